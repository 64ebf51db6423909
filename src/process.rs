//! The daemon's own `process_*` metrics, named and computed as every Prometheus client library
//! exports them, read from procfs at scrape time (a few small files, never a device).

use crate::metrics::MetricSet;
use crate::procfs::selfstat;
use std::path::Path;
use std::sync::OnceLock;

/// The process's own procfs. Not `--path.procfs`: that names the host's tree (possibly a
/// fixture), while these metrics are about this process, wherever it runs (client_golang's
/// process collector reads /proc the same way).
const PROC: &str = "/proc";

/// Appends the `process_*` families. A figure that can't be read is left out (and logged at
/// debug level): an unknown value produces no series.
pub fn families(set: &mut MetricSet) {
    let proc = Path::new(PROC);
    match selfstat::read_stat(proc) {
        Ok(s) => {
            let ticks = clock_ticks_per_second();
            set.counter(
                "process_cpu_seconds_total",
                "Total user and system CPU time spent in seconds.",
            )
            .push_opt(
                &[],
                ticks.map(|t| (s.utime_ticks + s.stime_ticks) as f64 / t),
            );
            set.gauge(
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
            )
            .push(&[], s.vsize_bytes as f64);
            set.gauge(
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
            )
            .push_opt(&[], page_size().map(|p| s.rss_pages as f64 * p));
            set.gauge(
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
            )
            .push_opt(&[], start_time(s.start_ticks));
        }
        Err(e) => tracing::debug!("process metrics: {e}"),
    }
    match selfstat::count_open_fds(proc) {
        Ok(n) => set
            .gauge("process_open_fds", "Number of open file descriptors.")
            .push(&[], n as f64),
        Err(e) => tracing::debug!("process metrics: {e}"),
    }
    match selfstat::read_max_open_files(proc) {
        Ok(n) => set
            .gauge(
                "process_max_fds",
                "Maximum number of open file descriptors.",
            )
            .push_opt(&[], n.map(|n| n as f64)),
        Err(e) => tracing::debug!("process metrics: {e}"),
    }
}

/// Unix time the process started: boot time plus its start in ticks after boot. Computed once:
/// neither changes while the process runs.
fn start_time(start_ticks: u64) -> Option<f64> {
    static START: OnceLock<Option<f64>> = OnceLock::new();
    *START.get_or_init(|| {
        let btime = selfstat::read_btime(Path::new(PROC)).ok().flatten()?;
        Some(btime as f64 + start_ticks as f64 / clock_ticks_per_second()?)
    })
}

fn clock_ticks_per_second() -> Option<f64> {
    // SAFETY: sysconf only reads a system constant.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (t > 0).then_some(t as f64)
}

fn page_size() -> Option<f64> {
    // SAFETY: as above.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    (p > 0).then_some(p as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_described_with_plausible_figures() {
        let mut set = MetricSet::new();
        families(&mut set);
        let v = |n| set.value(n, &[]).unwrap_or_else(|| panic!("{n} missing"));
        let rss = v("process_resident_memory_bytes");
        assert!(
            rss > 1e6 && rss < v("process_virtual_memory_bytes"),
            "{rss}"
        );
        assert!(v("process_open_fds") >= 3.0);
        assert!(v("process_max_fds") >= v("process_open_fds"));
        assert!(v("process_cpu_seconds_total") >= 0.0);
        let now = crate::snapshot::unix_now();
        let start = v("process_start_time_seconds");
        // Started before now, and not before this test binary could have been built.
        assert!(
            start <= now + 1.0 && start > now - 3600.0,
            "{start} vs {now}"
        );
    }
}
