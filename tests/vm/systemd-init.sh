#!/bin/busybox sh
# /init of the initramfs of the systemd guest (tests/vm/systemd.sh): loads the drivers, mounts
# the Debian root filesystem from the virtio disk with serial SSDWROOT, puts the .deb and the
# scenario in it with a oneshot unit that runs the scenario after boot, and hands over to
# systemd as PID 1. Anything that goes wrong here is written to the console and the guest
# powers off: the host then finds no results and shows the console.
/bin/busybox --install -s /bin
export PATH=/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
log() { echo "systemd-vm: [$(cut -d' ' -f1 /proc/uptime)] $*"; }
die() { log "FAILED: $*"; poweroff -f; }

for m in /modules/*.ko /modules-late/*.ko; do
  # CPU-specific crc modules find no CPU support under TCG: the generic ones serve.
  insmod "$m" 2>/dev/null || log "insmod $m failed"
done

# Under TCG the drives take a while to show up; 60 s covers a slow host.
ROOT=
i=0
while [ -z "$ROOT" ] && [ $i -lt 600 ]; do
  for d in /sys/block/vd*; do
    [ "$(cat $d/serial 2>/dev/null)" = SSDWROOT ] && ROOT=${d##*/}
  done
  [ -n "$ROOT" ] || { sleep 0.1; i=$((i + 1)); }
done
[ -n "$ROOT" ] || die "no virtio disk with serial SSDWROOT (the Debian root filesystem)"
mkdir -p /newroot
mount -t ext4 /dev/$ROOT /newroot || die "mounting /dev/$ROOT"
[ -x /newroot/lib/systemd/systemd ] || die "/dev/$ROOT has no /lib/systemd/systemd"

# The scenario runs once the system is up (multi-user.target), then powers the guest off.
t=/newroot/root/ssdwatch-test
mkdir -p $t
cp /payload/ssdwatch.deb /payload/scenario.sh $t/
cp -r /payload/recipe $t/
chmod 755 $t/scenario.sh
cat > /newroot/etc/systemd/system/ssdwatch-vmtest.service <<'EOF'
[Unit]
Description=ssdwatch test scenario under systemd
After=multi-user.target

[Service]
Type=oneshot
ExecStart=/root/ssdwatch-test/scenario.sh
StandardOutput=journal+console
StandardError=journal+console
EOF
mkdir -p /newroot/etc/systemd/system/multi-user.target.wants
ln -sf ../ssdwatch-vmtest.service /newroot/etc/systemd/system/multi-user.target.wants/ssdwatch-vmtest.service

log "switching to systemd on /dev/$ROOT"
umount /proc /sys
umount /dev 2>/dev/null
exec switch_root /newroot /lib/systemd/systemd
