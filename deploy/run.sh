#!/usr/bin/env bash
# The main job: installs the C libraries when missing, builds cogd in release
# mode and runs what this build offers. Today that is the graph benchmark;
# the local leader-with-two-workers cluster arrives with `cogd leader`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
swift build -c release --product cogd
cogd=".build/release/cogd"
"$cogd" version
echo
echo "== cogd bench graph (release build, median of repeated runs) =="
"$cogd" bench graph "$@"
