#!/usr/bin/env bash
# Attacks on the daemon's web layer, measured: scrape p99 under slowloris connections, RSS
# under connections holding big unfinished headers, descriptors in use, and the exit time on
# SIGTERM with half-open clients. Starts its own daemon on a free loopback port (an empty
# fixture host) and stops exactly that PID.
#   benches/http_attack.sh           1,000 connections per attack (the figures in docs/web.md)
#   benches/http_attack.sh --short   100 connections, a few seconds (run by tests/it/web/limits.rs)
# SSDWATCH_BIN picks the binary (default: target/release/ssdwatch, built when missing).
# Targets: scrape p99 < 100 ms, RSS < 64 MiB, exit < 5 s; exit status 1 when one is missed.
set -euo pipefail

n=1000
[[ "${1:-}" == "--short" ]] && n=100
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${SSDWATCH_BIN:-$root/target/release/ssdwatch}
if [[ ! -x "$bin" ]]; then
  (cd "$root" && cargo build --release --quiet)
fi

tmp=$(mktemp -d)
pid=""
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

mkdir -p "$tmp/sys/block" "$tmp/sys/class/block" "$tmp/proc/self" "$tmp/rootfs" "$tmp/state"
: > "$tmp/proc/self/mountinfo"
printf 'state_dir: %s\ncollectors:\n  smart:\n    enabled: false\n' "$tmp/state" > "$tmp/ssdwatch.yaml"

"$bin" --config "$tmp/ssdwatch.yaml" --path.sysfs "$tmp/sys" --path.procfs "$tmp/proc" \
  --path.rootfs "$tmp/rootfs" --web.listen-address 127.0.0.1:0 2> "$tmp/log" &
pid=$!

addr=""
for _ in $(seq 200); do
  addr=$(grep -o 'serving /metrics address=[0-9.:]*' "$tmp/log" | head -1 | cut -d= -f2 || true)
  [[ -n "$addr" ]] && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/log" >&2; exit 1; }
  sleep 0.05
done
[[ -n "$addr" ]] || { echo "daemon never served" >&2; cat "$tmp/log" >&2; exit 1; }

python3 - "$addr" "$pid" "$n" <<'PY'
import os, resource, socket, sys, time

host, port = sys.argv[1].rsplit(":", 1)
addr = (host, int(port))
pid, n = int(sys.argv[2]), int(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 3 * n + 256)), hard))
failed = []

def scrape():
    t = time.monotonic()
    s = socket.create_connection(addr, timeout=10)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    if not data.startswith(b"HTTP/1.1 200"):
        raise SystemExit("scrape failed: %r" % data[:80])
    return time.monotonic() - t

def partial(extra=b""):
    s = socket.create_connection(addr, timeout=10)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + extra)
    return s

def rss_mib():
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0

def fds():
    return len(os.listdir("/proc/%d/fd" % pid))

def exited():
    # A process being torn down can make the read fail with ESRCH rather than ENOENT.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True

scrape()
idle_rss, idle_fds = rss_mib(), fds()

# 1. slowloris: n connections with unfinished headers, then timed scrapes.
slow = [partial() for _ in range(n)]
lat = sorted(scrape() for _ in range(100))
p99 = lat[98] * 1000
open_fds = fds()
print("scrape p99 under %d slowloris connections: %.1f ms (median %.1f ms; target < 100 ms)" % (n, p99, lat[50] * 1000))
print("fds: %d idle, %d with %d connections open" % (idle_fds, open_fds, n))
if p99 >= 100:
    failed.append("scrape p99")
for s in slow:
    s.close()
time.sleep(0.5)

# 2. big headers: n connections each holding ~15 KiB of an unfinished head (under the 16 KiB
# cap), and one over the cap, which must get 431.
big = [partial(b"a" * 15000) for _ in range(n)]
time.sleep(0.5)
rss = rss_mib()
s = socket.create_connection(addr, timeout=10)
try:
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 65536 + b"\r\n\r\n")
except OSError:
    pass
reply = s.recv(64)
s.close()
print("RSS: %.1f MiB idle, %.1f MiB under %d big-header connections (target < 64 MiB); over the cap: %s"
      % (idle_rss, rss, n, reply.split(b"\r\n")[0].decode() or "closed"))
if rss >= 64:
    failed.append("RSS")
if reply and not reply.startswith(b"HTTP/1.1 431"):
    failed.append("431")
for s in big:
    s.close()
time.sleep(0.5)

# 3. SIGTERM with n half-open clients.
half = [partial() for _ in range(n)]
time.sleep(0.2)
t = time.monotonic()
os.kill(pid, 15)
while not exited() and time.monotonic() - t < 30:
    time.sleep(0.01)
took = time.monotonic() - t
print("exit after SIGTERM with %d half-open clients: %.2f s (target < 5 s)" % (n, took))
if took >= 5:
    failed.append("exit time")
for s in half:
    s.close()
if failed:
    print("missed: " + ", ".join(failed))
    sys.exit(1)
PY
