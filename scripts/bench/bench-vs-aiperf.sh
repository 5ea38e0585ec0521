#!/usr/bin/env bash
# Our `bench` beside an established client on the same endpoint, in one run: NVIDIA's AIPerf
# (PyPI `aiperf`, GenAI-Perf's successor; no torch) against a real llama.cpp `llama-server` on
# loopback serving the tests' tiny llama model (random weights, the llama SPM vocabulary).
# Runs alternate, ours then AIPerf, BENCH_SERVING_RUNS times; prints each run's output tokens/s
# and the medians' ratio, and fails when ours is not within 10% of AIPerf's.
#
# The server runs on CPU 0 and both clients on CPU 1 (taskset), so neither client's own work
# (AIPerf's worker processes, ours) takes cycles from the server on a two-core machine.
#
# Both send the same load: streamed /v1/completions, BENCH_INPUT_LEN prompt tokens,
# BENCH_OUTPUT_LEN generated tokens (ignore_eos), greedy (temperature 0: vLLM's bench default, and
# ours; llama-server's own default samples at 0.8 through its whole sampler chain, which on this
# tiny model costs more than the model itself), BENCH_CONCURRENCY in flight, BENCH_REQUESTS
# requests, one untimed request first. AIPerf needs a Hugging Face tokenizer: gguf_tokenizer.py
# makes one from the GGUF's own vocabulary (it tokenizes exactly as llama-server does), and AIPerf
# counts tokens with the server's usage (--use-server-token-count), as ours does.
#
# Needs: the llama.cpp build (scripts/llama-cpp.sh), python3-venv. No root. Results: stdout and
# target/bench/serving.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${BENCH_SERVING_RUNS:-5}
concurrency=${BENCH_CONCURRENCY:-4}
requests=${BENCH_REQUESTS:-32}
input_len=${BENCH_INPUT_LEN:-128}
output_len=${BENCH_OUTPUT_LEN:-128}
layers=${BENCH_LAYERS:-16}
aiperf_version=0.13.0
gguf_version=0.19.0

llama=${LLAMA_CPP_DIR:-$(bash scripts/llama-cpp.sh)}
mkdir -p target/bench
venv=target/bench/aiperf-$aiperf_version
if [[ ! -x $venv/bin/aiperf ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "aiperf==$aiperf_version" "gguf==$gguf_version"
fi
[[ -x target/debug/strix-toolbox || -x target/release/strix-toolbox ]] || cargo build --release
strix=$( [[ -x target/release/strix-toolbox ]] && echo target/release/strix-toolbox || echo target/debug/strix-toolbox)

work=$(mktemp -d /tmp/strix-bench-serving.XXXXXX)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

model=$work/tiny-llama.gguf
"$llama/venv/bin/python" tests/testsuite/support/tiny_llama.py "$llama/models/ggml-vocab-llama-spm.gguf" "$model" 1 "$layers"
"$venv/bin/python" scripts/bench/gguf_tokenizer.py "$model" "$work/tokenizer" >/dev/null 2>&1

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
taskset -c 0 "$llama/bin/llama-server" -m "$model" --host 127.0.0.1 --port "$port" --parallel "$concurrency" --threads 1 \
  --ctx-size $(( concurrency * (input_len + output_len + 64) )) >"$work/llama-server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 120); do
  curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  sleep 0.5
done
curl -fsS "http://127.0.0.1:$port/health" >/dev/null || { tail -20 "$work/llama-server.log"; exit 1; }

ours() {
  XDG_STATE_HOME=$work/state taskset -c 1 "$strix" --json bench --endpoint "http://127.0.0.1:$port" --server llama.cpp \
    --gguf "$model" --concurrency "$concurrency" --requests "$requests" \
    --input-len "$input_len" --output-len "$output_len" 2>>"$work/ours.log" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["levels"][0]["figures"]["output_throughput"])'
}

theirs() {
  local out=$work/aiperf-$1
  taskset -c 1 "$venv/bin/aiperf" profile -m "$(basename "$model")" --tokenizer "$work/tokenizer" --endpoint-type completions \
    --streaming --url "http://127.0.0.1:$port" --concurrency "$concurrency" --request-count "$requests" \
    --warmup-request-count 1 --prompt-input-tokens-mean "$input_len" --prompt-input-tokens-stddev 0 \
    --prompt-output-tokens-mean "$output_len" --prompt-output-tokens-stddev 0 --extra-inputs ignore_eos:true \
    --extra-inputs temperature:0 \
    --use-server-token-count --random-seed "$1" --ui-type none --no-server-metrics --no-gpu-telemetry \
    --no-auto-plot --artifact-dir "$out" >"$out.log" 2>&1 || { tail -20 "$out.log" >&2; exit 1; }
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["output_token_throughput"]["avg"])' \
    "$out/profile_export_aiperf.json"
}

mine=() others=()
for run in $(seq 1 "$runs"); do
  mine+=("$(ours)")
  others+=("$(theirs "$run")")
  echo "run $run: strix-toolbox bench ${mine[-1]} tok/s, aiperf ${others[-1]} tok/s"
done
python3 - "$concurrency" "$requests" "$input_len" "$output_len" "$layers" "${#mine[@]}" "${mine[@]}" "${others[@]}" <<'PY' | tee target/bench/serving.md
import statistics, sys
concurrency, requests, input_len, output_len, layers, n = map(int, sys.argv[1:7])
ours, theirs = [float(v) for v in sys.argv[7:7 + n]], [float(v) for v in sys.argv[7 + n:7 + 2 * n]]
a, b = statistics.median(ours), statistics.median(theirs)
print(f"| output tokens/s, llama-server (tiny llama, {layers} layers, CPU), concurrency {concurrency}, "
      f"{requests} requests, {input_len} → {output_len} tokens | aiperf | strix-toolbox bench |")
print("|---|---|---|")
print(f"| median of {n} runs (each: {', '.join(f'{v:.1f}' for v in theirs)} / {', '.join(f'{v:.1f}' for v in ours)}) "
      f"| {b:.1f} | {a:.1f} ({a / b:.3f}×) |")
if abs(a / b - 1) > 0.10:
    sys.exit(f"bench: ours is {a / b:.3f}× aiperf's output tokens/s, beyond 10%")
PY
