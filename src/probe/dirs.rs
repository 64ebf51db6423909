//! The list of probe directories this host's probes made (`probe-dirs.list` in `state_dir`, one
//! absolute path a line), so the package's purge can give their space back: a 32 MiB
//! `probe.dat` on the database's filesystem, owned by a user about to be deleted, must not be
//! left behind. Written only when a directory is new to it, so at most once per target.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The list's file name in `state_dir`.
pub const LIST: &str = "probe-dirs.list";

pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join(LIST)
}

/// Adds `dir` (a probe directory, `<target>/.ssdwatch-probe`) to the list unless it is there;
/// the list is replaced whole (temporary file, rename), never half-written.
pub fn remember(state_dir: &Path, dir: &str) -> std::io::Result<()> {
    let p = path(state_dir);
    let current = match std::fs::read_to_string(&p) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    if current.lines().any(|l| l == dir) || dir.contains('\n') {
        return Ok(());
    }
    let tmp = state_dir.join(format!(".{LIST}.tmp"));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(current.as_bytes())?;
        writeln!(f, "{dir}")?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_directory_is_listed_once() {
        let t = tempfile::tempdir().unwrap();
        remember(t.path(), "/srv/pg/.ssdwatch-probe").unwrap();
        remember(t.path(), "/srv/wal/.ssdwatch-probe").unwrap();
        remember(t.path(), "/srv/pg/.ssdwatch-probe").unwrap();
        // A name with a line break would read as two paths: never listed.
        remember(t.path(), "/x\n/etc/.ssdwatch-probe").unwrap();
        assert_eq!(
            std::fs::read_to_string(path(t.path())).unwrap(),
            "/srv/pg/.ssdwatch-probe\n/srv/wal/.ssdwatch-probe\n"
        );
    }
}
