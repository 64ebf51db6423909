#!/usr/bin/env bash
# One scrape of ssdwatch beside one of node_exporter, on the same generated large host (64
# drives with 8 partitions each, 500 filesystems; benches/gen_big_host.py), both reading its
# sysfs, procfs and root trees: the time from request to last byte as curl measures it, on a
# new connection each time and on one kept alive (as Prometheus scrapes), without and with
# `Accept-Encoding: gzip` (what Prometheus sends on every scrape; the body then stays compressed,
# as Prometheus receives it), the body's bytes and its series, and the gzip bytes per series.
# node_exporter (Debian's prometheus-node-exporter) runs its default collectors as on a real
# host of that shape: the fixture's drives and mounts (its /proc/diskstats and /proc/1/mounts, a
# statfs of each mount point's directory under the fixture's rootfs) and, for what the fixture
# doesn't model (CPU, memory, network, ...), this machine's own /proc and /sys, linked in entry by
# entry. ssdwatch reads the same fixture and sends its published snapshot, compressed when it was
# published. Both on free loopback ports, stopped by their PIDs.
# The project's targets, printed at the end: ssdwatch's scrape (kept alive) at most 0.05x
# node_exporter's, with gzip and without, and its gzip bytes per series at most node_exporter's.
# A third node_exporter line reads the fixture alone (its drives and mounts, none of this
# machine's series), for the bytes per series of those series alone.
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
# node_exporter's /proc and /sys: the fixture's drives and mounts, this machine's for the rest;
# no udev data (the fixture's drives have none).
mkdir -p "$work/ne/proc" "$work/ne/sys" "$work/ne/udev"
for e in /proc/*; do
  case ${e#/proc/} in [0-9]* | diskstats) ;; *) ln -s "$e" "$work/ne/proc/" ;; esac
done
ln -s "$work/host/proc/diskstats" "$work/host/proc/1" "$work/ne/proc/"
for e in /sys/*; do [ "$e" = /sys/block ] || ln -s "$e" "$work/ne/sys/"; done
ln -s "$work/host/sys/block" "$work/ne/sys/"
# NAME PORT SYSFS PROCFS: a node_exporter on the fixture's rootfs, waited for; sets ne_pids.
ne_pids=()
start_ne() {
  "$NODE_EXPORTER" --web.listen-address "127.0.0.1:$2" --log.level=error \
    --path.sysfs "$3" --path.procfs "$4" --path.rootfs "$work/host/rootfs" \
    --path.udev.data "$work/ne/udev" 2>/dev/null &
  ne_pids+=("$!")
  wait_metrics "$2" "$1"
}
stop_ne() {
  for p in "${ne_pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
}
trap 'stop_ne; big_host_cleanup' EXIT
start_ne node_exporter "$ne_port" "$work/ne/sys" "$work/ne/proc"
# The same on the fixture alone (its drives and mounts, nothing of this machine): how the two
# compare on those series alone.
fx_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_ne "node_exporter on the fixture alone" "$fx_port" "$work/host/sys" "$work/host/proc"

gz=(-H 'Accept-Encoding: gzip')
# NAME URL [curl flags]: median and p99 of n scrapes in ms on new connections and on one kept
# alive, the body's bytes as sent and the series of a plain scrape. Sets $med_keep, $bytes, $series.
measure() {
  local name=$1 url=$2; shift 2
  local cold keep args=()
  cold=$(for _ in $(seq "$n"); do curl -fsS -o /dev/null -w '%{time_total}\n' "$@" "$url"; done | sort -n)
  for _ in $(seq "$n"); do args+=(-o /dev/null "$url"); done
  keep=$(curl -fsS -w '%{time_total}\n' "$@" "${args[@]}" | sort -n)
  pct() { awk -v n="$n" -v q="$2" 'NR == int(n * q + 0.999) {printf "%.3f", $1 * 1000}' <<<"$1"; }
  med_keep=$(pct "$keep" 0.5)
  bytes=$(curl -fsS "$@" "$url" | wc -c)
  series=$(curl -fsS "$url" | grep -vc '^#' || true)
  printf '%-27s new connection: median %7s ms  p99 %7s ms   kept alive: median %7s ms  p99 %7s ms   %9s bytes  %6s series  %6.1f bytes/series\n' \
    "$name" "$(pct "$cold" 0.5)" "$(pct "$cold" 0.99)" "$med_keep" "$(pct "$keep" 0.99)" "$bytes" "$series" \
    "$(awk -v b="$bytes" -v s="$series" 'BEGIN {print b / s}')"
}
# Warm both once.
curl -fsS -o /dev/null "http://127.0.0.1:$port/metrics"
curl -fsS -o /dev/null "http://127.0.0.1:$ne_port/metrics"
# The body ssdwatch sends in gzip must be gzip of the whole exposition.
curl -fsS "${gz[@]}" "http://127.0.0.1:$port/metrics" | gzip -dc | grep '^ssdwatch_filesystem_avail_bytes{mountpoint="/srv/db499"' >/dev/null
echo "$n scrapes each:"
measure ssdwatch "http://127.0.0.1:$port/metrics"
sw_plain_ms=$med_keep
measure ssdwatch-gzip "http://127.0.0.1:$port/metrics" "${gz[@]}"
sw_ms=$med_keep sw_gz=$bytes sw_series=$series
measure node_exporter "http://127.0.0.1:$ne_port/metrics"
ne_plain_ms=$med_keep
measure node_exporter-gzip "http://127.0.0.1:$ne_port/metrics" "${gz[@]}"
ne_ms=$med_keep ne_gz=$bytes ne_series=$series
measure node_exporter-fixture-gzip "http://127.0.0.1:$fx_port/metrics" "${gz[@]}"
fx_gz=$bytes fx_series=$series
awk -v a="$sw_ms" -v b="$ne_ms" -v pa="$sw_plain_ms" -v pb="$ne_plain_ms" -v sg="$sw_gz" -v ss="$sw_series" \
  -v ng="$ne_gz" -v ns="$ne_series" -v fg="$fx_gz" -v fs="$fx_series" 'BEGIN {
  r = a / b; printf "scrape time, gzip, kept alive: ssdwatch/node_exporter = %.3f (target <= 0.05: %s)\n", r, (r <= 0.05 ? "met" : "NOT met")
  r = pa / pb; printf "scrape time, plain, kept alive: ssdwatch/node_exporter = %.3f (target <= 0.05: %s)\n", r, (r <= 0.05 ? "met" : "NOT met")
  x = sg / ss; y = ng / ns
  printf "gzip bytes per series: ssdwatch %.2f, node_exporter %.2f (target ssdwatch <= node_exporter: %s)\n", x, y, (x <= y ? "met" : "NOT met")
  printf "gzip bytes per series, node_exporter on the fixture alone (its drives and mounts): %.2f\n", fg / fs
}'
