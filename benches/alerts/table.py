#!/usr/bin/env python3
"""Renders the alert benchmark's table (docs/alerts-benchmark.md) from `ssdwatch backtest
--json` outputs: one row per trace and rule set. Reads the lines traces.py printed (name, file,
eval interval, story) on stdin and RESULTS_DIR/<name>.json.

usage: table.py RESULTS_DIR < traces.tsv
"""
import json
import os
import sys


def dur(s):
    if s is None:
        return "—"
    sign = "-" if s < 0 else ""
    s = abs(s)
    d, h, m = s // 86400, s % 86400 // 3600, s % 3600 // 60
    if d:
        return f"{sign}{d}d {h}h"
    if h:
        return f"{sign}{h}h {m}m"
    return f"{sign}{m}m"


def daily(r):
    """The daemon's first forecast pass of each UTC day before the trace fills: (days its date
    was given, of which within 10 % of the time then left, of which its band held the full
    instant)."""
    full = r["full_at"]
    seen, dated, close, covered = set(), 0, 0, 0
    for p in r["forecast"]:
        t = p["t"]
        if full is None or t >= full or t // 86400 in seen:
            continue
        seen.add(t // 86400)
        if p["predicted_full"] is None:
            continue
        dated += 1
        if abs(p["predicted_full"] - full) <= 0.1 * (full - t):
            close += 1
        if p["earliest"] is not None and p["earliest"] <= full and (p["latest"] is None or full <= p["latest"]):
            covered += 1
    return dated, close, covered


def main():
    results = sys.argv[1]
    rows = []
    stories = []
    totals = [0, 0, 0]
    for line in sys.stdin:
        name, _path, eval_interval, story = line.rstrip("\n").split("\t")
        with open(os.path.join(results, name + ".json")) as f:
            r = json.load(f)
        stories.append(f"- **{name}**: {story} ({r['samples']} samples every {r['interval_seconds']} s, rules evaluated every {r['eval_interval_seconds']} s)")
        fills = r["full_at"] is not None
        dates = {c["days_before"]: c for c in r["date_checks"]}
        derr = " / ".join(
            (dur(dates[d]["error_seconds"]) if dates[d]["error_seconds"] is not None else "no date") if d in dates else "—"
            for d in (7, 3, 1)) if fills else "—"
        dated, close, covered = daily(r)
        for k, v in enumerate((dated, close, covered)):
            totals[k] += v
        days = f"{dated} / {close} / {covered}" if fills else "—"
        band = " / ".join(
            {True: "yes", False: "no", None: "no date"}[dates[d]["band_covers"]] if d in dates else "—"
            for d in (7, 3, 1)) if fills else "—"
        for i, rs in enumerate(r["rule_sets"]):
            by = {s["severity"]: s for s in rs["summary"]}
            def lead(sev):
                s = by.get(sev)
                if not fills:
                    return "—"
                if s is None or s["lead_seconds"] is None:
                    return "**missed**"
                return dur(s["lead_seconds"])
            def n(sev, key):
                s = by.get(sev)
                return str(s[key]) if s else "0"
            rows.append("| {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} |".format(
                name if i == 0 else "",
                ("yes" if fills else "no") if i == 0 else "",
                "ssdwatch (shipped)" if rs["rules"].startswith("shipped") else
                ("node-mixin" if "node-mixin" in rs["rules"] else os.path.basename(rs["rules"])),
                lead("warning"), lead("critical"),
                n("warning", "episodes"), n("critical", "episodes"),
                n("warning", "false_alarms"), n("critical", "false_alarms"),
                derr if i == 0 else "", band if i == 0 else "", days if i == 0 else ""))
    print("| trace | fills | rules | warning lead | critical lead | warning episodes | critical episodes | false alarms (w / c) | daemon date error 7 / 3 / 1 d before full | band covers the full instant 7 / 3 / 1 d | days before full: dated / within 10 % / band covers |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)
    print()
    dated, close, covered = totals
    if dated:
        print(f"Over every (trace, day) pair before full where the daemon gave a date (its first pass of the day): "
              f"{dated} pairs; the date within 10 % of the time left in {close} ({100 * close / dated:.0f} %); "
              f"the band holding the full instant in {covered} ({100 * covered / dated:.0f} %).")
        print()
    for s in stories:
        print(s)


if __name__ == "__main__":
    main()
