# A simulated SSD for the degradation scenario: a page-mapped flash translation layer whose
# write latency comes from the garbage collection its state forces, served as an nbdkit Python
# plugin (API version 2). It stores the data for real (a filesystem lives on it); it must not
# pretend to be a benchmark of any real drive. The spec is docs/ftl-model.md.
#
#   nbdkit --unix SOCK python tests/vm/ftl/ftl.py size=128M op=0.07 ...
#
# Ftl is the model alone (no nbdkit, no sleeping): tests/vm/ftl/test_ftl.py drives it directly.

import builtins
import time

PAGE = 4096


class Ftl:
    """Page-level map from logical to physical pages, blocks of `pages_per_block` pages, a pool
    of clean (erased) blocks that writes consume, greedy garbage collection.

    Every method that does I/O returns the modelled service time in seconds; the caller decides
    whether to sleep it (the plugin does, the unit tests add it up)."""

    def __init__(self, size, op=0.07, pages_per_block=64, low_blocks=2, high_ratio=0.08,
                 t_prog=100e-6, t_reloc=250e-6, t_erase=2e-3, t_read=50e-6,
                 idle_after=5.0, bg_pages_per_s=20000.0, clock=time.monotonic):
        if size <= 0 or size % PAGE:
            raise ValueError(f"size {size} is not a positive multiple of {PAGE}")
        if not 0.0 < op <= 1.0:
            raise ValueError(f"op {op} outside (0, 1]")
        self.size = size
        self.logical_pages = size // PAGE
        self.n = pages_per_block
        physical = int(self.logical_pages * (1.0 + op))
        # Whole blocks, and never fewer than the logical space plus the GC reserve and the open
        # block: a drive whose live data can fill every block could not collect garbage at all.
        self.blocks = max(-(-physical // self.n), -(-self.logical_pages // self.n) + low_blocks + 2)
        self.low = low_blocks
        self.high = max(low_blocks + 1, int(self.blocks * high_ratio))
        self.t_prog, self.t_reloc, self.t_erase, self.t_read = t_prog, t_reloc, t_erase, t_read
        self.idle_after, self.bg_pages_per_s = idle_after, bg_pages_per_s
        self.clock = clock
        self.l2p = [-1] * self.logical_pages
        self.p2l = [-1] * (self.blocks * self.n)
        self.live = [0] * self.blocks
        self.full = set()  # blocks written to the end: the GC candidates
        self.clean = list(range(self.blocks - 1, 0, -1))  # a stack: pop() takes the lowest
        self.open, self.wp = 0, 0  # the block being programmed and its next page
        self.data = {}  # logical page -> 4096 bytes; absent: reads as zeros
        self.last_io = clock()
        # Counters, for tests and the plugin's log.
        self.host_pages = self.relocated = self.erased = 0
        # (idle seconds, pool before, pool after, pages moved) of every background GC run.
        self.idle_gc_runs = []

    # --- state ---------------------------------------------------------------------------

    def live_pages(self):
        return self.logical_pages - self.l2p.count(-1)

    def free_ratio(self):
        """Physical pages not holding live data, as a share of all physical pages."""
        return 1.0 - self.live_pages() / (self.blocks * self.n)

    def _victim(self):
        # Greedy: the full block with the fewest live pages.
        return min(self.full, key=self.live.__getitem__) if self.full else None

    def gc_cost(self):
        """Seconds of GC work per page freed, for the block GC would pick now: relocating its
        live pages and erasing it, spread over the pages that frees."""
        b = self._victim()
        v = min(self.live[b], self.n - 1) if b is not None else 0
        return (self.t_reloc * v + self.t_erase) / (self.n - v)

    def pressure(self):
        """0 while the clean pool is at or above its high watermark (GC keeps up in the
        background), 1 at the low watermark (every page written must be paid for now)."""
        c = len(self.clean)
        if c >= self.high:
            return 0.0
        return min(1.0, (self.high - c) / (self.high - self.low))

    def page_write_cost(self):
        p = self.pressure()
        return self.t_prog + (p * self.gc_cost() if p else 0.0)

    # --- flash operations ----------------------------------------------------------------

    def _invalidate(self, lpn):
        ppn = self.l2p[lpn]
        if ppn >= 0:
            self.p2l[ppn] = -1
            self.live[ppn // self.n] -= 1
            self.l2p[lpn] = -1

    def _program(self, lpn):
        """Puts lpn at the write pointer; opens a clean block when the open one is full."""
        if self.wp == self.n:
            self.full.add(self.open)
            self.open, self.wp = self.clean.pop(), 0
        ppn = self.open * self.n + self.wp
        self.wp += 1
        self.p2l[ppn] = lpn
        self.l2p[lpn] = ppn
        self.live[self.open] += 1

    def _collect(self):
        """One GC pass: relocates the victim's live pages, erases it. False when no block
        holds anything to reclaim."""
        b = self._victim()
        if b is None or self.live[b] == self.n:
            return False
        self.full.discard(b)
        base = b * self.n
        for ppn in range(base, base + self.n):
            lpn = self.p2l[ppn]
            if lpn >= 0:
                self.p2l[ppn] = -1
                self.live[b] -= 1
                self.relocated += 1
                self._program(lpn)
        self.clean.insert(0, b)  # erased blocks go to the bottom of the stack
        self.erased += 1
        return True

    def _write_page(self, lpn):
        self._invalidate(lpn)
        # Foreground GC keeps the pool at `low` blocks: a host page may then take one, and a
        # GC pass (which relocates at most a block's worth of pages) always has one to write to.
        while len(self.clean) <= self.low and self._collect():
            pass
        self._program(lpn)
        self.host_pages += 1

    def _idle_gc(self, now):
        """Background GC for the idle time since the last I/O: compaction at bg_pages_per_s
        page moves a second, until the pool reaches what the live data leaves room for."""
        idle = now - self.last_io - self.idle_after
        if idle <= 0:
            return
        budget = idle * self.bg_pages_per_s
        pool, moved = len(self.clean), self.relocated
        while budget > 0:
            b = self._victim()
            if b is None or self.live[b] == self.n:
                break
            budget -= self.live[b]
            self._collect()
        self.idle_gc_runs.append((now - self.last_io, pool, len(self.clean), self.relocated - moved))

    def _touch(self):
        now = self.clock()
        self._idle_gc(now)
        self.last_io = now

    # --- host interface ------------------------------------------------------------------

    def _pages(self, offset, count):
        if offset < 0 or count < 0 or offset + count > self.size:
            raise ValueError(f"I/O at {offset}+{count} beyond the drive's {self.size} bytes")
        return range(offset // PAGE, -(-(offset + count) // PAGE))

    def read(self, offset, count):
        """Returns (bytes, seconds)."""
        self._touch()
        out = bytearray(count)
        for lpn in self._pages(offset, count):
            page = self.data.get(lpn)
            if page is None:
                continue
            lo, hi = max(offset, lpn * PAGE), min(offset + count, (lpn + 1) * PAGE)
            out[lo - offset:hi - offset] = page[lo - lpn * PAGE:hi - lpn * PAGE]
        return bytes(out), self.t_read * len(self._pages(offset, count))

    def write(self, offset, buf):
        """Returns seconds: each page costs what the state charged before it was written."""
        self._touch()
        count = len(buf)
        cost = 0.0
        # The victim is looked up once per request: the pool moves page by page, the victim's
        # occupancy hardly within one request.
        gc = None
        for lpn in self._pages(offset, count):
            lo, hi = max(offset, lpn * PAGE), min(offset + count, (lpn + 1) * PAGE)
            if hi - lo == PAGE:
                page = bytes(buf[lo - offset:hi - offset])
            else:  # read-modify-write of a partly written page
                page = bytearray(self.data.get(lpn, bytes(PAGE)))
                page[lo - lpn * PAGE:hi - lpn * PAGE] = buf[lo - offset:hi - offset]
                page = bytes(page)
            p = self.pressure()
            if p and gc is None:
                gc = self.gc_cost()
            cost += self.t_prog + (p * gc if p else 0.0)
            self._write_page(lpn)
            self.data[lpn] = page
        return cost

    def trim(self, offset, count):
        """Unmaps the whole pages in the range (a partial page keeps its data: a discard is
        advisory). Returns seconds: none, TRIM only updates the map."""
        self._touch()
        first, end = -(-offset // PAGE), (offset + count) // PAGE
        emptied = set()
        for lpn in range(first, max(first, end)):
            ppn = self.l2p[lpn]
            self._invalidate(lpn)
            self.data.pop(lpn, None)
            if ppn >= 0 and self.live[ppn // self.n] == 0:
                emptied.add(ppn // self.n)
        # A full block the TRIM left without a live page has nothing to relocate: the firmware
        # erases it in the background right away, whatever the idle time.
        for b in emptied & self.full:
            self.full.discard(b)
            for ppn in range(b * self.n, (b + 1) * self.n):
                self.p2l[ppn] = -1
            self.clean.insert(0, b)
            self.erased += 1
        return 0.0

    def zero(self, offset, count):
        """Write zeroes: whole pages are unmapped (they read back as zeros), partial ones
        written."""
        cost = 0.0
        first, end = -(-offset // PAGE), (offset + count) // PAGE
        if end <= first:
            return self.write(offset, bytes(count))
        if offset < first * PAGE:
            cost += self.write(offset, bytes(first * PAGE - offset))
        if offset + count > end * PAGE:
            cost += self.write(end * PAGE, bytes(offset + count - end * PAGE))
        cost += self.trim(first * PAGE, (end - first) * PAGE)
        return cost

    def stats(self):
        return (f"live {self.live_pages()}/{self.logical_pages} pages, free {self.free_ratio():.3f},"
                f" clean {len(self.clean)}/{self.blocks} blocks, pressure {self.pressure():.2f},"
                f" page write {self.page_write_cost() * 1e3:.3f} ms, host {self.host_pages}"
                f" relocated {self.relocated} erased {self.erased}")


# --- nbdkit plugin (API version 2) ---------------------------------------------------------

API_VERSION = 2

_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
# key=value parameters nbdkit passes (see docs/ftl-model.md): name -> (Ftl argument, parser).
_PARAMS = {
    "op": ("op", float),
    "pages_per_block": ("pages_per_block", int),
    "low_blocks": ("low_blocks", int),
    "high_ratio": ("high_ratio", float),
    "t_prog_ms": ("t_prog", lambda v: float(v) / 1e3),
    "t_reloc_ms": ("t_reloc", lambda v: float(v) / 1e3),
    "t_erase_ms": ("t_erase", lambda v: float(v) / 1e3),
    "t_read_ms": ("t_read", lambda v: float(v) / 1e3),
    "idle_after_s": ("idle_after", float),
    "bg_pages_per_s": ("bg_pages_per_s", float),
}
_config = {"size": 128 << 20, "log": None}
_kwargs = {}
_ftl = None


def _parse_size(v):
    v = v.strip().upper().removesuffix("B").removesuffix("I")
    unit = v[-1] if v and v[-1] in _SIZE_UNITS else ""
    return int(v[: len(v) - len(unit)]) * _SIZE_UNITS[unit]


def config(key, value):
    if key == "size":
        _config["size"] = _parse_size(value)
    elif key == "log":
        _config["log"] = value
    elif key in _PARAMS:
        name, parse = _PARAMS[key]
        _kwargs[name] = parse(value)
    else:
        raise RuntimeError(f"ftl.py: unknown parameter {key}={value}")


def config_complete():
    global _ftl
    _ftl = Ftl(_config["size"], **_kwargs)
    _log(f"start: {_ftl.blocks} blocks of {_ftl.n} pages for {_ftl.logical_pages} logical pages;"
         f" watermarks low {_ftl.low} high {_ftl.high}")


def _log(msg):
    if _config["log"]:
        with builtins.open(_config["log"], "a") as f:  # open() is the plugin method below
            f.write(f"{time.time():.3f} {msg}\n")


def thread_model():
    import nbdkit
    # One model, one clock: requests are served one at a time, like one flash channel.
    return nbdkit.THREAD_MODEL_SERIALIZE_ALL_REQUESTS


def open(readonly):
    return 1


def get_size(h):
    return _ftl.size


def can_trim(h):
    return True


def can_zero(h):
    return True


def can_flush(h):
    return True


def can_multi_conn(h):
    return True


def _note_idle_gc():
    if _ftl.idle_gc_runs:
        idle, before, after, moved = _ftl.idle_gc_runs.pop()
        _log(f"idle gc after {idle:.1f} s idle: clean pool {before} -> {after} blocks,"
             f" {moved} pages moved: {_ftl.stats()}")


def pread(h, buf, offset, flags):
    data, cost = _ftl.read(offset, len(buf))
    _note_idle_gc()
    buf[:] = data
    time.sleep(cost)


_writes = [0]


def pwrite(h, buf, offset, flags):
    cost = _ftl.write(offset, buf)
    _note_idle_gc()
    time.sleep(cost)
    _writes[0] += 1
    if _writes[0] % 2000 == 0:
        _log(_ftl.stats())


def flush(h, flags):
    # Writes are durable when acknowledged (the data lives in this process): nothing to wait on.
    pass


def trim(h, count, offset, flags):
    _ftl.trim(offset, count)
    _note_idle_gc()
    _log(f"trim {offset}+{count}: {_ftl.stats()}")


def zero(h, count, offset, flags):
    time.sleep(_ftl.zero(offset, count))
