#!/bin/busybox sh
# /init of the end-to-end guest: formats the NVMe, SATA and virtio drives, runs ssdwatch around
# an O_DIRECT write, a delete, probes and fstrim, and leaves everything it saw as a tar on the
# scratch disk for the host to check. It asserts nothing itself: the host does (tests/it/vm/drives.rs).
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
uptime_s() { cut -d. -f1 /proc/uptime; }
# The host names its accelerator on the kernel command line (tests/vm/run.sh). Nothing below
# sleeps a fixed time: every wait polls for what it needs, and SLOW only stretches the deadlines
# after which a wait gives up (and the host's checks then say what is missing).
SLOW=3
case " $(cat /proc/cmdline) " in
  *" ssdwatch.accel=kvm "*) SLOW=1 ;;
esac
log "deadlines scaled by $SLOW ($(grep -o 'ssdwatch.accel=[a-z]*' /proc/cmdline || echo 'accelerator not named'))"
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

# Wait for the drives the host attached (probing takes a moment under emulation): two NVMe
# namespaces, the SATA disk and the four virtio disks (the one under dm, two md members, scratch).
drives_present() {
  [ -b /dev/nvme0n1 ] && [ -b /dev/nvme1n1 ] && [ -b /dev/sda ] \
    && [ "$(ls -d /sys/block/vd* 2>/dev/null | wc -l)" -ge 4 ]
}
t0=$(uptime_s)
until drives_present; do
  [ $(($(uptime_s) - t0)) -ge $((20 * SLOW)) ] && { log "drives still missing after $((20 * SLOW)) s"; break; }
  sleep 0.1
done
log "drives present: $(ls /sys/block | tr '\n' ' ')"
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
# smartctl's own reading of each drive, with the options the daemon's first run of a drive uses
# (smartctl_args in src/smart/argv.rs), so its exit status compares bit for bit.
SMARTCTL_ARGS="--json=c --info --health --attributes --nocheck=standby"
smart_json() {
  for spec in nvme:$NVME sata:sda warning:${WARNC}n1 virtio:$VIRT; do
    name=${spec%%:*}; dev=${spec#*:}
    smartctl $SMARTCTL_ARGS /dev/$dev > $R/smartctl-$name-$1.json 2> $R/smartctl-$name-$1.err
    echo $? > $R/smartctl-$name-$1.rc
  done
}
sample() {
  timeout $((30 * SLOW)) ssdwatch --config /etc/ssdwatch/guest-sample.yaml sample > $R/sample-$1.prom 2> $R/sample-$1.err
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
# smartctl right before and right after sample #2: writeback between them may move the counters,
# so the host checks the daemon's reading lies between the two.
# The warning drive's over-temperature threshold (Set Features 04h, composite sensor) set to
# 274 K (1 °C), below any temperature the emulated drive reports: it must raise the
# temperature bit of its critical warning.
nvme set-feature /dev/$WARNC --feature-id=4 --value=274 > $R/temp-threshold.txt 2>&1
echo $? > $R/temp-threshold.rc
nvme get-feature /dev/$WARNC --feature-id=4 >> $R/temp-threshold.txt 2>&1
smart_json 2-before
sample 2
smart_json 2
rm /mnt/nvme/e2e-data /mnt/sata/e2e-data /mnt/virtio/e2e-data
sync
listing > $R/listing-before.txt
log "written, sampled, deleted"

# One probe run of every kind on each filesystem, through the CLI (same code as the daemon).
for m in nvme sata virtio; do
  timeout $((30 * SLOW)) ssdwatch --config /etc/ssdwatch/guest-probes.yaml probe run --target /mnt/$m --json \
    > $R/probe-$m.json 2> $R/probe-$m.err
  echo $? > $R/probe-$m.rc
done

# The daemon proper (probes included): last-discard time needs consecutive samples of a running collector.
log "probes run from the CLI"
DAEMON=
ssdwatch --config /etc/ssdwatch/guest-daemon.yaml serve > $R/daemon.log 2>&1 &
DAEMON=$!

# metric FILE NAME [KEY="VALUE"...]: the value of the first series of NAME carrying every label
# given (label values here have no spaces); empty when there is none.
metric() {
  f=$1; n=$2; shift 2
  awk -v n="$n" -v want="$*" 'index($0, n "{") == 1 {
      k = split(want, w, " "); ok = 1
      for (i = 1; i <= k; i++) if (!index($0, w[i])) ok = 0
      if (ok) { print $NF; exit }
    }' "$f"
}
# holds EXPR: an awk comparison of numbers, e.g. holds "$a >= $b".
holds() { awk "BEGIN { exit !($1) }"; }
# Bytes fstrim -v reported for MOUNT: busybox says "N bytes trimmed", util-linux
# "X MiB (N bytes) trimmed".
fstrim_bytes() {
  awk -v mp="$1:" '$1 == mp { for (i = 2; i <= NF; i++) if ($i ~ /^bytes/) {
      n = $(i - 1); gsub(/[^0-9]/, "", n); print n; exit } }' $R/fstrim.txt
}
# wait_daemon WHAT SECONDS CHECK: scrapes /metrics into $R/poll.prom until the function CHECK
# holds on it or SECONDS pass. CHECK says in WAITING what it still misses; the log tells how long
# the wait took, or what it gave up on.
wait_daemon() {
  what=$1; limit=$2; check=$3
  t0=$(uptime_s)
  while :; do
    WAITING="a successful scrape of /metrics"
    if timeout 20 wget -q -O $R/poll.prom http://127.0.0.1:10150/metrics 2>/dev/null && $check; then
      log "waited $(($(uptime_s) - t0)) s for $what"
      return 0
    fi
    if [ $(($(uptime_s) - t0)) -ge "$limit" ]; then
      log "gave up after $limit s waiting for $what: still no $WAITING"
      return 1
    fi
    sleep 0.5
  done
}

# Drives every fstrim below reaches, by mount: the host checks each of them (tests/it/vm/drives.rs).
TRIMMED="/mnt/nvme:$NVME /mnt/sata:sda /mnt/virtio:$VIRT /mnt/virtio:$DM /mnt/md:md0 /mnt/md:$MDA /mnt/md:$MDB"
# Before the trim, the diskstats collector must hold a sample of every drive to grow from (its
# first sample of a device is the baseline; the trim shows as growth in a later one). Two samples
# taken, every drive in them. The wait also covers the daemon's start: it needs a scrape to succeed.
FIRST_DISKSTATS=
baseline_taken() {
  f=$R/poll.prom
  t=$(metric $f ssdwatch_collector_last_success_timestamp_seconds 'collector="diskstats"')
  [ -n "$t" ] || { WAITING="diskstats sample"; return 1; }
  [ -n "$FIRST_DISKSTATS" ] || FIRST_DISKSTATS=$t
  [ "$t" != "$FIRST_DISKSTATS" ] || { WAITING="second diskstats sample"; return 1; }
  for spec in $TRIMMED; do
    dev=${spec#*:}
    [ -n "$(metric $f ssdwatch_disk_discarded_bytes_total "device=\"$dev\"")" ] \
      || { WAITING="discard counters for $dev"; return 1; }
  done
}
wait_daemon "two diskstats samples of every drive" $((60 * SLOW)) baseline_taken
cp $R/poll.prom $R/daemon-2.prom

date +%s > $R/trim-start.txt
TRIM_START=$(cat $R/trim-start.txt)
for m in nvme sata virtio md; do
  fstrim -v /mnt/$m >> $R/fstrim.txt 2>&1; echo "$m $?" >> $R/fstrim.rc
done
sync
log "fstrim done"

# After the trim, until the daemon shows all of it: every drive's discarded bytes grown by at
# least what fstrim reported for its filesystem (a diskstats sample after the trim ended), its
# last-discard time at or after the trim's start, and on each probed filesystem a probe run
# whose context measured the time since that discard.
trim_seen() {
  f=$R/poll.prom
  for spec in $TRIMMED; do
    mp=${spec%%:*}; dev=${spec#*:}
    want=$(fstrim_bytes $mp)
    [ -n "$want" ] || { WAITING="fstrim byte count for $mp (fstrim.txt)"; return 1; }
    was=$(metric $R/daemon-2.prom ssdwatch_disk_discarded_bytes_total "device=\"$dev\"")
    now=$(metric $f ssdwatch_disk_discarded_bytes_total "device=\"$dev\"")
    [ -n "$was" ] && [ -n "$now" ] && holds "$now - $was >= $want" \
      || { WAITING="growth of $want discarded bytes on $dev (from $was, now $now)"; return 1; }
    last=$(metric $f ssdwatch_disk_last_discard_timestamp_seconds "device=\"$dev\"")
    [ -n "$last" ] && holds "$last >= $TRIM_START" \
      || { WAITING="last discard time of $dev at or after $TRIM_START (now '$last')"; return 1; }
  done
  for mp in /mnt/nvme /mnt/sata /mnt/virtio; do
    since=$(metric $f ssdwatch_probe_context_since_discard_seconds "mountpoint=\"$mp\"")
    run=$(metric $f ssdwatch_probe_last_run_timestamp_seconds "mountpoint=\"$mp\"")
    [ -n "$since" ] && [ -n "$run" ] && holds "$run - $since >= $TRIM_START" \
      || { WAITING="probe run on $mp with the trim in its context (since discard '$since', run at '$run')"; return 1; }
  done
}
wait_daemon "the trim in the daemon's metrics" $((60 * SLOW)) trim_seen
# The scrape the checks held on (or the last one, if the wait gave up).
cp $R/poll.prom $R/daemon-3.prom
date +%s > $R/daemon-3-time.txt
rm -f $R/poll.prom
kill $DAEMON; wait $DAEMON 2>/dev/null; DAEMON=

sample 3
listing > $R/listing-after.txt
# Both SMART backends read the SATA drive back to back, on an idle drive, for the host to
# compare field by field.
# libatasmart takes its access method from udev (ID_ATA_SMART_ACCESS, else the parent bus:
# SAT for a SCSI-attached disk), and QEMU's emulated ATA disk does not answer its SAT IDENTIFY:
# first without the property (the error must say so), then with linux-ide as a udev rule would
# set it (this guest runs no udevd: the property goes straight into udev's database).
backend() {
  timeout $((30 * SLOW)) ssdwatch --config /etc/ssdwatch/guest-backend-$1.yaml sample \
    > $R/backend-$2.prom 2> $R/backend-$2.err
  echo $? > $R/backend-$2.rc
}
backend smartctl smartctl
backend libatasmart libatasmart-sat
SDA_DEVNUM=$(cat /sys/block/sda/dev)
mkdir -p /run/udev/data
echo "E:ID_ATA_SMART_ACCESS=linux-ide" > /run/udev/data/b$SDA_DEVNUM
backend libatasmart libatasmart

# A disk behind the emulated MegaRAID controller: the driver loaded now (the other drives have
# their names), smartctl's own scan and reading of the port, then the daemon's RAID discovery.
for m in /modules-late/*.ko; do insmod "$m" 2>>$LOG || log "insmod $m failed"; done
t0=$(uptime_s)
until grep -q megaraid_sas_ioctl /proc/devices && ls /sys/bus/scsi/drivers/sd/ 2>/dev/null | grep -q .; do
  [ $(($(uptime_s) - t0)) -ge $((20 * SLOW)) ] && { log "the MegaRAID controller's disk did not show"; break; }
  sleep 0.2
done
# Its disk shows once scanned; the scan below needs the controller, not the disk's name.
sleep 1
smartctl --scan-open --json=c > $R/raid-scan.json 2> $R/raid-scan.err
echo $? > $R/raid-scan.rc
port=$(smartctl --scan-open 2>/dev/null | awk '$3 == "megaraid,0" { print $1; exit }')
echo "$port" > $R/raid-port.txt
[ -n "$port" ] && smartctl --json=c --info --health --attributes -d megaraid,0 "$port" \
  > $R/smartctl-raid.json 2> $R/smartctl-raid.err
timeout $((30 * SLOW)) ssdwatch --config /etc/ssdwatch/guest-raid.yaml sample \
  > $R/raid.prom 2> $R/raid.err
echo $? > $R/raid.rc
log "scenario complete"
touch $R/done
finish
