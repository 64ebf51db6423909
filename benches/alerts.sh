#!/usr/bin/env bash
# The alert-quality benchmark (docs/alerts-benchmark.md): fill traces a DBA knows, each replayed by
# `ssdwatch backtest` through the daemon's forecast and, side by side, through the shipped rules
# and the node-mixin's filesystem alerts (benches/alerts/node-mixin.filesystem.alerts.yml), both
# evaluated by Prometheus' own engine (its query engine, as `ssdwatch backtest` does by default). Writes the table into docs/alerts-benchmark.md.
#
#   benches/alerts.sh            the whole benchmark (a quarter of an hour or more on 2 cores)
#   SHORT=1 benches/alerts.sh    three small traces, the table on stdout only (CI)
#   SSDWATCH=path                a built binary instead of `cargo build --release`
#   JOBS=n                       traces replayed at once (default 2)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v promtool >/dev/null || { echo "promtool not found: apt-get install prometheus" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 not found" >&2; exit 2; }
if [ -z "${SSDWATCH:-}" ]; then
  cargo build --release --quiet
  SSDWATCH="${CARGO_TARGET_DIR:-target}/release/ssdwatch"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
short=()
[ -n "${SHORT:-}" ] && short=(--short)
python3 benches/alerts/traces.py "$work/traces" "${short[@]}" > "$work/traces.tsv"
mkdir -p "$work/results"
export SSDWATCH work
# One backtest per trace, both rule sets in one run (alert names tell them apart).
run_one() {
  IFS=$'\t' read -r name path eval _story <<< "$1"
  local t0
  t0=$(date +%s%N)
  "$SSDWATCH" backtest --trace "$path" --eval-interval "$eval" --json \
    --rules shipped --rules benches/alerts/node-mixin.filesystem.alerts.yml \
    > "$work/results/$name.json"
  echo "$name: $(( ($(date +%s%N) - t0) / 1000000 )) ms" >&2
}
export -f run_one
tr '\n' '\0' < "$work/traces.tsv" | xargs -0 -P "${JOBS:-2}" -I{} bash -c 'run_one "$@"' _ {}
table=$(python3 benches/alerts/table.py "$work/results" < "$work/traces.tsv")
if [ -n "${SHORT:-}" ]; then
  echo "$table"
  exit 0
fi
doc=docs/alerts-benchmark.md
python3 - "$doc" "$table" <<'PY'
import sys
doc, table = sys.argv[1], sys.argv[2]
text = open(doc).read()
begin, end = "<!-- table:begin -->", "<!-- table:end -->"
a, b = text.index(begin) + len(begin), text.index(end)
open(doc, "w").write(text[:a] + "\n" + table + "\n" + text[b:])
PY
echo "table written to $doc"
