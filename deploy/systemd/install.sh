#!/usr/bin/env bash
# Installs cogd as systemd services on this host: the release binary, the
# shared settings, a `cogd` system user, and the leader and worker units.
#   sudo deploy/systemd/install.sh            # then: systemctl enable --now cogd-leader cogd-worker@w1
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if [[ $EUID -ne 0 ]]; then
    echo "Error: run as root (it writes /usr/local/bin, /etc/cogd and /etc/systemd/system)" >&2
    exit 1
fi
binary="$root/.build/release/cogd"
if [[ ! -x "$binary" ]]; then
    echo "building the release binary…"
    (cd "$root" && swift build -c release --product cogd)
fi
install -m 0755 "$binary" /usr/local/bin/cogd
install -d -m 0755 /etc/cogd /usr/local/share/doc/cogd
[[ -f /etc/cogd/cogd.env ]] || install -m 0644 "$here/cogd.env" /etc/cogd/cogd.env
install -m 0644 "$root/README.md" /usr/local/share/doc/cogd/README.md
id cogd >/dev/null 2>&1 || useradd --system --home-dir /var/lib/cogd --shell /usr/sbin/nologin cogd
install -m 0644 "$here/cogd-leader.service" "$here/cogd-worker@.service" /etc/systemd/system/
if ! systemctl daemon-reload 2>/dev/null; then
    echo "note: systemd is not running here; on a systemd host run: systemctl daemon-reload"
fi
echo "installed: /usr/local/bin/cogd, /etc/cogd/cogd.env, cogd-leader.service, cogd-worker@.service"
echo "start:     systemctl enable --now cogd-leader cogd-worker@w1 cogd-worker@w2"
echo "watch:     cogd tail --connect \$(. /etc/cogd/cogd.env; echo \$COGD_TURNS) ; cogd status --leader \$(. /etc/cogd/cogd.env; echo \$COGD_REQUESTS)"
