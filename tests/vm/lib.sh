# Shared by tests/vm/run.sh and tests/vm/degrade.sh (sourced):
# builds the cached base initramfs (busybox, kernel modules, tools and their libraries) and picks
# the accelerator, after checking the prerequisites (exit 77 names what to install). Expects HERE,
# CACHE, BIN and OUT; sets KERNEL, KVER, BASE, VMLINUZ, TOOLS and, through pick_accel (which
# needs RUN), ACCEL.

missing() {
  echo "vm: missing prerequisite: $1 (Debian: apt-get install $2)" >&2
  exit 77
}

command -v qemu-system-x86_64 >/dev/null || missing qemu-system-x86_64 qemu-system-x86
command -v cpio >/dev/null || missing cpio cpio
command -v modprobe >/dev/null || missing modprobe kmod
BUSYBOX=/bin/busybox
# Only the static build runs without a loader in the guest (Debian: busybox-static).
is_static() { [ -x "$1" ] && case "$(LC_ALL=C ldd "$1" 2>&1)" in *"not a dynamic"*) true ;; *) false ;; esac; }
is_static "$BUSYBOX" || { is_static /usr/bin/busybox && BUSYBOX=/usr/bin/busybox; } \
  || missing "a static busybox" busybox-static
# The newest Debian kernel on the host and its modules.
KERNEL="${SSDWATCH_VM_KERNEL:-$(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n1)}"
[ -n "$KERNEL" ] && [ -r "$KERNEL" ] || missing "a kernel in /boot/vmlinuz-*" linux-image-amd64
KVER="${KERNEL##*/vmlinuz-}"
[ -d "/lib/modules/$KVER" ] || missing "/lib/modules/$KVER" linux-image-amd64
for t in smartctl mkfs.ext4 fstrim dmsetup mdadm nvme; do
  command -v "$t" >/dev/null || PATH="$PATH:/usr/sbin:/sbin" command -v "$t" >/dev/null \
    || missing "$t" "smartmontools e2fsprogs util-linux dmsetup mdadm nvme-cli"
done
[ -x "$BIN" ] || { echo "vm: ssdwatch binary not found: $BIN" >&2; exit 1; }
export PATH="$PATH:/usr/sbin:/sbin"

# Drivers the scenario needs, in dependency order (modprobe resolves the order for us).
MODULES="virtio_pci virtio_blk virtio_rng nvme ahci sd_mod ext4 dm_mod raid1"
TOOLS="$(command -v smartctl) $(command -v mkfs.ext4) $(command -v fstrim) $(command -v dmsetup)
  $(command -v mdadm) $(command -v nvme)"

mkdir -p "$CACHE" "$OUT"

# --- base initramfs (busybox, modules, tools and their libraries), cached on its inputs ---
insmods="$(for m in $MODULES; do modprobe -S "$KVER" --show-depends "$m" \
  || { echo "vm: module $m not found for kernel $KVER" >&2; exit 1; }; done \
  | awk '$1 == "insmod" && !seen[$2]++ { print $2 }')"
libs_of() { ldd "$1" 2>/dev/null | awk '/=> \// { print $3 } /^\t\/lib/ { print $1 }'; }
files="$BUSYBOX $KERNEL $insmods $TOOLS"
for t in $TOOLS; do files="$files $(libs_of "$t")"; done
key="$( { echo "$KVER"; sha256sum $files; sha256sum "$HERE/lib.sh"; } | sha256sum | cut -c1-16)"
BASE="$CACHE/base-$key.cpio"
VMLINUZ="$CACHE/vmlinuz-$KVER"
if [ ! -s "$BASE" ] || [ ! -s "$VMLINUZ" ]; then
  echo "vm: building base initramfs for $KVER (cache key $key)" >&2
  stage="$(mktemp -d)"
  mkdir -p "$stage"/{bin,sbin,dev,proc,sys,tmp,mnt,modules,etc,var/lib/smartmontools}
  cp "$BUSYBOX" "$stage/bin/busybox"
  n=0
  for m in $insmods; do
    n=$((n + 1))
    cp "$m" "$stage/modules/$(printf '%02d' "$n")-$(basename "$m")"
  done
  for t in $TOOLS; do cp "$t" "$stage/sbin/"; done
  for t in $TOOLS; do
    for l in $(libs_of "$t"); do
      mkdir -p "$stage$(dirname "$l")"
      cp -L "$l" "$stage$l"
    done
  done
  # smartctl's drive database, when the distribution ships one outside the binary.
  [ -d /var/lib/smartmontools/drivedb ] && cp -r /var/lib/smartmontools/drivedb "$stage/var/lib/smartmontools/"
  # mke2fs reads its defaults from here; without it it falls back to built-ins (fine).
  [ -r /etc/mke2fs.conf ] && cp /etc/mke2fs.conf "$stage/etc/"
  # Two suites may build it at once (they run side by side): each writes a file of its own and
  # renames it into place, so neither ever reads the other's half-written one.
  (cd "$stage" && find . | cpio -o -H newc --quiet) > "$BASE.$$.tmp"
  mv "$BASE.$$.tmp" "$BASE"
  cp "$KERNEL" "$VMLINUZ.$$.tmp"
  mv "$VMLINUZ.$$.tmp" "$VMLINUZ"
  rm -rf "$stage"
  # Older cached bases are dead weight.
  find "$CACHE" -maxdepth 1 -name 'base-*.cpio' ! -name "base-$key.cpio" -delete
fi

pick_accel() {
  # KVM only where it actually boots a guest: on some hosts /dev/kvm opens but the guest never
  # starts. A tiny guest that only prints a marker decides, once per host and kernel (cached).
  # SSDWATCH_VM_ACCEL=tcg|kvm skips the check.
  detect_accel() {
    [ -r /dev/kvm ] && [ -w /dev/kvm ] || { echo tcg; return; }
    local d="$RUN/kvm-check"
    mkdir -p "$d/ov"
    printf '#!/bin/busybox sh\n/bin/busybox echo SSDWATCH-KVM-OK\n/bin/busybox poweroff -f\n' > "$d/ov/init"
    chmod 755 "$d/ov/init"
    (cd "$d/ov" && echo init | cpio -o -H newc --quiet) > "$d/ov.cpio"
    cat "$BASE" "$d/ov.cpio" > "$d/initrd"
    # Under KVM this takes about a second; 12 s also covers a slow host.
    timeout --kill-after=2 12 qemu-system-x86_64 -accel kvm -m 512 -nographic -no-reboot \
      -kernel "$VMLINUZ" -initrd "$d/initrd" -append "console=ttyS0 panic=-1 quiet rdinit=/init" \
      > "$d/console.log" 2>&1 || true
    if grep -q SSDWATCH-KVM-OK "$d/console.log"; then echo kvm; else echo tcg; fi
  }
  ACCEL="${SSDWATCH_VM_ACCEL:-}"
  if [ -z "$ACCEL" ]; then
    accel_cache="$CACHE/accel-$KVER-$(uname -r)"
    if [ -s "$accel_cache" ]; then
      ACCEL="$(cat "$accel_cache")"
    else
      echo "vm: checking whether KVM boots a guest here (once; cached in $accel_cache)" >&2
      ACCEL="$(detect_accel)"
      echo "$ACCEL" > "$accel_cache"
    fi
  fi
}

# After qemu has exited with status $1 (started at $2, `date +%s%N`): records the guest's wall
# time, and unpacks the results the guest left on $RUN/scratch.img into $OUT, or fails saying
# why ($3 names the scenario in that message).
collect_guest_results() {
  local rc=$1 start=$2 what=$3 end ms
  end=$(date +%s%N)
  ms=$(( (end - start) / 1000000 ))
  printf 'guest_wall_seconds %d.%03d\n' $((ms / 1000)) $((ms % 1000)) > "$OUT/timing.txt"
  if [ "$rc" -ne 0 ]; then
    echo "vm: qemu exited with $rc (124 = guest timed out after ${GUEST_TIMEOUT}s); console:" >&2
    tail -n 40 "$OUT/console.log" >&2
    exit 1
  fi
  if ! tar -xf "$RUN/scratch.img" -C "$OUT" 2>"$RUN/tar.err"; then
    echo "vm: the guest left no results on the scratch disk ($(cat "$RUN/tar.err")); console:" >&2
    tail -n 40 "$OUT/console.log" >&2
    exit 1
  fi
  [ -f "$OUT/done" ] || { echo "vm: $what did not finish; see $OUT/console.log and $OUT/log.txt" >&2; exit 1; }
  echo "vm: guest finished in $(cut -d' ' -f2 "$OUT/timing.txt") s; results in $OUT" >&2
}
