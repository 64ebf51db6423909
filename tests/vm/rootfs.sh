#!/usr/bin/env bash
# Builds the small Debian root filesystem the systemd guest boots (tests/vm/systemd.sh), once:
# an ext4 image made with mmdebstrap from the host's apt sources, cached in CACHE under a key
# made of its package list, the sources and the section of this script between the markers
# below. Prints the image's path. tests/run.sh runs it early, in the background, so a machine
# without the cache builds it while the tests run.
#
#   tests/vm/rootfs.sh CACHE
#
# Exit status: 0 and the path; 77 a prerequisite is missing (the message names it).
set -euo pipefail
mkdir -p "${1:?usage: rootfs.sh CACHE}"
CACHE="$(cd "$1" && pwd)"
missing() {
  echo "vm: missing prerequisite: $1 (Debian: apt-get install $2)" >&2
  exit 77
}

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
echo "$ROOTFS"
