//! Per-item faults as events, not a drumbeat: a failing mount or device is logged when its fault
//! starts and when it clears, and only at debug level in between. Knows nothing of collectors.

use std::collections::BTreeMap;

/// A problem with one item (a mount, a device) that did not fail the whole sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemError {
    /// What failed: a mount point, a device, a file. Faults are tracked per item.
    pub item: String,
    pub message: String,
}

impl ItemError {
    pub fn new(item: impl Into<String>, message: impl Into<String>) -> Self {
        ItemError {
            item: item.into(),
            message: message.into(),
        }
    }
}

/// The message alone when it already names its item (`"device sda: ..."` for item `sda`),
/// else prefixed with it.
impl std::fmt::Display for ItemError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.message.contains(&self.item) {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.item, self.message)
        }
    }
}

/// The open faults of one collector, carried from one sample to the next.
#[derive(Debug, Default)]
pub struct Faults {
    /// Item → the message it last failed with.
    open: BTreeMap<String, String>,
    /// The whole sample's failure, while it lasts.
    failed: Option<String>,
    /// When recording: every line logged at INFO or above, with its level.
    journal: Option<Vec<(tracing::Level, String)>>,
}

impl Faults {
    /// Faults that also keep every line they log at INFO or above, for [`Faults::journal`]: what
    /// a test reads back instead of capturing the process's log (a capturing subscriber set for
    /// one thread misses events whose call site another thread registered first).
    pub fn recording() -> Faults {
        Faults {
            journal: Some(Vec::new()),
            ..Faults::default()
        }
    }

    /// The lines logged at INFO or above since [`Faults::recording`] made this (empty when not
    /// recording).
    pub fn journal(&self) -> &[(tracing::Level, String)] {
        self.journal.as_deref().unwrap_or_default()
    }

    fn log(&mut self, collector: &str, level: tracing::Level, line: String) {
        match level {
            tracing::Level::ERROR => tracing::error!(collector, "{line}"),
            tracing::Level::WARN => tracing::warn!(collector, "{line}"),
            tracing::Level::INFO => tracing::info!(collector, "{line}"),
            _ => tracing::debug!(collector, "{line}"),
        }
        if let Some(j) = &mut self.journal
            && level <= tracing::Level::INFO
        {
            j.push((level, line));
        }
    }

    /// Takes one sample's per-item errors: logs new faults at WARN, cleared ones at INFO and
    /// repeats at DEBUG. An item in `unsampled` was not looked at in this sample (a probe target
    /// or a drive not due, a store not retried yet): its fault, if open, stays open unsaid,
    /// neither cleared nor told again. Returns how many items are failing now.
    pub fn items(&mut self, collector: &str, errors: &[ItemError], unsampled: &[String]) -> u64 {
        let mut now: BTreeMap<String, String> = BTreeMap::new();
        for e in errors {
            now.entry(e.item.clone()).or_insert_with(|| e.to_string());
        }
        for item in unsampled {
            if let Some(msg) = self.open.get(item) {
                now.entry(item.clone()).or_insert_with(|| msg.clone());
            }
        }
        let mut lines = Vec::new();
        for (item, msg) in &now {
            lines.push(match self.open.get(item) {
                None => (
                    tracing::Level::WARN,
                    format!("{msg} (logged again when it clears; repeats at debug level)"),
                ),
                Some(_) => (tracing::Level::DEBUG, format!("still failing: {msg}")),
            });
        }
        for (item, msg) in &self.open {
            if !now.contains_key(item) {
                lines.push((
                    tracing::Level::INFO,
                    format!("{item}: recovered (was: {msg})"),
                ));
            }
        }
        for (level, line) in lines {
            self.log(collector, level, line);
        }
        self.open = now;
        self.open.len() as u64
    }

    /// Takes the outcome of a whole sample: `Some(cause)` when it failed.
    pub fn sample_failed(&mut self, collector: &str, cause: Option<&str>) {
        let line = match (&self.failed, cause) {
            (None, Some(c)) => Some((
                tracing::Level::ERROR,
                format!(
                    "sample failed: {c} (logged again when it recovers; repeats at debug level)"
                ),
            )),
            (Some(prev), Some(c)) if prev != c => {
                Some((tracing::Level::ERROR, format!("sample failed: {c}")))
            }
            (Some(_), Some(c)) => {
                Some((tracing::Level::DEBUG, format!("sample still failing: {c}")))
            }
            (Some(prev), None) => Some((
                tracing::Level::INFO,
                format!("sampling recovered (was: {prev})"),
            )),
            (None, None) => None,
        };
        if let Some((level, line)) = line {
            self.log(collector, level, line);
        }
        self.failed = cause.map(str::to_string);
    }

    /// Items failing as of the last sample.
    #[cfg(test)]
    pub fn open_items(&self) -> impl Iterator<Item = &str> {
        self.open.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(item: &str, msg: &str) -> ItemError {
        ItemError::new(item, format!("{item}: {msg}"))
    }

    #[test]
    fn a_fault_opens_once_and_clears_once_whatever_its_message_says() {
        let mut f = Faults::default();
        assert_eq!(f.items("filesystem", &[e("/a", "EIO 1")], &[]), 1);
        // The same item failing again with another detail is the same fault.
        assert_eq!(
            f.items("filesystem", &[e("/a", "EIO 2"), e("/b", "ENOENT")], &[]),
            2
        );
        assert_eq!(f.open_items().collect::<Vec<_>>(), ["/a", "/b"]);
        assert_eq!(f.items("filesystem", &[e("/b", "ENOENT")], &[]), 1);
        assert_eq!(f.items("filesystem", &[], &[]), 0);
        assert_eq!(f.open_items().count(), 0);
    }

    #[test]
    fn what_is_logged_at_info_and_above_is_a_start_and_an_end_never_a_repeat() {
        use tracing::Level;
        let mut f = Faults::recording();
        for _ in 0..3 {
            f.items("smart", &[e("sda", "timed out")], &[]);
            f.sample_failed("smart", Some("smartctl not found"));
        }
        f.items("smart", &[], &[]);
        f.sample_failed("smart", None);
        let got: Vec<(Level, &str)> = f.journal().iter().map(|(l, s)| (*l, s.as_str())).collect();
        assert_eq!(
            got,
            [
                (
                    Level::WARN,
                    "sda: timed out (logged again when it clears; repeats at debug level)"
                ),
                (
                    Level::ERROR,
                    "sample failed: smartctl not found (logged again when it recovers; repeats at debug level)"
                ),
                (Level::INFO, "sda: recovered (was: sda: timed out)"),
                (Level::INFO, "sampling recovered (was: smartctl not found)"),
            ]
        );
        assert!(Faults::default().journal().is_empty());
    }

    /// Two probe targets, one failing, sampled in turns: the failing one is neither cleared
    /// nor warned again in the samples that don't cover it.
    #[test]
    fn an_item_not_sampled_keeps_its_fault_unsaid() {
        use tracing::Level;
        let mut f = Faults::recording();
        let (good, bad) = ("/srv/a".to_string(), "/srv/b".to_string());
        for round in 0..5 {
            assert_eq!(
                f.items("probe", &[], std::slice::from_ref(&bad)),
                u64::from(round > 0)
            );
            assert_eq!(
                f.items("probe", &[e("/srv/b", "EIO")], std::slice::from_ref(&good)),
                1
            );
        }
        // Sampled again without an error, it clears, once.
        assert_eq!(f.items("probe", &[], std::slice::from_ref(&good)), 0);
        let got: Vec<(Level, &str)> = f.journal().iter().map(|(l, s)| (*l, s.as_str())).collect();
        assert_eq!(
            got,
            [
                (
                    Level::WARN,
                    "/srv/b: EIO (logged again when it clears; repeats at debug level)"
                ),
                (Level::INFO, "/srv/b: recovered (was: /srv/b: EIO)"),
            ]
        );
    }

    #[test]
    fn two_errors_of_one_item_count_as_one_failing_item() {
        let mut f = Faults::default();
        assert_eq!(f.items("smart", &[e("sda", "x"), e("sda", "y")], &[]), 1);
    }

    #[test]
    fn a_message_is_shown_once_with_its_item() {
        let i = ItemError::new("/data", "/data: statvfs: Permission denied");
        assert_eq!(i.to_string(), "/data: statvfs: Permission denied");
        let i = ItemError::new("sda", "device sda: smartctl timed out");
        assert_eq!(i.to_string(), "device sda: smartctl timed out");
        assert_eq!(
            ItemError::new("sda", "timed out").to_string(),
            "sda: timed out"
        );
    }
}
