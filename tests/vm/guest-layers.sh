#!/bin/busybox sh
# /init of the layers guest: an overcommitted LVM thin pool filled step by step under a
# half-empty ext4 until writes fail, an md RAID1 degraded and rebuilt, a ZFS pool filled past
# 80 % beside datasets with a quota and a reservation, and a mirror pool with a faulted device.
# The daemon runs throughout; each step's /metrics, the tools' own outputs and the log go on
# the scratch disk as a tar. Then errors under the filesystem: a btrfs RAID1 with one device
# behind dm-flakey failing its writes, then its reads, and an md RAID1 whose member is an md
# "faulty" array failing one read until it is rewritten (a corrected read error).
# It asserts nothing itself: the host does (tests/it/vm/layers.rs).
/bin/busybox --install -s /bin
export PATH=/sbin:/usr/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mkdir -p /run && mount -t tmpfs tmpfs /run
mkdir -p /var/lib/ssdwatch /out /run/lvm /run/lock/lvm /etc/lvm
R=/out
LOG=$R/log.txt
log() { echo "layers: [$(cut -d' ' -f1 /proc/uptime)] $*" | tee -a $LOG; }
uptime_s() { cut -d. -f1 /proc/uptime; }
SLOW=3
case " $(cat /proc/cmdline) " in
  *" ssdwatch.accel=kvm "*) SLOW=1 ;;
esac
DAEMON=
SCRATCH=
finish() {
  dmesg > $R/dmesg.txt 2>&1
  [ -n "$DAEMON" ] && kill "$DAEMON" 2>/dev/null
  if [ -n "$SCRATCH" ]; then
    (cd $R && tar -cf "/dev/$SCRATCH" .) && sync
  else
    echo "layers: no scratch disk: results lost"
  fi
  poweroff -f
}
fail() { log "FAILED: $*"; finish; }

for m in /modules/*.ko /modules-extra/*.ko /modules-zfs/*.ko; do
  insmod "$m" 2>>$LOG || log "insmod $m failed"
done
ip link set lo up

t0=$(uptime_s)
until [ "$(ls -d /sys/block/vd* 2>/dev/null | wc -l)" -ge 11 ]; do
  [ $(($(uptime_s) - t0)) -ge $((20 * SLOW)) ] && { log "drives still missing"; break; }
  sleep 0.1
done
for d in /sys/block/vd*; do
  case "$(cat $d/serial 2>/dev/null)" in
    SCRATCH) SCRATCH=${d##*/} ;;
    SSDWTHIN) THIN=${d##*/} ;;
    SSDWMDA) MDA=${d##*/} ;;
    SSDWMDB) MDB=${d##*/} ;;
    SSDWZFSA) ZA=${d##*/} ;;
    SSDWZFSB1) ZB1=${d##*/} ;;
    SSDWZFSB2) ZB2=${d##*/} ;;
    SSDWBTRA) BTA=${d##*/} ;;
    SSDWBTRB) BTB=${d##*/} ;;
    SSDWMDC) MDC=${d##*/} ;;
    SSDWMDD) MDD=${d##*/} ;;
  esac
done
[ -n "$SCRATCH" ] || { echo "layers: FAILED: scratch disk not found"; poweroff -f; }
log "drives: thin=$THIN md=$MDA,$MDB zfs=$ZA mirror=$ZB1,$ZB2 btrfs=$BTA,$BTB md2=$MDC,$MDD"

# --- the daemon, and how to take a scrape that saw a given moment ---
ssdwatch --config /etc/ssdwatch/guest-layers.yaml serve > $R/daemon.log 2>&1 &
DAEMON=$!
metric() {
  awk -v n="$2" -v want="$3" 'index($0, n "{") == 1 && index($0, want) { print $NF; exit }
    n == $1 && want == "" { print $NF; exit }' "$1"
}
# snap NAME: waits for a layers sample that began after this call and a filesystem sample after
# that one (so the mounts' effective space saw it), and keeps that scrape as NAME.prom.
snap() {
  since=$(date +%s)
  t0=$(uptime_s)
  while :; do
    if timeout 20 wget -q -O $R/poll.prom http://127.0.0.1:10150/metrics 2>/dev/null; then
      # A sample's start: its last success less its duration.
      l=$(metric $R/poll.prom ssdwatch_collector_last_success_timestamp_seconds 'collector="layers"')
      ld=$(metric $R/poll.prom ssdwatch_collector_duration_seconds 'collector="layers"')
      f=$(metric $R/poll.prom ssdwatch_collector_last_success_timestamp_seconds 'collector="filesystem"')
      fd=$(metric $R/poll.prom ssdwatch_collector_duration_seconds 'collector="filesystem"')
      if [ -n "$l" ] && [ -n "$f" ] && [ -n "$ld" ] && [ -n "$fd" ] \
        && awk "BEGIN { exit !($l - $ld > $since + 1 && $f - $fd > $l) }"; then
        cp $R/poll.prom $R/$1.prom
        return 0
      fi
    fi
    [ $(($(uptime_s) - t0)) -ge $((30 * SLOW)) ] && { log "no fresh scrape for $1"; return 1; }
    sleep 0.2
  done
}

# --- errors under the filesystem, injected; each source's own count kept beside the scrape ---
errors_under_the_filesystem() {
  # btrfs RAID1 (data and metadata) over a plain drive and a dm-flakey one (a linear table
  # until the faults start). Flakey with its down interval only: error_writes fails every write
  # and lets reads through; with no feature, it fails every read and lets writes through.
  S=$(cat /sys/block/$BTB/size)
  echo "0 $S linear /dev/$BTB 0" | dmsetup create --noudevsync flaky >>$LOG 2>&1 \
    || { log "dmsetup create flaky failed"; return; }
  dmsetup mknodes >>$LOG 2>&1
  mkfs.btrfs -q -f -d raid1 -m raid1 /dev/$BTA /dev/mapper/flaky >>$LOG 2>&1 \
    || { log "mkfs.btrfs failed"; return; }
  mkdir -p /mnt/btrfs
  mount -o device=/dev/$BTA,device=/dev/mapper/flaky /dev/$BTA /mnt/btrfs >>$LOG 2>&1 \
    || { log "mount btrfs failed"; return; }
  dd if=/dev/urandom of=/mnt/btrfs/base bs=1M count=4 conv=fsync 2>>$LOG
  BUUID=$(ls /sys/fs/btrfs | grep -v -e features -e '^$' | head -n1)
  echo "$BUUID" > $R/btrfs-uuid.txt
  ls -l /dev/mapper/flaky > $R/btrfs-flaky-node.txt 2>&1
  for d in /sys/block/dm-*; do echo "${d##*/} $(cat $d/dm/name)"; done > $R/dm-names.txt
  snap btrfs-clean
  flakey() {
    dmsetup suspend --noudevsync flaky >>$LOG 2>&1
    echo "0 $S flakey /dev/$BTB 0 0 3600 $*" | dmsetup load flaky >>$LOG 2>&1 || log "dmsetup load flakey $* failed"
    dmsetup resume --noudevsync flaky >>$LOG 2>&1
  }
  flakey 1 error_writes
  dd if=/dev/urandom of=/mnt/btrfs/written bs=1M count=4 conv=fsync 2>>$LOG || log "write under error_writes failed"
  sync
  flakey 0
  # O_DIRECT reads, each by a new process: btrfs picks a RAID1 mirror by pid, so about half
  # of them go to the failing device (and are repaired from the other).
  for i in 1 2 3 4 5 6 7 8; do
    dd if=/mnt/btrfs/base of=/dev/null bs=64k iflag=direct 2>>$LOG || log "read $i failed"
  done
  for f in /sys/fs/btrfs/$BUUID/devinfo/*/error_stats; do
    d=${f%/error_stats}; echo "devid ${d##*/}"; cat $f
  done > $R/btrfs-error-stats.txt 2>&1
  btrfs device stats /mnt/btrfs > $R/btrfs-device-stats.txt 2>&1
  snap btrfs-errors
  dmsetup table flaky > $R/btrfs-flaky-table.txt 2>&1

  # md RAID1 over an md "faulty" array and a write-mostly drive (so reads go to the faulty
  # one). Layout read-fixable, no period: the next read fails and keeps failing until the
  # sector is written; raid1 reads the other side, rewrites it, reads again: corrected.
  mdadm --build /dev/md9 --run --level=faulty --raid-devices=1 /dev/$MDC >>$LOG 2>&1 \
    || { log "mdadm --build faulty failed"; return; }
  mdadm --create /dev/md2 --run --level=1 --raid-devices=2 --metadata=1.2 --assume-clean \
    /dev/md9 --write-mostly /dev/$MDD >>$LOG 2>&1 || { log "mdadm --create md2 failed"; return; }
  # md starts arrays read-only here (start_ro): a read error is only corrected read-write.
  mdadm --readwrite /dev/md2 >>$LOG 2>&1
  dd if=/dev/zero of=/dev/md2 bs=4k count=16 oflag=direct 2>>$LOG
  mdadm --grow /dev/md9 --layout=rf >>$LOG 2>&1 || log "mdadm --grow --layout=rf failed"
  dd if=/dev/md2 of=/dev/null bs=4k count=16 iflag=direct 2>>$LOG || log "md2 read failed"
  t0=$(uptime_s)
  until [ "$(cat /sys/block/md2/md/dev-md9/errors 2>/dev/null || echo 0)" -gt 0 ]; do
    [ $(($(uptime_s) - t0)) -ge $((10 * SLOW)) ] && { log "md2: no corrected read error"; break; }
    sleep 0.2
  done
  for f in /sys/block/md2/md/dev-*/errors; do
    d=${f%/errors}; echo "${d##*/dev-} $(cat $f)"
  done > $R/md2-member-errors.txt
  cat /proc/mdstat > $R/mdstat-errors.txt
  snap md2-errors
}

# --- LVM thin: a 256 MiB pool promising two 400 MiB volumes; writes fail when it is full ---
LVM="lvm"
CONF='activation { udev_sync = 0 udev_rules = 0 monitoring = 0 } devices { obtain_device_list_from_udev = 0 }'
export DM_DISABLE_UDEV=1
lvmrun() { $LVM "$@" --config "$CONF" >>$LOG 2>&1 || fail "lvm $*"; }
lvmrun pvcreate -y /dev/$THIN
lvmrun vgcreate vg /dev/$THIN
lvmrun lvcreate -y --type thin-pool -L 256M -n pool vg
lvmrun lvchange --errorwhenfull y vg/pool
lvmrun lvcreate -y -V 400M -T vg/pool -n db
lvmrun lvcreate -y -V 400M -T vg/pool -n logs
# No udev here: dmsetup makes the /dev/mapper nodes itself.
dmsetup mknodes >>$LOG 2>&1
mkfs.ext4 -q -F -E nodiscard /dev/mapper/vg-db >>$LOG 2>&1 || fail "mkfs.ext4 on the thin volume"
mkdir -p /mnt/thin
mount -o errors=remount-ro /dev/mapper/vg-db /mnt/thin || fail "mount the thin volume"
dmsetup table > $R/dmsetup-table.txt 2>&1
dmsetup status > $R/dmsetup-status.txt 2>&1
snap thin-step-00
: > $R/thin-steps.txt
i=1
while [ $i -le 16 ]; do
  n=$(printf '%02d' $i)
  if dd if=/dev/urandom of=/mnt/thin/f$n bs=1M count=24 conv=fsync 2>>$LOG; then
    echo "$n ok" >> $R/thin-steps.txt
  else
    echo "$n failed" >> $R/thin-steps.txt
  fi
  dmsetup status vg-pool-tpool >> $R/thin-pool-status.txt 2>&1
  snap thin-step-$n
  grep -q failed $R/thin-steps.txt && break
  i=$((i + 1))
done
df -k /mnt/thin > $R/thin-df.txt 2>&1
dmsetup status > $R/dmsetup-status-full.txt 2>&1
log "thin: $(tr '\n' ' ' < $R/thin-steps.txt)"

# --- md RAID1: clean, degraded, recovering, recovered ---
mdadm --create /dev/md1 --run --level=1 --raid-devices=2 --metadata=1.2 --assume-clean \
  /dev/$MDA /dev/$MDB >>$LOG 2>&1 || fail "mdadm --create"
snap md-clean
mdadm /dev/md1 --fail /dev/$MDB >>$LOG 2>&1 && mdadm /dev/md1 --remove /dev/$MDB >>$LOG 2>&1 \
  || fail "mdadm --fail/--remove"
snap md-degraded
# Slow the rebuild so a scrape sees it running.
echo 2000 > /proc/sys/dev/raid/speed_limit_max
mdadm /dev/md1 --add /dev/$MDB >>$LOG 2>&1 || fail "mdadm --add"
t0=$(uptime_s)
until grep -q recover /sys/block/md1/md/sync_action; do
  [ $(($(uptime_s) - t0)) -ge $((20 * SLOW)) ] && break
  sleep 0.1
done
snap md-recovering
echo 2000000 > /proc/sys/dev/raid/speed_limit_max
t0=$(uptime_s)
until grep -q idle /sys/block/md1/md/sync_action; do
  [ $(($(uptime_s) - t0)) -ge $((120 * SLOW)) ] && break
  sleep 0.2
done
snap md-recovered
cat /proc/mdstat > $R/mdstat.txt
# Each member's corrected read errors as the kernel shows them (0: nothing here fails reads).
for f in /sys/block/md1/md/dev-*/errors; do
  d=${f%/errors}; echo "${d##*/dev-} $(cat $f)"
done > $R/md-member-errors.txt

# --- ZFS: a pool filled past 80 % with a quota and a reservation; a mirror losing a device ---
# Without udev, zpool can't wait for the partitions it makes on a whole disk: give it
# device-mapper linear devices, which it uses as they are.
for d in $ZA $ZB1 $ZB2; do
  echo "0 $(cat /sys/block/$d/size) linear /dev/$d 0" | dmsetup create --noudevsync z$d >>$LOG 2>&1 \
    || fail "dmsetup create z$d"
done
dmsetup mknodes >>$LOG 2>&1
zpool create -f -o ashift=12 tank /dev/mapper/z$ZA >>$LOG 2>&1 || fail "zpool create tank"
zfs create -o quota=48M tank/logs >>$LOG 2>&1 || fail "zfs create tank/logs"
zfs create -o reservation=32M tank/pg >>$LOG 2>&1 || fail "zfs create tank/pg"
zpool create -f -o ashift=12 safe mirror /dev/mapper/z$ZB1 /dev/mapper/z$ZB2 >>$LOG 2>&1 \
  || fail "zpool create safe"
zfs set compression=off tank >>$LOG 2>&1
snap zfs-empty
# Zeros, uncompressed, are written in full (and fast under emulation). The pool fills until
# its datasets have no room left: ZFS keeps a slop of 1/32 of the pool, at least 128 MiB.
dd if=/dev/zero of=/tank/logs/log bs=1M count=16 2>>$LOG
dd if=/dev/zero of=/tank/pg/data bs=1M count=1024 2>>$LOG
zpool sync >>$LOG 2>&1
zpool offline -f safe /dev/mapper/z$ZB2 >>$LOG 2>&1 || log "zpool offline -f failed"
snap zfs-full
zpool list -Hp -o name,size,allocated,free,fragmentation,capacity,health,checkpoint,expandsize > $R/zpool-list.txt 2>&1
zfs list -Hp -t filesystem,volume -o name,used,available,referenced,quota,reservation,mountpoint > $R/zfs-list.txt 2>&1
zpool status > $R/zpool-status.txt 2>&1
df -k /tank/pg /tank/logs > $R/zfs-df.txt 2>&1

# --- ZFS errors: 32 MiB of tank's only device overwritten behind ZFS's back (inside its data,
# past the labels), then a scrub: checksum errors on the device, permanent data errors in the
# pool (one copy of data; metadata keeps its ditto copies) ---
zpool status -p > $R/zpool-status-p.txt 2>&1
dd if=/dev/urandom of=/dev/mapper/z$ZA bs=1M seek=400 count=32 conv=notrunc,fsync 2>>$LOG \
  || log "dd over tank's device failed"
zpool scrub -w tank >>$LOG 2>&1 || log "zpool scrub tank failed"
zpool status -p > $R/zpool-status-p-errors.txt 2>&1
snap zfs-errors

errors_under_the_filesystem

cat /proc/self/mountinfo > $R/mountinfo.txt
kill $DAEMON; wait $DAEMON 2>/dev/null; DAEMON=
log "done"
touch $R/done
finish
