#!/usr/bin/env bash
# Installs the C libraries cogd links against (Debian packages), only when missing.
# Safe to run again: it does nothing once both pkg-config modules, the Python modules, chromium,
# prometheus (with promtool) and etcd are present.
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
# PrometheusTests check deploy/prometheus's rules with promtool and run a Prometheus server (on a
# free loopback port of their own) scraping a real leader and worker.
command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
# EtcdArbiterTests (and `cogd leader --ha`) run a real etcd: Debian's etcd-server. Its package may
# enable a service on 2379/2380; like prometheus's, it is kept from starting and disabled.
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)

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
# Debian's prometheus package enables and starts a service listening on *:9090 (and recommends
# prometheus-node-exporter, on *:9100). The tests need only the programs: no service may start
# while the packages install (a policy-rc.d that says 101 — kept as it is when the host has one
# already), none is pulled in by a recommendation (--no-install-recommends), and the unit the
# package enabled is disabled and stopped after, so nothing listens on 9090 at this boot or the next.
installing_prometheus=no
[[ " ${missing[*]} " == *" prometheus "* || " ${missing[*]} " == *" etcd-server "* ]] && installing_prometheus=yes
policy=/usr/sbin/policy-rc.d
made_policy=no
if [ "$installing_prometheus" = yes ] && [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# deploy/install-deps.sh: no service starts while it installs packages\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod 0755 "$policy"
  made_policy=yes
fi
status=0
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || status=$?
[ "$made_policy" = yes ] && $SUDO rm -f "$policy"
[ "$status" -eq 0 ] || { echo "Error: apt-get install ${missing[*]} failed (status $status)" >&2; exit "$status"; }
if [ "$installing_prometheus" = yes ]; then
  for service in prometheus etcd; do
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
      $SUDO systemctl disable --now "$service.service" >/dev/null 2>&1 || true
    elif [ -x "/etc/init.d/$service" ]; then
      $SUDO "/etc/init.d/$service" stop >/dev/null 2>&1 || true
      command -v update-rc.d >/dev/null 2>&1 && $SUDO update-rc.d "$service" disable >/dev/null 2>&1 || true
    fi
  done
  echo "cogd: installed ${missing[*]} for the tests: the prometheus and etcd services are disabled and stopped (nothing on 9090, 2379 or 2380)"
fi
pkg-config --exists libzmq && pkg-config --exists lmdb || {
  echo "Error: libzmq or lmdb still not visible to pkg-config after install" >&2; exit 1; }
echo "cogd: installed ${missing[*]}"
