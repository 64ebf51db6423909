# The curve this model's drive gives in the degradation guest, drawn by tests/vm/plot_curve.py
# without booting the guest: a small results directory in the guest's layout (scrapes.txt and
# one exposition per step) with the figures of the run docs/testing.md shows, plotted through
# the script's command line as tests/vm_degrade.rs calls it. Here so that tests/run.sh's
# `python3 -m unittest discover -s tests/vm/ftl` runs it.
import importlib.util
import os
import struct
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plot_curve.py")
spec = importlib.util.spec_from_file_location("plot_curve", SCRIPT)
plot_curve = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plot_curve)

try:
    import matplotlib.colors
    import matplotlib.image
    import numpy
    HAVE_MPL = True
except ImportError:
    HAVE_MPL = False
# tests/run.sh installs python3-matplotlib and sets this as root: nothing may be skipped.
STRICT = bool(os.environ.get("SSDWATCH_TESTS_STRICT"))

# (step, fill ratio, sync_write_4k p50 seconds): docs/testing.md's run, rounded as shown there.
RUN = [
    ("empty", 0.04, 0.67e-3),
    ("fill20", 0.21, 0.59e-3),
    ("fill40", 0.40, 0.64e-3),
    ("fill60", 0.61, 0.71e-3),
    ("fill80", 0.80, 2.32e-3),
    ("fill90", 0.90, 12.5e-3),
    ("fill95", 0.96, 20.8e-3),
    ("deleted", 0.04, 23.9e-3),
    ("idle", 0.04, 10.9e-3),
    ("trimmed", 0.04, 0.77e-3),
    ("trimmed2", 0.04, 0.70e-3),
]


def exposition(fill, p50):
    """The lines the script reads, among others it must pass over: another mount point's
    series and the other quantiles and probes."""
    lat = "ssdwatch_probe_last_latency_seconds"
    ftl = 'mountpoint="/mnt/ftl"'
    return "\n".join([
        "# TYPE ssdwatch_probe_context_fill_ratio gauge",
        'ssdwatch_probe_context_fill_ratio{mountpoint="/"} 0.5',
        f"ssdwatch_probe_context_fill_ratio{{{ftl}}} {fill}",
        f"# TYPE {lat} gauge",
        f'{lat}{{mountpoint="/",probe="sync_write_4k",quantile="0.5"}} 0.5',
        f'{lat}{{{ftl},probe="rand_read_4k",quantile="0.5"}} {p50 / 9}',
        f'{lat}{{{ftl},probe="sync_write_4k",quantile="0.5"}} {p50}',
        f'{lat}{{{ftl},probe="sync_write_4k",quantile="0.99"}} {p50 * 3}',
        "",
    ])


def results(d, run=RUN, without_probe=()):
    """Writes the guest's results layout into `d`: scrape-NN-STEP.prom and scrapes.txt."""
    with open(os.path.join(d, "scrapes.txt"), "w") as index:
        for n, (step, fill, p50) in enumerate(run, 1):
            name = f"scrape-{n:02d}-{step}.prom"
            text = exposition(fill, p50)
            if step in without_probe:
                text = "\n".join(x for x in text.splitlines() if "latency" not in x)
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
            index.write(f"{name} {1_700_000_000 + 10 * n} {100 + 10 * n}.00\n")


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise AssertionError(f"{path} is not a PNG: {head!r}")
    return struct.unpack(">II", head[16:24])


class TheScrapesGiveThePoints(unittest.TestCase):
    def test_each_step_in_order_with_fill_in_percent_and_p50_in_ms_without_trimmed2(self):
        with tempfile.TemporaryDirectory() as d:
            results(d, without_probe=("fill40",))
            pts = plot_curve.points(d)
        self.assertEqual([s for s, _, _ in pts],
                         ["empty", "fill20", "fill60", "fill80", "fill90", "fill95", "deleted",
                          "idle", "trimmed"])
        step = {s: (f, ms) for s, f, ms in pts}
        self.assertAlmostEqual(step["fill95"][0], 96.0)
        self.assertAlmostEqual(step["fill95"][1], 20.8)
        self.assertAlmostEqual(step["deleted"][1], 23.9)


class TheCurveIsDrawn(unittest.TestCase):
    def setUp(self):
        if not HAVE_MPL:
            why = "no matplotlib (Debian: python3-matplotlib)"
            if STRICT:
                self.fail(f"{why}, and SSDWATCH_TESTS_STRICT is set: nothing may be skipped")
            self.skipTest(why)

    def test_a_png_of_sane_size_where_latency_rises_with_fill_and_fstrim_brings_it_back(self):
        with tempfile.TemporaryDirectory() as d:
            results(d)
            out = os.path.join(d, "curve.png")
            run = subprocess.run([sys.executable, SCRIPT, d, out], capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, run.stderr)
            w, h = png_size(out)
            self.assertTrue(600 <= w <= 2000 and 300 <= h <= 1200 and w > h, (w, h))
            img = matplotlib.image.imread(out)
        self.assertEqual(img.shape[:2], (h, w))

        # The chart's frame: the columns of its left and right spines, the only black lines
        # taller than a third of the picture. The legend, with a mark of each colour, is outside.
        black = (img[:, :, :3] < 0.05).all(axis=2)
        spines = (black.sum(axis=0) > h / 3).nonzero()[0]
        self.assertGreater(len(spines), 1, "no chart frame")
        left, right = spines.min(), spines.max()
        self.assertGreater(right - left, w / 2, (left, right))

        def where(colour):
            """(x, y) of the pixels of one mark colour inside the frame."""
            rgb = numpy.array(matplotlib.colors.to_rgb(colour))
            near = (abs(img[:, left:right, :3] - rgb) < 0.02).all(axis=2)
            ys, xs = near.nonzero()
            self.assertTrue(len(xs), f"no {colour} pixel in the chart")
            return xs, ys

        # The filling line: its highest point is its rightmost part (rows grow downwards).
        xs, ys = where(plot_curve.FILLING)
        self.assertGreater(xs[ys == ys.min()].min(), xs.max() - 40)
        # Deleted highest, idle lower, fstrim at the bottom, as the figures say.
        red, orange, green = (where(c)[1].mean() for _, _, c in plot_curve.AFTER)
        self.assertLess(red, orange)
        self.assertLess(orange, green)


if __name__ == "__main__":
    unittest.main()
