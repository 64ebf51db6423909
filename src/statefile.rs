//! Small JSON state files in `state_dir` that must survive restarts: read whole, replaced
//! atomically (write a temporary file, fsync, rename, fsync the directory), never half-written.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A state file could not be read, parsed or written; names the file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StateError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not valid state ({source}); remove it to start afresh")]
    Corrupt {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// Reads a state file; `Ok(None)` when it does not exist yet.
pub(crate) fn load<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, StateError> {
    match std::fs::read(path) {
        Ok(bytes) => {
            serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|source| StateError::Corrupt {
                    path: path.to_path_buf(),
                    source,
                })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StateError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Replaces a state file atomically with `value` as JSON, creating its directory if needed.
pub(crate) fn store<T: Serialize>(path: &Path, value: &T) -> Result<(), StateError> {
    let io = |source| StateError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let text = serde_json::to_vec_pretty(value).map_err(|e| io(std::io::Error::other(e)))?;
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = PathBuf::from(tmp_name);
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(&text)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    });
    if let Err(e) = written {
        // A full disk must not also keep a half-written copy of the state taking space.
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A time kept across a restart reads back bit for bit: the scrape shows the same value
    /// before and after (serde_json's default float parser may be a unit or two off in the last
    /// place; this one was, in a run of the QEMU degradation story).
    #[test]
    fn a_float_reads_back_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.json");
        let v: BTreeMap<String, f64> = [
            ("a".to_string(), 1_795_745_770.921_643_7),
            ("b".to_string(), 0.1 + 0.2),
            ("c".to_string(), 1e-300 / 3.0),
        ]
        .into();
        store(&p, &v).unwrap();
        let back = load::<BTreeMap<String, f64>>(&p).unwrap().unwrap();
        for (k, x) in &v {
            assert_eq!(
                back[k].to_bits(),
                x.to_bits(),
                "{k}: {x} read as {}",
                back[k]
            );
        }
    }

    #[test]
    fn round_trip_missing_and_corrupt_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/state.json");
        assert!(load::<BTreeMap<String, u64>>(&p).unwrap().is_none());
        let v: BTreeMap<String, u64> = [("a".to_string(), 1)].into();
        store(&p, &v).unwrap();
        assert_eq!(load::<BTreeMap<String, u64>>(&p).unwrap(), Some(v));
        assert!(!p.with_extension("json.tmp").exists());
        std::fs::write(&p, "{not json").unwrap();
        let e = load::<BTreeMap<String, u64>>(&p).unwrap_err().to_string();
        assert!(
            e.contains("sub/state.json") && e.contains("not valid state"),
            "{e}"
        );
    }

    #[test]
    fn a_failed_replace_leaves_no_temporary_file_behind() {
        let dir = tempfile::tempdir().unwrap();
        // A non-empty directory where the file should be: the write succeeds, the rename can't.
        let p = dir.path().join("state.json");
        std::fs::create_dir_all(p.join("in-the-way")).unwrap();
        let e = store(&p, &1u32).unwrap_err().to_string();
        assert!(e.contains("state.json"), "{e}");
        assert!(!dir.path().join("state.json.tmp").exists());
    }

    #[test]
    fn an_unwritable_directory_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        // A path under a regular file can never be created, root or not.
        let e = store(&file.join("state.json"), &1u32)
            .unwrap_err()
            .to_string();
        assert!(e.contains("a-file/state.json"), "{e}");
    }
}
