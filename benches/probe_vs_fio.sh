#!/bin/sh
# Compares `ssdwatch probe run --json` with fio running the same pattern (block size, O_DIRECT,
# O_DSYNC, queue depth, the very same probe file), alternating the two ROUNDS times per place,
# and prints the ratio of the medians of their p50 latencies. Needs root (loop device) and fio.
# Both run in the normal I/O priority class: the daemon's default idle class adds queueing delay
# of its own on schedulers that honour it (mq-deadline, bfq), which is the point in production but
# not what this comparison measures.
#
#   benches/probe_vs_fio.sh                       # loop-mounted ext4 + a directory on the root disk
#   ROUNDS=9 OPS=400 KINDS="sync_write_4k rand_read_4k" benches/probe_vs_fio.sh
#   PLACES="/srv/data" benches/probe_vs_fio.sh    # only these directories (no loop device)
#   LOOP_DIRECT_IO=off benches/probe_vs_fio.sh    # buffered loop device (reads from page cache)
#   PLAIN=1 KINDS=sync_write_4k benches/probe_vs_fio.sh  # also a plain Python loop, a third opinion
#
# Output: one line per kind and place, and a final machine-readable line each:
#   RATIO <kind> <place> <ssdwatch_p50_median/fio_p50_median>
#   PAIRED <kind> <place> <median over rounds of ssdwatch_p50/fio_p50>
# and with PLAIN=1:
#   PLAIN <kind> <place> <ssdwatch_p50_median/plain_p50_median>
#   FIOPLAIN <kind> <place> <fio_p50_median/plain_p50_median>
set -eu

ROUNDS=${ROUNDS:-15}
# Pause before each run, so that neither tool runs in the tail of the other's writes.
SETTLE=${SETTLE:-0.2}
# I/Os per run of each 4 KiB kind. Short runs carry a start-up part (the first I/Os of a fresh
# process are slower, for both tools but not equally); 1000 keeps it small.
OPS=${OPS:-1000}
KINDS=${KINDS:-"sync_write_4k rand_read_4k rand_write_4k seq_write"}
SSDWATCH=${SSDWATCH:-$(dirname "$0")/../target/release/ssdwatch}
ROOTDISK_DIR=${ROOTDISK_DIR:-/var/tmp}

[ -x "$SSDWATCH" ] || { echo "no ssdwatch binary at $SSDWATCH (cargo build --release, or set SSDWATCH)" >&2; exit 2; }
command -v fio >/dev/null || { echo "fio not installed (apt-get install fio)" >&2; exit 2; }

. "$(dirname "$0")/loop_ext4.sh"
WORK=$(mktemp -d /tmp/probe-vs-fio.XXXXXX)
cleanup() {
    loop_ext4_cleanup
    [ -n "${ROOTDIR:-}" ] && rm -rf "$ROOTDIR"
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

if [ -z "${PLACES:-}" ]; then
    # Direct I/O from the loop device to its backing file (LOOP_DIRECT_IO=off for the buffered
    # mode, where fio itself ranges 11-20 us by CPU placement alone).
    loop_ext4_setup "$WORK"
    ROOTDIR=$(mktemp -d "$ROOTDISK_DIR/probe-vs-fio.XXXXXX")
    PLACES="$LOOP_MNT $ROOTDIR"
fi

# Within the probes' cap of 1/32 of the filesystem (the 1 GiB loop image allows 32 MiB): a file
# the daemon would resize is not the file fio measures.
FILE_SIZE=$((24 << 20))
DEPTH=4
SEQ_BLOCK=$((1 << 20))
SEQ_BYTES=${SEQ_BYTES:-$((16 << 20))}
# Offsets below are drawn inside the file; settings that can't fit would make fio run its
# defaults silently, so refuse them.
if [ "$OPS" -gt $((FILE_SIZE / 4096)) ] || [ "$SEQ_BYTES" -gt "$FILE_SIZE" ] \
    || [ "$SEQ_BYTES" -lt "$SEQ_BLOCK" ] || [ $((SEQ_BYTES % SEQ_BLOCK)) -ne 0 ]; then
    echo "need OPS <= $((FILE_SIZE / 4096)) and SEQ_BYTES a multiple of $SEQ_BLOCK up to $FILE_SIZE" >&2
    exit 2
fi
{
    echo "state_dir: $WORK/state"
    echo "collectors:"
    echo "  probe:"
    echo "    busy_window: 0s"
    echo "    targets:"
    for p in $PLACES; do
        cat <<YAML
      - path: $p
        write_ops: $OPS
        read_ops: $OPS
        queue_depth: $DEPTH
        file_size_bytes: $FILE_SIZE
        seq_write_bytes: $SEQ_BYTES
        seq_write_block_bytes: $SEQ_BLOCK
        budget_bytes_per_day: 1099511627776
        budget_time_per_hour: 1h
        busy_threshold: 1.0
        free_floor_ratio: 0.0
        free_floor_bytes: 67108864
        idle_priority: false
YAML
    done
} > "$WORK/config.yaml"

fio_args() { # kind -> fio flags reproducing the probe
    case "$1" in
    # Like the probe: consecutive writes from a random block of the file.
    sync_write_4k) echo "--rw=write --bs=4k --sync=dsync --number_ios=$OPS --size=$((OPS * 4096)) --offset=$(($(shuf -i 0-$((FILE_SIZE / 4096 - OPS)) -n 1) * 4096))" ;;
    rand_read_4k) echo "--rw=randread --bs=4k --number_ios=$OPS --randrepeat=0" ;;
    rand_write_4k) echo "--rw=randwrite --bs=4k --numjobs=$DEPTH --group_reporting --number_ios=$((OPS / DEPTH)) --randrepeat=0" ;;
    # Like the probe: a burst from a random block-aligned slot of the file.
    seq_write) echo "--rw=write --bs=$SEQ_BLOCK --number_ios=$((SEQ_BYTES / SEQ_BLOCK)) --size=$SEQ_BYTES --offset=$(($(shuf -i 0-$(((FILE_SIZE - SEQ_BYTES) / SEQ_BLOCK)) -n 1) * SEQ_BLOCK)) --end_fsync=1" ;;
    esac
}

run_ours() { # place kind -> appends the p50 (seconds) to $WORK/ours
    sleep "$SETTLE"
    "$SSDWATCH" --config "$WORK/config.yaml" probe run --target "$1" --kind "$2" --json \
        | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["outcome"]=="ran", d; print(d["results"][0]["p50_seconds"])' >> "$WORK/ours"
}

run_fio() { # place kind -> appends fio's p50 (seconds) to $WORK/fio
    sleep "$SETTLE"
    # shellcheck disable=SC2046
    fio --name=probe --filename="$1/.ssdwatch-probe/probe.dat" --size=$FILE_SIZE \
        --direct=1 --ioengine=psync --thread --lat_percentiles=1 --output-format=json \
        $(fio_args "$2") \
        | python3 -c 'import json,sys; d=json.load(sys.stdin); j=d["jobs"][0]; s=j["read"] if j["read"]["total_ios"] else j["write"]; print(s["lat_ns"]["percentile"]["50.000000"]/1e9)' >> "$WORK/fio"
}

run_plain() { # place kind -> appends a plain loop's p50 (seconds) to $WORK/plain
    sleep "$SETTLE"
    python3 - "$1/.ssdwatch-probe/probe.dat" "$2" "$OPS" >> "$WORK/plain" <<'PY'
# The probe's pattern with nothing around it: one pwrite/preadv per I/O, timed on each side.
import mmap, os, random, statistics, sys, time
path, kind, ops = sys.argv[1], sys.argv[2], int(sys.argv[3])
flags = os.O_DIRECT | (os.O_RDWR | os.O_DSYNC if kind == "sync_write_4k" else os.O_RDONLY)
fd = os.open(path, flags)
blocks = os.fstat(fd).st_size // 4096
buf = mmap.mmap(-1, 4096)
buf.write(os.urandom(4096))
start = random.randrange(blocks - ops + 1)
lat = []
for i in range(ops):
    off = (start + i if kind == "sync_write_4k" else random.randrange(blocks)) * 4096
    t = time.perf_counter_ns()
    if kind == "sync_write_4k":
        os.pwrite(fd, buf, off)
    else:
        os.preadv(fd, [buf], off)
    lat.append(time.perf_counter_ns() - t)
print(statistics.median(lat) / 1e9)
PY
}

case " $KINDS " in *" rand_write_4k "*|*" seq_write "*) [ -n "${PLAIN:-}" ] \
    && { echo "PLAIN=1 covers sync_write_4k and rand_read_4k only" >&2; exit 2; } ;; esac

for p in $PLACES; do
    # Creates the probe file both tools then use.
    "$SSDWATCH" --config "$WORK/config.yaml" probe run --target "$p" --kind rand_read_4k --json >/dev/null
    for k in $KINDS; do
        : > "$WORK/ours"
        : > "$WORK/fio"
        : > "$WORK/plain"
        i=0
        while [ $i -lt "$ROUNDS" ]; do
            # Which tool goes first alternates too, so neither always runs on a rested drive.
            if [ $((i % 2)) -eq 0 ]; then
                run_ours "$p" "$k"
                run_fio "$p" "$k"
            else
                run_fio "$p" "$k"
                run_ours "$p" "$k"
            fi
            [ -n "${PLAIN:-}" ] && run_plain "$p" "$k"
            i=$((i + 1))
        done
        [ -n "${VERBOSE:-}" ] && paste "$WORK/ours" "$WORK/fio" >&2
        python3 - "$k" "$p" "$WORK/ours" "$WORK/fio" "$WORK/plain" <<'PY'
import statistics, sys
kind, place, a, b, c = sys.argv[1:]
ours = [float(x) for x in open(a)]
fio = [float(x) for x in open(b)]
mo, mf = statistics.median(ours), statistics.median(fio)
print(f"{kind:<14} {place}: ssdwatch p50 median {mo*1e6:9.1f} us, fio {mf*1e6:9.1f} us, "
      f"ratio {mo/mf:.3f} over {len(ours)} alternated runs")
# Each ssdwatch run next to the fio run that followed it: robust to the machine's load drifting.
paired = statistics.median(o / f for o, f in zip(ours, fio))
print(f"{'':<14} median of paired ratios {paired:.3f}")
print(f"RATIO {kind} {place} {mo/mf:.4f}")
print(f"PAIRED {kind} {place} {paired:.4f}")
plain = [float(x) for x in open(c)]
if plain:
    mp = statistics.median(plain)
    print(f"{'':<14} plain Python loop p50 median {mp*1e6:9.1f} us: ssdwatch/plain {mo/mp:.3f}, fio/plain {mf/mp:.3f}")
    print(f"PLAIN {kind} {place} {mo/mp:.4f}")
    print(f"FIOPLAIN {kind} {place} {mf/mp:.4f}")
PY
    done
done
