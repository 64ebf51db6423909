#!/usr/bin/env bash
# Bytes the daemon writes to the host's disk per day at the default config, with the history
# store on: the daemon serves the generated large host (64 drives with 8 partitions each, 500
# filesystems; benches/gen_big_host.py) for DURATION seconds and its write_bytes in
# /proc/PID/io (what reached the block layer, WAL and checkpoints included) are scaled to a day.
# Intervals are the defaults; SMART and probes are off (no drives to read here; probe writes
# are budgeted separately).
# An hour holds four commits at the defaults (a raw sample every 5 minutes, a commit every 15
# minutes), and SQLite checkpoints its WAL into the file every 1,000 pages (hours apart), so the run itself may see no checkpoint: the pages its WAL
# holds at the end, each of which the next checkpoint writes once, are added as that debt.
# Usage: benches/history_io.sh [DURATION]   (default 3600; target <= 20 MiB/day)
# SHORT=1 runs 20 s with a 5 s raw interval and flush, so CI exercises the script in seconds.
# PREFILL_DAYS=N measures a store that already holds N days of samples of the same series (14
# is the steady state at the defaults, raw rows kept 14 days): the daemon runs once against the
# host in a scratch state directory to learn its series, examples/history_fill.rs (a bench tool,
# not in the daemon's binary; it only creates new stores) writes N days like them into the
# measured store (the store's own code, one transaction per raw interval),
# then the measured daemon starts on it.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-3600}
intervals="  enabled: true"
raw_interval=300
if [ -n "${SHORT:-}" ]; then
  duration=8
  raw_interval=2
  intervals=$'  raw_interval: 2s\n  flush_interval: 2s'
fi

# SSDWATCH=path uses that binary (the CI test passes its debug build) instead of building one.
. benches/big_host.sh
big_host_setup
cat >"$work/config.yaml" <<CFG
state_dir: $work/state
collectors:
  smart: {enabled: false}
  probe: {enabled: false}
history:
$intervals
CFG
if [ -n "${PREFILL_DAYS:-}" ]; then
  sed "s|state_dir: $work/state|state_dir: $work/template|" "$work/config.yaml" >"$work/template.yaml"
  big_host_serve "$work/template.yaml"
  # The first flush comes one flush interval after start; a stop flushes what is queued.
  sleep 3
  kill -TERM "$pid"
  wait "$pid" || true
  pid=
  # HISTORY_FILL=path uses that build of the bench tool instead of building one.
  fill=${HISTORY_FILL:-}
  if [ -z "$fill" ]; then
    cargo build --release --quiet --example history_fill
    fill=target/release/examples/history_fill
  fi
  "$fill" --state-dir "$work/state" --like "$work/template/history.db" \
    --days "$PREFILL_DAYS" --raw-interval "$raw_interval"
  filled=$(du -sb "$work/state" | cut -f1)
  echo "pre-filled store: $PREFILL_DAYS days, $filled bytes"
fi
big_host_serve "$work/config.yaml"
written() { awk '/^write_bytes:/ {print $2}' "/proc/$pid/io"; }
start=$(written)
sleep "$duration"
end=$(written)
m=$(curl -fsS "http://127.0.0.1:$port/metrics")
records=$(printf '%s\n' "$m" | awk '/^ssdwatch_history_records_written_total / {print $2}')
store=$(printf '%s\n' "$m" | awk '/^ssdwatch_history_store_bytes / {print $2}')
# Distinct pages in the WAL's current generation (frames carrying its header's salt).
debt=$(python3 - "$work/state/history.db-wal" <<'PY'
import struct, sys
try:
    w = open(sys.argv[1], "rb").read()
except FileNotFoundError:
    w = b""
pages, off = set(), 32
ps = struct.unpack(">I", w[8:12])[0] if len(w) >= 32 else 0
while ps and off + 24 + ps <= len(w) and w[off + 8:off + 16] == w[16:24]:
    pages.add(struct.unpack(">I", w[off:off + 4])[0])
    off += 24 + ps
print(len(pages) * ps)
PY
)
per_day=$(( (end - start + debt) * 86400 / duration ))
echo "history: $records records written in ${duration}s, store ${store} bytes"
echo "written to disk: $((end - start)) bytes in ${duration}s, and $debt bytes of WAL pages the next checkpoint writes"
echo "= $((per_day / 1048576)) MiB/day (target <= 20)"
if [ -z "$records" ] || [ "${records%.*}" -eq 0 ]; then
  echo "the history wrote nothing: the measurement means nothing" >&2
  exit 1
fi
if [ -z "${SHORT:-}" ] && [ "$per_day" -gt $((20 << 20)) ]; then
  echo "above the 20 MiB/day target" >&2
  exit 1
fi
