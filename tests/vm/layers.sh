#!/usr/bin/env bash
# Boots a Linux guest under QEMU whose kernel has device-mapper, md and OpenZFS, and runs the
# layers scenario of tests/vm/guest-layers.sh in it: an overcommitted LVM thin pool filled until
# writes fail under a half-empty ext4, an md RAID1 degraded and rebuilt, a ZFS pool filled past
# 80 % with a quota and a reservation, and a mirror with a faulted device. What the guest saw is
# unpacked into OUT_DIR; the assertions are in tests/it/vm/layers.rs.
#
#   tests/vm/layers.sh SSDWATCH_BINARY OUT_DIR
#
# Exit status: 0 the guest finished; 77 a prerequisite is missing (named); else a failure.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
# Per machine, not per clone: a fresh clone (CI) reuses what an earlier run built.
CACHE="${SSDWATCH_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ssdwatch-vm}"
BIN="${1:?usage: layers.sh SSDWATCH_BINARY OUT_DIR}"
OUT="${2:?usage: layers.sh SSDWATCH_BINARY OUT_DIR}"

. "$HERE/lib.sh"
for t in lvm thin_check; do
  command -v "$t" >/dev/null || missing "$t" "lvm2 thin-provisioning-tools"
done
for t in mkfs.btrfs btrfs; do
  command -v "$t" >/dev/null || PATH="$PATH:/usr/sbin:/sbin" command -v "$t" >/dev/null \
    || missing "$t" btrfs-progs
done
# OpenZFS for the guest's kernel, built once per machine (cached).
set +e
ZFS="$(bash "$HERE/zfs-modules.sh" "$KVER" "$CACHE")"
rc=$?
set -e
[ "$rc" -eq 0 ] || exit "$rc"

RUN="$(mktemp -d "${TMPDIR:-/tmp}/ssdwatch-vm-layers.XXXXXX")"
trap 'rm -rf "$RUN"' EXIT
ov="$RUN/overlay"
mkdir -p "$ov/etc/ssdwatch" "$ov/sbin" "$ov/modules-extra" "$ov/modules-zfs" "$ov/usr/sbin"
cp "$HERE/guest-layers.sh" "$ov/init"
chmod 755 "$ov/init"
cp "$HERE/guest-layers.yaml" "$ov/etc/ssdwatch/"
strip -o "$ov/sbin/ssdwatch" "$BIN" 2>/dev/null || cp "$BIN" "$ov/sbin/ssdwatch"
# Thin pools: the dm-thin-pool module and what it needs beyond the base's dm_mod.
base_mods=" $(for m in $MODULES; do modprobe -S "$KVER" --show-depends "$m"; done | awk '$1 == "insmod" { printf "%s ", $2 }')"
n=0
for m in $(modprobe -S "$KVER" --show-depends dm_thin_pool | awk '$1 == "insmod" { print $2 }'); do
  case "$base_mods" in *" $m "*) continue ;; esac
  n=$((n + 1))
  cp "$m" "$ov/modules-extra/$(printf '%02d' "$n")-$(basename "$m")"
done
# Errors injected under the filesystem: dm-flakey, md's faulty personality, btrfs.
for m in $(for x in dm_flakey faulty btrfs; do modprobe -S "$KVER" --show-depends "$x"; done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }'); do
  case "$base_mods" in *" $m "*) continue ;; esac
  case " $(ls "$ov/modules-extra" | sed 's/^[0-9]*-//' | tr '\n' ' ') " in *" $(basename "$m") "*) continue ;; esac
  n=$((n + 1))
  cp "$m" "$ov/modules-extra/$(printf '%02d' "$n")-$(basename "$m")"
done
cp "$ZFS"/modules/*.ko "$ov/modules-zfs/"
cp -a "$ZFS"/root/. "$ov/"
# LVM and thin_check (thin-provisioning-tools' multi-call binary, by the name LVM calls).
lvm_bin="$(command -v lvm)"
cp "$lvm_bin" "$ov/sbin/lvm"
cp -L "$(command -v thin_check)" "$ov/usr/sbin/thin_check"
# btrfs-progs, for the btrfs on dm-flakey (and its own view of the error counters).
cp "$(command -v mkfs.btrfs)" "$(command -v btrfs)" "$ov/sbin/"
for l in $(libs_of "$BIN") $(libs_of "$lvm_bin") $(libs_of "$(command -v thin_check)") \
  $(libs_of "$(command -v btrfs)") $(libs_of "$(command -v mkfs.btrfs)"); do
  mkdir -p "$ov$(dirname "$l")"
  cp -L "$l" "$ov$l"
done
(cd "$ov" && find . | cpio -o -H newc --quiet) > "$RUN/overlay.cpio"
cat "$BASE" "$RUN/overlay.cpio" > "$RUN/initrd.cpio"

truncate -s 512M "$RUN/thin.img"
truncate -s 128M "$RUN/md-a.img" "$RUN/md-b.img" "$RUN/zfs-b1.img" "$RUN/zfs-b2.img"
truncate -s 1G "$RUN/zfs-a.img"
truncate -s 64M "$RUN/scratch.img"
truncate -s 256M "$RUN/btrfs-a.img" "$RUN/btrfs-b.img"
truncate -s 64M "$RUN/md-c.img" "$RUN/md-d.img"

pick_accel
echo "$ACCEL" > "$OUT/accel.txt"
# Whole-guest deadline; only stops a hung guest (the scenario takes 2-5 minutes under TCG).
case "$ACCEL" in
  kvm) GUEST_TIMEOUT="${SSDWATCH_VM_TIMEOUT:-480}" ;;
  *) GUEST_TIMEOUT="${SSDWATCH_VM_TIMEOUT:-1500}" ;;
esac
drives=()
for d in thin:SSDWTHIN md-a:SSDWMDA md-b:SSDWMDB zfs-a:SSDWZFSA zfs-b1:SSDWZFSB1 zfs-b2:SSDWZFSB2 \
  btrfs-a:SSDWBTRA btrfs-b:SSDWBTRB md-c:SSDWMDC md-d:SSDWMDD scratch:SCRATCH; do
  f=${d%%:*}; s=${d#*:}
  drives+=(-drive "if=none,id=$f,file=$RUN/$f.img,format=raw,discard=unmap"
    -device "virtio-blk-pci,drive=$f,serial=$s")
done
echo "vm: booting $KVER with accel=$ACCEL for the layers scenario (guest timeout ${GUEST_TIMEOUT}s)" >&2
start=$(date +%s%N)
set +e
timeout --kill-after=5 "$GUEST_TIMEOUT" qemu-system-x86_64 \
  -accel "$ACCEL" -machine q35 -m 1536 -smp 2 -nographic -no-reboot \
  -kernel "$VMLINUZ" -initrd "$RUN/initrd.cpio" \
  -append "console=ttyS0 panic=-1 quiet loglevel=4 rdinit=/init ssdwatch.accel=$ACCEL" \
  -device virtio-rng-pci "${drives[@]}" \
  > "$OUT/console.log" 2>&1
rc=$?
set -e
collect_guest_results "$rc" "$start" "the layers scenario"
