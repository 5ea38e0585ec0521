#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every test (unit, fixtures, end-to-end
# against real podman, dockerd, a loopback registry and Toolbx). The tests start and stop their own
# services. Extra arguments go to cargo test. The real inference engines are made here, once per
# machine and pin, so that no test makes them under a timeout: llama.cpp (scripts/llama-cpp.sh)
# and the vLLM CPU toolbox image (scripts/vllm-cpu.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/test-deps.sh
bash scripts/llama-cpp.sh >/dev/null
bash scripts/vllm-cpu.sh >/dev/null
cargo build --quiet --all-targets
# Most end-to-end tests wait on containers, sshd and servers rather than compute: three at a time
# on the CI's two cores keeps the run well inside its budget (a test's own waits are bounded, never
# timed, so a busier machine only makes it slower).
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-3}"
if [ "$#" -gt 0 ]; then
  exec cargo test --all-targets "$@"
fi
# The real vLLM's tests run after the rest, two at a time: each of their ranks is a CPU-bound
# process, and beside the rest of the suite on two cores they starve (vLLM's own 60 s timeouts).
real_vllm=(vllm_launch:: vllm_cluster:: plan_real_vllm::)
cargo test --all-targets -- "${real_vllm[@]/#/--skip=}"
cargo test --test testsuite -- --test-threads 2 "${real_vllm[@]}"
