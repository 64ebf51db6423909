#!/bin/bash
# The scenario of the systemd guest (tests/vm/systemd.sh), run by a oneshot unit once Debian is
# up with systemd as PID 1: installs the .deb with dpkg, follows the README's probe recipe as
# written (taken out of the README by tests/vm/readme-probe-recipe.sh into $T/recipe),
# configures a probe target made writable by a drop-in and one left outside it, then drives the
# installed unit (restart, reload, SIGHUP, kill -9, stop) and records what it saw. It asserts
# nothing itself: the host does (tests/it/vm/systemd.rs). Every wait polls for what it needs;
# SLOW only stretches the deadlines.
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
T=/root/ssdwatch-test
R=$T/out
mkdir -p $R/procs
LOG=$R/log.txt
log() { echo "systemd-vm: [$(cut -d' ' -f1 /proc/uptime)] $*" | tee -a $LOG; }
now_ms() { date +%s%3N; }
SLOW=3
case " $(cat /proc/cmdline) " in
  *" ssdwatch.accel=kvm "*) SLOW=1 ;;
esac
log "deadlines scaled by $SLOW"
URL=http://127.0.0.1:10150/metrics

SCRATCH=
finish() {
  journalctl -u ssdwatch --no-pager -o short-monotonic > $R/journal-ssdwatch.txt 2>&1
  journalctl -b --no-pager -o short-monotonic > $R/journal.txt 2>&1
  dmesg > $R/dmesg.txt 2>&1
  if [ -n "$SCRATCH" ]; then
    (cd $R && tar -cf "/dev/$SCRATCH" .) && sync
  else
    echo "systemd-vm: no scratch disk: results lost"
  fi
  # -ff: straight to the kernel; nothing here needs a clean shutdown (the disk is a snapshot).
  systemctl poweroff -ff
}
fail() { log "FAILED: $*"; finish; exit 1; }

# until SECONDS CMD...: runs CMD until it succeeds or SECONDS (times SLOW) have passed.
until_ok() {
  local limit=$(($1 * SLOW)) t0
  shift
  t0=$(now_ms)
  until "$@"; do
    [ $(($(now_ms) - t0)) -ge $((limit * 1000)) ] && return 1
    sleep 0.2
  done
}

echo "$(cat /proc/1/comm)" > $R/pid1.txt
systemctl is-system-running > $R/system-running.txt 2>&1

# --- the drives, found by the serials the host gave them ---
drives_present() {
  SCRATCH= VIRT= NVME= SATA= RAIDSD=
  for d in /sys/block/vd*; do
    case "$(cat $d/serial 2>/dev/null)" in
      SCRATCH) SCRATCH=${d##*/} ;;
      SSDWVIRT0001) VIRT=${d##*/} ;;
    esac
  done
  for c in /sys/class/nvme/nvme*; do
    [ "$(tr -d ' ' < $c/serial 2>/dev/null)" = SSDWNVME0001 ] && NVME=${c##*/}n1
  done
  for d in /sys/block/sd*; do
    case "$(cat $d/device/model 2>/dev/null)" in
      "SSDW SATA SSD"*) SATA=${d##*/} ;;
      "QEMU HARDDISK"*) RAIDSD=${d##*/} ;;
    esac
  done
  [ -n "$SCRATCH" ] && [ -n "$VIRT" ] && [ -n "$NVME" ] && [ -n "$SATA" ] && [ -n "$RAIDSD" ] \
    && [ -b /dev/$NVME ] && [ -b /dev/$SATA ] && [ -b /dev/$VIRT ] && [ -b /dev/$SCRATCH ]
}
until_ok 30 drives_present || { drives_present; [ -n "$SCRATCH" ] || { echo "no scratch disk"; systemctl poweroff -ff; }; fail "drives missing: nvme=$NVME sata=$SATA virtio=$VIRT"; }
printf 'nvme %s\nsata %s\nvirtio %s\n' $NVME $SATA $VIRT > $R/layout.txt
log "drives: nvme $NVME, sata $SATA, virtio $VIRT, scratch $SCRATCH"
# The README's target directory sits on the virtio drive, mounted where the recipe's target's
# parent is (/var/lib/postgresql: the database's filesystem).
RECIPE=$T/recipe
mkdir -p $R/recipe
cp $RECIPE/* $R/recipe/ 2>/dev/null
RT=$(cat $RECIPE/target.txt 2>/dev/null)
[ -n "$RT" ] || fail "no recipe target in $RECIPE/target.txt"
RMP=$(dirname "$RT")
echo "$RMP" > $R/recipe/mountpoint.txt
for spec in /mnt/nvme:$NVME /mnt/sata:$SATA $RMP:$VIRT; do
  mp=${spec%%:*}
  mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 /dev/${spec#*:} >>$LOG 2>&1 \
    || fail "mkfs.ext4 /dev/${spec#*:}"
  mkdir -p $mp
  mount -t ext4 /dev/${spec#*:} $mp || fail "mount /dev/${spec#*:} on $mp"
done

# --- the package, with dpkg, as an operator installs it ---
t0=$(now_ms)
dpkg -i $T/ssdwatch.deb > $R/dpkg.txt 2>&1
echo $? > $R/dpkg.rc
echo $(($(now_ms) - t0)) > $R/dpkg-ms.txt
log "dpkg -i: rc $(cat $R/dpkg.rc)"
# The postinst started it with the shipped config.
until_ok 20 systemctl is-active -q ssdwatch
systemctl is-active ssdwatch > $R/installed-active.txt 2>&1
systemctl is-enabled ssdwatch > $R/installed-enabled.txt 2>&1
id ssdwatch > $R/id.txt 2>&1 || fail "no ssdwatch user after dpkg -i"

# --- the README's probe recipe, its setup as written: the directory, and `systemctl edit`
# with an editor that types what the README's comment says ---
cat > $T/recipe-editor <<EOF
#!/bin/sh
for f; do cat $RECIPE/dropin.conf > "\$f"; done
EOF
chmod 755 $T/recipe-editor
# On a terminal, as an operator types it (`systemctl edit` refuses to run without one).
SYSTEMD_EDITOR=$T/recipe-editor script -qec "bash -ex $RECIPE/setup.sh" /dev/null \
  > $R/recipe/setup.out 2>&1 < /dev/null
echo $? > $R/recipe/setup.rc
log "README recipe setup: rc $(cat $R/recipe/setup.rc)"

# --- the probe targets: one made writable by a drop-in, one left outside it ---
ALLOWED=/mnt/nvme/ssdwatch
REFUSED=/mnt/sata/ssdwatch
install -d -o ssdwatch -g ssdwatch -m 0750 $ALLOWED $REFUSED
echo "$ALLOWED $REFUSED" > $R/targets.txt
cat > /etc/ssdwatch/ssdwatch.yaml <<EOF
# The systemd guest: SMART every 5 s, both probe targets every 2 s (1 GiB drives: the free-space
# floor lowered).
log:
  level: info
state_dir: /var/lib/ssdwatch
web:
  listen_address: "127.0.0.1:10150"
collectors:
  smart:
    # Often, so that a smartctl run can be caught in the act (its capabilities recorded).
    interval: 5s
    # The disk behind the emulated MegaRAID controller, found by smartctl --scan-open. Its
    # plain view ($RAIDSD) is left out: QEMU's controller fails its TEST UNIT READY there
    # (smartctl: "medium or hardware error"), and the port is the drive's reading.
    discover_raid: true
    device_exclude: "^$RAIDSD\$"
  probe:
    interval: 2s
    busy_window: 0s
    targets:
      - { path: $ALLOWED, free_floor_bytes: 67108864, budget_bytes_per_day: 1073741824 }
      - { path: $REFUSED, free_floor_bytes: 67108864, budget_bytes_per_day: 1073741824 }
EOF
# The README's targets, as written.
cat $RECIPE/targets.yaml >> /etc/ssdwatch/ssdwatch.yaml
mkdir -p /etc/systemd/system/ssdwatch.service.d
cat > /etc/systemd/system/ssdwatch.service.d/probe.conf <<EOF
[Service]
ReadWritePaths=$ALLOWED
EOF
systemctl daemon-reload
# The README's commands after the config, as written (by hand first, then the restart): each
# line's output, exit status, and the probe directory's owner and mode after it.
n=0
while IFS= read -r line; do
  [ -n "$line" ] || continue
  n=$((n + 1))
  echo "$line" > $R/recipe/after-$n.cmd
  # The deadline only stops a hung command, so that the guest still returns its results.
  timeout $((60 * SLOW)) bash -c "$line" > $R/recipe/after-$n.out 2> $R/recipe/after-$n.err < /dev/null
  echo $? > $R/recipe/after-$n.rc
  stat -c '%U:%G %a' "$RT/.ssdwatch-probe" > $R/recipe/after-$n.stat 2>&1
  log "README recipe: '$line': rc $(cat $R/recipe/after-$n.rc)"
done < $RECIPE/after.sh
systemctl show ssdwatch --no-pager > $R/show.txt 2>&1
systemctl cat ssdwatch --no-pager > $R/unit.txt 2>&1

# --- /metrics: SMART of the NVMe and SATA drives, a probe run on the allowed target, the
# refused target's skip ---
scrape_has_all() {
  curl -sS --max-time 10 -o $R/poll.prom $URL 2>>$LOG || return 1
  grep -q "^ssdwatch_device_smart_supported{device=\"$NVME\"" $R/poll.prom \
    && grep -q "^ssdwatch_device_smart_supported{device=\"$SATA\"" $R/poll.prom \
    && grep -q "^ssdwatch_device_smart_supported{device=\"$VIRT\"" $R/poll.prom \
    && grep "^ssdwatch_probe_runs_total{mountpoint=\"/mnt/nvme\"" $R/poll.prom | grep -qv ' 0$' \
    && grep "^ssdwatch_probe_skipped_total{mountpoint=\"/mnt/sata\"" $R/poll.prom | grep -qv ' 0$' \
    && grep "^ssdwatch_probe_runs_total{mountpoint=\"$RMP\"" $R/poll.prom | grep -qv ' 0$' \
    && grep -q '^ssdwatch_device_smart_sample_ok{device="bus/[0-9]*:megaraid,0".* 1$' $R/poll.prom
}
# The MegaRAID controller's character device (its node is made by no udev rule: smartctl makes
# /dev/megaraid_sas_ioctl_node itself when it is missing).
grep megaraid /proc/devices > $R/megaraid-devices.txt 2>&1
until_ok 60 scrape_has_all || log "the scrape still lacks SMART or probe series after $((60 * SLOW)) s"
curl -sS --max-time 10 -o $R/metrics.prom -w '%{http_code}\n' $URL > $R/metrics.http 2>&1
stat -c '%U:%G %a' "$RT/.ssdwatch-probe" > $R/recipe/probe-dir.stat 2>&1
ls -l /dev/megaraid_sas_ioctl_node > $R/megaraid-node-after.txt 2>&1
# The SCSI disks other than the SATA one (the MegaRAID controller's disk, as the kernel shows
# it), read by smartctl as root outside the unit, for comparison with the service's reading.
smartctl --json=c --info --health --attributes --nocheck=standby /dev/$RAIDSD > $R/smartctl-root-raidsd.json 2>&1
echo $? > $R/smartctl-root-raidsd.rc

# --- who it runs as, and with what capabilities: the main process and every process of its
# cgroup ---
PID=$(systemctl show -p MainPID --value ssdwatch)
echo $PID > $R/mainpid.txt
ps -o user= -p $PID > $R/main-user.txt 2>&1
cp /proc/$PID/status $R/main-status.txt
cg=/sys/fs/cgroup$(systemctl show -p ControlGroup --value ssdwatch)
for p in $(cat $cg/cgroup.procs 2>/dev/null); do
  cp /proc/$p/status $R/procs/$p.status 2>/dev/null
  tr '\0' ' ' < /proc/$p/cmdline > $R/procs/$p.cmdline 2>/dev/null
done

# A smartctl the daemon started, caught while it runs: what it inherited from the unit. It
# lives for a fraction of a second, so the cgroup is polled without the usual pause.
catch_smartctl() {
  local t0 p
  t0=$(now_ms)
  while [ $(($(now_ms) - t0)) -lt $((30000 * SLOW)) ]; do
    for p in $(cat $cg/cgroup.procs 2>/dev/null); do
      [ "$p" = "$PID" ] && continue
      [ "$(cat /proc/$p/comm 2>/dev/null)" = smartctl ] || continue
      mkdir -p $R/smartctl
      # It may exit between the two reads: only a complete pair counts.
      cp /proc/$p/status $R/smartctl/status.tmp 2>/dev/null \
        && tr '\0' ' ' < /proc/$p/cmdline > $R/smartctl/cmdline 2>/dev/null \
        && [ -s $R/smartctl/cmdline ] \
        && mv $R/smartctl/status.tmp $R/smartctl/status && return 0
    done
    sleep 0.01
  done
  return 1
}
catch_smartctl || log "no smartctl caught running in $((30 * SLOW)) s"

# --- the sandbox: the ssdwatch user may write to the refused target outside the unit, but not
# in the unit's view of the filesystem; the allowed target is writable there ---
uid=$(id -u ssdwatch)
gid=$(id -g ssdwatch)
runuser -u ssdwatch -- sh -c "echo outside > $REFUSED/written-outside-the-unit" > $R/write-outside.err 2>&1
echo $? > $R/write-outside.rc
nsenter -t $PID -m -S $uid -G $gid -- sh -c "echo inside > $REFUSED/written-inside-the-unit" > $R/write-refused.err 2>&1
echo $? > $R/write-refused.rc
nsenter -t $PID -m -S $uid -G $gid -- sh -c "echo inside > $ALLOWED/written-inside-the-unit" > $R/write-allowed.err 2>&1
echo $? > $R/write-allowed.rc
rm -f $REFUSED/written-outside-the-unit $ALLOWED/written-inside-the-unit
grep " /mnt/" /proc/$PID/mountinfo > $R/unit-mountinfo.txt

systemd-analyze security ssdwatch --no-pager > $R/security.txt 2>&1
echo $? > $R/security.rc

cursor() { journalctl -u ssdwatch -n 0 --show-cursor --no-pager | sed -n 's/^-- cursor: //p'; }
journal_after() { journalctl -u ssdwatch --after-cursor="$1" --no-pager -o short-monotonic; }

# A request that is not HTTP: the web server answers 400 and logs the closed connection at debug
# level, so the same request tells whether debug lines are on.
bad_request() {
  exec 3<>/dev/tcp/127.0.0.1/10150 || return 1
  printf 'NOT-HTTP\r\n\r\n' >&3
  timeout 10 head -n 1 <&3 | tr -d '\r' >> $R/bad-request.txt
  exec 3<&-
}
journal_has() { journalctl -u ssdwatch --after-cursor="$1" --no-pager | grep -q -- "$2"; }

# --- systemctl reload: info -> debug; the PID stays and debug lines follow ---
c=$(cursor)
sed -i 's/^  level: info$/  level: debug/' /etc/ssdwatch/ssdwatch.yaml
systemctl reload ssdwatch
echo $? > $R/reload.rc
echo $(systemctl show -p MainPID --value ssdwatch) > $R/reload-pid.txt
until_ok 30 journal_has "$c" 'SIGHUP: config .* reloaded' \
  || log "no reload line $((30 * SLOW)) s after systemctl reload"
bad_request
until_ok 30 journal_has "$c" ' level=DEBUG ' \
  || log "no debug line $((30 * SLOW)) s after systemctl reload and a bad request"
journal_after "$c" > $R/reload-journal.txt

# --- SIGHUP: debug -> info; the PID stays and debug lines stop ---
runs() {
  curl -sS --max-time 10 $URL 2>/dev/null \
    | awk '/^ssdwatch_probe_runs_total\{mountpoint="\/mnt\/nvme"/ { s += $NF } END { print s + 0 }'
}
runs_at_least() { [ "$(runs)" -ge "$1" ]; }
c=$(cursor)
sed -i 's/^  level: debug$/  level: info/' /etc/ssdwatch/ssdwatch.yaml
kill -HUP $PID
echo $? > $R/hup.rc
until_ok 30 journal_has "$c" 'SIGHUP: config .* reloaded' \
  || log "no reload line $((30 * SLOW)) s after SIGHUP"
bad_request
# Two more probe runs after the bad request: time for its debug line to show, were the level
# still debug.
r0=$(runs)
until_ok 30 runs_at_least $((r0 + 2)) || log "fewer than 2 probe runs $((30 * SLOW)) s after SIGHUP"
echo $(systemctl show -p MainPID --value ssdwatch) > $R/hup-pid.txt
journal_after "$c" > $R/hup-journal.txt

# --- kill -9: systemd restarts it (Restart=on-failure) after RestartSec ---
systemctl show -p RestartUSec --value ssdwatch > $R/restart-sec.txt
PID=$(systemctl show -p MainPID --value ssdwatch)
echo $PID > $R/kill-pid.txt
t0=$(now_ms)
kill -9 $PID
restarted() {
  local p
  p=$(systemctl show -p MainPID --value ssdwatch)
  [ "$p" != 0 ] && [ "$p" != "$PID" ] && systemctl is-active -q ssdwatch
}
until_ok 40 restarted || log "no new main process $((40 * SLOW)) s after kill -9"
echo $(($(now_ms) - t0)) > $R/kill-restart-ms.txt
systemctl show -p MainPID --value ssdwatch > $R/kill-newpid.txt
systemctl show -p NRestarts --value ssdwatch > $R/kill-nrestarts.txt
until_ok 30 curl -sS --max-time 10 -o $R/after-restart.prom $URL

# --- systemctl stop: within TimeoutStopSec, and without SIGKILL ---
systemctl show -p TimeoutStopUSec --value ssdwatch > $R/stop-timeout.txt
c=$(cursor)
t0=$(now_ms)
systemctl stop ssdwatch
echo $? > $R/stop.rc
echo $(($(now_ms) - t0)) > $R/stop-ms.txt
systemctl show ssdwatch -p Result -p ExecMainCode -p ExecMainStatus -p ActiveState --no-pager > $R/stop-show.txt
journalctl --after-cursor="$c" --no-pager -o short-monotonic > $R/stop-journal.txt

log "scenario done"
touch $R/done
finish
