#!/usr/bin/env bash
# Installs cogd as systemd services on this host: the release binary, the
# shared settings, a `cogd` system user, the leader and worker units, and
# CURVE keys with a starter peers file.
#   sudo deploy/systemd/install.sh [WORKER…]   # workers to make keys for (default: w1 w2)
#   then: systemctl enable --now cogd-leader cogd-worker@w1 cogd-worker@w2
# Run it again after an upgrade, or with more worker names: it overwrites
# the binary, the units, the README, docs/ and the Prometheus rules and Grafana
# dashboard (under /usr/local/share/doc/cogd/deploy), and never a file of yours (the
# settings, a key, the peers file).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if [[ $EUID -ne 0 ]]; then
    echo "Error: run as root (it writes /usr/local/bin, /etc/cogd and /etc/systemd/system)" >&2
    exit 1
fi
workers=("$@")
[[ ${#workers[@]} -gt 0 ]] || workers=(w1 w2)
binary="$root/.build/release/cogd"
if [[ ! -x "$binary" ]]; then
    echo "building the release binary…"
    (cd "$root" && swift build -c release --product cogd)
fi
install -m 0755 "$binary" /usr/local/bin/cogd
cogd=/usr/local/bin/cogd
install -d -m 0755 /etc/cogd /usr/local/share/doc/cogd
fresh_settings=no
if [[ ! -f /etc/cogd/cogd.env ]]; then
    install -m 0644 "$here/cogd.env" /etc/cogd/cogd.env
    fresh_settings=yes
fi
install -m 0644 "$root/README.md" /usr/local/share/doc/cogd/README.md
install -d -m 0755 /usr/local/share/doc/cogd/docs
install -m 0644 "$root"/docs/*.md /usr/local/share/doc/cogd/docs/
# The alert rules and the dashboard docs/operations.md ("Dashboards and alerts") loads.
install -d -m 0755 /usr/local/share/doc/cogd/deploy/prometheus /usr/local/share/doc/cogd/deploy/grafana
install -m 0644 "$root/deploy/prometheus/cogd-alerts.yml" /usr/local/share/doc/cogd/deploy/prometheus/
install -m 0644 "$root/deploy/grafana/cogd-dashboard.json" /usr/local/share/doc/cogd/deploy/grafana/
id cogd >/dev/null 2>&1 || useradd --system --home-dir /var/lib/cogd --shell /usr/sbin/nologin cogd

# Keys: root's alone (0700, secrets 0600). The units get theirs as
# credentials (LoadCredential=), each instance only its own.
keys=/etc/cogd/keys
install -d -m 0700 -o root -g root "$keys"
# A secret readable beyond root, by hand or by an old umask, is closed again.
find "$keys" -maxdepth 1 -name '*.key' -exec chmod go-rwx {} +
made=()
key_pair() { # NAME: makes NAME.key and NAME.pub unless the key is there
    local name="$1" public
    if [[ -f "$keys/$name.key" ]]; then
        # A public key file that went missing is made again from the secret.
        if [[ ! -f "$keys/$name.pub" ]]; then
            public="$("$cogd" keys show "$keys/$name.key")"
            printf '# cogd CURVE key pair %s: the public key.\npublic-key = %s\n' "$name" "$public" > "$keys/$name.pub"
        fi
        return 0
    fi
    if [[ -f "$keys/$name.pub" ]]; then
        echo "Error: $keys/$name.pub has no $name.key beside it; move it away to make a new pair for $name" >&2
        exit 1
    fi
    "$cogd" keys generate "$name" --out "$keys" >/dev/null
    made+=("$name")
}
key_pair leader
for worker in "${workers[@]}"; do key_pair "$worker"; done
# For `cogd status` and `cogd tail --connect` from this host (an observer: no ops).
key_pair operator

# The peers file: who may connect to the leader, and as what. Made once;
# after that it is yours: lines for keys made later are printed, not added.
peers=/etc/cogd/peers
peer_line() { # NAME ROLE
    printf '%s %-8s %s\n' "$("$cogd" keys show "$keys/$1.pub")" "$2" "$1"
}
if [[ -f "$peers" ]]; then
    peers_state=kept
    for worker in "${workers[@]}"; do
        line="$(peer_line "$worker" worker)"
        awk '{ print $1 }' "$peers" | grep -qxF -- "${line%% *}" ||
            echo "note: $peers does not list $worker's key; add this line, then run systemctl reload cogd-leader: $line"
    done
else
    peers_state=new
    draft="$(mktemp)"
    {
        echo "# Who may connect to cogd-leader (with COGD_CURVE=on in /etc/cogd/cogd.env),"
        echo "# one peer a line: PUBLIC-KEY ROLE NAME [OP-PATTERN…]. Roles: worker (runs"
        echo "# the rig, in its own name), client (runs the ops its patterns allow,"
        echo "# for example ledger.* trails.openScreen), observer (status and the turn"
        echo "# stream). \`cogd keys show FILE.pub\` prints a key. After an edit:"
        echo "#   systemctl reload cogd-leader"
        for worker in "${workers[@]}"; do peer_line "$worker" worker; done
        peer_line operator observer
    } > "$draft"
    install -m 0640 -o root -g cogd "$draft" "$peers"
    rm -f "$draft"
fi

install -m 0644 "$here/cogd-leader.service" "$here/cogd-worker@.service" /etc/systemd/system/
if ! systemctl daemon-reload 2>/dev/null; then
    echo "note: systemd is not running here; on a systemd host run: systemctl daemon-reload"
fi
echo "installed: /usr/local/bin/cogd, cogd-leader.service, cogd-worker@.service"
echo "settings:  /etc/cogd/cogd.env ($([[ $fresh_settings == yes ]] && echo new || echo kept))"
echo "keys:      $keys (new: ${made[*]:-none}), peers file $peers ($peers_state)"
echo "start:     systemctl enable --now cogd-leader$(printf ' cogd-worker@%s' "${workers[@]}")"
watch='cogd status --leader $(. /etc/cogd/cogd.env; echo $COGD_REQUESTS); cogd tail --connect $(. /etc/cogd/cogd.env; echo $COGD_TURNS)'
if grep -q '^COGD_CURVE=on' /etc/cogd/cogd.env; then
    echo "watch:     export COGD_KEY=$keys/operator.key COGD_LEADER_KEY=$keys/leader.pub; $watch"
else
    echo "watch:     $watch"
    echo "note: CURVE is off (/etc/cogd/cogd.env does not say COGD_CURVE=on; one written before the setting existed"
    echo "      does not): the leader serves this host only and authenticates nobody. To turn it on, set"
    echo "      COGD_CURVE=on in /etc/cogd/cogd.env, then: systemctl restart cogd-leader 'cogd-worker@*'"
fi
