//! Bytes as label values and back: mount points and /sys names need not be UTF-8, and a label
//! must keep every byte and never let two names share one. Pure; used by `procfs` and `sysfs`.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

/// Bytes as a label value and map key: valid UTF-8 as is, except that every byte that is not
/// valid UTF-8, a backslash and an ASCII control character (an ESC must not reach an admin's
/// terminal through a report) are written `\xNN`. So nothing is lost, the label turns back into
/// the exact bytes ([`name_path`]), and two different paths never share a label:
/// a mount point at the byte 0xff is `b\xff`, one at the text `b\xff` is `b\x5cxff`.
/// Mount points and /sys names are labelled alike.
pub fn label_form(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' || c.is_ascii_control() {
                out.push_str(&format!("\\x{:02x}", c as u32));
            } else {
                out.push(c);
            }
        }
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out
}

/// The exact bytes of a name given in its label form ([`name_label`]), for building paths.
pub fn name_path(label: &str) -> OsString {
    let b = label.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && b.get(i + 1) == Some(&b'x')
            && let Some(v) = b
                .get(i + 2..i + 4)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    OsString::from_vec(out)
}
