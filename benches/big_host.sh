# Sourced by the benches that serve the generated large host (64 drives with 8 partitions each,
# 500 filesystems; benches/gen_big_host.py): the binary, a work directory removed on exit, the
# host, and the daemon started on a free port and stopped by its PID.
# After `big_host_setup`: $SSDWATCH, $work (with $work/host, $work/state). After
# `big_host_serve CONFIG`: $pid and $port, the daemon answering /metrics. `wait_metrics PORT
# NAME` waits for any exporter's /metrics.

big_host_setup() {
  # SSDWATCH=path uses that binary (a CI test passes its debug build) instead of building one:
  # the release build, the binary the .deb ships (packaging/deb/build.sh packages this same
  # build), so the figures are the shipped binary's. libatasmart and libudev are not mapped in
  # the daemon: the library is loaded at run time, by the process that reads a drive with it.
  if [ -z "${SSDWATCH:-}" ]; then
    cargo build --release --quiet
    SSDWATCH=${CARGO_TARGET_DIR:-target}/release/ssdwatch
  fi
  work=$(mktemp -d)
  pid=
  trap big_host_cleanup EXIT
  python3 benches/gen_big_host.py "$work/host"
  mkdir -p "$work/state"
}

big_host_cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}

big_host_serve() {
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$SSDWATCH" serve --config "$1" --web.listen-address "127.0.0.1:$port" --log.level warn \
    --path.sysfs "$work/host/sys" --path.procfs "$work/host/proc" --path.rootfs "$work/host/rootfs" \
    --fixture.statvfs "$work/host/statvfs.yaml" &
  pid=$!
  wait_metrics "$port" "the daemon"
}

# PORT NAME: waits up to 10 s for /metrics on PORT to answer; NAME says who did not.
wait_metrics() {
  for _ in $(seq 100); do
    curl -fsS -o /dev/null "http://127.0.0.1:$1/metrics" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "$2 did not answer on port $1" >&2
  return 1
}
