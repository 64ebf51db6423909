//! Recorded probe outcomes played back instead of running (the `--fixture.probe-outcomes` test
//! seam, like the statvfs fixture): a fixture host's golden scrape includes the probe collector's
//! series without doing I/O. Never used unless that hidden flag is given.

use super::{Outcome, Skip, SkipReason};
use std::path::Path;

/// The recorded outcome for `target` in the JSON list at `file`; a skip with reason `error`
/// naming the file when it can't be read or has no outcome for that target.
pub fn recorded(file: &Path, target: &Path) -> Outcome {
    let error = |detail: String| {
        Outcome::Skipped(Skip {
            target: target.to_path_buf(),
            placement: None,
            reason: SkipReason::Error,
            detail,
        })
    };
    let outcomes: Vec<Outcome> = match std::fs::read(file)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(o) => o,
        Err(e) => return error(format!("{}: {e}", file.display())),
    };
    let target_of = |o: &Outcome| match o {
        Outcome::Ran(r) => r.target.clone(),
        Outcome::Skipped(s) => s.target.clone(),
    };
    outcomes
        .into_iter()
        .find(|o| target_of(o) == target)
        .unwrap_or_else(|| {
            error(format!(
                "{}: no recorded outcome for {}",
                file.display(),
                target.display()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_or_target_is_a_named_error_skip() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("outcomes.json");
        let reason = |o: &Outcome| match o {
            Outcome::Skipped(s) => (s.reason, s.detail.clone()),
            Outcome::Ran(_) => panic!("ran"),
        };
        let (r, d) = reason(&recorded(&f, Path::new("/data")));
        assert_eq!(r, SkipReason::Error);
        assert!(d.contains("outcomes.json"), "{d}");
        std::fs::write(
            &f,
            r#"[{"outcome":"skipped","target":"/logs","placement":null,"reason":"busy","detail":"x"}]"#,
        )
        .unwrap();
        assert_eq!(
            reason(&recorded(&f, Path::new("/logs"))).0,
            SkipReason::Busy
        );
        let (r, d) = reason(&recorded(&f, Path::new("/data")));
        assert_eq!(r, SkipReason::Error);
        assert!(d.contains("no recorded outcome for /data"), "{d}");
    }
}
