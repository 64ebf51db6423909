#!/usr/bin/env bash
# Bytes the daemon writes a day on a host whose filesystem is mounted `-o discard` (online
# discard, common on cloud images and in XFS guides): every diskstats sample there sees a new
# discard. A real ext4 on a loop device, mounted with discard, takes a small churn (a 1 MiB file
# written, synced and deleted every 2 s) while the daemon samples the real /sys at its default
# intervals with the history on; its write_bytes in /proc/PID/io (every file it writes: the
# history store, its WAL, discards.json and the diskstats state) are scaled to a day.
# Usage (root): benches/discard_io.sh [DURATION]   (default 1800; target <= 20 MiB/day)
# SHORT=1 runs 8 s with a 1 s diskstats interval, so CI exercises the script in seconds; it
# checks that the daemon saw the discards, not the target (the start-up writes dominate 8 s).
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-1800}
diskstats_interval=15s
if [ -n "${SHORT:-}" ]; then
  duration=8
  diskstats_interval=1s
fi
[ "$(id -u)" -eq 0 ] || { echo "discard_io.sh needs root (loop device, mount)" >&2; exit 2; }

if [ -z "${SSDWATCH:-}" ]; then
  cargo build --release --quiet --features atasmart
  SSDWATCH=${CARGO_TARGET_DIR:-target}/release/ssdwatch
fi
work=$(mktemp -d)
pid= churn= loopdev=
cleanup() {
  [ -n "$churn" ] && { kill "$churn" 2>/dev/null || true; wait "$churn" 2>/dev/null || true; }
  [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  mountpoint -q "$work/mnt" 2>/dev/null && umount "$work/mnt"
  [ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
truncate -s 256M "$work/disk.img"
loopdev=$(losetup --find --show "$work/disk.img")
mkfs.ext4 -q "$loopdev"
mkdir -p "$work/mnt" "$work/state"
mount -o discard "$loopdev" "$work/mnt"
dev=$(basename "$loopdev")

cat >"$work/config.yaml" <<CFG
state_dir: $work/state
collectors:
  diskstats:
    interval: $diskstats_interval
  smart: {enabled: false}
  probe: {enabled: false}
history:
  enabled: true
CFG
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$SSDWATCH" serve --config "$work/config.yaml" --web.listen-address "127.0.0.1:$port" --log.level warn &
pid=$!
for _ in $(seq 100); do
  curl -fsS -o /dev/null "http://127.0.0.1:$port/metrics" 2>/dev/null && break
  sleep 0.1
done
(
  i=0
  while :; do
    head -c 1048576 /dev/urandom >"$work/mnt/churn.$i"
    sync "$work/mnt/churn.$i"
    rm -f "$work/mnt/churn.$i"
    sync -f "$work/mnt"
    i=$(( (i + 1) % 8 ))
    sleep 2
  done
) &
churn=$!
discards() {
  curl -fsS "http://127.0.0.1:$port/metrics" |
    awk -v d="$dev" '$0 ~ "^ssdwatch_disk_discards_completed_total\\{device=\"" d "\"\\}" {print $2}'
}
written() { awk '/^write_bytes:/ {print $2}' "/proc/$pid/io"; }
# Measured from the first sample on: the daemon's start (creating the store) is not a day's work.
sleep 3
start=$(written)
d0=$(discards)
sleep "$duration"
end=$(written)
d1=$(discards)
per_day=$(( (end - start) * 86400 / duration ))
echo "discards completed on $dev during the run: $(( ${d1%.*} - ${d0%.*} ))"
echo "written by the daemon: $((end - start)) bytes in ${duration}s"
echo "= $((per_day / 1048576)) MiB/day (target <= 20)"
if [ "${d1%.*}" -le "${d0%.*}" ]; then
  echo "no discard reached $dev during the run: the measurement means nothing" >&2
  exit 1
fi
if [ -z "${SHORT:-}" ] && [ "$per_day" -gt $((20 << 20)) ]; then
  echo "above the 20 MiB/day target" >&2
  exit 1
fi
