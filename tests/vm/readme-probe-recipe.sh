#!/usr/bin/env bash
# Takes the README's probe recipe out of the README, so that the systemd guest runs what the
# README says, and fails when the README changes in a way that breaks it:
#
#   tests/vm/readme-probe-recipe.sh README.md OUT_DIR
#
# The recipe is the three fenced blocks after "until you name a probe target", before the next
# heading: the setup commands, the config excerpt (YAML), the commands run afterwards. It writes
#   OUT_DIR/setup.sh     the first block's lines, as written
#   OUT_DIR/dropin.conf  what the `systemctl edit` line's comment says to type into the editor
#   OUT_DIR/targets.yaml the list items under `targets:` of the config excerpt, as written
#   OUT_DIR/target.txt   the first target's path
#   OUT_DIR/after.sh     the third block's lines, as written
# Exit status 0, or 1 with a message naming what it could not find.
set -euo pipefail
README="${1:?usage: readme-probe-recipe.sh README OUT_DIR}"
OUT="${2:?usage: readme-probe-recipe.sh README OUT_DIR}"
die() {
  echo "readme-probe-recipe: $README: $*" >&2
  exit 1
}
[ -r "$README" ] || die "cannot read it"
mkdir -p "$OUT"
rm -f "$OUT"/block-*

# Block N (1-based) goes to OUT/block-N; its fence's info string to OUT/block-N.lang.
awk -v out="$OUT" '
  !start && /until you name a probe target/ { start = 1; next }
  !start { next }
  !fence && /^## / { exit }
  /^```/ {
    if (!fence) { n++; fence = 1; lang = substr($0, 4); printf "%s\n", lang > (out "/block-" n ".lang"); printf "" > (out "/block-" n) }
    else { fence = 0 }
    next
  }
  fence { print > (out "/block-" n) }
' "$README"

[ -f "$OUT/block-1" ] || die "no code block after \"until you name a probe target\""
[ -f "$OUT/block-3" ] || die "fewer than three code blocks in the probe recipe (setup, config, then the commands)"
[ "$(cat "$OUT/block-2.lang")" = yaml ] || die "the recipe's second block is not the yaml config excerpt"

cp "$OUT/block-1" "$OUT/setup.sh"
cp "$OUT/block-3" "$OUT/after.sh"

# `systemctl edit UNIT   # [Section]  Key=value`: the comment is what the operator types.
edit=$(grep -E '^systemctl edit [^ ]+ +# *\[[A-Za-z]+\]' "$OUT/setup.sh" | head -n 1) \
  || die "the recipe's first block has no \"systemctl edit UNIT  # [Section]  Key=value\" line"
comment=${edit#*#}
section=$(sed -E 's/^ *(\[[A-Za-z]+\]).*/\1/' <<<"$comment")
directive=$(sed -E 's/^ *\[[A-Za-z]+\] *//; s/ *$//' <<<"$comment")
[ -n "$directive" ] || die "the systemctl edit line's comment names no directive: $edit"
printf '%s\n%s\n' "$section" "$directive" > "$OUT/dropin.conf"

awk '
  /^ *targets: *$/ { t = 1; next }
  t && /^ *- / { print; next }
  t && /^ {8,}[^ -]/ { print; next }
  t { t = 0 }
' "$OUT/block-2" > "$OUT/targets.yaml"
[ -s "$OUT/targets.yaml" ] || die "the recipe's yaml block lists no probe target under targets:"
sed -nE '1s/^ *- *path: *([^ #]+).*/\1/p' "$OUT/targets.yaml" > "$OUT/target.txt"
[ -s "$OUT/target.txt" ] || die "the recipe's first target has no \"- path: DIR\": $(head -n 1 "$OUT/targets.yaml")"
rm -f "$OUT"/block-*
