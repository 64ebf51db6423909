#!/usr/bin/env bash
# Builds what the QEMU suites cache per machine and a machine without the cache would otherwise
# build in the middle of the suites: the systemd guest's Debian root filesystem (rootfs.sh) and
# the OpenZFS modules for the guest's kernel (zfs-modules.sh). tests/run.sh starts it at the
# lowest CPU priority while it builds and runs the other tests, and waits for it before the
# suites; on a machine with the cache it finds both and exits at once. A step that can't be done
# here (exit 77) or fails is reported and left to its suite, which says the same again.
#
#   tests/vm/warm-cache.sh [CACHE]
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
CACHE="${1:-${SSDWATCH_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ssdwatch-vm}}"
export PATH="$PATH:/usr/sbin:/sbin"
# The guest's kernel, as lib.sh picks it: the newest Debian kernel on the host.
KERNEL="${SSDWATCH_VM_KERNEL:-$(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n1)}"
status=0
step() {
  local name=$1 t0 rc
  shift
  t0=$(date +%s)
  "$@" >/dev/null
  rc=$?
  echo "vm cache: $name: exit $rc after $(($(date +%s) - t0)) s"
  [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || status=1
}
step "systemd guest's root filesystem" bash "$HERE/rootfs.sh" "$CACHE"
if [ -n "$KERNEL" ]; then
  step "OpenZFS modules for ${KERNEL##*/vmlinuz-}" bash "$HERE/zfs-modules.sh" "${KERNEL##*/vmlinuz-}" "$CACHE"
else
  echo "vm cache: no kernel in /boot/vmlinuz-*: nothing to build the ZFS modules for"
fi
exit "$status"
