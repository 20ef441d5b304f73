#!/usr/bin/env bash
# The main job: installs the C libraries when missing, builds cogd in release
# mode and runs what this build offers: a durable turn log written and read
# back under ./cogd-data, then the benchmarks. (The local leader with two
# workers arrives with `cogd leader` / `cogd worker`.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
swift build -c release --product cogd
cogd=".build/release/cogd"
data="${COGD_DATA:-cogd-data}"
"$cogd" version
echo
echo "== a durable turn log in ./$data: 100 turns, 10 per LMDB transaction =="
"$cogd" log soak --data "$data" --count 100 --batch 10 | tail -n 1
"$cogd" tail --data "$data" --last 3
"$cogd" log verify --data "$data"
"$cogd" log stats --data "$data"
echo
echo "== cogd bench graph (release build, median of repeated runs) =="
"$cogd" bench graph "$@"
echo
echo "== cogd bench log (beside raw LMDB in the same run) =="
"$cogd" bench log --only batch-1,batch-10,batch-100,batch-1000
