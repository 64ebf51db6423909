//! Value checks shared by every config section: the error type that names a key, and ranges.
//! A leaf module: it knows no config struct, so each collector can own its own section.

use std::time::Duration;

/// A value that failed validation: which key, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid {
    pub key: String,
    pub message: String,
}

impl Invalid {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Invalid {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// The longest interval any collector accepts: beyond it a schedule means nothing, and a
/// larger value could overflow the clock arithmetic of the scheduler.
pub(crate) const MAX_INTERVAL: Duration = Duration::from_secs(30 * crate::time::DAY as u64);

/// Checks that `p` is a path the kernel can take: absolute, and without a NUL byte (a path with
/// one can't be passed to any system call, so it would fail only at run time, far from the
/// config).
pub(crate) fn check_absolute_path(key: &str, p: &std::path::Path) -> Result<(), Invalid> {
    if !p.is_absolute() {
        return Err(Invalid::new(key, "must be an absolute path"));
    }
    if std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str()).contains(&0) {
        return Err(Invalid::new(key, "contains a NUL byte; no path can"));
    }
    Ok(())
}

/// Checks a `<section>.timeout` of a collector that runs a command or a blocking call (smartctl,
/// dmsetup and zpool, a database directory's listing): 100 ms to 10 minutes, one range for all.
pub(crate) fn check_timeout(section: &str, d: Duration) -> Result<(), Invalid> {
    check_duration(
        &format!("{section}.timeout"),
        d,
        Duration::from_millis(100),
        Duration::from_secs(600),
    )
}

/// Checks that `d` lies in `min..=max`, naming `key` otherwise.
pub(crate) fn check_duration(
    key: &str,
    d: Duration,
    min: Duration,
    max: Duration,
) -> Result<(), Invalid> {
    let show = |d: Duration| humantime::format_duration(d).to_string();
    if d < min {
        return Err(Invalid::new(
            key,
            format!("{} is too short; the minimum is {}", show(d), show(min)),
        ));
    }
    if d > max {
        return Err(Invalid::new(
            key,
            format!("{} is too long; the maximum is {}", show(d), show(max)),
        ));
    }
    Ok(())
}

/// Checks that a count or size `v` lies in `min..=max`, naming `key` otherwise.
pub(crate) fn check_range(key: &str, v: u64, min: u64, max: u64) -> Result<(), Invalid> {
    if v < min || v > max {
        return Err(Invalid::new(
            key,
            format!("{v} is out of range; it must be {min} to {max}"),
        ));
    }
    Ok(())
}

/// The most entries any list of the config takes: far beyond a real host's needs, and a bound
/// on the work each one costs per sample.
pub(crate) const MAX_ENTRIES: usize = 1024;

/// Checks that the list at `key` has at most `max` entries.
pub(crate) fn check_entries(key: &str, len: usize, max: usize) -> Result<(), Invalid> {
    if len > max {
        return Err(Invalid::new(key, format!("{len} entries; at most {max}")));
    }
    Ok(())
}

/// Shared check for a collector's `interval`: at least `min`, at most [`MAX_INTERVAL`].
pub(crate) fn check_interval(key: &str, d: Duration, min: Duration) -> Result<(), Invalid> {
    check_duration(&format!("{key}.interval"), d, min, MAX_INTERVAL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_out_of_range_name_the_key_and_the_bound() {
        let s = Duration::from_secs;
        assert_eq!(check_interval("c.x", s(60), s(1)), Ok(()));
        let short = check_interval("c.x", Duration::from_millis(10), s(1)).unwrap_err();
        assert_eq!(short.key, "c.x.interval");
        assert!(short.message.contains("minimum is 1s"), "{}", short.message);
        let long = check_interval("c.x", Duration::MAX, s(1)).unwrap_err();
        assert!(check_entries("k", 1024, MAX_ENTRIES).is_ok());
        assert_eq!(
            check_entries("k", 1025, MAX_ENTRIES).unwrap_err().message,
            "1025 entries; at most 1024"
        );
        assert!(check_range("k", 0, 1, 64).is_err());
        assert!(check_range("k", 65, 1, 64).is_err());
        assert!(check_range("k", 1, 1, 64).is_ok() && check_range("k", 64, 1, 64).is_ok());
        assert_eq!(
            check_range("k", 0, 1, 64).unwrap_err().message,
            "0 is out of range; it must be 1 to 64"
        );
        assert!(
            long.message.contains("maximum is 30days"),
            "{}",
            long.message
        );
    }
}
