#!/bin/sh
# How many I/Os a probe run needs for a stable p50: RUNS runs of `ssdwatch probe run --json` at
# each count in COUNTS (write_ops = read_ops = count), on a loop-mounted ext4 (direct I/O to its
# backing file) or in the directories of PLACES, and per kind and count the coefficient of
# variation (stdev / mean) of the runs' p50s, with what the two 4 KiB writers plus the daily
# seq_write burst write per day at the default 5 min interval. Needs root for the loop device.
#
#   benches/probe_runlength.sh                        # COUNTS="16 32 64 128 256", RUNS=30
#   COUNTS="32 64" RUNS=60 benches/probe_runlength.sh
#   PLACES=/srv/data benches/probe_runlength.sh       # a directory on a real drive instead
#   SHORT=1 benches/probe_runlength.sh                # CI's smoke run: COUNTS="4 8", RUNS=3
#
# Output: a table, then machine-readable lines:
#   CV <kind> <count> <cv of p50> <median p50 seconds> <(Q3 - Q1) / median of p50>
#   BYTES_PER_DAY <count> <bytes>
set -eu

if [ -n "${SHORT:-}" ]; then
    COUNTS=${COUNTS:-"4 8"}
    RUNS=${RUNS:-3}
fi
COUNTS=${COUNTS:-"16 32 64 128 256"}
RUNS=${RUNS:-30}
INTERVAL=${INTERVAL:-300}
SEQ_BYTES=$((16 << 20))
SSDWATCH=${SSDWATCH:-$(dirname "$0")/../target/release/ssdwatch}
[ -x "$SSDWATCH" ] || { echo "no ssdwatch binary at $SSDWATCH (cargo build --release, or set SSDWATCH)" >&2; exit 2; }

. "$(dirname "$0")/loop_ext4.sh"
WORK=$(mktemp -d /tmp/probe-runlength.XXXXXX)
cleanup() {
    loop_ext4_cleanup
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

if [ -z "${PLACES:-}" ]; then
    loop_ext4_setup "$WORK"
    PLACES="$LOOP_MNT"
fi

for n in $COUNTS; do
    {
        echo "state_dir: $WORK/state"
        echo "collectors:"
        echo "  probe:"
        echo "    busy_window: 0s"
        echo "    targets:"
        for p in $PLACES; do
            # The daemon's settings but the counts; no budget in the way of the repetitions.
            cat <<YAML
      - path: $p
        kinds: [sync_write_4k, rand_read_4k, rand_write_4k]
        write_ops: $n
        read_ops: $n
        budget_bytes_per_day: 1099511627776
        budget_time_per_hour: 1h
        busy_threshold: 1.0
YAML
        done
    } > "$WORK/config-$n.yaml"
done

# Counts take turns, run by run, so a burst of someone else's I/O on the host lands on all of
# them alike instead of on whichever count was running then.
i=0
while [ "$i" -lt "$RUNS" ]; do
    for p in $PLACES; do
        for n in $COUNTS; do
            "$SSDWATCH" --config "$WORK/config-$n.yaml" probe run --json --target "$p" \
                > "$WORK/run.json" || { cat "$WORK/run.json" >&2; exit 1; }
            python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["outcome"] == "ran", d
for k in d["results"]:
    if "p50_seconds" in k:
        print(sys.argv[2], k["probe"], k["p50_seconds"])
' "$WORK/run.json" "$n" >> "$WORK/p50s"
        done
    done
    i=$((i + 1))
done

python3 - "$WORK/p50s" "$INTERVAL" "$SEQ_BYTES" <<'PY'
import statistics, sys
from collections import defaultdict
p50 = defaultdict(list)
for line in open(sys.argv[1]):
    n, kind, v = line.split()
    p50[(kind, int(n))].append(float(v))
interval, seq = int(sys.argv[2]), int(sys.argv[3])
# The coefficient of variation (stdev / mean) is what was asked for, but one run caught behind
# someone else's I/O burst dominates it; the quartile spread ((Q3 - Q1) / median) says how far
# apart ordinary runs land.
print(f"{'kind':<14} {'ops':>5} {'runs':>5} {'median p50':>12} {'cv of p50':>10} {'IQR/median':>11}")
out = []
for (kind, n), vs in sorted(p50.items()):
    mean = statistics.fmean(vs)
    cv = statistics.pstdev(vs) / mean if mean > 0 else float("nan")
    med = statistics.median(vs)
    q = statistics.quantiles(vs, n=4) if len(vs) > 1 else [vs[0]] * 3
    iqr = (q[2] - q[0]) / med if med > 0 else float("nan")
    print(f"{kind:<14} {n:>5} {len(vs):>5} {med * 1e6:>9.1f} us {cv * 100:>9.1f}% {iqr * 100:>10.1f}%")
    out.append(f"CV {kind} {n} {cv:.4f} {med:.9f} {iqr:.4f}")
runs_per_day = 86400 // interval
for n in sorted({n for _, n in p50}):
    day = 2 * n * 4096 * runs_per_day + seq
    print(f"{n:>5} ops: {day / 2**20:.1f} MiB/day written at one run per {interval} s (two 4 KiB writers, one 16 MiB seq_write)")
    out.append(f"BYTES_PER_DAY {n} {day}")
print("\n".join(out))
PY
