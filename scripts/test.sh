#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every test (unit, fixtures, end-to-end
# against real podman, dockerd, a loopback registry and Toolbx). The tests start and stop their own
# services. Extra arguments go to cargo test. llama.cpp (the tests' real inference engine) is built
# here, once per pin and flags (scripts/llama-cpp.sh), so that no test builds it under a timeout.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/test-deps.sh
bash scripts/llama-cpp.sh >/dev/null
cargo build --quiet --all-targets
cargo test --all-targets "$@"
