#!/usr/bin/env bash
# Boots a guest whose NVMe drive is the simulated SSD of tests/vm/ftl/ftl.py (nbdkit on a unix
# socket, reached by QEMU's NBD client, discards passed through), runs the degradation story of
# tests/vm/guest-degrade.sh in it with the real daemon, and unpacks the scrapes into OUT_DIR.
# Assertions live in tests/it/vm/degrade.rs; this script only runs.
#
#   tests/vm/degrade.sh SSDWATCH_BINARY OUT_DIR
#
# Exit status: 0 the guest finished; 77 a prerequisite is missing; anything else a failure.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
# Per machine, not per clone: a fresh clone (CI) reuses what an earlier run built.
CACHE="${SSDWATCH_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ssdwatch-vm}"
BIN="${1:?usage: degrade.sh SSDWATCH_BINARY OUT_DIR}"
OUT="${2:?usage: degrade.sh SSDWATCH_BINARY OUT_DIR}"

. "$HERE/lib.sh"
command -v nbdkit >/dev/null || missing nbdkit nbdkit
nbdkit --dump-plugin python >/dev/null 2>&1 || missing "nbdkit's python plugin" nbdkit-plugin-python

# The drive: small enough that filling it to 95 % under TCG takes seconds, big enough for ext4
# with a journal, the probe file and six fill steps. The model's parameters (docs/ftl-model.md):
# GC work (t_reloc_ms, t_erase_ms) is slowed GC_SCALE times from the spec's figures so that it
# stands clear of what TCG itself adds to every guest I/O (2-3 ms); programming a page keeps
# the spec's 0.1 ms, so the fill of clean flash stays fast. 3 % over-provisioning.
FTL_SIZE="${SSDWATCH_FTL_SIZE:-128M}"
GC_SCALE="${SSDWATCH_FTL_GC_SCALE:-20}"
FTL_IDLE_S=8
ftl_args=(size="$FTL_SIZE" op=0.03 pages_per_block=64 low_blocks=2 high_ratio=0.08 t_prog_ms=0.1
  t_reloc_ms="$(awk -v s="$GC_SCALE" 'BEGIN { print 0.25 * s }')"
  t_erase_ms="$(awk -v s="$GC_SCALE" 'BEGIN { print 2 * s }')"
  t_read_ms=0.05 idle_after_s="$FTL_IDLE_S" bg_pages_per_s=300)

RUN="$(mktemp -d "${TMPDIR:-/tmp}/ssdwatch-degrade.XXXXXX")"
NBDKIT_PID=
cleanup() {
  # Only the server this script started, by its pid.
  if [ -n "$NBDKIT_PID" ]; then
    kill "$NBDKIT_PID" 2>/dev/null || true
    wait "$NBDKIT_PID" 2>/dev/null || true
  fi
  rm -rf "$RUN"
}
trap cleanup EXIT

# --- overlay: the scenario as /init, the daemon under test ---
ov="$RUN/overlay"
mkdir -p "$ov/sbin"
cp "$HERE/guest-degrade.sh" "$ov/init"
chmod 755 "$ov/init"
strip -o "$ov/sbin/ssdwatch" "$BIN" 2>/dev/null || cp "$BIN" "$ov/sbin/ssdwatch"
for l in $(libs_of "$BIN"); do
  mkdir -p "$ov$(dirname "$l")"
  cp -L "$l" "$ov$l"
done
(cd "$ov" && find . | cpio -o -H newc --quiet) > "$RUN/overlay.cpio"
cat "$BASE" "$RUN/overlay.cpio" > "$RUN/initrd.cpio"
truncate -s 128M "$RUN/scratch.img"

# --- the simulated drive ---
SOCK="$RUN/ftl.sock"
printf '%s\n' "${ftl_args[@]}" > "$OUT/ftl-args.txt"
echo "$FTL_IDLE_S" > "$OUT/ftl-idle-seconds.txt"
nbdkit --foreground --unix "$SOCK" python "$HERE/ftl/ftl.py" "${ftl_args[@]}" \
  log="$OUT/ftl.log" > "$OUT/nbdkit.log" 2>&1 &
NBDKIT_PID=$!
for _ in $(seq 100); do
  [ -S "$SOCK" ] && break
  kill -0 "$NBDKIT_PID" 2>/dev/null || { echo "vm: nbdkit exited: $(cat "$OUT/nbdkit.log")" >&2; exit 1; }
  sleep 0.1
done
[ -S "$SOCK" ] || { echo "vm: nbdkit made no socket in 10 s" >&2; exit 1; }

pick_accel
echo "$ACCEL" > "$OUT/accel.txt"
# Whole-guest deadline; it only stops a hung guest (the scenario takes about 4 minutes under TCG).
GUEST_TIMEOUT="${SSDWATCH_VM_TIMEOUT:-900}"
echo "vm: booting $KVER with accel=$ACCEL, drive ftl.py $FTL_SIZE (guest timeout ${GUEST_TIMEOUT}s)" >&2
start=$(date +%s%N)
set +e
# cache=none: no host page cache between the guest and the model; discard=unmap: the guest's
# discards reach the model as NBD trims.
timeout --kill-after=5 "$GUEST_TIMEOUT" qemu-system-x86_64 \
  -accel "$ACCEL" -machine q35 -m 1024 -smp 2 -nographic -no-reboot \
  -kernel "$VMLINUZ" -initrd "$RUN/initrd.cpio" \
  -append "console=ttyS0 panic=-1 quiet loglevel=4 rdinit=/init ssdwatch.accel=$ACCEL" \
  -device virtio-rng-pci \
  -drive "file=nbd+unix:///?socket=$SOCK,format=raw,if=none,id=ftl,discard=unmap,cache=none" \
  -device "nvme,serial=FTL0001,drive=ftl" \
  -drive "if=none,id=scratch,file=$RUN/scratch.img,format=raw" \
  -device "virtio-blk-pci,drive=scratch,serial=SCRATCH" \
  > "$OUT/console.log" 2>&1
rc=$?
set -e
collect_guest_results "$rc" "$start" "the degradation scenario"
