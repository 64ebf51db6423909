#!/usr/bin/env bash
# Mutation fuzzing of the parsers of outside input (smartctl JSON, mountinfo, /sys block stat,
# the config YAML, dmsetup table/status, zpool/zfs list, the btrfs and md /sys trees, PostgreSQL's
# slot state, pg_control, postmaster.pid and pg_wal names, MySQL option and binlog index files,
# server command lines), each for
# SECONDS_PER_PARSER of wall time, through tests/it/fuzz.rs built with
# the release profile. Prints one line of figures per parser: cases run, cases the parser
# accepted, panics, the slowest case, and the seed that replays the run (FUZZ_SEED=...).
#   benches/fuzz.sh                 600 s per parser (80 minutes in all)
#   benches/fuzz.sh 120             120 s per parser
#   FUZZ_ONLY=pg_control,postmaster_pid benches/fuzz.sh 300   those parsers only (names: tests/it/fuzz.rs)
# Inputs that made a parser panic are saved under FUZZ_CRASH_DIR (default target/fuzz-crashes);
# exit status 1 when there is any. The test suite runs the same harness for 2 s per parser.
set -euo pipefail

seconds=${1:-600}
if ! [[ "$seconds" =~ ^[0-9]+([.][0-9]+)?$ ]]; then
  echo "usage: $0 [SECONDS_PER_PARSER]  (got \"$seconds\")" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
export FUZZ_SECONDS=$seconds
export FUZZ_CRASH_DIR=${FUZZ_CRASH_DIR:-$root/target/fuzz-crashes}
mkdir -p "$FUZZ_CRASH_DIR"
cd "$root"
cargo test --release --quiet --test it --no-run
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --release --quiet --test it -- --exact fuzz::no_parser_panics_on_mutations_of_real_inputs \
  >"$log" 2>&1 || status=$?
grep '^FUZZ ' "$log" || true
if [[ $status -ne 0 ]]; then
  cat "$log" >&2
  echo "crashing inputs: $FUZZ_CRASH_DIR" >&2
  exit 1
fi
