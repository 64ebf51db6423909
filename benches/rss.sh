#!/usr/bin/env bash
# Steady resident memory of the daemon on the large generated host (64 drives, 500 mounts):
# starts the release build, scrapes it repeatedly for a while, prints VmRSS and VmHWM.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
python3 benches/gen_big_host.py "$dir"
cat > "$dir/config.yaml" <<YAML
state_dir: $dir/state
collectors:
  filesystem: {interval: 1s}
  diskstats: {interval: 1s}
  topology: {interval: 5s}
  smart: {enabled: false}
  probe: {enabled: false}
YAML
port=${PORT:-19150}
./target/release/ssdwatch --config "$dir/config.yaml" --web.listen-address "127.0.0.1:$port" \
  --path.sysfs "$dir/sys" --path.procfs "$dir/proc" --path.rootfs "$dir/rootfs" \
  --fixture.statvfs "$dir/statvfs.yaml" --log.level warn &
pid=$!
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$port/-/ready" >/dev/null && break; sleep 0.1; done
end=$((SECONDS + ${DURATION:-20}))
n=0
while [ $SECONDS -lt $end ]; do
  curl -sf "http://127.0.0.1:$port/metrics" >/dev/null; n=$((n + 1)); sleep 0.05
done
echo "scrapes: $n"
grep -E 'VmRSS|VmHWM|Threads' "/proc/$pid/status"
