#!/usr/bin/env bash
# The main job: installs the C libraries when missing, builds cogd in release
# mode, and runs a local cluster on the default rig (trails): one leader and
# two workers on loopback with data under ./cogd-data, a little activity, the
# tail of the turn log and `cogd status`. Ctrl-C stops everything cleanly.
# Pass --demo to stop by itself after showing the tail.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
swift build -c release --product cogd
.build/release/cogd version
exec bash deploy/local-cluster.sh "$@"
