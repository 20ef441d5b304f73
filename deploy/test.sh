#!/usr/bin/env bash
# The whole test suite: installs the C libraries when missing, builds, runs
# every test (Swift Testing), and exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
swift build --build-tests
# Every test bounds its own waits; this bounds the whole run so a hang fails CI instead of stalling it.
timeout --signal=KILL 1200 swift test --skip-build "$@"
