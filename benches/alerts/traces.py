#!/usr/bin/env python3
"""The alert benchmark's fill traces (benches/alerts.sh): CSV files of
`unix_seconds,size_bytes,avail_bytes` for `ssdwatch backtest`, each a story a DBA knows.
Deterministic (no randomness): the same table from every clean clone.

usage: traces.py OUT_DIR [--short | --speed]   prints one line per trace: name, file, eval interval, story
       (--speed: the one trace benches/backtest_speed.sh times, 6 months at 1 minute; with
       --short too, its first 2 days)
"""
import math
import os
import sys

TB = 10**12
GB = 10**9
SIZE = TB
DAY = 86400
HOUR = 3600
# Monday 2026-01-05 00:00 UTC: weekdays fall where the stories say.
T0 = 1767571200


def write(out, name, step, days, used_at, eval_interval, story):
    """Samples every `step` s for `days` days (stopping a few hours after the volume is full);
    used_at(seconds since T0) -> used bytes."""
    path = os.path.join(out, name + ".csv")
    full = None
    end = int(days * DAY)
    with open(path, "w") as f:
        f.write("unix_seconds,size_bytes,avail_bytes\n")
        t = 0
        while t <= end:
            used = min(SIZE, max(0, int(used_at(t))))
            f.write(f"{T0 + t},{SIZE},{SIZE - used}\n")
            if used >= SIZE and full is None:
                full = t
            if full is not None and t - full >= 2 * HOUR:
                break
            t += step
    print(f"{name}\t{path}\t{eval_interval}\t{story}")


def frac(x):
    return x * SIZE


def weekly_dump(base, peak):
    # Every Sunday 01:00-03:00 a dump is written; it is shipped off and deleted Monday 01:00.
    def used(t):
        day = t // DAY  # day 0 is a Monday
        into = t % DAY
        dow = day % 7
        if dow == 6 and into >= HOUR:  # Sunday
            return frac(base) + frac(peak - base) * min(1.0, (into - HOUR) / (2 * HOUR))
        if dow == 0 and into < HOUR and day > 0:  # Monday before 01:00
            return frac(peak)
        return frac(base)
    return used


def main():
    out = sys.argv[1]
    short = "--short" in sys.argv[2:]
    os.makedirs(out, exist_ok=True)
    m5 = 300
    if "--speed" in sys.argv[2:]:
        # The yardstick: 6 months of 1-minute samples (262,080 rows), the monthly
        # partition sawtooth (it never fills, so the whole trace is evaluated).
        write(out, "partition-drop-6months-1m", 60, 2 if short else 182 - 1 / 1440,
              lambda t: frac(0.60) + 20 * GB * (t // (30 * DAY)) + 150 * GB * ((t % (30 * DAY)) / (30 * DAY)), "1m",
              "partitions: 150 GB a month, the oldest month dropped on the 30th: 6 months at 1 minute")
        return
    if short:
        # The CI form: small traces that still fill, or don't, through the whole pipeline.
        write(out, "runaway-minutes", 60, 3, lambda t: frac(0.60) if t < 2 * DAY else frac(0.60) + 1 * GB * (t - 2 * DAY), "1m",
              "flat at 60 % for 2 days, then a runaway bulk write of 1 GB/s: full in under 7 minutes")
        write(out, "wal-runaway", m5, 4, lambda t: frac(0.55) if t < 3 * DAY else frac(0.55) + 40 * GB * (t - 3 * DAY) / HOUR, "1m",
              "flat at 55 % for 3 days, then WAL piling up at 40 GB/h: full in ~11 h")
        write(out, "daily-checkpoint", m5, 3, lambda t: frac(0.70) + 20 * GB * ((t % DAY) / DAY), "1m",
              "flat at 70 % with a daily 20 GB checkpoint/WAL sawtooth: never full")
        return
    write(out, "steady-growth", m5, 51, lambda t: frac(0.50) + 10 * GB * t / DAY, "1m",
          "10 GB/day on 1 TB from half full: full in 50 days")
    write(out, "wal-runaway", m5, 22, lambda t: frac(0.55) if t < 21 * DAY else frac(0.55) + 40 * GB * (t - 21 * DAY) / HOUR, "1m",
          "flat at 55 % for 3 weeks, then WAL piling up at 40 GB/h: full in ~11 h")
    write(out, "weekly-dump-85", m5, 56, weekly_dump(0.70, 0.85), "1m",
          "a weekly dump: 70 % to 85 % every Sunday for a day, for 8 weeks: never full")
    write(out, "weekly-dump-94", m5, 56, weekly_dump(0.79, 0.94), "1m",
          "the same dump peaking at 94 %: never full")
    write(out, "bulk-load", m5, 30, lambda t: frac(0.40) + (0 if t < 10 * DAY else min(300 * GB, 100 * GB * (t - 10 * DAY) / HOUR)), "1m",
          "flat at 40 %, a 300 GB bulk load over 3 h on day 10, then flat: never full")
    write(out, "log-rotation", m5, 60, lambda t: frac(0.60) + 1 * GB * t / DAY + 30 * GB * ((t % DAY) / DAY), "1m",
          "logs growing 30 GB a day, rotated at midnight, over 1 GB/day of growth from 60 %: never full in 60 days")
    write(out, "delete-then-growth", m5, 48,
          lambda t: frac(0.80) + 5 * GB * t / DAY if t < 20 * DAY else frac(0.80) + 100 * GB - 300 * GB + 15 * GB * (t - 20 * DAY) / DAY, "1m",
          "80 % growing 5 GB/day, a 300 GB delete on day 20, then 15 GB/day: full ~27 days later")
    write(out, "monthly-partition-drop", m5, 180,
          lambda t: frac(0.60) + 20 * GB * (t // (30 * DAY)) + 150 * GB * ((t % (30 * DAY)) / (30 * DAY)), "1m",
          "partitions: 150 GB a month, the oldest month dropped on the 30th, the floor rising 20 GB a month from 60 %: never full in 6 months")
    write(out, "daily-checkpoint", m5, 30, lambda t: frac(0.70) + 20 * GB * ((t % DAY) / DAY), "1m",
          "flat at 70 % with a daily 20 GB checkpoint/WAL sawtooth: never full")
    write(out, "slow-leak", m5, 91, lambda t: frac(0.70) + 300 * GB * t / (90 * DAY), "1m",
          "a leak of 3.3 GB/day from 70 %: full in 90 days")
    write(out, "runaway-minutes", 60, 7, lambda t: frac(0.60) if t < 6 * DAY else frac(0.60) + 1 * GB * (t - 6 * DAY), "1m",
          "flat at 60 % for 6 days, then a runaway bulk write of 1 GB/s: full in under 7 minutes")


if __name__ == "__main__":
    main()
