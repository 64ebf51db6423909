#!/usr/bin/env bash
# Boots a small Debian (bookworm) root filesystem with systemd as PID 1 under QEMU, with the
# same emulated NVMe, SATA (AHCI) and virtio drives as the end-to-end guest and a disk behind
# an emulated LSI MegaRAID controller, installs the
# project's .deb there with dpkg, and runs tests/vm/systemd-guest.sh against the installed unit,
# with the README's probe recipe taken out of the README (tests/vm/readme-probe-recipe.sh).
# What the guest recorded is unpacked into OUT_DIR; the assertions live in tests/it/vm/systemd.rs.
#
#   tests/vm/systemd.sh SSDWATCH_BINARY OUT_DIR
#
# The .deb is SSDWATCH_DEB when set, else built by packaging/deb/build.sh. The root filesystem
# is built once by tests/vm/rootfs.sh (mmdebstrap from the host's apt sources) and cached
# (SSDWATCH_VM_CACHE, default ~/.cache/ssdwatch-vm) under a key made of its package list, the
# sources and that script; each boot writes to a throw-away snapshot of it, never to the cached image.
#
# Exit status: 0 the guest finished its scenario; 77 a prerequisite is missing (the message
# names it); anything else a failure (its message says which step).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
# Per machine, not per clone: a fresh clone (CI) reuses what an earlier run built.
CACHE="${SSDWATCH_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ssdwatch-vm}"
BIN="${1:?usage: systemd.sh SSDWATCH_BINARY OUT_DIR}"
OUT="${2:?usage: systemd.sh SSDWATCH_BINARY OUT_DIR}"

. "$HERE/lib.sh"

# The Debian root filesystem, built once (tests/vm/rootfs.sh).
ROOTFS="$(bash "$HERE/rootfs.sh" "$CACHE")"

# --- the package under test ---
DEB="${SSDWATCH_DEB:-}"
if [ -z "$DEB" ]; then
  echo "vm: building the .deb (packaging/deb/build.sh)" >&2
  root="$(cd "$HERE/../.." && pwd)"
  # build.sh takes the binary from target/release and prints a path under target/: it builds
  # there, whatever CARGO_TARGET_DIR the caller's shell exports.
  last="$(env -u CARGO_TARGET_DIR "$root/packaging/deb/build.sh" | tail -n 1)"
  DEB="$root/$last"
fi
[ -f "$DEB" ] && case "$DEB" in *.deb) true ;; *) false ;; esac \
  || { echo "vm: no .deb at '$DEB' (SSDWATCH_DEB, or the last line of packaging/deb/build.sh)" >&2; exit 1; }

# --- overlay: the initramfs /init that switches to the Debian root, the scenario, the .deb ---
RUN="$(mktemp -d "${TMPDIR:-/tmp}/ssdwatch-vm-systemd.XXXXXX")"
trap 'rm -rf "$RUN"' EXIT
ov="$RUN/overlay"
mkdir -p "$ov/payload"
cp "$HERE/systemd-init.sh" "$ov/init"
chmod 755 "$ov/init"
cp "$HERE/systemd-guest.sh" "$ov/payload/scenario.sh"
cp "$DEB" "$ov/payload/ssdwatch.deb"
# The README's probe recipe, as the README has it now: the guest follows it.
bash "$HERE/readme-probe-recipe.sh" "$HERE/../../README.md" "$ov/payload/recipe"
# The MegaRAID driver for the disk behind the emulated controller (its SCSI deps are in the base).
mkdir -p "$ov/modules-late"
cp "$(modprobe -S "$KVER" --show-depends megaraid_sas | awk '$1 == "insmod" { m = $2 } END { print m }')" \
  "$ov/modules-late/"
(cd "$ov" && find . | cpio -o -H newc --quiet) > "$RUN/overlay.cpio"
cat "$BASE" "$RUN/overlay.cpio" > "$RUN/initrd.cpio"
echo "${DEB##*/}" > "$OUT/deb.txt"

for d in nvme sata virtio; do truncate -s 1G "$RUN/$d.img"; done
truncate -s 64M "$RUN/scratch.img" "$RUN/raid.img"

pick_accel
echo "$ACCEL" > "$OUT/accel.txt"
# Whole-guest deadline; it only stops a hung guest. Boot, install and scenario took 67-94 s
# under TCG on a 2-core machine. The guest's own waits, should every one give up, add up to
# about 450 s (the README recipe's two commands 60 s each), three times that under TCG
# (systemd-guest.sh, SLOW), plus boot and dpkg: this outlasts them, so a guest whose steps all
# gave up still returns its results.
case "$ACCEL" in
  kvm) GUEST_TIMEOUT="${SSDWATCH_VM_TIMEOUT:-600}" ;;
  *) GUEST_TIMEOUT="${SSDWATCH_VM_TIMEOUT:-1560}" ;;
esac
echo "vm: booting $KVER into ${ROOTFS##*/} with systemd, accel=$ACCEL (guest timeout ${GUEST_TIMEOUT}s)" >&2
start=$(date +%s%N)
set +e
# snapshot=on: the guest's writes go to a temporary file qemu drops at exit, so the cached root
# filesystem stays as built.
timeout --kill-after=5 "$GUEST_TIMEOUT" qemu-system-x86_64 \
  -accel "$ACCEL" -machine q35 -m 1024 -smp 2 -nographic -no-reboot \
  -kernel "$VMLINUZ" -initrd "$RUN/initrd.cpio" \
  -append "console=ttyS0 panic=-1 loglevel=4 rdinit=/init ssdwatch.accel=$ACCEL systemd.show_status=1" \
  -device virtio-rng-pci \
  -drive "if=none,id=root,file=$ROOTFS,format=raw,snapshot=on" \
  -device "virtio-blk-pci,drive=root,serial=SSDWROOT" \
  -drive "if=none,id=nvme0,file=$RUN/nvme.img,format=raw,discard=unmap" \
  -device "nvme,serial=SSDWNVME0001,drive=nvme0" \
  -device ahci,id=ahci0 \
  -drive "if=none,id=sata0,file=$RUN/sata.img,format=raw,discard=unmap" \
  -device "ide-hd,bus=ahci0.0,drive=sata0,model=SSDW SATA SSD,serial=SSDWSATA0001,rotation_rate=1" \
  -drive "if=none,id=virt0,file=$RUN/virtio.img,format=raw,discard=unmap" \
  -device "virtio-blk-pci,drive=virt0,serial=SSDWVIRT0001" \
  -device megasas-gen2,id=raid0 \
  -drive "if=none,id=raid,file=$RUN/raid.img,format=raw" \
  -device "scsi-hd,bus=raid0.0,drive=raid,serial=SSDWRAID0001" \
  -drive "if=none,id=scratch,file=$RUN/scratch.img,format=raw" \
  -device "virtio-blk-pci,drive=scratch,serial=SCRATCH" \
  > "$OUT/console.log" 2>&1
rc=$?
set -e
collect_guest_results "$rc" "$start" "the systemd guest scenario"
