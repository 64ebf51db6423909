#!/usr/bin/env bash
# One scrape of ssdwatch beside one of node_exporter, on the same generated large host (64
# drives with 8 partitions each, 500 filesystems; benches/gen_big_host.py), both reading its
# sysfs, procfs and root trees: the time from request to last byte as curl measures it, the
# body's size and its series. node_exporter (Debian's prometheus-node-exporter) runs its
# default collectors, each reading the fixture trees (and failing where a tree lacks a file);
# ssdwatch renders its cached snapshot. Both on free loopback ports, stopped by their PIDs.
# Usage: benches/scrape_vs_node_exporter.sh [SCRAPES]   (default 200; SHORT=1: 20)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200}
[ -n "${SHORT:-}" ] && n=20
NODE_EXPORTER=${NODE_EXPORTER:-$(command -v prometheus-node-exporter || command -v node_exporter || true)}
[ -n "$NODE_EXPORTER" ] || { echo "node_exporter not found (Debian: prometheus-node-exporter)" >&2; exit 2; }

. benches/big_host.sh
big_host_setup
cat >"$work/config.yaml" <<CFG
state_dir: $work/state
collectors:
  smart: {enabled: false}
  probe: {enabled: false}
history:
  enabled: false
CFG
big_host_serve "$work/config.yaml"
ne_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$NODE_EXPORTER" --web.listen-address "127.0.0.1:$ne_port" --log.level=error \
  --path.sysfs "$work/host/sys" --path.procfs "$work/host/proc" --path.rootfs "$work/host/rootfs" 2>/dev/null &
ne_pid=$!
stop_ne() { kill "$ne_pid" 2>/dev/null || true; wait "$ne_pid" 2>/dev/null || true; }
trap 'stop_ne; big_host_cleanup' EXIT
for _ in $(seq 100); do
  curl -fsS -o /dev/null "http://127.0.0.1:$ne_port/metrics" 2>/dev/null && break
  sleep 0.1
done

measure() { # NAME URL [curl flags]: median and p99 of n scrapes in ms, bytes and series of one
  local name=$1 url=$2; shift 2
  local times
  times=$(for _ in $(seq "$n"); do curl -fsS -o /dev/null -w '%{time_total}\n' "$@" "$url"; done | sort -n)
  local med p99 bytes series
  med=$(printf '%s\n' "$times" | awk -v n="$n" 'NR == int((n + 1) / 2) {printf "%.2f", $1 * 1000}')
  p99=$(printf '%s\n' "$times" | awk -v n="$n" 'NR == int(n * 0.99 + 0.999) {printf "%.2f", $1 * 1000}')
  bytes=$(curl -fsS "$@" "$url" | wc -c)
  series=$(curl -fsS "$url" | grep -vc '^#' || true)
  printf '%-14s median %8s ms  p99 %8s ms  %9s bytes  %6s series\n' "$name" "$med" "$p99" "$bytes" "$series"
}
# Warm both once.
curl -fsS -o /dev/null "http://127.0.0.1:$port/metrics"
curl -fsS -o /dev/null "http://127.0.0.1:$ne_port/metrics"
echo "$n scrapes each:"
measure ssdwatch "http://127.0.0.1:$port/metrics"
measure node_exporter "http://127.0.0.1:$ne_port/metrics"
