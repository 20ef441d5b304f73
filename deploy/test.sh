#!/usr/bin/env bash
# The whole test suite: installs the C libraries when missing, builds, runs
# every test (Swift Testing), and exits non-zero on any failure.
#
# Two runs: first the in-process tests (the Cog graph, the log, the rigs,
# the leader and replica cores — many are async and hop to the main
# actor), then the tests that start real
# `cogd` processes and wait on them (module CogdTests). Run together, the
# waiting tests can hold every thread of Swift's cooperative pool (two on a
# 2-CPU machine) long enough for an async test to pass its time limit.
# Then the benchmark guard on a release build (`cogd-lab bench quick`).
# With arguments (say `--filter NAME`), one run with them (no guard).
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
# A build prints no warning (an incremental one recompiles only what changed,
# so a fresh clone checks every file): one that does fails the run, naming it.
build_log=$(mktemp)
trap 'rm -f "$build_log"' EXIT
swift build --build-tests 2>&1 | tee "$build_log"
# The template package (Examples/TodoApp, which depends on this one by path),
# built into a folder of its own under .build so the next build is
# incremental; CogdTests' TemplatePackageTests runs the same command (then a
# no-op) and starts the result as a leader and two workers.
swift build --package-path Examples/TodoApp --scratch-path .build/examples/TodoApp --product todo 2>&1 | tee -a "$build_log"
if grep -q "warning:" "$build_log"; then
    echo "deploy/test.sh: the build printed warnings (a clean build prints none):" >&2
    grep "warning:" "$build_log" | sort -u >&2
    exit 1
fi
# Every test bounds its own waits; this bounds each run so a hang fails CI instead of stalling it.
if [ "$#" -gt 0 ]; then
    timeout --signal=KILL 1200 swift test --skip-build "$@"
else
    timeout --signal=KILL 600 swift test --skip-build --filter '^(CogTests|CogLogTests|RigTests|CoreTests)\.'
    timeout --signal=KILL 1200 swift test --skip-build --filter '^CogdTests\.'
    # The benchmark guard (docs/benchmarks.md, "The guard"): a release build,
    # then `bench quick` holds a few ratios (each to a baseline measured in
    # the same run) to generous floors; exit 3 names a figure past its floor.
    swift build -c release --product cogd-lab 2>&1 | tee "$build_log"
    if grep -q "warning:" "$build_log"; then
        echo "deploy/test.sh: the release build printed warnings:" >&2
        grep "warning:" "$build_log" | sort -u >&2
        exit 1
    fi
    timeout --signal=KILL 600 .build/release/cogd-lab bench quick
fi
