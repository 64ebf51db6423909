#!/usr/bin/env bash
# Boots a Linux guest under QEMU with an emulated NVMe drive, a SATA (AHCI) drive, a
# virtio drive and a disk behind an emulated LSI MegaRAID controller (megasas-gen2), runs the end-to-end scenario of tests/vm/guest-init.sh inside it and unpacks
# what the guest collected into OUT_DIR. Assertions live in tests/it/vm/drives.rs; this script only runs.
#
#   tests/vm/run.sh SSDWATCH_BINARY OUT_DIR
#
# Exit status: 0 the guest finished its scenario; 77 a prerequisite (qemu, kernel, busybox)
# is missing; anything else a failure (its message says which step).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
# Per machine, not per clone: a fresh clone (CI) reuses what an earlier run built.
CACHE="${SSDWATCH_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ssdwatch-vm}"
BIN="${1:?usage: run.sh SSDWATCH_BINARY OUT_DIR}"
OUT="${2:?usage: run.sh SSDWATCH_BINARY OUT_DIR}"

. "$HERE/lib.sh"

# --- overlay (init, configs, the ssdwatch under test): rebuilt on every run ---
RUN="$(mktemp -d "${TMPDIR:-/tmp}/ssdwatch-vm.XXXXXX")"
trap 'rm -rf "$RUN"' EXIT
ov="$RUN/overlay"
mkdir -p "$ov/etc/ssdwatch" "$ov/sbin"
cp "$HERE/guest-init.sh" "$ov/init"
chmod 755 "$ov/init"
cp "$HERE"/guest-*.yaml "$ov/etc/ssdwatch/"
# Debug symbols are most of a debug build; the guest unpacks every byte under emulation.
strip -o "$ov/sbin/ssdwatch" "$BIN" 2>/dev/null || cp "$BIN" "$ov/sbin/ssdwatch"
# libatasmart is loaded at run time, so ldd doesn't list it: the guest's libatasmart backend
# needs it and what it links (libudev) too.
# awk reads to the end: leaving early could kill ldconfig with SIGPIPE, which pipefail and set -e
# would make this script's exit status (141).
atasmart=$(ldconfig -p | awk '$1 == "libatasmart.so.4" && !found { print $NF; found = 1 }')
for l in $(libs_of "$BIN") ${atasmart:+$atasmart $(libs_of "$atasmart")}; do
  mkdir -p "$ov$(dirname "$l")"
  cp -L "$l" "$ov$l"
done
# The MegaRAID driver, loaded by the guest only once the other drives have their names (its
# disk would otherwise race the SATA disk for /dev/sda); its SCSI deps are in the base.
mkdir -p "$ov/modules-late"
cp "$(modprobe -S "$KVER" --show-depends megaraid_sas | awk '$1 == "insmod" { m = $2 } END { print m }')" \
  "$ov/modules-late/"
(cd "$ov" && find . | cpio -o -H newc --quiet) > "$RUN/overlay.cpio"
cat "$BASE" "$RUN/overlay.cpio" > "$RUN/initrd.cpio"

# --- drives: sparse images; a scratch disk the guest writes its results to as a tar ---
for d in nvme sata virtio; do truncate -s 1G "$RUN/$d.img"; done
truncate -s 256M "$RUN/md-a.img" "$RUN/md-b.img"
truncate -s 64M "$RUN/nvme-warning.img"
# Critical-warning bits of the second NVMe drive: 0x04, NVM subsystem reliability degraded.
CRITICAL_WARNING=4
echo "$CRITICAL_WARNING" > "$OUT/critical-warning.txt"
truncate -s 64M "$RUN/scratch.img" "$RUN/raid.img"

pick_accel
echo "$ACCEL" > "$OUT/accel.txt"
# Whole-guest deadline; it only stops a hung guest. Boot and scenario take ~45-55 s under TCG
# on a 2-core machine. The guest's own deadlines, should every one of them run out, add up to
# 320 s (waits for drives 20, daemon start and baseline 60, trim 60; six commands at 30 each),
# three times that under TCG (guest-init.sh, SLOW): this outlasts them, so a guest whose steps
# all give up still writes its results for reading.
case "$ACCEL" in
  kvm) GUEST_TIMEOUT="${SSDWATCH_VM_TIMEOUT:-420}" ;;
  *) GUEST_TIMEOUT="${SSDWATCH_VM_TIMEOUT:-1200}" ;;
esac
echo "vm: booting $KVER with accel=$ACCEL (guest timeout ${GUEST_TIMEOUT}s)" >&2
start=$(date +%s%N)
set +e
timeout --kill-after=5 "$GUEST_TIMEOUT" qemu-system-x86_64 \
  -accel "$ACCEL" -machine q35 -m 1024 -smp 2 -nographic -no-reboot \
  -kernel "$VMLINUZ" -initrd "$RUN/initrd.cpio" \
  -append "console=ttyS0 panic=-1 quiet loglevel=4 rdinit=/init ssdwatch.accel=$ACCEL" \
  -device virtio-rng-pci \
  -drive "if=none,id=nvme0,file=$RUN/nvme.img,format=raw,discard=unmap" \
  -device "nvme,serial=SSDWNVME0001,drive=nvme0" \
  -drive "if=none,id=nvme1,file=$RUN/nvme-warning.img,format=raw" \
  -device "nvme,serial=SSDWNVMEWARN,drive=nvme1,smart_critical_warning=$CRITICAL_WARNING" \
  -device ahci,id=ahci0 \
  -drive "if=none,id=sata0,file=$RUN/sata.img,format=raw,discard=unmap" \
  -device "ide-hd,bus=ahci0.0,drive=sata0,model=SSDW SATA SSD,serial=SSDWSATA0001,rotation_rate=1" \
  -drive "if=none,id=virt0,file=$RUN/virtio.img,format=raw,discard=unmap" \
  -device "virtio-blk-pci,drive=virt0,serial=SSDWVIRT0001" \
  -drive "if=none,id=mda,file=$RUN/md-a.img,format=raw,discard=unmap" \
  -device "virtio-blk-pci,drive=mda,serial=SSDWMDA" \
  -drive "if=none,id=mdb,file=$RUN/md-b.img,format=raw,discard=unmap" \
  -device "virtio-blk-pci,drive=mdb,serial=SSDWMDB" \
  -device megasas-gen2,id=raid0 \
  -drive "if=none,id=raid,file=$RUN/raid.img,format=raw" \
  -device "scsi-hd,bus=raid0.0,drive=raid,serial=SSDWRAID0001" \
  -drive "if=none,id=scratch,file=$RUN/scratch.img,format=raw" \
  -device "virtio-blk-pci,drive=scratch,serial=SCRATCH" \
  > "$OUT/console.log" 2>&1
rc=$?
set -e
collect_guest_results "$rc" "$start" "the guest scenario"
