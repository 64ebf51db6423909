#!/usr/bin/env bash
# How long `ssdwatch backtest --trace X.csv --json` takes on a 6-month trace at 1-minute samples
# (262,080 rows, benches/alerts/traces.py --speed), the shipped rules evaluated every minute.
# Prints each run's wall and CPU seconds and peak RSS, then min / median / max of the wall time
# (docs/alerts-benchmark.md, "Speed", quotes them).
#
#   benches/backtest_speed.sh               3 runs with the default engine (Prometheus' query
#                                           engine), range queries at once: the CPUs
#   RUNS=n JOBS=n benches/backtest_speed.sh
#   ENGINE=rules                            promtool's rule manager instead (the trace cut in
#                                           --jobs pieces: about 8 minutes on 2 cores)
#   COMPARE=1                               also one run with the other engine (the rule
#                                           manager: a quarter of an hour on 2 cores with
#                                           --jobs 1), and its episodes compared
#   SSDWATCH=path                           a built binary instead of `cargo build --release`
#   SHORT=1                                 CI's form: the trace's first 2 days, one run, and
#                                           the other engine's episodes compared
set -euo pipefail
cd "$(dirname "$0")/.."
command -v promtool >/dev/null || { echo "promtool not found: apt-get install prometheus" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 not found" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time not found: apt-get install time" >&2; exit 2; }
if [ -z "${SSDWATCH:-}" ]; then
  cargo build --release --quiet
  SSDWATCH="${CARGO_TARGET_DIR:-target}/release/ssdwatch"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
short=()
if [ -n "${SHORT:-}" ]; then
  short=(--short)
  RUNS=1
  COMPARE=1
fi
IFS=$'\t' read -r _name trace _eval _story < <(python3 benches/alerts/traces.py "$work/traces" --speed "${short[@]}")
echo "trace: $(($(wc -l < "$trace") - 1)) rows; $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
jobs=()
[ -n "${JOBS:-}" ] && jobs=(--jobs "$JOBS")
engine="${ENGINE:-auto}"
jobs+=(--engine "$engine")
walls=()
for i in $(seq "${RUNS:-3}"); do
  /usr/bin/time -f '%e %U %S %M' -o "$work/time" \
    "$SSDWATCH" backtest --trace "$trace" --json "${jobs[@]}" > "$work/run$i.json"
  read -r wall user sys rss < "$work/time"
  walls+=("$wall")
  python3 - "$work/run$i.json" "$wall" "$user" "$sys" "$rss" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
wall, user, sys_, rss = sys.argv[2:]
print(f"run: {float(wall):.1f} s wall, {float(user) + float(sys_):.1f} s CPU, peak RSS {int(rss) // 1024} MiB"
      f" (engine {r['engine']}, {r['pieces']} piece(s), warm-up {r['warmup_seconds']} s, {r['rules_evaluated']} rules,"
      f" {len(r['episodes'])} episodes)")
PY
done
printf '%s\n' "${walls[@]}" | sort -n | python3 -c '
import sys
w = [float(x) for x in sys.stdin]
print(f"wall seconds: min {w[0]:.1f}, median {w[len(w) // 2]:.1f}, max {w[-1]:.1f} ({len(w)} runs, load average now '"$(cut -d' ' -f1-3 /proc/loadavg)"')")'
if [ -n "${COMPARE:-}" ]; then
  /usr/bin/time -f '%e %U %S %M' -o "$work/time" \
    "$SSDWATCH" backtest --trace "$trace" --json --engine "$([ "$engine" = rules ] && echo query || echo rules)" > "$work/one.json"
  read -r wall user sys rss < "$work/time"
  echo "the other engine: $wall s wall, $(python3 -c "print(round($user + $sys, 1))") s CPU, peak RSS $((rss / 1024)) MiB"
  python3 - "$work/one.json" "$work/run1.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
same = a["episodes"] == b["episodes"] and a["rule_sets"] == b["rule_sets"]
print("episodes the same under both engines:", "yes" if same else "NO")
sys.exit(0 if same else 1)
PY
fi
