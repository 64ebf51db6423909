//! Headless Chromium for tests that look at a page: its DOM, and the pixels of a screenshot.

use crate::support::{run, system_python};
use std::path::Path;
use std::process::Command;

/// Pixels of each (r, g, b) colour in a PNG, decoded with Python's zlib (8-bit RGB or RGBA,
/// non-interlaced: what Chromium writes).
pub fn count_colours(png: &Path, colours: &[(u8, u8, u8)]) -> Vec<usize> {
    let script = r#"
import sys, zlib, struct
data = open(sys.argv[1], 'rb').read()
assert data[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
pos, idat, w = 8, b'', 0
while pos < len(data):
    n, kind = struct.unpack('>I4s', data[pos:pos+8]); body = data[pos+8:pos+8+n]; pos += 12 + n
    if kind == b'IHDR':
        w, h, depth, ctype, _, _, interlace = struct.unpack('>IIBBBBB', body)
        assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
        bpp = 3 if ctype == 2 else 4
    elif kind == b'IDAT':
        idat += body
raw = zlib.decompress(idat); stride = w * bpp; prev = bytearray(stride); out = []
for y in range(h):
    f = raw[y*(stride+1)]; line = bytearray(raw[y*(stride+1)+1:(y+1)*(stride+1)])
    for i in range(stride):
        a = line[i-bpp] if i >= bpp else 0; b = prev[i]; c = prev[i-bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p-a), abs(p-b), abs(p-c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    out.append(bytes(line)); prev = line
want = [tuple(int(x) for x in c.split(',')) for c in sys.argv[2:]]
counts = [0] * len(want)
for line in out:
    for i in range(0, len(line), bpp):
        px = tuple(line[i:i+3])
        for k, c in enumerate(want):
            if px == c: counts[k] += 1
print(' '.join(map(str, counts)))
"#;
    let mut args = vec![
        "-c".to_string(),
        script.to_string(),
        png.display().to_string(),
    ];
    args.extend(colours.iter().map(|(r, g, b)| format!("{r},{g},{b}")));
    let out = run(
        system_python(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    out.split_whitespace()
        .map(|n| n.parse().expect("a count"))
        .collect()
}

/// Runs headless Chromium (no sandbox, no GPU, a throw-away profile) with `args`.
pub fn chromium(args: &[&str]) -> std::process::Output {
    let home = tempfile::tempdir().unwrap();
    Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
        ])
        .arg(format!("--user-data-dir={}", home.path().display()))
        .args(args)
        .env("HOME", home.path())
        .output()
        .expect("run chromium")
}

/// The DOM headless Chromium builds of the page at `page`, which it must load.
pub fn dom_of(page: &std::path::Path) -> String {
    let out = chromium(&["--dump-dom", &format!("file://{}", page.display())]);
    assert!(
        out.status.success(),
        "chromium --dump-dom {}: {}",
        page.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
