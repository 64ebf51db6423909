//! Parser of `/proc/<pid>/mountinfo` (proc(5)). One bad line costs only that line.
//! Mount points and sources are octal-escaped by the kernel (`\040` for a space): unescaped here.
//! No statvfs and no metrics here: the filesystem collector does that.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountInfo {
    pub mount_id: u32,
    pub parent_id: u32,
    pub major: u32,
    pub minor: u32,
    /// The root of the mount within the filesystem (`/` unless a bind mount of a subtree).
    pub root: String,
    /// The mount point as a label: UTF-8 as is, any byte that is not valid UTF-8 written as
    /// `\xNN` (a mount point is bytes; an automounted USB label or a FUSE mount can make it any).
    pub mount_point: String,
    /// The mount point's exact bytes, for the system calls (statvfs) on it.
    pub mount_path: PathBuf,
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

/// What is wrong with one mountinfo line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineProblem {
    #[error("expected at least 6 space-separated fields before \" - \", found {0:?}")]
    TooFewFields(String),
    #[error("field {index} ({name}) is empty (two spaces in a row?): {line:?}")]
    EmptyField {
        index: usize,
        name: &'static str,
        line: String,
    },
    #[error("no \" - \" separator before the filesystem type")]
    NoSeparator,
    #[error("expected filesystem type, source and super options after \" - \"")]
    NothingAfterSeparator,
    #[error("major:minor expected, found {0:?}")]
    NoMajorMinor(String),
    #[error("{what} is not a number: {value:?}")]
    NotANumber { what: &'static str, value: String },
}

/// A bad line of a mountinfo text (1-based).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct LineError {
    pub line: usize,
    pub problem: LineProblem,
}

/// The mount table could not be read (neither pid 1's nor our own).
#[derive(Debug, thiserror::Error)]
#[error("reading {}: {cause}", path.display())]
pub struct ReadError {
    pub path: PathBuf,
    pub cause: std::io::Error,
}

/// Undoes the kernel's octal escaping (`\040` space, `\011` tab, `\012` newline, `\134`
/// backslash), giving the field's exact bytes.
pub fn unescape_bytes(b: &[u8]) -> Vec<u8> {
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
    out
}

pub use crate::label::label_form;

fn field(b: &[u8]) -> String {
    label_form(&unescape_bytes(b))
}

fn parse_line(line: &[u8]) -> Result<MountInfo, LineProblem> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // The kernel separates fields by exactly one space and escapes spaces inside them, so an empty
    // field is meaningful (`mount -t tmpfs "" /x` shows an empty source): split on single spaces.
    let fields: Vec<&[u8]> = line.split(|c| *c == b' ').collect();
    if fields.len() < 7 {
        return Err(LineProblem::TooFewFields(truncate(line)));
    }
    const NAMES: [&str; 6] = [
        "mount id",
        "parent id",
        "major:minor",
        "root",
        "mount point",
        "mount options",
    ];
    if let Some(i) = fields[..6].iter().position(|f| f.is_empty()) {
        return Err(LineProblem::EmptyField {
            index: i + 1,
            name: NAMES[i],
            line: truncate(line),
        });
    }
    // Optional fields (`shared:1`, `master:2`, ...) run up to the lone "-".
    let sep = fields[6..]
        .iter()
        .position(|f| *f == b"-")
        .map(|p| p + 6)
        .ok_or(LineProblem::NoSeparator)?;
    if fields.len() < sep + 3 {
        return Err(LineProblem::NothingAfterSeparator);
    }
    let text = |b: &[u8]| label_form(b);
    let num = |what: &'static str, value: &[u8]| -> Result<u32, LineProblem> {
        std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| LineProblem::NotANumber {
                what,
                value: text(value),
            })
    };
    let mm = fields[2];
    let colon = mm
        .iter()
        .position(|c| *c == b':')
        .ok_or_else(|| LineProblem::NoMajorMinor(text(mm)))?;
    let (maj, min) = (&mm[..colon], &mm[colon + 1..]);
    let split_opts = |s: &[u8]| -> Vec<String> { s.split(|c| *c == b',').map(text).collect() };
    let mount_point = unescape_bytes(fields[4]);
    Ok(MountInfo {
        mount_id: num("mount id", fields[0])?,
        parent_id: num("parent id", fields[1])?,
        major: num("major", maj)?,
        minor: num("minor", min)?,
        root: field(fields[3]),
        mount_point: label_form(&mount_point),
        mount_path: PathBuf::from(OsString::from_vec(mount_point)),
        mount_options: split_opts(fields[5]),
        optional_fields: fields[6..sep].iter().map(|s| text(s)).collect(),
        fstype: field(fields[sep + 1]),
        source: field(fields[sep + 2]),
        super_options: fields
            .get(sep + 3)
            .map(|s| split_opts(s))
            .unwrap_or_default(),
    })
}

/// Mount points as the host names them when the daemon runs with `--path.rootfs` (the host's
/// root mounted at, say, /host): in a container that shares the host's mount table through its
/// own PID 1 (not the host's PID namespace), the table already shows `/host/media/volume1`;
/// that mount is the host's `/media/volume1`, and [`crate::Roots::in_rootfs`] puts the prefix
/// back to reach it. Mounts outside the prefix stay as they are (node_exporter's rule).
pub fn strip_rootfs(mounts: &mut [MountInfo], rootfs: &Path) {
    if rootfs == Path::new("/") || rootfs.as_os_str().is_empty() {
        return;
    }
    for m in mounts {
        if let Ok(rest) = m.mount_path.strip_prefix(rootfs) {
            let host = Path::new("/").join(rest);
            m.mount_point = label_form(host.as_os_str().as_bytes());
            m.mount_path = host;
        }
    }
}

/// The start of an overlong line, for error messages.
fn truncate(line: &[u8]) -> String {
    label_form(line).chars().take(120).collect()
}

/// Parses a whole mountinfo text: the good entries, and an error per bad line (1-based).
pub fn parse_mountinfo(text: &str) -> (Vec<MountInfo>, Vec<LineError>) {
    parse_mountinfo_bytes(text.as_bytes())
}

/// [`parse_mountinfo`] of the file's bytes: a mount point need not be UTF-8, and one that is not
/// costs nothing to the other lines.
pub fn parse_mountinfo_bytes(text: &[u8]) -> (Vec<MountInfo>, Vec<LineError>) {
    parse_mountinfo_lines(text, |_| true)
}

/// [`parse_mountinfo_bytes`] of the lines `keep` accepts (their line numbers kept in errors).
fn parse_mountinfo_lines(
    text: &[u8],
    keep: impl Fn(&[u8]) -> bool,
) -> (Vec<MountInfo>, Vec<LineError>) {
    let mut mounts = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.split(|c| *c == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) || !keep(line) {
            continue;
        }
        match parse_line(line) {
            Ok(m) => mounts.push(m),
            Err(problem) => errors.push(LineError {
                line: i + 1,
                problem,
            }),
        }
    }
    (mounts, errors)
}

/// The mount table of the host: `<proc>/1/mountinfo` when readable, else `<proc>/self/mountinfo`.
///
/// Pid 1's table is the host's view even when this process runs in its own mount namespace (a
/// sandboxed systemd unit remounts everything read-only and hides /home and /tmp for the daemon
/// alone; a container sees its own mounts), which is what node_exporter reads too. Where pid 1 is
/// hidden (`hidepid`, a fixture tree) our own table is the best there is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountTable {
    pub path: PathBuf,
    pub mounts: Vec<MountInfo>,
    /// Bad lines of the file at `path`.
    pub errors: Vec<LineError>,
}

/// Reads and parses the host's mount table (see [`MountTable`]). Fails, naming the file, only when
/// neither table can be read.
pub fn read_mountinfo(proc_root: &Path) -> Result<MountTable, ReadError> {
    read_mountinfo_lines(proc_root, |_| true)
}

/// The host's mounts of one filesystem type (see [`MountTable`]): the other lines are passed
/// over unparsed, so looking for a btrfs among hundreds of mounts costs a scan of the file.
/// The type follows the separator ` - ` (a space in a mount point is escaped as `\040`, so the
/// separator is the only place the pattern can match).
pub fn read_mountinfo_of_type(proc_root: &Path, fstype: &str) -> Result<MountTable, ReadError> {
    let needle = format!(" - {fstype} ").into_bytes();
    read_mountinfo_lines(proc_root, |line| {
        line.windows(needle.len()).any(|w| w == needle.as_slice())
    })
}

fn read_mountinfo_lines(
    proc_root: &Path,
    keep: impl Fn(&[u8]) -> bool,
) -> Result<MountTable, ReadError> {
    let init = proc_root.join("1/mountinfo");
    let own = proc_root.join("self/mountinfo");
    // Bytes, not a String: one mount point that is not UTF-8 must not cost every other mount.
    let (path, text) = match std::fs::read(&init) {
        Ok(t) if !t.is_empty() => (init, t),
        _ => {
            let t = match std::fs::read(&own) {
                Ok(t) => t,
                Err(cause) => return Err(ReadError { path: own, cause }),
            };
            (own, t)
        }
    };
    let (mounts, errors) = parse_mountinfo_lines(&text, keep);
    Ok(MountTable {
        path,
        mounts,
        errors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_mount_point_that_is_not_utf8_is_kept_exactly_and_labelled_with_escapes() {
        let text = b"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
                     2 1 8:17 / /mnt/b\xff\\040x rw - ext4 /dev/sdb1 rw\n\
                     3 1 8:2 / /data rw - ext4 /dev/sda2 rw\n";
        let (m, e) = parse_mountinfo_bytes(text);
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(m.len(), 3, "the other lines are unaffected");
        assert_eq!(m[1].mount_point, "/mnt/b\\xff x");
        assert_eq!(
            std::os::unix::ffi::OsStrExt::as_bytes(m[1].mount_path.as_os_str()),
            b"/mnt/b\xff x"
        );
        assert_eq!(m[2].mount_point, "/data");
    }

    #[test]
    fn label_form_escapes_invalid_bytes_backslashes_and_control_characters() {
        assert_eq!(label_form("/srv/pg data".as_bytes()), "/srv/pg data");
        assert_eq!(label_form("/mnt/été".as_bytes()), "/mnt/été");
        assert_eq!(label_form(b"/a\xc3(\xff"), "/a\\xc3(\\xff");
        assert_eq!(label_form(b"/mnt/\x1b[31mred"), "/mnt/\\x1b[31mred");
        assert_eq!(label_form(b"/a\tb"), "/a\\x09b");
    }

    /// A mount at the byte 0xff and one at the text `b\xff` are two mounts with two labels.
    #[test]
    fn a_byte_and_its_escape_written_out_never_share_a_label() {
        let (m, e) = parse_mountinfo_bytes(
            b"1 0 8:1 / /mnt/b\xff rw - ext4 /dev/sda1 rw\n2 0 8:2 / /mnt/b\\134xff rw - ext4 /dev/sda2 rw\n",
        );
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(m[0].mount_point, "/mnt/b\\xff");
        assert_eq!(m[1].mount_point, "/mnt/b\\x5cxff");
        for mi in &m {
            assert_eq!(
                crate::label::name_path(&mi.mount_point),
                mi.mount_path.as_os_str(),
                "the label turns back into the exact path"
            );
        }
    }

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
        assert_eq!(m[0].mount_point, "/srv/pg data\\x09x");
        assert_eq!(m[0].mount_path, Path::new("/srv/pg data\tx"));
        assert!(m[0].has_option("discard"));
        assert_eq!(unescape_bytes(b"a\\134b"), b"a\\b");
        assert_eq!(unescape_bytes(b"trailing\\04"), b"trailing\\04");
        assert_eq!(unescape_bytes(b"\\999"), b"\\999");
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
        assert_eq!(
            e[1].problem,
            LineProblem::NotANumber {
                what: "major",
                value: "x".into()
            }
        );
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

    #[test]
    fn unreadable_mountinfo_names_the_path() {
        // A directory where the file should be: read fails with EISDIR even for root.
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("self/mountinfo")).unwrap();
        let err = read_mountinfo(dir.path()).unwrap_err().to_string();
        let want = dir.path().join("self/mountinfo");
        assert!(err.contains(want.to_str().unwrap()), "{err}");
    }

    #[test]
    fn the_host_table_of_pid_1_wins_over_our_own() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("1")).unwrap();
        std::fs::create_dir_all(dir.path().join("self")).unwrap();
        std::fs::write(
            dir.path().join("1/mountinfo"),
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("self/mountinfo"),
            "1 0 8:1 / / ro - ext4 /dev/sda1 rw\nbroken\n",
        )
        .unwrap();
        let t = read_mountinfo(dir.path()).unwrap();
        assert_eq!(t.path, dir.path().join("1/mountinfo"));
        assert_eq!(t.mounts[0].mount_options, vec!["rw"]);
        assert!(t.errors.is_empty());

        std::fs::remove_file(dir.path().join("1/mountinfo")).unwrap();
        let t = read_mountinfo(dir.path()).unwrap();
        assert_eq!(t.path, dir.path().join("self/mountinfo"));
        assert_eq!(t.mounts[0].mount_options, vec!["ro"]);
        assert_eq!(t.errors.len(), 1);
        assert_eq!(t.errors[0].line, 2);
    }

    #[test]
    fn the_mounts_of_one_type_are_read_alone_with_their_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("1")).unwrap();
        std::fs::write(
            dir.path().join("1/mountinfo"),
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             2 1 0:40 / /srv/b\\040-\\040btrfs\\040 rw - xfs /dev/sdb rw\n\
             3 1 0:41 / /srv/data rw,noatime - btrfs /dev/sdc rw,space_cache=v2\n\
             4 1 0:42 / /srv/bad - btrfs\n\
             5 1 0:43 / /srv/not-btrfs rw - btrfsx /dev/sdd rw\n",
        )
        .unwrap();
        let t = read_mountinfo_of_type(dir.path(), "btrfs").unwrap();
        // A mount point that spells " - btrfs " is escaped in the file, so it can't match.
        let paths: Vec<_> = t.mounts.iter().map(|m| m.mount_path.clone()).collect();
        assert_eq!(paths, [std::path::PathBuf::from("/srv/data")]);
        assert_eq!(t.mounts[0].fstype, "btrfs");
        assert!(t.errors.is_empty(), "{:?}", t.errors);
        // The whole table has the xfs, the ext4 and a bad line, numbered as in the file.
        let all = read_mountinfo(dir.path()).unwrap();
        assert_eq!(all.mounts.len(), 4);
        assert_eq!(all.errors.len(), 1);
        assert_eq!(all.errors[0].line, 4);
    }

    #[test]
    fn empty_source_is_kept_and_missing_fields_are_errors() {
        let (m, e) = parse_mountinfo(
            "7 1 0:50 / /mnt/t rw - tmpfs  rw,size=8k\n\
             8 1 0:51 / /x rw -\n\
             9 1 0:52 / /y rw shared:1 tmpfs none rw\n\
             10 1\n",
        );
        assert_eq!(m.len(), 1, "{e:?}");
        assert_eq!(m[0].source, "");
        assert_eq!(m[0].super_options, vec!["rw", "size=8k"]);
        let lines: Vec<usize> = e.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![2, 3, 4]);
    }

    /// node_exporter's `fixtures_bindmount`: run with `--path.rootfs /host` in a container whose
    /// table shows the host's mounts under /host. Those are labelled as the host names them;
    /// the others stay.
    #[test]
    fn mounts_under_the_rootfs_prefix_are_labelled_as_the_host_names_them() {
        let (mut m, e) = parse_mountinfo(
            "29 1 259:0 / /host rw,relatime shared:1 - ext4 /dev/nvme1n0 rw\n\
             30 1 260:0 / /host/media/volume1 rw,relatime shared:1 - ext4 /dev/nvme1n1 rw\n\
             31 1 261:0 / /host/media/volume2 rw,relatime shared:1 - ext4 /dev/nvme1n2 rw\n\
             31 26 0:26 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw,inode64\n\
             34 1 262:0 / /hostile rw - ext4 /dev/nvme1n3 rw\n",
        );
        assert!(e.is_empty(), "{e:?}");
        strip_rootfs(&mut m, Path::new("/host"));
        let mps: Vec<&str> = m.iter().map(|m| m.mount_point.as_str()).collect();
        assert_eq!(
            mps,
            vec![
                "/",
                "/media/volume1",
                "/media/volume2",
                "/dev/shm",
                "/hostile"
            ]
        );
        assert_eq!(m[1].mount_path, Path::new("/media/volume1"));
        let roots = crate::Roots {
            rootfs: "/host".into(),
            ..Default::default()
        };
        assert_eq!(
            roots.in_rootfs(&m[1].mount_path),
            Path::new("/host/media/volume1"),
            "statvfs reaches it through the prefix once"
        );
        let mut unchanged = m.clone();
        strip_rootfs(&mut unchanged, Path::new("/"));
        assert_eq!(unchanged, m);
    }

    /// Eight fields with an empty one is not "fewer than 6 fields": the message says which.
    #[test]
    fn an_empty_field_is_named_not_counted_as_missing() {
        let (m, e) = parse_mountinfo("7 1 0:50  /mnt/t rw - tmpfs none rw\n");
        assert!(m.is_empty());
        let msg = e[0].problem.to_string();
        assert!(msg.contains("field 4 (root) is empty"), "{msg}");
        assert!(!msg.contains("at least 6"), "{msg}");
    }

    #[test]
    fn real_mountinfo_of_this_machine_parses_without_errors() {
        // Bytes, not a String: a mount point need not be UTF-8, and this machine may have one.
        let text = match std::fs::read("/proc/self/mountinfo") {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                crate::testing::skip("real mountinfo", "no /proc/self/mountinfo here");
                return;
            }
            Err(e) => panic!("reading /proc/self/mountinfo: {e}"),
        };
        let (m, e) = parse_mountinfo_bytes(&text);
        assert!(e.is_empty(), "{e:?}");
        let lines = text
            .split(|c| *c == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        assert_eq!(m.len(), lines);
        assert!(m.iter().any(|m| m.mount_point == "/"));
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in "(.{0,120}\n){0,5}") {
            let _ = parse_mountinfo(&text);
        }

        #[test]
        fn any_number_of_optional_fields(tags in proptest::collection::vec("(shared|master|propagate_from):[0-9]{1,4}", 0..8)) {
            let opt = tags.iter().map(|t| format!("{t} ")).collect::<String>();
            let (m, e) = parse_mountinfo(&format!("1 0 8:1 / /data rw,noatime {opt}- xfs /dev/sda1 rw\n"));
            prop_assert!(e.is_empty());
            prop_assert_eq!(&m[0].optional_fields, &tags);
            prop_assert_eq!(m[0].fstype.as_str(), "xfs");
        }

        #[test]
        fn good_lines_survive_garbage_between_them(garbage in proptest::collection::vec("[^\n]{0,80}", 0..6)) {
            let good = "1 0 8:1 / / rw - ext4 /dev/sda1 rw";
            let mut text = String::new();
            for g in &garbage {
                text.push_str(good);
                text.push('\n');
                text.push_str(g);
                text.push('\n');
            }
            let (m, e) = parse_mountinfo(&text);
            prop_assert!(m.len() >= garbage.len());
            prop_assert!(m.len() + e.len() <= 2 * garbage.len());
            for err in &e {
                prop_assert!(err.line % 2 == 0, "only garbage lines fail: {:?}", err);
            }
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
            let path = format!("/m/{name}");
            prop_assert_eq!(&m[0].mount_path, Path::new(&path));
            prop_assert_eq!(&m[0].mount_point, &label_form(format!("/m/{name}").as_bytes()));
        }
    }
}
