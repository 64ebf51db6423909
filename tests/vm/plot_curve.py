#!/usr/bin/env python3
# Draws the latency-vs-fill curve of one run of the degradation guest (tests/vm/degrade.sh) as a
# PNG: the write probe's p50 (the daemon's ssdwatch_probe_last_latency_seconds) at each fill
# step, then after the delete, the idle period and fstrim. Pure Python (zlib, struct): the test
# machines have no plotting library.
#
#   tests/vm/plot_curve.py RESULTS_DIR OUT.png
import re
import struct
import sys
import zlib

W, H = 820, 440
L, R, T, B = 80, 270, 40, 60  # plot margins

# A 3x5 font, rows top to bottom, 3 bits each: enough for the labels below.
FONT = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001001001001",
    "8": "111101111101111", "9": "111101111001111", ".": "000000000000010", "%": "101001010100101",
    " ": "000000000000000", "-": "000000111000000", "(": "001010010010001", ")": "100010010010100",
    "_": "000000000000111", ",": "000000000010100", "/": "001001010100100", ":": "000010000010000",
    "A": "010101111101101", "C": "011100100100011", "D": "110101101101110", "E": "111100110100111",
    "F": "111100110100100", "G": "011100101101011", "H": "101101111101101", "I": "111010010010111",
    "K": "101101110101101", "L": "100100100100111", "M": "101111111101101", "N": "110101101101101",
    "O": "010101101101010", "P": "110101110100100", "R": "110101110101101", "S": "011100010001110",
    "T": "111010010010010", "U": "101101101101111", "V": "101101101101010", "W": "101101111111101",
    "Y": "101101010010010", "X": "101101010101101", "B": "110101110101110",
}

WHITE, BLACK, GREY = (255, 255, 255), (0, 0, 0), (210, 210, 210)
BLUE, RED, ORANGE, GREEN = (31, 119, 180), (214, 39, 40), (255, 127, 14), (44, 160, 44)


class Canvas:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.px = [bytearray(WHITE * w) for _ in range(h)]

    def dot(self, x, y, c):
        x, y = int(round(x)), int(round(y))
        if 0 <= x < self.w and 0 <= y < self.h:
            self.px[y][3 * x:3 * x + 3] = bytes(c)

    def rect(self, x0, y0, x1, y1, c):
        for y in range(int(y0), int(y1) + 1):
            for x in range(int(x0), int(x1) + 1):
                self.dot(x, y, c)

    def line(self, x0, y0, x1, y1, c, width=1):
        n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
        for i in range(n + 1):
            x, y = x0 + (x1 - x0) * i / n, y0 + (y1 - y0) * i / n
            self.rect(x - width // 2, y - width // 2, x + width // 2, y + width // 2, c)

    def text(self, x, y, s, c=BLACK, scale=2):
        for ch in s.upper():
            g = FONT.get(ch, FONT[" "])
            for i, bit in enumerate(g):
                if bit == "1":
                    self.rect(x + (i % 3) * scale, y + (i // 3) * scale,
                              x + (i % 3) * scale + scale - 1, y + (i // 3) * scale + scale - 1, c)
            x += 4 * scale

    def png(self):
        raw = b"".join(b"\x00" + bytes(row) for row in self.px)

        def chunk(tag, data):
            return (struct.pack(">I", len(data)) + tag + data
                    + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def series(text, family, *parts):
    for line in text.splitlines():
        if line.startswith(family + "{") and all(p in line for p in parts):
            return float(line.rsplit(" ", 1)[1])
    return None


def main(results, out):
    points = []  # (step, fill %, p50 ms)
    for line in open(f"{results}/scrapes.txt"):
        name = line.split()[0]
        text = open(f"{results}/{name}").read()
        step = re.sub(r"^scrape-\d+-|\.prom$", "", name)
        p50 = series(text, "ssdwatch_probe_last_latency_seconds", 'probe="sync_write_4k"', 'quantile="0.5"')
        fill = series(text, "ssdwatch_probe_context_fill_ratio", 'mountpoint="/mnt/ftl"')
        if step != "trimmed2" and p50 is not None and fill is not None:
            points.append((step, 100 * fill, 1e3 * p50))
    ymax = max(p for _, _, p in points)
    ytop = next(v for v in (1, 2, 5, 10, 20, 25, 30, 40, 50, 100, 200, 500) if v >= ymax * 1.1)
    c = Canvas(W, H)
    px = lambda f: L + (W - L - R) * f / 100.0  # noqa: E731
    py = lambda ms: H - B - (H - T - B) * ms / ytop  # noqa: E731
    for i in range(0, 11):  # grid and ticks
        f = 10 * i
        c.line(px(f), T, px(f), H - B, GREY)
        c.text(px(f) - 8, H - B + 8, f"{f}")
    for i in range(0, 6):
        ms = ytop * i / 5
        c.line(L, py(ms), W - R, py(ms), GREY)
        c.text(L - 52, py(ms) - 5, f"{ms:g}")
    c.line(L, T, L, H - B, BLACK)
    c.line(L, H - B, W - R, H - B, BLACK)
    c.text(L, 12, "SYNC_WRITE_4K P50 (MS) VS FILL - SSDWATCH ON THE SIMULATED SSD")
    c.text(px(50) - 60, H - 24, "FILESYSTEM FILL (%)")
    fill_steps = [p for p in points if p[0] == "empty" or p[0].startswith("fill")]
    for (_, f0, m0), (_, f1, m1) in zip(fill_steps, fill_steps[1:]):
        c.line(px(f0), py(m0), px(f1), py(m1), BLUE, 3)
    marks = {"deleted": RED, "idle": ORANGE, "trimmed": GREEN}
    for step, f, ms in points:
        col = marks.get(step, BLUE)
        c.rect(px(f) - 4, py(ms) - 4, px(f) + 4, py(ms) + 4, col)
    legend = [("FILLING", BLUE), ("AFTER DELETE", RED), ("AFTER IDLE", ORANGE), ("AFTER FSTRIM", GREEN)]
    for i, (label, col) in enumerate(legend):
        y = T + 10 + 22 * i
        c.rect(W - R + 16, y, W - R + 26, y + 10, col)
        c.text(W - R + 34, y, label)
    y = T + 110
    for step, f, ms in points:
        c.text(W - R + 16, y, f"{step.upper()[:7]}")
        c.text(W - R + 90, y, f"{f:.0f}%")
        c.text(W - R + 140, y, f"{ms:.2f} MS")
        y += 16
    open(out, "wb").write(c.png())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
