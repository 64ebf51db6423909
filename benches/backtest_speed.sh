#!/usr/bin/env bash
# How long `ssdwatch backtest --trace X.csv --json` takes on a 6-month trace at 1-minute samples
# (262,080 rows, benches/alerts/traces.py --speed), the shipped rules evaluated every minute.
# Prints each run's wall and CPU seconds and peak RSS, then min / median / max of the wall time
# (docs/alerts-benchmark.md, "Speed", quotes them).
#
#   benches/backtest_speed.sh               3 runs, promtool runs at once: the CPUs
#   RUNS=n JOBS=n benches/backtest_speed.sh
#   COMPARE=1                               also one run with --jobs 1 (one promtool over the
#                                           whole trace: a quarter of an hour on 2 cores), and
#                                           its episodes compared with the cut runs'
#   SSDWATCH=path                           a built binary instead of `cargo build --release`
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
IFS=$'\t' read -r _name trace _eval _story < <(python3 benches/alerts/traces.py "$work/traces" --speed)
echo "trace: $(($(wc -l < "$trace") - 1)) rows; $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
jobs=()
[ -n "${JOBS:-}" ] && jobs=(--jobs "$JOBS")
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
      f" ({r['pieces']} promtool runs, warm-up {r['warmup_seconds']} s, {r['rules_evaluated']} rules,"
      f" {len(r['episodes'])} episodes)")
PY
done
printf '%s\n' "${walls[@]}" | sort -n | python3 -c '
import sys
w = [float(x) for x in sys.stdin]
print(f"wall seconds: min {w[0]:.1f}, median {w[len(w) // 2]:.1f}, max {w[-1]:.1f} ({len(w)} runs, load average now '"$(cut -d' ' -f1-3 /proc/loadavg)"')")'
if [ -n "${COMPARE:-}" ]; then
  /usr/bin/time -f '%e %U %S %M' -o "$work/time" \
    "$SSDWATCH" backtest --trace "$trace" --json --jobs 1 > "$work/one.json"
  read -r wall user sys rss < "$work/time"
  echo "one promtool run (--jobs 1): $wall s wall, $(python3 -c "print(round($user + $sys, 1))") s CPU, peak RSS $((rss / 1024)) MiB"
  python3 - "$work/one.json" "$work/run1.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
same = a["episodes"] == b["episodes"] and a["rule_sets"] == b["rule_sets"]
print("episodes the same as one run:", "yes" if same else "NO")
sys.exit(0 if same else 1)
PY
fi
