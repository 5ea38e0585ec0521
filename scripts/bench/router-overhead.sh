#!/usr/bin/env bash
# What the router (src/router) adds to a streamed request, in one run: TTFT p50 and output
# tokens/s of the same streamed /v1/completions sent to a real llama.cpp `llama-server` on loopback
# directly and through the router in front of it (router_overhead.py says how). The issue's goals:
# TTFT p50 no more than 1 ms higher, output tokens/s at least 0.98 of direct; the script exits 1
# when one is missed. Not run by the tests.
#
# The router runs as examples/router.rs (release) until the binary has a command for it; then
# `strix-toolbox bench` can measure it the same way.
#
# The server runs on CPU 0, the router and the client on CPU 1 (taskset): on a two-core machine
# neither takes cycles from the server, and the router's own work shows in the figures.
#
# Needs: the llama.cpp build (scripts/llama-cpp.sh). No root. Results: stdout and
# target/bench/router-overhead.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
ttft_requests=${BENCH_TTFT_REQUESTS:-100}
runs=${BENCH_ROUTER_RUNS:-5}
concurrency=${BENCH_CONCURRENCY:-4}
requests=${BENCH_REQUESTS:-32}
input_len=${BENCH_INPUT_LEN:-128}
output_len=${BENCH_OUTPUT_LEN:-128}
layers=${BENCH_LAYERS:-16}

llama=${LLAMA_CPP_DIR:-$(bash scripts/llama-cpp.sh)}
cargo build --quiet --release --example router
mkdir -p target/bench

work=$(mktemp -d /tmp/strix-bench-router.XXXXXX)
server_pid='' router_pid=''
cleanup() {
  [[ -n $router_pid ]] && kill "$router_pid" 2>/dev/null && wait "$router_pid" 2>/dev/null
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

model=$work/tiny-llama.gguf
"$llama/venv/bin/python" tests/testsuite/support/tiny_llama.py "$llama/models/ggml-vocab-llama-spm.gguf" "$model" 1 "$layers"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
taskset -c 0 "$llama/bin/llama-server" -m "$model" --alias tiny --host 127.0.0.1 --port "$port" \
  --parallel "$concurrency" --threads 1 --ctx-size $(( concurrency * (input_len + output_len + 64) )) \
  >"$work/llama-server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 120); do
  curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  sleep 0.5
done
curl -fsS "http://127.0.0.1:$port/health" >/dev/null || { tail -20 "$work/llama-server.log"; exit 1; }

# The router reads its stdin until it closes: a FIFO held open here keeps it serving.
mkfifo "$work/router.stdin"
taskset -c 1 target/release/examples/router 127.0.0.1:0 "tiny=127.0.0.1:$port" <"$work/router.stdin" >"$work/router.out" &
router_pid=$!
exec 3>"$work/router.stdin"
for _ in $(seq 1 100); do
  [[ -s $work/router.out ]] && break
  sleep 0.1
done
router=$(head -1 "$work/router.out")
[[ -n $router ]] || { echo "router-overhead: the router did not start" >&2; exit 1; }

taskset -c 1 python3 scripts/bench/router_overhead.py tiny "http://127.0.0.1:$port" "http://$router" \
  "$ttft_requests" "$runs" "$concurrency" "$requests" "$input_len" "$output_len" | tee target/bench/router-overhead.md
exec 3>&-
