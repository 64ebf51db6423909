#!/usr/bin/env bash
# Attacks on the daemon's web layer, measured: scrape p99 under slowloris connections, RSS
# under connections holding big unfinished headers, descriptors in use, the exit time on
# SIGTERM with half-open clients; the right password's scrapes under a flood of wrong ones;
# scrapes while idle connections past the connection cap are held and reopened, also under a
# limit of 1,024 descriptors. Starts its own daemons (an empty fixture host) on loopback, one
# after the other, and stops exactly their PIDs.
#   benches/http_attack.sh           1,000 connections per attack, 200 wrong-password connections
#                                    for 100 s, 1,100 idle connections for 30 s (docs/web.md)
#   benches/http_attack.sh --short   100 connections, 50 for 4 s, 1,100 for 3 s (run by
#                                    tests/it/web/limits.rs)
#   --port N (or SSDWATCH_PORT=N)    listen on 127.0.0.1:N (default: a free port)
# SSDWATCH_BIN picks the binary (default: target/release/ssdwatch, built when missing).
# Targets: scrape p99 < 100 ms, RSS < 64 MiB, exit < 5 s, the right password's scrapes >= 99 %
# answered within 2 s, scrapes past held idle connections within 2 s; exit status 1 when one
# is missed.
set -euo pipefail

short=0
port=${SSDWATCH_PORT:-0}
while (($#)); do
  case $1 in
    --short) short=1 ;;
    --port) port=${2:-}; shift ;;
    --port=*) port=${1#*=} ;;
    *) echo "usage: $0 [--short] [--port N]" >&2; exit 2 ;;
  esac
  shift
done
if ! [[ "$port" =~ ^[0-9]+$ ]] || ((port > 65535)); then
  echo "--port / SSDWATCH_PORT: $port is not a port number (0 picks a free one)" >&2
  exit 2
fi
n=1000
((short)) && n=100
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${SSDWATCH_BIN:-$root/target/release/ssdwatch}
if [[ ! -x "$bin" ]]; then
  (cd "$root" && cargo build --release --quiet)
fi

tmp=$(mktemp -d)
pid=""
holder=""
cleanup() {
  if [[ -n "$holder" ]]; then kill -KILL "$holder" 2>/dev/null || true; fi
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

mkdir -p "$tmp/sys/block" "$tmp/sys/class/block" "$tmp/proc/self" "$tmp/rootfs" "$tmp/state"
: > "$tmp/proc/self/mountinfo"
printf 'state_dir: %s\ncollectors:\n  smart:\n    enabled: false\n  layers:\n    enabled: false\n' "$tmp/state" > "$tmp/ssdwatch.yaml"

# start_daemon LOG [ARGS...]: starts the daemon on 127.0.0.1:$port (with `ulimit -n $nofile`
# when set) and waits for it to serve; sets pid and addr.
start_daemon() {
  local log=$1
  shift
  local cmd=("$bin" --config "$tmp/ssdwatch.yaml" --path.sysfs "$tmp/sys" --path.procfs "$tmp/proc"
    --path.rootfs "$tmp/rootfs" --web.listen-address "127.0.0.1:$port" "$@")
  if [[ -n "${nofile:-}" ]]; then
    (ulimit -n "$nofile" && exec "${cmd[@]}") 2> "$log" &
  else
    "${cmd[@]}" 2> "$log" &
  fi
  pid=$!
  addr=""
  for _ in $(seq 200); do
    addr=$(grep 'serving /metrics' "$log" | grep -o 'address=[0-9.:]*' | head -1 | cut -d= -f2 || true)
    if [[ -n "$addr" ]]; then
      echo "daemon at $addr${nofile:+ (open files limited to $nofile)}"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.05
  done
  echo "daemon never served" >&2
  cat "$log" >&2
  exit 1
}

# stop_daemon: SIGTERM, and SIGKILL if it is still there after 10 s; reaps it.
stop_daemon() {
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
}

failed=0
start_daemon "$tmp/log"

python3 - "$addr" "$pid" "$n" <<'PY' || failed=1
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
stop_daemon

# The attackers run as processes of their own, so the scrapes are timed by a process no
# attacker thread competes with for the interpreter.
cat > "$tmp/flood.py" <<'PY'
# flood.py ADDR N SECONDS SOURCE: N keep-alive connections from SOURCE, each sending a scrape
# with a new wrong password for user prometheus as soon as the previous answer is in; prints the
# statuses answered, as JSON, at the end.
import asyncio, base64, json, sys, time

host, port = sys.argv[1].rsplit(":", 1)
n, seconds, source = int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
counts = {}

async def attacker(i):
    k = 0
    while True:
        try:
            r, w = await asyncio.open_connection(host, int(port), local_addr=(source, 0))
        except OSError:
            await asyncio.sleep(0.05)
            continue
        try:
            while True:
                k += 1
                cred = base64.b64encode(b"prometheus:guess-%d-%d" % (i, k)).decode()
                w.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic %s\r\n\r\n" % cred.encode())
                head = await r.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await r.readexactly(length)
                counts[status] = counts.get(status, 0) + 1
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            w.close()

async def main():
    tasks = [asyncio.ensure_future(attacker(i)) for i in range(n)]
    await asyncio.sleep(seconds)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)

asyncio.run(main())
print(json.dumps(counts))
PY

cat > "$tmp/hold.py" <<'PY'
# hold.py ADDR N SECONDS: N connections that never send a byte, each reopened (without waiting
# for the connect) when the server closes it, checked every 250 ms; prints how many were
# reopened.
import errno, socket, sys, time

host, port = sys.argv[1].rsplit(":", 1)
addr, n, seconds = (host, int(port)), int(sys.argv[2]), float(sys.argv[3])
conns, reopened = [None] * n, 0

def connect():
    s = socket.socket()
    s.setblocking(False)
    e = s.connect_ex(addr)
    if e in (0, errno.EINPROGRESS):
        return s
    s.close()
    return None

end = time.monotonic() + seconds
while time.monotonic() < end:
    for i, s in enumerate(conns):
        alive = False
        if s is not None:
            try:
                alive = s.recv(64) != b""
            except BlockingIOError:
                alive = True
            except OSError:
                pass
            if not alive:
                s.close()
                reopened += 1
        if not alive:
            conns[i] = connect()
    time.sleep(0.25)
print(reopened)
PY

# Shared by the measuring scripts below: a timed scrape on a fresh connection.
cat > "$tmp/scrape.py" <<'PY'
import base64, socket, time

def scrape(addr, user=None, password=None, timeout=10):
    """(status or 0, seconds) of one GET /metrics on a new connection."""
    host, port = addr.rsplit(":", 1)
    auth = b""
    if user is not None:
        auth = b"Authorization: Basic %s\r\n" % base64.b64encode(("%s:%s" % (user, password)).encode())
    t = time.monotonic()
    try:
        s = socket.create_connection((host, int(port)), timeout=timeout)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + auth + b"Connection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0
    except (OSError, ValueError, IndexError):
        status = 0
    return status, time.monotonic() - t

def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] if xs else float("nan")
PY

# 4. The right password's scrapes under a flood of wrong passwords (bcrypt cost 10, the password
# "right"). Full run: first, the flood from another loopback address and Prometheus' first
# check under it; then 200 connections from Prometheus' own address, each request a new guess,
# for 100 s, with a scrape every 5 s and a SIGHUP (a reload) half-way.
printf 'basic_auth_users:\n  prometheus: %s\n' '$2b$10$zypMUhxcu0w4NeUdZjKNhOecwCKulLhKYv1/1SfLLHVJaheRV1Sw.' > "$tmp/web.yml"
start_daemon "$tmp/log.auth" --web.config.file "$tmp/web.yml"
if ((short)); then conns=50 secs=4 every=1; else conns=200 secs=100 every=5; fi
PYTHONPATH="$tmp" python3 - "$addr" "$pid" "$conns" "$secs" "$every" "$short" "$tmp" <<'PY' || failed=1
import json, os, signal, subprocess, sys, time
from scrape import scrape, pct

addr, pid, conns, secs, every, short, tmp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), sys.argv[6] == "1", sys.argv[7]
missed = []

def flood(source, seconds):
    return subprocess.Popen([sys.executable, os.path.join(tmp, "flood.py"), addr, str(conns), str(seconds), source],
                            stdout=subprocess.PIPE, text=True)

if short:
    status, first = scrape(addr, "prometheus", "right")
    print("first check of the right password: %.0f ms (%d)" % (first * 1000, status))
else:
    f = flood("127.0.0.2", 12)
    time.sleep(2)
    status, first = scrape(addr, "prometheus", "right")
    other = json.loads(f.communicate()[0] or "{}")
    print("first check of the right password while %d connections from another address send wrong ones: %.0f ms (%d); their answers %s"
          % (conns, first * 1000, status, other))
if status != 200 or first >= 2:
    missed.append("first check")

f = flood("127.0.0.1", secs + 2)
time.sleep(2)
results, start, hup = [], time.monotonic(), False
while time.monotonic() - start < secs:
    t = time.monotonic()
    results.append(scrape(addr, "prometheus", "right"))
    if not hup and time.monotonic() - start >= secs / 2:
        os.kill(pid, signal.SIGHUP)
        hup = True
    time.sleep(max(0, every - (time.monotonic() - t)))
answers = json.loads(f.communicate()[0] or "{}")
ok = [lat for status, lat in results if status == 200 and lat < 2]
lat = [lat for _, lat in results]
share = 100.0 * len(ok) / len(results)
print("right password every %g s under %d connections of wrong passwords from its own address for %g s (a reload half-way): "
      "%d/%d answered 200 within 2 s (%.1f %%; target >= 99 %%), median %.1f ms, max %.1f ms; the flood: %d requests, %s"
      % (every, conns, secs, len(ok), len(results), share, pct(lat, 0.5) * 1000, max(lat) * 1000,
         sum(answers.values()), ", ".join("%s: %d" % kv for kv in sorted(answers.items()))))
if share < 99:
    missed.append("right password under the flood")
if "200" in answers:
    missed.append("a wrong password got in")
if missed:
    print("missed: " + ", ".join(missed))
    sys.exit(1)
PY
stop_daemon

# 5. Idle connections past the connection cap, held and reopened as the daemon closes them:
# 1,100 against the default cap of 1,024, then under a limit of 1,024 descriptors (cap 768);
# a scrape every 500 ms meanwhile. The header timeout is the default 10 s.
if ((short)); then secs=3; else secs=30; fi
for nofile in "" 1024; do
  if [[ -n "$nofile" ]] && ! (ulimit -n "$nofile") 2>/dev/null; then
    echo "skipped: idle connections under a limit of $nofile descriptors (can't set it here)"
    continue
  fi
  start_daemon "$tmp/log.idle$nofile"
  cap=$(grep -o 'max_connections=[0-9]*' "$tmp/log.idle$nofile" | head -1 | cut -d= -f2)
  python3 "$tmp/hold.py" "$addr" 1100 $((secs + 3)) > "$tmp/held" &
  holder=$!
  PYTHONPATH="$tmp" python3 - "$addr" "$secs" "$cap" "${nofile:-no}" <<'PY' || failed=1
import sys, time
from scrape import scrape, pct

addr, secs, cap, nofile = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
time.sleep(3)  # all 1,100 opened, the cap reached
results, start = [], time.monotonic()
while time.monotonic() - start < secs:
    t = time.monotonic()
    results.append(scrape(addr))
    time.sleep(max(0, 0.5 - (time.monotonic() - t)))
lat = [lat for _, lat in results]
ok = [1 for status, lat in results if status == 200 and lat < 2]
limit = "no descriptor limit" if nofile == "no" else "a limit of %s descriptors" % nofile
print("scrapes under 1,100 idle connections held and reopened, cap %s (%s): %d/%d answered 200 within 2 s, "
      "median %.1f ms, p99 %.1f ms, max %.1f ms (target: all within 2 s)"
      % (cap, limit, len(ok), len(results), pct(lat, 0.5) * 1000, pct(lat, 0.99) * 1000, max(lat) * 1000))
if len(ok) < len(results):
    print("missed: scrapes past idle connections")
    sys.exit(1)
PY
  wait "$holder" || true
  holder=""
  echo "  idle connections reopened after the daemon closed them: $(cat "$tmp/held")"
  stop_daemon
done

exit "$failed"
