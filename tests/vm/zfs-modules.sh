#!/usr/bin/env bash
# Builds the OpenZFS kernel modules for the guest's kernel from Debian's zfs-dkms source (the
# contrib component of bookworm) and gathers zpool and zfs with their libraries, for the guest
# suites. The result is cached on its inputs (kernel, package versions, this script), so a
# machine pays the module build once.
#
# Usage: zfs-modules.sh KVER CACHE
# Prints the directory holding modules/ (in load order), sbin/ and lib/. Exit 77 names what is
# missing when it can't be built here (not root and no headers, no network to Debian's mirror).
# The host's apt configuration is not changed: contrib is read through a private list.
set -euo pipefail
KVER="$1"
mkdir -p "$2"
CACHE="$(cd "$2" && pwd)"
HERE="$(cd "$(dirname "$0")" && pwd)"
PKGS=(zfs-dkms zfsutils-linux libzfs4linux libnvpair3linux libuutil3linux libzpool5linux)

skip() {
  echo "vm: zfs: $*" >&2
  exit 77
}

apt_dir="$CACHE/zfs-apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/parts" "$apt_dir/debs"
: > "$apt_dir/none.list"
cat > "$apt_dir/parts/contrib.sources" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
APT_OPTS=(-o "Dir::Etc::SourceList=$apt_dir/none.list" -o "Dir::Etc::SourceParts=$apt_dir/parts"
  -o "Dir::State::Lists=$apt_dir/lists" -o Debug::NoLocking=1)
# The package versions are part of the cache key: read them from the list (refreshed daily).
if [ -z "$(find "$apt_dir/lists" -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -n1)" ]; then
  apt-get "${APT_OPTS[@]}" update -qq >/dev/null 2>&1 \
    || [ -n "$(ls "$apt_dir/lists" | grep Packages || true)" ] \
    || skip "cannot read Debian's contrib package list (no network to deb.debian.org?)"
fi
versions="$(for p in "${PKGS[@]}"; do
  apt-cache "${APT_OPTS[@]}" policy "$p" | awk -v p="$p" '/Candidate:/ { print p "=" $2 }'
done)"
echo "$versions" | grep -q '(none)' && skip "a package is not in bookworm contrib: $versions"
key="$( { echo "$KVER"; echo "$versions"; sha256sum < "$0"; } | sha256sum | cut -c1-12)"
OUT="$CACHE/zfs-$KVER-$key"
if [ -s "$OUT/done" ]; then
  echo "$OUT"
  exit 0
fi

headers="/lib/modules/$KVER/build"
if [ ! -e "$headers/Makefile" ]; then
  [ "$(id -u)" -eq 0 ] || skip "linux-headers-$KVER is not installed (Debian: apt-get install linux-headers-$KVER)"
  echo "vm: zfs: installing linux-headers-$KVER" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "linux-headers-$KVER" >/dev/null \
    || skip "cannot install linux-headers-$KVER"
fi

echo "vm: zfs: building OpenZFS modules for $KVER (once; cached in $OUT)" >&2
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$apt_dir/debs" && rm -f ./*.deb && apt-get "${APT_OPTS[@]}" download $(echo "$versions") >/dev/null 2>&1) \
  || skip "cannot download ${PKGS[*]} from bookworm contrib"
for d in "$apt_dir"/debs/*.deb; do dpkg-deb -x "$d" "$work/root"; done
src="$(ls -d "$work"/root/usr/src/zfs-* | head -n1)"
[ -d "$src" ] || { echo "vm: zfs: no source in zfs-dkms" >&2; exit 1; }
source_dir="$headers"
[ -e "/lib/modules/$KVER/source" ] && source_dir="/lib/modules/$KVER/source"
# Debian's kernels keep the arch-independent headers in the -common package that build's
# Makefile includes.
common="$(sed -n 's/^include \(.*\)\/Makefile$/\1/p' "$headers/Makefile" | head -n1)"
[ -n "$common" ] && [ -d "$common" ] && source_dir="$common"
# Debian's kernel config asks for debug info (-g), which makes the build (configure's ~300 test
# modules included) slower and the modules ten times their size, copied into every guest boot's
# initramfs: kbuild appends KCFLAGS last, so -g0 turns it off; what is left is stripped below.
export KCFLAGS=-g0
(
  cd "$src"
  nice -n 10 ./configure --with-config=kernel --with-linux="$source_dir" --with-linux-obj="$headers" \
    > "$work/configure.log" 2>&1 || { tail -n 30 "$work/configure.log" >&2; exit 1; }
  nice -n 10 make -j"$(nproc)" -C module > "$work/make.log" 2>&1 || { tail -n 40 "$work/make.log" >&2; exit 1; }
)
rm -rf "$OUT.tmp"
mkdir -p "$OUT.tmp/modules" "$OUT.tmp/root/sbin" "$OUT.tmp/root/lib/x86_64-linux-gnu"
# Load order: each module after those it depends on (modinfo's depends).
mapfile -t kos < <(find "$src/module" -name '*.ko')
declare -A path_of deps_of
for k in "${kos[@]}"; do
  n="$(basename "$k" .ko)"
  path_of[$n]="$k"
  deps_of[$n]="$(modinfo -F depends "$k" | tr ',' ' ')"
done
order=()
placed=" "
while [ "${#order[@]}" -lt "${#kos[@]}" ]; do
  progress=0
  for n in "${!path_of[@]}"; do
    case "$placed" in *" $n "*) continue ;; esac
    ok=1
    for d in ${deps_of[$n]}; do
      [ -n "${path_of[$d]:-}" ] || continue # a kernel module: the guest's base has it or it's built in
      case "$placed" in *" $d "*) ;; *) ok=0 ;; esac
    done
    if [ "$ok" -eq 1 ]; then order+=("$n"); placed="$placed$n "; progress=1; fi
  done
  [ "$progress" -eq 1 ] || { echo "vm: zfs: module dependency cycle" >&2; exit 1; }
done
i=0
for n in "${order[@]}"; do
  i=$((i + 1))
  cp "${path_of[$n]}" "$OUT.tmp/modules/$(printf '%02d' "$i")-$n.ko"
  strip --strip-debug "$OUT.tmp/modules/$(printf '%02d' "$i")-$n.ko"
done
# Kernel modules the ZFS modules need from the guest's kernel (zlib and the like).
for n in "${order[@]}"; do
  for d in ${deps_of[$n]}; do [ -n "${path_of[$d]:-}" ] || echo "$d"; done
done | sort -u > "$OUT.tmp/kernel-deps"
# zpool and zfs, and every library they load, at the paths they load them from: root/ is laid
# over the guest's initramfs as it is.
for t in zpool zfs; do cp "$work/root/sbin/$t" "$OUT.tmp/root/sbin/"; done
libdir="$work/root/lib/x86_64-linux-gnu"
[ -d "$libdir" ] || libdir="$work/root/usr/lib/x86_64-linux-gnu"
for t in zpool zfs; do
  LD_LIBRARY_PATH="$libdir" ldd "$work/root/sbin/$t" | awk '/=> \// { print $3 } /^\t\/lib/ { print $1 }'
done | sort -u | while read -r l; do
  case "$l" in
    "$libdir"/*) cp -L "$l" "$OUT.tmp/root/lib/x86_64-linux-gnu/" ;;
    *) mkdir -p "$OUT.tmp/root$(dirname "$l")" && cp -L "$l" "$OUT.tmp/root$l" ;;
  esac
done
echo "$versions" > "$OUT.tmp/versions"
date -u +%FT%TZ > "$OUT.tmp/done"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
# Older builds are dead weight.
find "$CACHE" -maxdepth 1 -name "zfs-*" -type d ! -name "zfs-apt" ! -name "$(basename "$OUT")" -exec rm -rf {} +
echo "$OUT"
