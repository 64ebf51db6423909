#!/bin/busybox sh
# /init of the degradation guest: the real daemon probes an ext4 filesystem on the simulated SSD
# (tests/vm/ftl/ftl.py behind the NVMe drive FTL0001) while the filesystem is filled step by step
# to 95 %, emptied by a delete, left idle, trimmed, and the daemon restarted. Every scrape is kept, with the time it was
# taken, as a tar on the scratch disk. It asserts nothing: the host does (tests/it/vm/degrade.rs).
/bin/busybox --install -s /bin
export PATH=/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mkdir -p /var/lib/ssdwatch /out /etc/ssdwatch
R=/out
LOG=$R/log.txt
log() { echo "degrade: [$(cut -d' ' -f1 /proc/uptime)] $*" | tee -a $LOG; }
uptime_s() { cut -d. -f1 /proc/uptime; }
SLOW=3
case " $(cat /proc/cmdline) " in
  *" ssdwatch.accel=kvm "*) SLOW=1 ;;
esac
MP=/mnt/ftl
# The fill steps, in percent of the filesystem (df's Use%, the daemon's fill ratio).
STEPS="20 40 60 80 90 95"
# A database's update workload between fill steps: this many 16 KiB O_DIRECT overwrites at
# random places in the data written so far. Without it the drive would never be in steady state:
# a sequential fill of clean flash only ever leaves fully valid blocks behind, and a freshly
# trimmed drive writes as fast at 87 % full as at 63 % (docs/ftl-model.md).
UPDATES=400
# Longer than the model's idle threshold (degrade.sh: idle_after_s=8) plus its GC time.
IDLE_SECONDS=20

DAEMON=
# A clean stop commits the history's last records; the store then goes out with the rest.
stop_daemon() {
  [ -n "$DAEMON" ] || return 0
  kill -CONT "$DAEMON" 2>/dev/null
  kill "$DAEMON" 2>/dev/null && wait "$DAEMON" 2>/dev/null
  DAEMON=
  mkdir -p $R/state && cp /var/lib/ssdwatch/history.db* $R/state/ 2>>$LOG
}
finish() {
  dmesg > $R/dmesg.txt 2>&1
  stop_daemon
  umount $MP 2>/dev/null
  if [ -n "$SCRATCH" ]; then
    (cd $R && tar -cf "/dev/$SCRATCH" .) && sync
  else
    echo "degrade: no scratch disk: results lost"
  fi
  poweroff -f
}
fail() { log "FAILED: $*"; finish; }

for m in /modules/*.ko; do
  insmod "$m" 2>>$LOG || log "insmod $m failed"
done
ip link set lo up

NVME=
SCRATCH=
t0=$(uptime_s)
while [ -z "$NVME" ] || [ -z "$SCRATCH" ]; do
  for c in /sys/class/nvme/nvme*; do
    [ "$(cat $c/serial 2>/dev/null | tr -d ' ')" = FTL0001 ] && [ -b /dev/${c##*/}n1 ] && NVME=${c##*/}n1
  done
  for d in /sys/block/vd*; do
    [ "$(cat $d/serial 2>/dev/null)" = SCRATCH ] && SCRATCH=${d##*/}
  done
  [ $(($(uptime_s) - t0)) -ge $((20 * SLOW)) ] && break
  sleep 0.1
done
[ -n "$SCRATCH" ] || { echo "degrade: FAILED: scratch disk not found"; poweroff -f; }
[ -n "$NVME" ] || fail "the simulated NVMe drive (serial FTL0001) not found"
echo "$NVME" > $R/device.txt
cat /sys/block/$NVME/queue/discard_granularity /sys/block/$NVME/queue/discard_max_bytes \
  > $R/discard-limits.txt 2>&1

# nodiscard at mkfs: the model starts erased (a new drive), so mke2fs's whole-device discard
# would change nothing in it, and leaving it out keeps fstrim the only discard the drive ever
# sees, so the daemon's discard counter can be held to fstrim's own figure. No reserved blocks:
# df's Use% then reaches 95 % with data. Mounted without `discard`: a delete stays untrimmed.
mkfs.ext4 -q -F -m 0 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 /dev/$NVME >>$LOG 2>&1 \
  || fail "mkfs.ext4 /dev/$NVME"
mkdir -p $MP
mount -t ext4 /dev/$NVME $MP || fail "mount /dev/$NVME"
mkdir -p $MP/data

# Fast intervals so the story fits in minutes; every probe kind the story is about, on every
# run. The space gate is the default one: the probe file is made while the drive is empty, and
# rewriting it in place on ext4 runs down to the 4 MiB reserve, so probes go on at 95 % used.
cat > /etc/ssdwatch/degrade.yaml <<EOF
state_dir: /var/lib/ssdwatch
web:
  listen_address: "127.0.0.1:10150"
collectors:
  topology:
    interval: 1s
  diskstats:
    interval: 1s
  filesystem:
    interval: 1s
  smart:
    enabled: false
  probe:
    interval: 3s
    jitter_ratio: 0
    busy_window: 0s
    targets:
      - path: $MP
        kinds: [sync_write_4k, rand_read_4k, rand_write_4k]
        write_ops: 16
        read_ops: 16
        queue_depth: 1
        file_size_bytes: 4194304
        budget_bytes_per_day: 1073741824
        budget_time_per_hour: 30m
        busy_threshold: 1.0
        idle_priority: false
# The history at the story's pace: its store is what docs/report-example.png is drawn from.
history:
  raw_interval: 1s
  flush_interval: 1s
  forecast_interval: 1m
EOF
cp /etc/ssdwatch/degrade.yaml $R/
ssdwatch --config /etc/ssdwatch/degrade.yaml serve > $R/daemon.log 2>&1 &
DAEMON=$!

metric() {
  f=$1; n=$2; shift 2
  awk -v n="$n" -v want="$*" 'index($0, n "{") == 1 || $1 == n {
      k = split(want, w, " "); ok = 1
      for (i = 1; i <= k; i++) if (!index($0, w[i])) ok = 0
      if (ok) { print $NF; exit }
    }' "$f"
}
SCRAPE=$R/poll.prom
get() { timeout 20 wget -q -O $SCRAPE http://127.0.0.1:10150/metrics 2>/dev/null; }
runs() { metric $SCRAPE ssdwatch_probe_runs_total "mountpoint=\"$MP\""; }
# wait_runs N: until the target has N more completed probe runs (every kind, each) than when called.
wait_runs() {
  want=$1; t0=$(uptime_s); from=
  while :; do
    if get; then
      n=$(runs); n=${n:-0}
      [ -n "$from" ] || from=$n
      awk "BEGIN { exit !($n - $from >= $want) }" && return 0
    fi
    [ $(($(uptime_s) - t0)) -ge $((40 * SLOW)) ] && { log "gave up waiting for $want probe runs"; return 1; }
    sleep 0.5
  done
}
# wait_run_after T: until the target's last completed run started after Unix time T.
wait_run_after() {
  t0=$(uptime_s)
  while :; do
    if get; then
      ran=$(metric $SCRAPE ssdwatch_probe_last_run_timestamp_seconds "mountpoint=\"$MP\"")
      awk "BEGIN { exit !(${ran:-0} > $1) }" && return 0
    fi
    [ $(($(uptime_s) - t0)) -ge $((40 * SLOW)) ] && { log "gave up waiting for a probe run after $1"; return 1; }
    sleep 0.5
  done
}
N=0
# scrape NAME: keeps the current exposition as scrape-NN-NAME.prom with its time.
scrape() {
  get || log "scrape $1 failed"
  N=$((N + 1))
  f=$(printf 'scrape-%02d-%s.prom' $N "$1")
  cp $SCRAPE $R/$f
  echo "$f $(date +%s) $(cut -d' ' -f1 /proc/uptime)" >> $R/scrapes.txt
  log "scrape $f: fill $(metric $R/$f ssdwatch_probe_context_fill_ratio) sync_write_4k p50 $(metric $R/$f ssdwatch_probe_last_latency_seconds 'probe="sync_write_4k"' 'quantile="0.5"')"
}
fill_pct() { df -k $MP | awk 'NR == 2 { printf "%d\n", 100 * $3 / ($3 + $4) }'; }

t_start=$(uptime_s)
# Three runs: the first one creates the probe file alongside its measurements.
wait_runs 3 || fail "no probe runs on the empty filesystem"
scrape empty

files=0
SIZES=
for pct in $STEPS; do
  # MiB to write for df's Use% to reach pct (rounded up).
  mib=$(df -k $MP | awk -v p=$pct 'NR == 2 { n = (p / 100 * ($3 + $4) - $3) / 1024; n = (n == int(n)) ? n : int(n) + 1; print (n > 0 ? n : 0) }')
  files=$((files + 1))
  # Zeros: the model stores and costs every page alike (no compression), and /dev/urandom is
  # slow under emulation.
  dd if=/dev/zero of=$MP/data/f$files bs=1M count=$mib oflag=direct 2>>$LOG || log "dd to $pct % failed"
  SIZES="$SIZES $((mib * 64))"
  echo "$files $mib" >> $R/files.txt
  # The updates: a random 16 KiB slot of a random file; one process each (dd), nothing else
  # forked, as forks are what an update costs under emulation.
  i=0
  while [ $i -lt $UPDATES ]; do
    f=$((RANDOM % files + 1))
    set -- $SIZES
    eval "slots=\${$f}"
    [ "$slots" -gt 0 ] && dd if=/dev/zero of=$MP/data/f$f bs=16k count=1 seek=$((RANDOM % slots)) \
      conv=notrunc oflag=direct 2>/dev/null
    i=$((i + 1))
  done
  sync
  log "filled to $(fill_pct) % (step $pct, $mib MiB, $UPDATES updates)"
  wait_runs 2 || log "fewer than two probe runs at $pct %"
  scrape "fill$pct"
done

rm -rf $MP/data
sync
log "deleted everything"
wait_runs 2 || log "fewer than two probe runs after the delete"
scrape deleted

# Idle: the daemon is paused so that no I/O reaches the drive (its probes would otherwise come
# every 3 s, shorter than the model's idle threshold; real probe intervals are minutes).
kill -STOP $DAEMON
log "idle for $IDLE_SECONDS s"
sleep $IDLE_SECONDS
kill -CONT $DAEMON
# Two runs: the first may be one the pause caught halfway, most of its writes before the rest.
wait_runs 2 || log "no probe run after the idle period"
scrape idle

date +%s > $R/trim-start.txt
fstrim -v $MP > $R/fstrim.txt 2>&1
echo $? > $R/fstrim.rc
log "fstrim: $(cat $R/fstrim.txt)"
# Whole seconds (the guest's date has no %N): the next one, so the end is never put early.
echo $(($(date +%s) + 1)) > $R/trim-end.txt
# The first run that started after the trim ended, not one already going when it began (that
# one's writes met the discards). Past the diskstats sample (1 s) that sees the burst end: a run
# starting before it shares the drive with the trim as far as the daemon knows, and has no
# time since the discard.
wait_run_after $(awk '{ print $1 + 2 }' $R/trim-end.txt) || log "no probe run after fstrim"
scrape trimmed
wait_runs 2
scrape trimmed2

# A restart, as an upgrade or a reboot of the daemon is: the TRIM is then known from the state,
# the target keeps its one set of series (its mount, never its path), and the probes go on.
stop_daemon
log "restarting the daemon"
ssdwatch --config /etc/ssdwatch/degrade.yaml serve >> $R/daemon.log 2>&1 &
DAEMON=$!
wait_runs 2 || log "fewer than two probe runs after the restart"
scrape restarted
echo $(($(uptime_s) - t_start)) > $R/scenario-seconds.txt
rm -f $SCRAPE
stop_daemon
log "scenario complete"
touch $R/done
finish
