#!/usr/bin/env bash
# How fast `cluster watch` brings a service back, per fault: the end-to-end test
# (tests/testsuite/watch.rs: the real llama.cpp, llama-server on the head over one worker's
# rpc-server, two network-namespace nodes) is run once with STRIX_WATCH_RECOVERY_DIR set, so it
# notes the moment it made each fault (the head's llama-server stopped with SIGSTOP, the worker's
# rpc-server killed, the worker rebooted); the watch's own event log (watch/events.jsonl, JSON lines
# of time, service, state, action) then says, per fault, when the watch decided to relaunch
# (detection) and when the service was seen serving again. The watch runs as the test runs it:
# --interval 3s --stall 6s --failures 5 (a probe's deadline is the interval: a look that ends
# with its probe unanswered has seen no token for two intervals, so a stall is found by it).
# The issue's goals: a stall detected within two intervals, serving again within the warm launch
# time plus 10 s.
#
# Needs root and scripts/test-deps.sh, the llama.cpp build (scripts/llama-cpp.sh). Results: stdout
# and target/bench/watch-recovery.md. BENCH_PROFILE=dev uses the debug build (no release build).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$PWD/target/bench/watch-recovery
rm -rf "$out"
mkdir -p "$out"
profile=()
[[ ${BENCH_PROFILE:-release} == release ]] && profile=(--release)
STRIX_WATCH_RECOVERY_DIR=$out cargo test "${profile[@]}" --quiet --test testsuite \
  watch::the_watch_relaunches -- --nocapture >"$out/test.log" 2>&1 || {
  tail -40 "$out/test.log" >&2
  exit 1
}
python3 - "$out" <<'PY' | tee target/bench/watch-recovery.md
import json, sys
from datetime import datetime

out = sys.argv[1]
at = lambda text: datetime.fromisoformat(text.replace("Z", "+00:00"))
faults = [line.split() for line in open(f"{out}/faults.txt") if line.strip()]
events = [json.loads(line) for line in open(f"{out}/events.jsonl") if line.strip()]
print("| fault | detected (relaunch decided) | serving again | the watch's reason |")
print("|---|---|---|---|")
for name, made in faults:
    made = at(made)
    after = [e for e in events if at(e["time"]) >= made]
    detected = next((e for e in after if e["action"] == "relaunch"), None)
    if detected is None:
        print(f"| {name} | not detected | - | - |")
        continue
    back = next((e for e in after if at(e["time"]) >= at(detected["time"]) and e["state"] == "serving"), None)
    seconds = lambda e: f"{(at(e['time']) - made).total_seconds():.1f} s" if e else "not seen"
    reason = (detected.get("reason") or "").split(";")[0]
    print(f"| {name} | {seconds(detected)} | {seconds(back)} | {reason} |")
PY
