#!/usr/bin/env bash
# Boots a small Debian (bookworm) root filesystem with systemd as PID 1 under QEMU, with the
# same emulated NVMe, SATA (AHCI) and virtio drives as the end-to-end guest, installs the
# project's .deb there with dpkg, and runs tests/vm/systemd-guest.sh against the installed unit.
# What the guest recorded is unpacked into OUT_DIR; the assertions live in tests/it/vm/systemd.rs.
#
#   tests/vm/systemd.sh SSDWATCH_BINARY OUT_DIR
#
# The .deb is SSDWATCH_DEB when set, else built by packaging/deb/build.sh. The root filesystem
# is built once with mmdebstrap from the host's apt sources and cached (SSDWATCH_VM_CACHE,
# default ~/.cache/ssdwatch-vm) under a key made of its package list, the sources and this script;
# each boot writes to a throw-away snapshot of it, never to the cached image.
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

# --- the Debian root filesystem, cached on its package list ---
# systemd and what the test drives it with; the .deb's own dependencies (smartmontools,
# libatasmart4, adduser) are installed here so that dpkg -i in the guest, which has no network,
# finds them; e2fsprogs formats the test drives.
SUITE=bookworm
SOURCES="${SSDWATCH_VM_APT_SOURCES:-/etc/apt/sources.list.d/debian.sources}"
PACKAGES="systemd systemd-sysv udev dbus init-system-helpers smartmontools libatasmart4 adduser
  curl util-linux e2fsprogs kmod procps libcap2-bin"
[ -r "$SOURCES" ] || {
  echo "vm: missing prerequisite: Debian apt sources at $SOURCES (a deb822 .sources or a sources.list file reaching bookworm; set SSDWATCH_VM_APT_SOURCES)" >&2
  exit 77
}
rootfs_key="$( { echo "$SUITE"; echo $PACKAGES; cat "$SOURCES"; sed -n '/^# --- the Debian root/,/^# --- end of the root/p' "$0"; } \
  | sha256sum | cut -c1-16)"
ROOTFS="$CACHE/debian-$SUITE-$rootfs_key.ext4"
if [ ! -s "$ROOTFS" ]; then
  command -v mmdebstrap >/dev/null || missing mmdebstrap mmdebstrap
  # Root mode keeps the files' owners, which mkfs.ext4 -d copies into the image.
  [ "$(id -u)" -eq 0 ] || {
    echo "vm: missing prerequisite: root, to build the cached Debian root filesystem once ($ROOTFS)" >&2
    exit 77
  }
  echo "vm: building the Debian $SUITE root filesystem (cache key $rootfs_key; a few minutes, once)" >&2
  t0=$(date +%s)
  tree="$(mktemp -d "${TMPDIR:-/tmp}/ssdwatch-rootfs.XXXXXX")"
  trap 'rm -rf "$tree"' EXIT
  # Timers and gettys only add noise to a guest that runs one scenario and powers off.
  mmdebstrap --quiet --mode=root --variant=minbase --include="$(echo $PACKAGES | tr ' ' ,)" \
    --customize-hook='chroot "$1" systemctl mask getty.target apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer systemd-networkd-wait-online.service' \
    --customize-hook='echo ssdwatch-vm > "$1/etc/hostname"' \
    --customize-hook='rm -f "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*_Packages' \
    "$SUITE" "$tree" "$SOURCES" >&2 \
    || { echo "vm: mmdebstrap failed (is deb.debian.org reachable?)" >&2; exit 1; }
  used_mib=$(du -sm "$tree" | cut -f1)
  # Room for the .deb, the journal and the history store the daemon writes in the guest.
  size_mib=$((used_mib + used_mib / 4 + 256))
  rm -f "$ROOTFS.tmp"
  mkfs.ext4 -q -F -L ssdwatch-vm -d "$tree" "$ROOTFS.tmp" "${size_mib}M" >&2
  mv "$ROOTFS.tmp" "$ROOTFS"
  rm -rf "$tree"
  trap - EXIT
  find "$CACHE" -maxdepth 1 -name "debian-$SUITE-*.ext4" ! -name "${ROOTFS##*/}" -delete
  echo "vm: root filesystem built in $(($(date +%s) - t0)) s: $ROOTFS (${used_mib} MiB of files)" >&2
fi
# --- end of the root filesystem ---

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
(cd "$ov" && find . | cpio -o -H newc --quiet) > "$RUN/overlay.cpio"
cat "$BASE" "$RUN/overlay.cpio" > "$RUN/initrd.cpio"
echo "${DEB##*/}" > "$OUT/deb.txt"

for d in nvme sata virtio; do truncate -s 1G "$RUN/$d.img"; done
truncate -s 64M "$RUN/scratch.img"

pick_accel
echo "$ACCEL" > "$OUT/accel.txt"
# Whole-guest deadline; it only stops a hung guest. Boot, install and scenario took 67-94 s
# under TCG on a 2-core machine. The guest's own waits, should every one give up, add up to
# about 330 s, three times that under TCG (systemd-guest.sh, SLOW), plus boot and dpkg: this
# outlasts them, so a guest whose steps all gave up still returns its results.
case "$ACCEL" in
  kvm) GUEST_TIMEOUT="${SSDWATCH_VM_TIMEOUT:-480}" ;;
  *) GUEST_TIMEOUT="${SSDWATCH_VM_TIMEOUT:-1200}" ;;
esac
echo "vm: booting $KVER into Debian $SUITE with systemd, accel=$ACCEL (guest timeout ${GUEST_TIMEOUT}s)" >&2
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
  -drive "if=none,id=scratch,file=$RUN/scratch.img,format=raw" \
  -device "virtio-blk-pci,drive=scratch,serial=SCRATCH" \
  > "$OUT/console.log" 2>&1
rc=$?
set -e
collect_guest_results "$rc" "$start" "the systemd guest scenario"
