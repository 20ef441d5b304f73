#!/usr/bin/env bash
# A local cluster on the default rig (trails): one leader and two workers on
# loopback over ./cogd-data, a little activity through `cogd call` (trail
# screens whose loads are accepted with receipts, one closed while its load
# is out; the hike logger), then the tail of the turn log and `cogd status`. Ctrl-C (or the end of the demo with --demo) stops every
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
# worker-1 runs the rig's mechanisms; worker-2 is a pure replica (running the
# mechanisms on both would do every effect twice: two ticks a second).
"$cogd" worker --leader "$requests" --name worker-1 --rig trails > "$logs/worker-1.log" 2>&1 &
pids+=($!)
"$cogd" worker --leader "$requests" --name worker-2 --rig replica > "$logs/worker-2.log" 2>&1 &
pids+=($!)
for name in worker-1 worker-2; do
  for _ in $(seq 1 200); do grep -q "synced at revision" "$logs/$name.log" 2>/dev/null && break; sleep 0.05; done
  grep -m 1 "synced at revision" "$logs/$name.log"
done

echo "== a little activity =="
"$cogd" call trails.openScreen '{"screen": 1, "trail": "ridge"}' --leader "$requests"
"$cogd" call trails.openScreen '{"screen": 2, "trail": "lake"}' --leader "$requests"
"$cogd" call trails.closeScreen '2' --leader "$requests"       # closed while its load is out: never accepted
"$cogd" call trails.startHike 'true' --leader "$requests"
sleep 2.5                                                      # loads answer after 1 s; the hike timer ticks each second
"$cogd" call trails.stopHike 'false' --leader "$requests"
sleep 0.3
echo "== the turn log =="
"$cogd" tail --data "$data" --last 12
echo "== the cluster =="
"$cogd" status --leader "$requests"

if [ "${1:-}" = "--demo" ]; then exit 0; fi
echo "running; Ctrl-C stops the leader and both workers"
wait
