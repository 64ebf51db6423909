#!/usr/bin/env python3
"""Fleet benchmark: does the rule set and the Fleet dashboard stay fast with thousands of hosts?

Serves a synthetic fleet (N hosts shaped like ssdwatch's real output: 5 filesystems, 2 SSDs,
one probe target with 4 kinds each) from one endpoint with an `instance` label per host, runs
Debian's `prometheus` on it with ssdwatch.rules.yml and ssdwatch.alerts.yml loaded, lets it
scrape and evaluate for a while, then prints the evaluation time of every rule group and the
latency of every Fleet dashboard query (through the HTTP API, median of 5).

    python3 packaging/prometheus/bench/fleet.py [--hosts 1000] [--seconds 60] [--ssdwatch BIN]

With --ssdwatch, also times `ssdwatch report --prometheus URL --fleet` and `--instance` end to
end. Machine-readable lines: FLEET_QUERY <what> <seconds> <rows>, FLEET_REPORT <mode> <seconds>
<rows>.

With --server victoria-metrics, Debian's `victoria-metrics` (single node) scrapes the fleet
instead, as a long-term store does; it has no rule engine (vmalert's job), so the rule groups
are not evaluated there, and everything else is timed the same way. Its response cache is on,
as in production; its 30 s visibility delay (-search.latencyOffset) is cut to 1 s so the
bench's first seconds are visible.

Python 3 standard library only. Needs `prometheus` (or `victoria-metrics`) on PATH; uses two
free loopback ports.
"""

import argparse
import http.server
import json
import math
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
BUCKETS = [1e-5 * (2 ** i) for i in range(20)]  # 10 us .. ~5 s


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def exposition(hosts, t0):
    """The fleet's metrics at this moment; filesystems fill slowly, counters grow."""
    el = time.time() - t0
    out = []
    add = out.append
    for h in range(hosts):
        inst = f"db{h:05d}:10150"
        rnd = random.Random(h)
        for c in ("topology", "diskstats", "filesystem", "smart", "probe"):
            add(f'ssdwatch_collector_success{{instance="{inst}",collector="{c}"}} 1')
        for d in range(2):
            dev = f"nvme{d}n1"
            add(f'ssdwatch_disk_info{{instance="{inst}",device="{dev}",kind="nvme",model="M",serial="S{h}-{d}",firmware="F",wwn="eui.{h}{d}",rotational="0"}} 1')
            add(f'ssdwatch_disk_rotational{{instance="{inst}",device="{dev}"}} 0')
            add(f'ssdwatch_disk_solid_state{{instance="{inst}",device="{dev}",source="nvme"}} 1')
            add(f'ssdwatch_disk_last_discard_timestamp_seconds{{instance="{inst}",device="{dev}"}} {t0 - rnd.randint(0, 10 * 86400)}')
            lab = f'instance="{inst}",device="{dev}",serial="S{h}-{d}",wwn="eui.{h}{d}"'
            add(f"ssdwatch_device_wear_used_ratio{{{lab}}} {rnd.randint(0, 95) / 100}")
            add(f"ssdwatch_device_spare_available_ratio{{{lab}}} 1")
            add(f"ssdwatch_device_spare_threshold_ratio{{{lab}}} 0.1")
            add(f"ssdwatch_device_media_errors_total{{{lab}}} 0")
            add(f"ssdwatch_device_critical_warning{{{lab}}} 0")
            add(f"ssdwatch_device_smart_passed{{{lab}}} 1")
            add(f"ssdwatch_device_temperature_celsius{{{lab}}} {30 + rnd.randint(0, 20)}")
            add(f"ssdwatch_device_host_written_bytes_total{{{lab}}} {int(1e12 + el * 1e6)}")
            add(f"ssdwatch_device_nand_written_bytes_total{{{lab}}} {int(2e12 + el * 2e6)}")
            add(f"ssdwatch_device_smart_sample_age_seconds{{{lab}}} 100")
            add(f"ssdwatch_device_predicted_wearout_timestamp_seconds{{{lab}}} {int(t0 + rnd.randint(30, 3000) * 86400)}")
        for f in range(5):
            mp = ["/", "/var", "/srv/pg", "/srv/wal", "/tmp"][f]
            dev = f"nvme{f % 2}n1p{f + 1}"
            lab = f'instance="{inst}",mountpoint="{mp}",device="{dev}",fstype="ext4"'
            size = 10 ** 12
            avail = max(0, int(size * rnd.random() - el * rnd.randint(0, 10 ** 6)))
            add(f"ssdwatch_filesystem_size_bytes{{{lab}}} {size}")
            add(f"ssdwatch_filesystem_avail_bytes{{{lab}}} {avail}")
            add(f"ssdwatch_filesystem_free_bytes{{{lab}}} {avail}")
            add(f"ssdwatch_filesystem_files{{{lab}}} 1000000")
            add(f"ssdwatch_filesystem_files_free{{{lab}}} 900000")
            add(f"ssdwatch_filesystem_readonly{{{lab}}} 0")
            add(f"ssdwatch_filesystem_stuck{{{lab}}} 0")
            add(f"ssdwatch_filesystem_discard_mount_option{{{lab}}} 0")
            add(f"ssdwatch_filesystem_trim_capable{{{lab}}} {1 if rnd.random() > 0.05 else 0}")
            add(f'ssdwatch_filesystem_drive_info{{{lab},drive="nvme{f % 2}n1"}} 1')
            # The daemon's own forecast (history on): absent for a flat filesystem, as there.
            if rnd.random() < 0.8:
                add(f"ssdwatch_filesystem_predicted_full_timestamp_seconds{{{lab}}} {int(t0 + rnd.randint(1, 900) * 86400)}")
        lab = f'instance="{inst}",mountpoint="/srv/pg",device="nvme0n1"'
        runs = int(el / 5) + 1
        for k in ("sync_write_4k", "rand_read_4k", "rand_write_4k", "seq_write"):
            cum = 0
            for le in BUCKETS:
                cum = runs * 16 * min(1.0, math.exp(-1e-4 / le))
                add(f'ssdwatch_probe_latency_seconds_bucket{{{lab},probe="{k}",le="{le:g}"}} {int(cum)}')
            add(f'ssdwatch_probe_latency_seconds_bucket{{{lab},probe="{k}",le="+Inf"}} {runs * 16}')
            add(f'ssdwatch_probe_latency_seconds_sum{{{lab},probe="{k}"}} {runs * 16 * 2e-4}')
            add(f'ssdwatch_probe_latency_seconds_count{{{lab},probe="{k}"}} {runs * 16}')
            add(f'ssdwatch_probe_runs_total{{{lab},probe="{k}"}} {runs}')
        add(f"ssdwatch_probe_context_fill_ratio{{{lab}}} 0.5")
        add(f"ssdwatch_probe_context_since_discard_seconds{{{lab}}} 3600")
    return ("\n".join(out) + "\n").encode()


def serve(hosts, port):
    t0 = time.time()

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = exposition(hosts, t0)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # Prometheus gave up on a slow scrape or is shutting down

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def api(base, path, **params):
    url = f"{base}{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.load(r)


def fleet_queries():
    with open(os.path.join(REPO, "dashboards", "ssdwatch-fleet.json"), encoding="utf-8") as f:
        d = json.load(f)
    for p in d["panels"]:
        for t in p.get("targets", []):
            yield p["title"], t["expr"].replace('$instance', ".*").replace("$topn", "20")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--ssdwatch", metavar="BIN",
                    help="also time `BIN report --prometheus URL --fleet` and `--instance` end to end")
    ap.add_argument("--server", choices=("prometheus", "victoria-metrics"), default="prometheus",
                    help="the server that scrapes the fleet and answers the queries")
    args = ap.parse_args()
    vm = args.server == "victoria-metrics"
    if not shutil.which(args.server):
        sys.exit(f"{args.server} not installed (apt-get install {args.server})")
    work = tempfile.mkdtemp(prefix="ssdwatch-fleet-")
    tport, pport = free_port(), free_port()
    srv = serve(args.hosts, tport)
    rules = os.path.join(REPO, "packaging", "prometheus")
    cfg = os.path.join(work, "prometheus.yml")
    with open(cfg, "w", encoding="utf-8") as f:
        f.write("global:\n  scrape_interval: 10s\n  scrape_timeout: 10s\n")
        if not vm:
            f.write("  evaluation_interval: 10s\n"
                    f"rule_files:\n  - {rules}/ssdwatch.rules.yml\n  - {rules}/ssdwatch.alerts.yml\n")
        f.write(
            "scrape_configs:\n  - job_name: ssdwatch-fleet\n    honor_labels: true\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{tport}']\n"
        )
    if vm:
        cmd = ["victoria-metrics", f"-promscrape.config={cfg}", f"-storageDataPath={work}/vm",
               f"-httpListenAddr=127.0.0.1:{pport}", "-loggerLevel=ERROR",
               # One target holds the whole fleet (tens of MB a scrape).
               "-promscrape.maxScrapeSize=1GB", "-search.latencyOffset=1s"]
    else:
        cmd = ["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={work}/tsdb",
               f"--web.listen-address=127.0.0.1:{pport}", "--log.level=warn"]
    prom = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{pport}"
    try:
        print(f"{args.hosts} hosts on {args.server}; scraping and evaluating for {args.seconds} s ...",
              flush=True)
        time.sleep(args.seconds)
        # The first scrape comes up to a scrape interval after Prometheus starts, later on a
        # busy machine: wait until the fleet's series are there as of a whole second ago, the
        # time a report asks at (its `now` is whole seconds), so no timing counts an empty answer.
        deadline = time.monotonic() + 60
        while not api(base, "/api/v1/query", query="ssdwatch_device_predicted_wearout_timestamp_seconds",
                      time=str(int(time.time()) - 1))["data"]["result"]:
            if time.monotonic() > deadline:
                sys.exit(f"no scrape of the fleet reached {args.server} in 60 s")
            time.sleep(0.5)
        series = api(base, "/api/v1/query", query="count({__name__=~\"ssdwatch_.+\"})")["data"]["result"]
        print(f"series scraped: {series[0]['value'][1] if series else 0}")
        if vm:
            print("\nrule groups: not evaluated (VictoriaMetrics leaves rules to vmalert)")
        else:
            print("\nrule group evaluation time (last evaluation)")
            for g in api(base, "/api/v1/rules")["data"]["groups"]:
                print(f"  {g['name']:32s} {g['evaluationTime'] * 1000:8.1f} ms")
        print("\nFleet dashboard queries (median of 5)")
        for title, q in fleet_queries():
            ts = []
            for _ in range(5):
                t = time.perf_counter()
                r = api(base, "/api/v1/query", query=q)
                ts.append(time.perf_counter() - t)
                if r["status"] != "success":
                    sys.exit(f"{title}: {r}")
            print(f"  {title:40s} {statistics.median(ts) * 1000:8.1f} ms")
        print("\n`ssdwatch report --prometheus --fleet` queries (median of 5)")
        for what in ("filesystem_predicted_full", "device_predicted_wearout"):
            q = f"bottomk(50, last_over_time(ssdwatch_{what}_timestamp_seconds[2h]))"
            ts, n = [], 0
            for _ in range(5):
                t = time.perf_counter()
                n = len(api(base, "/api/v1/query", query=q)["data"]["result"])
                ts.append(time.perf_counter() - t)
            print(f"  {q:80s} {statistics.median(ts) * 1000:8.1f} ms, {n} rows")
            print(f"FLEET_QUERY {what} {statistics.median(ts):.4f} {n}")
        if args.ssdwatch:
            for label, extra in (("--fleet", ["--fleet"]),
                                 ("--instance db00000:10150", ["--instance", "db00000:10150"])):
                ts = []
                for _ in range(3):
                    t = time.perf_counter()
                    out = subprocess.run([args.ssdwatch, "report", "--json", "--prometheus", base] + extra,
                                         capture_output=True, text=True, timeout=300)
                    ts.append(time.perf_counter() - t)
                    if out.returncode != 0:
                        sys.exit(f"ssdwatch report {label}: {out.stderr}")
                rows = json.loads(out.stdout)
                n = (len(rows["filesystems"]) + len(rows["drives"]))
                print(f"  ssdwatch report --prometheus {label:28s} {statistics.median(ts) * 1000:8.1f} ms "
                      f"(whole command, median of 3), {n} filesystems + drives")
                print(f"FLEET_REPORT {label.split()[0]} {statistics.median(ts):.4f} {n}")
        naive = 'topk(20, predict_linear(ssdwatch_filesystem_avail_bytes[6h], 86400) < 0)'
        ts = []
        for _ in range(5):
            t = time.perf_counter()
            api(base, "/api/v1/query", query=naive)
            ts.append(time.perf_counter() - t)
        print(f"\nfor comparison, raw-history query {naive}: {statistics.median(ts) * 1000:.1f} ms "
              f"(over {args.seconds} s of history only; it grows with the range)")
    finally:
        prom.terminate()
        prom.wait()
        srv.shutdown()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
