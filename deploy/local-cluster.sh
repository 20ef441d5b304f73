#!/usr/bin/env bash
# A local cluster on the default rig (trails): one leader and two workers on
# loopback over ./cogd-data, a little activity through `cogd call` (trail
# screens whose loads are accepted with receipts, one closed while its load
# is out; the hike logger), then the tail of the turn log and `cogd status`. Ctrl-C (or the end of the demo with --demo) stops every
# process it started.
#
# Signals: the leader and workers run in process groups of their own (`set -m`),
# so a terminal's Ctrl-C, which goes to the whole foreground process group,
# reaches only this script; it sends each child exactly one SIGINT (a second
# signal means "exit now" to cogd) — the workers first, then the leader —
# waits for it and prints its stop line and exit status. A second Ctrl-C while
# they drain is passed on: they exit at once.
#
# Variables (each optional):
#   COGD           the cogd binary (default .build/release/cogd in the repository;
#                  a relative path is taken from the directory you run the script in,
#                  a bare name is looked up in PATH)
#   COGD_DATA      the leader's data folder (default cogd-data in the repository;
#                  a relative path is taken from the directory you run the script in)
#   COGD_REQUESTS  the leader's requests endpoint (default tcp://127.0.0.1:5701)
#   COGD_TURNS     the leader's turn stream (default tcp://127.0.0.1:5702)
# Arguments: --demo stops everything after the demo; --help prints this.
set -euo pipefail
set -m
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
  exit 0
fi
caller="$PWD"
# A relative path given by the caller means from the caller's directory (the script then works from the repository).
from_caller() {
  case "$1" in
    /*) printf '%s\n' "$1" ;;
    *) printf '%s\n' "$caller/$1" ;;
  esac
}
cd "$(dirname "$0")/.."
if [ -n "${COGD:-}" ]; then
  case "$COGD" in
    */*) cogd="$(from_caller "$COGD")" ;;
    *) cogd="$(command -v "$COGD" || printf '%s\n' "$COGD")" ;;
  esac
else
  cogd="$PWD/.build/release/cogd"
fi
if [ -n "${COGD_DATA:-}" ]; then data="$(from_caller "$COGD_DATA")"; else data="cogd-data"; fi
requests="${COGD_REQUESTS:-tcp://127.0.0.1:5701}"
turns="${COGD_TURNS:-tcp://127.0.0.1:5702}"
# Read here and passed as options; unset, so the workers and tools this script
# starts (which do not read them) do not note them as set and unread.
unset COGD_DATA COGD_REQUESTS COGD_TURNS
if [ ! -f "$cogd" ] || [ ! -x "$cogd" ]; then
  if [ -n "${COGD:-}" ]; then
    case "$COGD" in
      */*) echo "local-cluster.sh: COGD=$COGD: no executable cogd at $cogd" >&2 ;;
      *) echo "local-cluster.sh: COGD=$COGD: no $COGD in PATH (give a path: COGD=./.build/release/cogd)" >&2 ;;
    esac
  else
    echo "local-cluster.sh: no cogd at $cogd: build it first (swift build -c release), or set COGD=PATH" >&2
  fi
  exit 1
fi
logs="$(mktemp -d)"
pids=()
names=()

signal_all() {
  for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
}

# Waits for child $1, through the signals this script traps (they interrupt
# `wait` while the child still runs); sets `status` to its exit status.
wait_for() {
  while :; do
    status=0
    wait "$1" || status=$?
    if [ "$status" -gt 128 ] && kill -0 "$1" 2>/dev/null; then continue; fi
    return 0
  done
}

# Each line of the leader's and workers' logs starts with the time and level
# (`2026-12-01T20:38:56.490Z INFO  cogd leader: …`); what this script echoes
# from them leaves those out.
unstamp='s/^[0-9][0-9T:.Z-]* [A-Z]* *//'

# Waits for child number $1 and prints its stop line and exit status.
report_stop() {
  wait_for "${pids[$1]}"
  stop_line=$(grep -h "stopped at revision" "$logs/${names[$1]}.log" | tail -n 1 | sed -e "$unstamp")
  # The stop line names the process (`cogd worker worker-1: stopped at revision 12`).
  echo "${stop_line:-${names[$1]}: no stop line} (exit $status)"
}

# The workers first (each says goodbye, so the leader retires what it held
# at once and records it), then the leader.
stop_all() {
  set +e
  trap signal_all INT TERM HUP
  for index in "${!pids[@]}"; do
    [ "$index" -gt 0 ] && kill -INT "${pids[$index]}" 2>/dev/null
  done
  for index in "${!pids[@]}"; do
    [ "$index" -gt 0 ] && report_stop "$index"
  done
  if [ "${#pids[@]}" -gt 0 ]; then
    kill -INT "${pids[0]}" 2>/dev/null
    report_stop 0
  fi
  echo "stopped leader and workers (logs in $logs)"
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

if [ -e "$data/data.mdb" ]; then
  echo "(the log in $data goes on from an earlier run, so the story below may differ: remove that folder for a fresh one)"
fi
"$cogd" leader --data "$data" --requests "$requests" --turns "$turns" > "$logs/leader.log" 2>&1 &
pids+=($!)
names+=(leader)
# Waits up to 10 s for child number $1 to log a line with $2 and echoes it;
# when it does not (it stopped, or is stuck), shows its log under $3 and
# exits: nothing more starts, and no call reaches whatever holds its port.
expect_line() {
  for _ in $(seq 1 200); do
    grep -q "$2" "$logs/${names[$1]}.log" 2>/dev/null && break
    kill -0 "${pids[$1]}" 2>/dev/null || break
    sleep 0.05
  done
  if ! grep -q "$2" "$logs/${names[$1]}.log" 2>/dev/null; then
    echo "$3:" >&2
    sed -e "$unstamp" "$logs/${names[$1]}.log" >&2
    exit 1
  fi
  grep -m 1 "$2" "$logs/${names[$1]}.log" | sed -e "$unstamp"
}
# It serves, or it said why not (a port in use, a locked folder, …).
started=$(expect_line 0 "cogd leader: data" "the leader did not start")
echo "$started"
# Both run the rig's mechanisms and, with no --group, form the worker group
# `trails` (named after the rig): each effect happens on one of them (one tick
# a second, each screen's load once). `--group NAME` with a name of its own
# would make a worker run everything itself; `--rig replica` only replicates.
"$cogd" worker --leader "$requests" --name worker-1 --rig trails > "$logs/worker-1.log" 2>&1 &
pids+=($!)
names+=(worker-1)
"$cogd" worker --leader "$requests" --name worker-2 --rig trails > "$logs/worker-2.log" 2>&1 &
pids+=($!)
names+=(worker-2)
for index in 1 2; do
  expect_line "$index" "synced at revision" "${names[$index]} did not sync with the leader within 10 s"
done

# This run's turns start after the revision the leader started at (its start
# line says `revision R`): the first may be the roots spread over the workers.
first=$(( $(printf '%s\n' "$started" | sed -n 's/.*, revision \([0-9]*\),.*/\1/p') + 1 ))

# Says what a call does and shows it, then sends it: its reply follows
# (`applied revision R (request ranger#1)`, or `unchanged: …`). Each call
# names who sends it (--name): the log and the replies show `ranger` and
# `hiker` instead of a random name per call.
act() {
  echo "$1 $4: cogd call $2 '$3' --name $1"
  "$cogd" call "$2" "$3" --leader "$requests" --name "$1"
}
echo "== a little activity =="
act ranger trails.openScreen '{"screen": 1, "trail": "ridge"}' "opens screen 1 on the ridge trail (a worker loads it, accepted after 1 s)"
act ranger trails.openScreen '{"screen": 2, "trail": "lake"}' "opens screen 2 on the lake trail"
act ranger trails.closeScreen '2' "closes screen 2 while its load is out (never accepted)"
act hiker trails.startHike 'true' "starts the hike logger (a worker ticks it each second)"
sleep 2.5
act hiker trails.stopHike 'false' "stops it two ticks later"
sleep 0.3
echo "== the turn log =="
# This run's turns: each scope instance is named by what opened it
# (`scope TrailScreens.trailScreen[1] #1.N`; the mechanisms' roots take the
# first numbers, so N depends on registration order).
"$cogd" tail --data "$data" --from "$first"
echo "== the cluster =="
"$cogd" status --leader "$requests"

if [ "${1:-}" = "--demo" ]; then exit 0; fi
echo "running; Ctrl-C stops the leader and both workers"
wait
