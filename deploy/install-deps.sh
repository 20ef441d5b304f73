#!/usr/bin/env bash
# Installs the C libraries cogd links against (Debian packages), only when missing.
# Safe to run again: it does nothing once both pkg-config modules, the Python modules and chromium are present.
set -euo pipefail

missing=()
pkg-config --exists libzmq 2>/dev/null || missing+=(libzmq3-dev)
pkg-config --exists lmdb 2>/dev/null || missing+=(liblmdb-dev)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
# The external clients (clients/*.py, run by ExternalClientTests) use Debian's python3 and these modules.
PY=/usr/bin/python3
[ -x "$PY" ] || missing+=(python3)
[ -x "$PY" ] && "$PY" -c 'import zmq' 2>/dev/null || missing+=(python3-zmq)
[ -x "$PY" ] && "$PY" -c 'import cbor2' 2>/dev/null || missing+=(python3-cbor2)
[ -x "$PY" ] && "$PY" -c 'import lmdb' 2>/dev/null || missing+=(python3-lmdb)
# MetricsEndpointTests parse /metrics with the Prometheus project's own text parser.
[ -x "$PY" ] && "$PY" -c 'import prometheus_client.parser' 2>/dev/null || missing+=(python3-prometheus-client)
# DrillReportRenderTests render a drill's HTML report in headless Chromium and read what it drew.
command -v chromium >/dev/null 2>&1 || missing+=(chromium)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "cogd: installing ${missing[*]} (Debian packages)…"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "Error: need root (or sudo) to install ${missing[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
pkg-config --exists libzmq && pkg-config --exists lmdb || {
  echo "Error: libzmq or lmdb still not visible to pkg-config after install" >&2; exit 1; }
echo "cogd: installed ${missing[*]}"
