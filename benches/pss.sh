#!/usr/bin/env bash
# The whole daemon's memory at its default config, as the package runs it: SMART, probes,
# layers, databases and the history on (the probe collector has no target until one is
# configured), on the generated large host (64 drives with 8 partitions each, 500 filesystems;
# benches/gen_big_host.py). SMART reads each drive through the SMART helper, as in production:
# the daemon, the helper's keeper and the helper are three processes, and smartctl answers from a
# real NVMe capture (tests/fake-smartctl, so the bench needs no drives; the 64 drives are
# listed under collectors.smart.devices). Every 3 s a scrape
# (gzip) and every second the PSS of each of the three (/proc/PID/smaps_rollup: each page shared
# between them is counted once, split between its users) and their sum; after a warm-up (every
# collector sampled, SMART's first pass over the 64 drives, the history's first forecast pass)
# the medians and maxima are printed, and the RSS each would show alone.
# Usage: benches/pss.sh [SECONDS]   (default 600)
# SHORT=1 runs 4 s after a short warm-up against whatever binary SSDWATCH names (CI passes its
# debug build, whose figures mean nothing): it keeps the script from rotting.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
warmup=90
if [ -n "${SHORT:-}" ]; then
  seconds=4
  warmup=3
fi

. benches/big_host.sh
big_host_setup
mkdir -p "$work/fake"
capture=$PWD/tests/fixtures/smart/$(cd tests/fixtures/smart && ls | grep -m1 '^nvme.*\.json$')
echo "ok $capture" >"$work/fake/mode"
export FAKE_STATE=$work/fake
# The host's drives are listed, as a configured device is read without a node under /dev (the
# generated host's drives have none here); the collectors are otherwise at their defaults.
drives=$(for d in "$work/host/sys/block/"*; do [ -e "$d/device" ] && echo "      - path: /dev/${d##*/}"; done)
cat >"$work/config.yaml" <<CFG
state_dir: $work/state
collectors:
  smart:
    smartctl_path: $PWD/tests/fake-smartctl/smartctl
    devices:
$drives
CFG
big_host_serve "$work/config.yaml"
# The keeper and the helper: the daemon's child and grandchild.
family() {
  local p=$1
  echo "$p"
  for c in $(cat "/proc/$p/task/"*/children 2>/dev/null); do family "$c"; done
}
pss() { awk '/^Pss:/ {print $2}' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0; }
rss() { awk '/^Rss:/ {print $2}' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0; }
sleep "$warmup"
procs=$(family "$pid" | head -n 3)
[ "$(echo "$procs" | wc -l)" -eq 3 ] || { echo "expected the daemon, its keeper and its helper; found: $procs" >&2; exit 1; }
names=()
for p in $procs; do names+=("$(cat "/proc/$p/comm")"); done
declare -a lines
for i in $(seq "$seconds"); do
  if [ $((i % 3)) -eq 0 ]; then curl -fsS -o /dev/null -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port/metrics"; fi
  line=""
  sum=0
  for p in $procs; do v=$(pss "$p"); line="$line $v"; sum=$((sum + v)); done
  lines+=("$sum$line")
  sleep 1
done
stats() { # column: median and max in KiB
  printf '%s\n' "${lines[@]}" | awk -v c="$1" '{print $c}' | sort -n \
    | awk '{a[NR]=$1} END {printf "median %d KiB (%.2f MiB), max %d KiB", a[int((NR+1)/2)], a[int((NR+1)/2)]/1024, a[NR]}'
}
smart_ok=$(curl -fsS "http://127.0.0.1:$port/metrics" | grep -c '^ssdwatch_device_smart_sample_ok{.*} 1' || true)
echo "drives read through the helper: $smart_ok"
col=2
for p in $procs; do
  echo "PSS ${names[$((col - 2))]} (pid $p): $(stats "$col"); RSS alone now $(rss "$p") KiB"
  col=$((col + 1))
done
echo "PSS of the whole daemon over ${seconds} s after a ${warmup} s warm-up: $(stats 1)"
# Where each process's pages are, at the end: anonymous (heap, stacks), file (the binary and
# libraries), and its threads; DETAIL=1 adds the daemon's largest mappings.
for p in $procs; do
  printf '%s (pid %s): %s, threads %s\n' "$(cat "/proc/$p/comm")" "$p" \
    "$(awk '/^Pss_(Anon|File|Shmem):/ {printf "%s%s %d KiB", sep, $1, $2; sep=", "}' "/proc/$p/smaps_rollup")" \
    "$(ls "/proc/$p/task" | wc -l)"
done
if [ -n "${DETAIL:-}" ]; then
  echo "the daemon's largest mappings by PSS (KiB):"
  awk '/^[0-9a-f]+-[0-9a-f]+ / {name = ($6 == "" ? "[anon]" : $6)} /^Pss:/ {pss[name] += $2} END {for (n in pss) printf "%8d %s\n", pss[n], n}' \
    "/proc/$pid/smaps" | sort -rn | head -8
fi
