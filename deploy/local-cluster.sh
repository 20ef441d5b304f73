#!/usr/bin/env bash
# A local cluster: one leader and two workers on loopback over ./cogd-data,
# a little activity through `cogd call`, then the tail of the turn log and
# `cogd status`. Ctrl-C (or the end of the demo with --demo) stops every
# process it started.
set -euo pipefail
cd "$(dirname "$0")/.."
cogd="${COGD:-.build/release/cogd}"
data="${COGD_DATA:-cogd-data}"
requests="${COGD_REQUESTS:-tcp://127.0.0.1:5701}"
turns="${COGD_TURNS:-tcp://127.0.0.1:5702}"
logs="$(mktemp -d)"
pids=()

stop_all() {
  for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  echo "stopped leader and workers (logs in $logs)"
}
trap stop_all EXIT
trap 'exit 130' INT TERM

"$cogd" leader --data "$data" --requests "$requests" --turns "$turns" > "$logs/leader.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do grep -q "cogd leader: data" "$logs/leader.log" 2>/dev/null && break; sleep 0.05; done
head -n 1 "$logs/leader.log"
for name in worker-1 worker-2; do
  "$cogd" worker --leader "$requests" --name "$name" > "$logs/$name.log" 2>&1 &
  pids+=($!)
done
for name in worker-1 worker-2; do
  for _ in $(seq 1 200); do grep -q "synced at revision" "$logs/$name.log" 2>/dev/null && break; sleep 0.05; done
  grep -m 1 "synced at revision" "$logs/$name.log"
done

echo "== a little activity =="
"$cogd" call ledger.open '{"account": "alice", "balance": 100}' --leader "$requests"
"$cogd" call ledger.open '{"account": "bob", "balance": 50}' --leader "$requests"
"$cogd" call ledger.transfer '{"from": "alice", "to": "bob", "amount": 30}' --leader "$requests"
"$cogd" call ledger.transfer '{"from": "bob", "to": "alice", "amount": 500}' --leader "$requests" || true
sleep 0.3
echo "== the turn log =="
"$cogd" tail --data "$data" --last 5
echo "== the cluster =="
"$cogd" status --leader "$requests"
for name in worker-1 worker-2; do echo "$name: $(grep 'ledger total' "$logs/$name.log" | tail -n 1)"; done

if [ "${1:-}" = "--demo" ]; then exit 0; fi
echo "running; Ctrl-C stops the leader and both workers"
wait
