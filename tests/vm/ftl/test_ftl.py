# Unit tests of the simulated SSD's model (tests/vm/ftl/ftl.py), the claims of docs/ftl-model.md:
# write latency rises with fill on a drive in steady state, TRIM brings it back, idle time brings
# part of it back, and the data survives all of it. Run: python3 -m unittest discover tests/vm/ftl
import os
import random
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ftl import PAGE, Ftl  # noqa: E402

MIB = 1 << 20


class Clock:
    """A clock the test moves: idle time without waiting for it."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def drive(size=16 * MIB, **kw):
    clock = Clock()
    return Ftl(size, clock=clock, **kw), clock


def steady_state(f, clock, fill, rnd, passes=3):
    """Writes the first `fill` of the drive sequentially, then overwrites random pages of it
    `passes` times its size over (a database's update workload), so every block has been
    through garbage collection."""
    pages = int(f.logical_pages * fill)
    for lpn in range(0, pages, 64):
        f.write(lpn * PAGE, bytes(PAGE * min(64, pages - lpn)))
    for _ in range(passes * pages):
        f.write(rnd.randrange(pages) * PAGE, bytes(PAGE))
        clock.t += 1e-4  # never idle
    return pages


def write_latency(f, clock, pages, rnd, n=400):
    """Mean seconds of a 4 KiB write at a random page among the first `pages`."""
    total = 0.0
    for _ in range(n):
        total += f.write(rnd.randrange(pages) * PAGE, bytes(PAGE))
        clock.t += 1e-4
    return total / n


class LatencyFollowsTheDrivesState(unittest.TestCase):
    def test_an_empty_drive_writes_at_program_time(self):
        f, clock = drive()
        self.assertAlmostEqual(write_latency(f, clock, f.logical_pages, random.Random(1)), f.t_prog)

    def test_write_latency_rises_with_fill_of_randomly_overwritten_data(self):
        lat = {}
        for pct in (20, 40, 60, 80, 90, 95):
            f, clock = drive()
            rnd = random.Random(pct)
            pages = steady_state(f, clock, pct / 100, rnd)
            lat[pct] = write_latency(f, clock, pages, rnd)
        shown = {k: f"{v * 1e3:.3f} ms" for k, v in lat.items()}
        # Flat while at least 30 % of the flash is free of live data...
        self.assertLess(lat[20], 1.5 * 100e-6, shown)
        # ...then rising with every step, to at least five times that.
        steps = sorted(lat)
        for a, b in zip(steps, steps[1:]):
            self.assertGreaterEqual(lat[b], lat[a] * 0.95, shown)
        self.assertGreaterEqual(lat[90], 5 * lat[20], shown)
        self.assertGreaterEqual(lat[95], lat[90], shown)

    def test_the_spec_ends_point_to_point_one_and_twenty_ms(self):
        # GC cost per page for a victim with one free page (the drive all but full) and for an
        # empty one: the ends of the curve.
        f, _ = drive()
        full = f.t_prog + (f.t_reloc * (f.n - 1) + f.t_erase)
        self.assertGreater(full, 15e-3)
        self.assertLess(full, 25e-3)
        self.assertAlmostEqual(f.page_write_cost(), 0.1e-3)

    def test_a_trim_of_everything_brings_back_the_empty_drives_latency(self):
        f, clock = drive()
        rnd = random.Random(7)
        pages = steady_state(f, clock, 0.9, rnd)
        slow = write_latency(f, clock, pages, rnd)
        f.trim(0, f.size)
        self.assertEqual(f.live_pages(), 0)
        after = write_latency(f, clock, pages, rnd)
        self.assertGreater(slow, 5 * f.t_prog)
        # The blocks it emptied are erased at once (nothing to relocate): back to program time.
        self.assertLess(after, 1.1 * f.t_prog, f"{after * 1e3:.3f} ms after the trim")

    def test_a_delete_without_trim_changes_nothing(self):
        # The filesystem forgetting its blocks is invisible to the drive: only the next writes
        # (the daemon's probes) tell, and they are as slow as before.
        f, clock = drive()
        rnd = random.Random(8)
        pages = steady_state(f, clock, 0.9, rnd)
        live = f.live_pages()
        slow = write_latency(f, clock, 256, rnd)
        self.assertEqual(f.live_pages(), live)
        self.assertGreater(slow, 5 * f.t_prog)

    def test_idle_time_brings_part_of_the_speed_back(self):
        f, clock = drive(64 * MIB, idle_after=5.0, bg_pages_per_s=300.0)
        rnd = random.Random(9)
        pages = steady_state(f, clock, 0.9, rnd)
        slow = write_latency(f, clock, pages, rnd, n=64)
        clean_before = len(f.clean)
        clock.t += 5.0 + 10.0  # ten seconds of background GC
        rested = write_latency(f, clock, pages, rnd, n=64)
        self.assertGreater(len(f.clean), clean_before)
        # Faster than before the rest, slower than a trimmed drive: the live data leaves GC
        # nothing cheap to collect, and ten seconds are not enough to refill the whole pool.
        self.assertLess(rested, 0.8 * slow, (rested, slow))
        self.assertGreater(rested, 1.5 * f.t_prog, (rested, slow))

    def test_no_background_gc_before_the_idle_threshold(self):
        f, clock = drive(idle_after=5.0)
        rnd = random.Random(10)
        pages = steady_state(f, clock, 0.9, rnd)
        clean = len(f.clean)
        clock.t += 4.9
        f.read(0, PAGE)
        self.assertEqual(len(f.clean), clean)

    def test_reads_are_cheap_and_flat(self):
        f, clock = drive()
        rnd = random.Random(11)
        _, empty = f.read(0, PAGE)
        steady_state(f, clock, 0.95, rnd)
        _, full = f.read(0, PAGE)
        self.assertEqual(empty, full)
        self.assertLess(full, f.t_prog)


class DataIsStoredForReal(unittest.TestCase):
    def test_random_writes_trims_and_zeroes_read_back_as_a_plain_buffer_would(self):
        size = 4 * MIB
        f, clock = drive(size, op=0.05, pages_per_block=16)
        shadow = bytearray(size)
        rnd = random.Random(12)
        for i in range(3000):
            off = rnd.randrange(size - 1)
            n = rnd.randrange(1, min(3 * PAGE, size - off) + 1)
            op = rnd.random()
            if op < 0.7:
                buf = rnd.randbytes(n)
                f.write(off, buf)
                shadow[off:off + n] = buf
            elif op < 0.85:
                # A discard of whole pages reads back as zeros; partial pages keep their data.
                f.trim(off, n)
                first, end = -(-off // PAGE), (off + n) // PAGE
                if end > first:
                    shadow[first * PAGE:end * PAGE] = bytes((end - first) * PAGE)
            else:
                f.zero(off, n)
                shadow[off:off + n] = bytes(n)
            if i % 500 == 0:
                clock.t += 30.0  # let background GC move pages too
        data, _ = f.read(0, size)
        self.assertEqual(data, bytes(shadow))
        self.assertGreater(f.relocated, 0, "GC never moved a page: the test proves little")
        # The map is consistent: every live logical page is where its physical page says.
        for lpn, ppn in enumerate(f.l2p):
            if ppn >= 0:
                self.assertEqual(f.p2l[ppn], lpn)
        self.assertEqual(sum(f.live), f.live_pages())

    def test_write_zeroes_frees_the_whole_pages_and_writes_the_ends(self):
        f, _ = drive(MIB)
        f.write(0, b"\xff" * (8 * PAGE))
        f.zero(PAGE // 2, 4 * PAGE)  # half a page, three whole pages, half a page
        self.assertEqual(f.live_pages(), 8 - 3)
        data, _ = f.read(0, 8 * PAGE)
        self.assertEqual(data, b"\xff" * (PAGE // 2) + bytes(4 * PAGE) + b"\xff" * (3 * PAGE + PAGE // 2))

    def test_io_beyond_the_end_is_refused(self):
        f, _ = drive(MIB)
        with self.assertRaises(ValueError):
            f.write(MIB - 10, bytes(20))


if __name__ == "__main__":
    unittest.main()
