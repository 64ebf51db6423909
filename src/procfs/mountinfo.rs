//! Parser of `/proc/<pid>/mountinfo` (proc(5)). One bad line costs only that line.
//! Mount points and sources are octal-escaped by the kernel (`\040` for a space): unescaped here.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountInfo {
    pub mount_id: u32,
    pub parent_id: u32,
    pub major: u32,
    pub minor: u32,
    /// The root of the mount within the filesystem (`/` unless a bind mount of a subtree).
    pub root: String,
    pub mount_point: String,
    pub mount_options: Vec<String>,
    /// Optional fields such as `shared:1`, `master:2`.
    pub optional_fields: Vec<String>,
    pub fstype: String,
    pub source: String,
    pub super_options: Vec<String>,
}

impl MountInfo {
    /// Whether `opt` is set in either the per-mount or the superblock options.
    pub fn has_option(&self, opt: &str) -> bool {
        self.mount_options
            .iter()
            .chain(self.super_options.iter())
            .any(|o| o == opt)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct LineError {
    pub line: usize,
    pub message: String,
}

/// Undoes the kernel's octal escaping (`\040` space, `\011` tab, `\012` newline, `\134` backslash).
pub fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && b.len() >= i + 4
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            if v <= 255 {
                out.push(v as u8);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_line(line: &str) -> Result<MountInfo, String> {
    let fields: Vec<&str> = line.split_ascii_whitespace().collect();
    let sep = fields
        .iter()
        .position(|f| *f == "-")
        .ok_or_else(|| "no \" - \" separator before the filesystem type".to_string())?;
    if sep < 6 {
        return Err(format!(
            "expected at least 6 fields before \" - \", found {sep}"
        ));
    }
    if fields.len() < sep + 3 {
        return Err("expected filesystem type, source and super options after \" - \"".into());
    }
    let num = |i: usize, what: &str| -> Result<u32, String> {
        fields[i]
            .parse()
            .map_err(|_| format!("{what} is not a number: {:?}", fields[i]))
    };
    let (maj, min) = fields[2]
        .split_once(':')
        .ok_or_else(|| format!("major:minor expected, found {:?}", fields[2]))?;
    let split_opts = |s: &str| -> Vec<String> { s.split(',').map(str::to_string).collect() };
    Ok(MountInfo {
        mount_id: num(0, "mount id")?,
        parent_id: num(1, "parent id")?,
        major: maj
            .parse()
            .map_err(|_| format!("major is not a number: {maj:?}"))?,
        minor: min
            .parse()
            .map_err(|_| format!("minor is not a number: {min:?}"))?,
        root: unescape(fields[3]),
        mount_point: unescape(fields[4]),
        mount_options: split_opts(fields[5]),
        optional_fields: fields[6..sep].iter().map(|s| s.to_string()).collect(),
        fstype: unescape(fields[sep + 1]),
        source: unescape(fields[sep + 2]),
        super_options: fields
            .get(sep + 3)
            .map(|s| split_opts(s))
            .unwrap_or_default(),
    })
}

/// Parses a whole mountinfo text: the good entries, and an error per bad line (1-based).
pub fn parse_mountinfo(text: &str) -> (Vec<MountInfo>, Vec<LineError>) {
    let mut mounts = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line) {
            Ok(m) => mounts.push(m),
            Err(message) => errors.push(LineError {
                line: i + 1,
                message,
            }),
        }
    }
    (mounts, errors)
}

/// Reads and parses `<proc>/self/mountinfo`. Line errors are returned as messages naming the file.
pub fn read_mountinfo(proc_root: &Path) -> anyhow::Result<(Vec<MountInfo>, Vec<String>)> {
    let path: PathBuf = proc_root.join("self/mountinfo");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    let (m, errs) = parse_mountinfo(&text);
    Ok((
        m,
        errs.into_iter()
            .map(|e| format!("{}: {e}", path.display()))
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn kernel_documentation_example() {
        let (m, e) = parse_mountinfo(
            "36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n",
        );
        assert!(e.is_empty());
        let m = &m[0];
        assert_eq!((m.mount_id, m.parent_id, m.major, m.minor), (36, 35, 98, 0));
        assert_eq!(m.root, "/mnt1");
        assert_eq!(m.mount_point, "/mnt/parent");
        assert_eq!(m.optional_fields, vec!["master:1"]);
        assert_eq!(m.fstype, "ext3");
        assert_eq!(m.source, "/dev/root");
        assert_eq!(m.super_options, vec!["rw", "errors=continue"]);
    }

    #[test]
    fn octal_escapes_in_mount_points() {
        let (m, _) = parse_mountinfo(
            "50 1 259:2 / /srv/pg\\040data\\011x rw,relatime - ext4 /dev/nvme0n1p2 rw,discard\n",
        );
        assert_eq!(m[0].mount_point, "/srv/pg data\tx");
        assert!(m[0].has_option("discard"));
        assert_eq!(unescape("a\\134b"), "a\\b");
        assert_eq!(unescape("trailing\\04"), "trailing\\04");
        assert_eq!(unescape("\\999"), "\\999");
    }

    #[test]
    fn no_optional_fields_and_several() {
        let (m, e) = parse_mountinfo(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 0:5 / /dev rw shared:2 master:3 propagate_from:4 - devtmpfs udev rw\n",
        );
        assert!(e.is_empty(), "{e:?}");
        assert!(m[0].optional_fields.is_empty());
        assert_eq!(m[1].optional_fields.len(), 3);
    }

    #[test]
    fn bad_lines_are_reported_with_their_number_and_others_kept() {
        let (m, e) = parse_mountinfo(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\ngarbage line\n3 1 x:1 / /a rw - ext4 /dev/sdb rw\n4 1 8:17 / /b rw - xfs /dev/sdb1 rw\n",
        );
        assert_eq!(m.len(), 2);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].line, 2);
        assert_eq!(e[1].line, 3);
        assert!(e[1].message.contains("major"));
    }

    #[test]
    fn long_lines_parse() {
        let opts = (0..500)
            .map(|i| format!("opt{i}"))
            .collect::<Vec<_>>()
            .join(",");
        let line = format!("1 0 0:40 / /mnt/x rw - fuse.sshfs host:/very/long rw,{opts}\n");
        let (m, e) = parse_mountinfo(&line);
        assert!(e.is_empty());
        assert_eq!(m[0].super_options.len(), 501);
    }

    #[test]
    fn missing_file_names_the_path() {
        let err = read_mountinfo(Path::new("/nonexistent-proc")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent-proc/self/mountinfo"));
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in "(.{0,120}\n){0,5}") {
            let _ = parse_mountinfo(&text);
        }

        #[test]
        fn escaped_mount_points_roundtrip(name in "[a-z \t\\\\]{1,20}") {
            let esc: String = name.chars().map(|c| match c {
                ' ' => "\\040".to_string(),
                '\t' => "\\011".to_string(),
                '\\' => "\\134".to_string(),
                c => c.to_string(),
            }).collect();
            let (m, e) = parse_mountinfo(&format!("1 0 8:1 / /m/{esc} rw - ext4 /dev/sda1 rw\n"));
            prop_assert!(e.is_empty());
            prop_assert_eq!(&m[0].mount_point, &format!("/m/{name}"));
        }
    }
}
