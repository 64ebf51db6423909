#!/bin/busybox sh
# /init of the end-to-end guest: formats the NVMe, SATA and virtio drives, runs ssdwatch around
# an O_DIRECT write, a delete, probes and fstrim, and leaves everything it saw as a tar on the
# scratch disk for the host to check. It asserts nothing itself: the host does (tests/vm.rs).
/bin/busybox --install -s /bin
export PATH=/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mkdir -p /var/lib/ssdwatch /out
R=/out
LOG=$R/log.txt
log() { echo "e2e: [$(cut -d' ' -f1 /proc/uptime)] $*" | tee -a $LOG; }
fail() { log "FAILED: $*"; finish; }
# Bytes each drive gets written with O_DIRECT between the first two samples.
WRITE_MIB=64

finish() {
  dmesg > $R/dmesg.txt 2>&1
  [ -n "$DAEMON" ] && kill "$DAEMON" 2>/dev/null
  for m in /mnt/*; do umount "$m" 2>/dev/null; done
  if [ -n "$SCRATCH" ]; then
    (cd $R && tar -cf "/dev/$SCRATCH" .) && sync
  else
    echo "e2e: no scratch disk: results lost"
  fi
  poweroff -f
}

for m in /modules/*.ko; do
  # CPU-specific crc modules find no CPU support under TCG: the generic ones serve.
  insmod "$m" 2>>$LOG || log "insmod $m failed"
done
ip link set lo up

# Wait for the drives the host attached (probing takes a moment under emulation).
i=0
while [ $i -lt 100 ]; do
  [ -b /dev/nvme0n1 ] && [ -b /dev/nvme1n1 ] && [ -b /dev/sda ] && [ -b /dev/vda ] && [ -b /dev/vdd ] \
    && break
  sleep 0.1; i=$((i + 1))
done
SCRATCH=
VIRT=
for d in /sys/block/vd*; do
  case "$(cat $d/serial 2>/dev/null)" in
    SCRATCH) SCRATCH=${d##*/} ;;
    SSDWVIRT0001) VIRT=${d##*/} ;;
    SSDWMDA) MDA=${d##*/} ;;
    SSDWMDB) MDB=${d##*/} ;;
  esac
done
[ -n "$SCRATCH" ] || { echo "e2e: FAILED: scratch disk not found"; poweroff -f; }
[ -n "$VIRT" ] || fail "virtio test drive not found"
# Two NVMe controllers: the test drive and one whose critical-warning bits the host set.
NVMEC=
WARNC=
for c in /sys/class/nvme/nvme*; do
  case "$(cat $c/serial 2>/dev/null | tr -d ' ')" in
    SSDWNVME0001) NVMEC=${c##*/} ;;
    SSDWNVMEWARN) WARNC=${c##*/} ;;
  esac
done
[ -n "$NVMEC" ] && [ -b /dev/${NVMEC}n1 ] || fail "NVMe test drive not found"
[ -n "$WARNC" ] || fail "NVMe drive with a critical warning not found"
NVME=${NVMEC}n1
[ -b /dev/sda ] || fail "no /dev/sda"
ls -l /sys/block > $R/sys-block.txt

# The virtio drive carries a device-mapper linear layer, so one mount is resolved through dm.
SECTORS=$(cat /sys/block/$VIRT/size)
echo "0 $SECTORS linear /dev/$VIRT 0" | dmsetup create --noudevsync e2evirt 2>>$LOG \
  || fail "dmsetup create"
# No udev here: dmsetup makes the /dev/mapper node itself.
dmsetup mknodes e2evirt 2>>$LOG
DM=$(basename /sys/block/$VIRT/holders/dm-*)
log "virtio drive $VIRT, dm layer $DM"
echo "nvme /dev/$NVME $NVME" > $R/layout.txt
echo "nvme-warning /dev/${WARNC}n1 ${WARNC}n1" >> $R/layout.txt
echo "sata /dev/sda sda" >> $R/layout.txt
echo "virtio /dev/mapper/e2evirt $VIRT $DM" >> $R/layout.txt

# An md RAID1 of two more virtio drives: a filesystem on two drives at once.
[ -n "$MDA" ] && [ -n "$MDB" ] || fail "md member drives not found"
mdadm --create /dev/md0 --run --level=1 --raid-devices=2 --metadata=1.2 --assume-clean \
  /dev/$MDA /dev/$MDB >>$LOG 2>&1 || fail "mdadm --create"
echo "md /dev/md0 md0 $MDA $MDB" >> $R/layout.txt

# nodiscard: the fstrim below is then the only discard the drives see.
for spec in nvme:/dev/$NVME sata:/dev/sda virtio:/dev/mapper/e2evirt md:/dev/md0; do
  name=${spec%%:*}; dev=${spec#*:}
  mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "$dev" >>$LOG 2>&1 \
    || fail "mkfs.ext4 $dev"
  mkdir -p /mnt/$name
  mount -t ext4 "$dev" /mnt/$name || fail "mount $dev"
done
cat /proc/self/mountinfo > $R/mountinfo.txt

# What is on each filesystem, so the host can tell nothing was written outside the probe dirs.
listing() {
  for m in /mnt/nvme /mnt/sata /mnt/virtio /mnt/md; do
    find $m -xdev | sort | while read -r f; do
      echo "$f $(stat -c '%F %s %Y' "$f")"
    done
  done
}
smart_json() {
  smartctl --json -a /dev/$NVMEC > $R/smartctl-nvme-$1.json 2>&1; echo $? > $R/smartctl-nvme-$1.rc
  smartctl --json -a /dev/sda > $R/smartctl-sata-$1.json 2>&1; echo $? > $R/smartctl-sata-$1.rc
  smartctl --json -a /dev/$WARNC > $R/smartctl-warning-$1.json 2>&1; echo $? > $R/smartctl-warning-$1.rc
}
sample() {
  timeout 60 ssdwatch --config /etc/ssdwatch/guest-sample.yaml sample > $R/sample-$1.prom 2> $R/sample-$1.err
  echo $? > $R/sample-$1.rc
  cat /sys/block/$NVME/stat /sys/block/sda/stat /sys/block/$VIRT/stat > $R/stat-$1.txt
}

sync
log "drives formatted and mounted"
sample 1
smart_json 1

# Known writes: WRITE_MIB MiB with O_DIRECT on each filesystem, then make them durable.
for m in nvme sata virtio; do
  dd if=/dev/zero of=/mnt/$m/e2e-data bs=1M count=$WRITE_MIB oflag=direct conv=fsync 2>>$LOG \
    || fail "dd on /mnt/$m"
done
sync
echo $((WRITE_MIB * 1048576)) > $R/written-bytes.txt
sample 2
smart_json 2
rm /mnt/nvme/e2e-data /mnt/sata/e2e-data /mnt/virtio/e2e-data
sync
listing > $R/listing-before.txt
log "written, sampled, deleted"

# One probe run of every kind on each filesystem, through the CLI (same code as the daemon).
for m in nvme sata virtio; do
  timeout 60 ssdwatch --config /etc/ssdwatch/guest-probes.yaml probe run --target /mnt/$m --json \
    > $R/probe-$m.json 2> $R/probe-$m.err
  echo $? > $R/probe-$m.rc
done

# The daemon proper (probes included): last-discard time needs consecutive samples of a running collector.
log "probes run from the CLI"
DAEMON=
ssdwatch --config /etc/ssdwatch/guest-daemon.yaml serve > $R/daemon.log 2>&1 &
DAEMON=$!
scrape() {
  i=0
  while [ $i -lt 100 ]; do
    wget -q -O $R/daemon-$1.prom http://127.0.0.1:10150/metrics 2>/dev/null && return 0
    sleep 0.2; i=$((i + 1))
  done
  log "daemon scrape $1 failed"
}
sleep 1
scrape 1
# Let the 1 s collectors take at least two samples before the trim.
sleep 2.5
scrape 2

for m in nvme sata virtio md; do
  fstrim -v /mnt/$m >> $R/fstrim.txt 2>&1; echo "$m $?" >> $R/fstrim.rc
done
sync
date +%s > $R/trim-time.txt
log "fstrim done"
# Long enough for a diskstats sample and a probe run after the trim.
sleep 4
scrape 3
kill $DAEMON; wait $DAEMON 2>/dev/null; DAEMON=

sample 3
listing > $R/listing-after.txt
log "scenario complete"
touch $R/done
finish
