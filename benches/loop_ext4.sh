# Sourced by the probe benches (POSIX sh): a 1 GiB ext4 on a loop device, the loop device doing
# direct I/O to its backing file (LOOP_DIRECT_IO=off for the buffered mode: every read is then a
# copy from the host's page cache, and what a tool measures is mostly how fast the scheduler
# hands the CPU between the caller and the loop worker). Needs root.
#
#   loop_ext4_setup DIR     # mounts it at DIR/mnt (backing file DIR/disk.img); sets LOOPDEV
#   loop_ext4_cleanup       # unmounts and detaches what loop_ext4_setup made, if anything

LOOPDEV=""
LOOP_MNT=""

loop_ext4_setup() {
    truncate -s 1G "$1/disk.img"
    LOOPDEV=$(losetup -f --show --direct-io="${LOOP_DIRECT_IO:-on}" "$1/disk.img")
    mkfs.ext4 -q -F -m 0 "$LOOPDEV"
    LOOP_MNT="$1/mnt"
    mkdir "$LOOP_MNT"
    mount "$LOOPDEV" "$LOOP_MNT"
}

loop_ext4_cleanup() {
    if [ -n "$LOOPDEV" ]; then
        [ -n "$LOOP_MNT" ] && umount -l "$LOOP_MNT" 2>/dev/null
        losetup -d "$LOOPDEV" 2>/dev/null
    fi
    LOOPDEV=""
    return 0
}
