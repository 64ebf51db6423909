#!/usr/bin/env python3
# Draws the latency-vs-fill curve of one run of the degradation guest (tests/vm/degrade.sh) as a
# PNG with matplotlib (Debian's python3-matplotlib, installed by tests/run.sh): the write probe's
# p50 (the daemon's ssdwatch_probe_last_latency_seconds) at each fill step, then after the
# delete, the idle period and fstrim. It reads the run's scrapes only; it judges nothing (the
# checks are tests/vm_degrade.rs's).
#
#   tests/vm/plot_curve.py RESULTS_DIR OUT.png
import os
import re
import sys

MOUNTPOINT = "/mnt/ftl"
# The steps after the fill, each its own mark: (step, legend, colour). Colours are matplotlib's
# default cycle (tab10), as the filling line is.
AFTER = [
    ("deleted", "after delete", "tab:red"),
    ("idle", "after 20 s idle", "tab:orange"),
    ("trimmed", "first run after fstrim", "tab:green"),
]
FILLING = "tab:blue"


def series(text, family, *parts):
    """The value of the first sample of `family` whose line holds every one of `parts`."""
    for line in text.splitlines():
        if line.startswith(family + "{") and all(p in line for p in parts):
            return float(line.rsplit(" ", 1)[1])
    return None


def points(results):
    """(step, fill %, p50 ms) of every scrape in scrapes.txt ("FILE UNIX_TIME UPTIME") that has
    both series, in the order taken. The second scrape after fstrim (trimmed2) is left out: it
    only shows that the first one was no accident."""
    out = []
    with open(os.path.join(results, "scrapes.txt")) as f:
        names = [line.split()[0] for line in f if line.strip()]
    for name in names:
        with open(os.path.join(results, name)) as f:
            text = f.read()
        step = re.sub(r"^scrape-\d+-|\.prom$", "", name)
        p50 = series(text, "ssdwatch_probe_last_latency_seconds",
                     'probe="sync_write_4k"', 'quantile="0.5"', f'mountpoint="{MOUNTPOINT}"')
        fill = series(text, "ssdwatch_probe_context_fill_ratio", f'mountpoint="{MOUNTPOINT}"')
        if step != "trimmed2" and p50 is not None and fill is not None:
            out.append((step, 100 * fill, 1e3 * p50))
    return out


def draw(pts, out):
    # No display on a test machine; imported here so points() needs no matplotlib.
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.8), dpi=100, layout="constrained")
    filling = [p for p in pts if p[0] == "empty" or p[0].startswith("fill")]
    ax.plot([f for _, f, _ in filling], [ms for _, _, ms in filling], "-s", color=FILLING,
            markersize=6, linewidth=2, label="filling (empty, then 20 … 95 %)")
    for step, label, colour in AFTER:
        mine = [p for p in pts if p[0] == step]
        ax.plot([f for _, f, _ in mine], [ms for _, _, ms in mine], "s", color=colour,
                markersize=8, label=label)
    ax.set_xlim(0, 100)
    ax.set_ylim(0, max((ms for _, _, ms in pts), default=1.0) * 1.1)
    ax.set_xticks(range(0, 101, 10))
    ax.grid(True, color="0.85")
    ax.set_xlabel("filesystem fill (%)")
    ax.set_ylabel("sync_write_4k p50 (ms)")
    ax.set_title("sync_write_4k p50 vs fill: ssdwatch on the simulated SSD")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, frameon=False)
    # Every point's figures beside the chart: the after-steps share one fill and overlap.
    rows = [f"{s[:8]:<8} {f:3.0f} % {ms:6.2f} ms" for s, f, ms in pts]
    ax.text(1.02, 0.70, "\n".join(rows), transform=ax.transAxes, va="top", ha="left",
            family="monospace", fontsize=9)
    # No software version in the file: the same scrapes give the same bytes.
    fig.savefig(out, metadata={"Software": None})
    plt.close(fig)


def main(results, out):
    pts = points(results)
    if not pts:
        sys.exit(f"{results}/scrapes.txt: no scrape has both the sync_write_4k p50 and the fill "
                 f"of {MOUNTPOINT}")
    draw(pts, out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} RESULTS_DIR OUT.png")
    main(sys.argv[1], sys.argv[2])
