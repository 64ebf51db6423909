#!/usr/bin/env bash
# What the layers collector costs on a host with many layers (benches/gen_layers_host.py: 16 LVM
# thin pools with 200 thin volumes, each under an ext4 mount, 8 btrfs, 4 ZFS pools with 100
# datasets, 2 md arrays; 311 mounts), dmsetup, zpool and zfs answering from the host's captures
# through tests/fake-layers. Two daemons on the same host with the same intervals (filesystem
# and layers every INTERVAL seconds, history on, scraped every 3 s, /metrics read every second
# to count the layers collector's samples), one with the layers collector on, one with it off,
# measured side by side over the same seconds: what else the machine does in those seconds
# weighs on both alike (SEQUENTIAL=1: one phase after the other). Printed per
# phase: the daemon's own CPU (utime + stime from /proc/PID/stat: its children, the commands it
# runs, are counted apart), the layers collector's samples and mean duration, the median VmRSS
# the median time of the 3-s scrapes (curl's time to the last byte) and the exposition's size.
# The CPU a layers sample costs beyond today is the difference of the
# two phases' CPU per second times the interval (the filesystem collector's placing of each mount
# on its layers included). Target: <= 5 ms of CPU per sample.
# Usage: benches/layers.sh [SECONDS_PER_PHASE] [INTERVAL]   (defaults 300 and 2)
# SHORT=1 runs 3 s per phase at 1 s against whatever binary SSDWATCH names (CI passes its debug
# build, whose figures mean nothing): it keeps the script from rotting.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-300}
interval=${2:-2}
warmup=$((3 * interval + 3))
if [ -n "${SHORT:-}" ]; then
  seconds=3
  interval=1
  warmup=2
fi
if [ -z "${SSDWATCH:-}" ]; then
  cargo build --release --quiet
  SSDWATCH=${CARGO_TARGET_DIR:-target}/release/ssdwatch
fi
work=$(mktemp -d)
pid=
stop() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  pid=
}
# Each phase's daemon, by the pid it wrote down, whichever shell started it.
stop_all() {
  local f
  stop
  for f in "$work"/*.pid; do
    [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null
  done
  return 0
}
trap 'stop_all; wait; rm -rf "$work"' EXIT
python3 benches/gen_layers_host.py "$work/host"
fake=$PWD/tests/fake-layers
export FAKE_LAYERS=$work/host/layers
hz=$(getconf CLK_TCK)

# NAME ENABLED: one phase; prints its figures and leaves "cpu_per_s" set.
phase() {
  local name=$1 enabled=$2
  mkdir -p "$work/state-$name"
  cat >"$work/$name.yaml" <<EOF
state_dir: $work/state-$name
collectors:
  smart: {enabled: false}
  probe: {enabled: false}
  filesystem: {interval: ${interval}s}
  layers:
    enabled: $enabled
    interval: ${interval}s
    dmsetup_path: $fake/dmsetup
    zpool_path: $fake/zpool
    zfs_path: $fake/zfs
EOF
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$SSDWATCH" serve --config "$work/$name.yaml" --web.listen-address "127.0.0.1:$port" --log.level warn \
    --path.sysfs "$work/host/sys" --path.procfs "$work/host/proc" --path.rootfs "$work/host/rootfs" \
    --fixture.statvfs "$work/host/statvfs.yaml" &
  pid=$!
  echo "$pid" >"$work/$name.pid"
  local url="http://127.0.0.1:$port/metrics" up=
  for _ in $(seq 100); do
    if curl -fsS -o /dev/null "$url" 2>/dev/null; then up=1; break; fi
    sleep 0.1
  done
  [ -n "$up" ] || { echo "the daemon did not answer on port $port" >&2; exit 1; }
  sleep "$warmup"
  local t0 c0 t1 c1 i m stamp last= samples=0 durations=() rss=() scrapes=()
  read -r t0 c0 < <(awk '{print $14 + $15, $16 + $17}' "/proc/$pid/stat")
  for i in $(seq "$seconds"); do
    m=$(curl -fsS "$url")
    stamp=$(printf '%s\n' "$m" | awk '/^ssdwatch_collector_last_success_timestamp_seconds\{collector="layers"\}/ {print $2}')
    if [ -n "$stamp" ] && [ "$stamp" != "$last" ]; then
      samples=$((samples + 1))
      last=$stamp
      durations+=("$(printf '%s\n' "$m" | awk '/^ssdwatch_collector_duration_seconds\{collector="layers"\}/ {print $2}')")
    fi
    if [ $((i % 3)) -eq 0 ]; then scrapes+=("$(curl -fsS -o /dev/null -w '%{time_total}' "$url")"); fi
    rss+=("$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")")
    sleep 1
  done
  read -r t1 c1 < <(awk '{print $14 + $15, $16 + $17}' "/proc/$pid/stat")
  local body
  body=$(curl -fsS "$url")
  local bytes series limiting median mean_ms scrape_ms
  scrape_ms=$(printf '%s\n' "${scrapes[@]:-}" | awk 'NF' | sort -n | awk '{a[NR]=$1} END {if (NR) printf "%.2f", a[int((NR+1)/2)] * 1000; else print "-"}')
  bytes=$(printf '%s\n' "$body" | wc -c)
  series=$(printf '%s\n' "$body" | grep -vc '^#')
  limiting=$(printf '%s\n' "$body" | grep '^ssdwatch_filesystem_limiting_layer_info' \
    | sed 's/.*layer="\([a-z_]*\)".*/\1/' | sort | uniq -c | awk '{printf "%s %s, ", $1, $2}')
  median=$(printf '%s\n' "${rss[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  mean_ms=$(printf '%s\n' "${durations[@]:-}" | awk 'NF {s+=$1; n++} END {if (n) printf "%.1f", s / n * 1000; else print "-"}')
  cpu_per_s=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v s="$seconds" 'BEGIN {printf "%.3f", (b - a) / hz * 1000 / s}')
  local child_ms
  child_ms=$(awk -v a="$c0" -v b="$c1" -v hz="$hz" -v n="$samples" 'BEGIN {if (n) printf "%.1f", (b - a) / hz * 1000 / n; else print "-"}')
  echo "layers $name: daemon CPU $cpu_per_s ms/s over $seconds s; $samples layers samples, mean duration $mean_ms ms, commands' CPU $child_ms ms per sample (the fake commands: sh + cat); median VmRSS $median KiB ($(awk -v k="$median" 'BEGIN {printf "%.2f", k / 1024}') MiB); scrape median $scrape_ms ms; exposition $bytes bytes, $series series"
  [ -n "$limiting" ] && echo "  limiting layers: ${limiting%, }"
  echo "$cpu_per_s" >"$work/$name.cpu"
  stop
  rm -f "$work/$name.pid"
}

echo "host: 16 thin pools, 200 thin volumes, 8 btrfs, 4 ZFS pools with 100 datasets, 2 md arrays; intervals ${interval}s"
if [ -n "${SEQUENTIAL:-}" ]; then
  phase on true
  phase off false
else
  echo "both daemons at once, over the same $seconds s"
  (trap stop EXIT; trap 'exit 1' TERM INT; phase on true) >"$work/on.out" &
  on_shell=$!
  (trap stop EXIT; trap 'exit 1' TERM INT; phase off false) >"$work/off.out" &
  off_shell=$!
  status=0
  wait "$on_shell" || status=1
  wait "$off_shell" || status=1
  cat "$work/on.out" "$work/off.out"
  [ "$status" -eq 0 ] || exit 1
fi
on=$(cat "$work/on.cpu")
off=$(cat "$work/off.cpu")
awk -v on="$on" -v off="$off" -v i="$interval" 'BEGIN {printf "CPU a layers sample costs beyond today: %.2f ms ((%s - %s) ms/s x %s s)\n", (on - off) * i, on, off, i}'
