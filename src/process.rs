//! The daemon's own `process_*` metrics, named and computed as every Prometheus client library
//! exports them, read from procfs at scrape time (a few small files, never a device).

use crate::catalogue;
use crate::metrics::MetricSet;
use crate::procfs::selfstat::{self, ProcError};
use std::path::Path;
use std::sync::OnceLock;

/// The process's own procfs. Not `--path.procfs`: that names the host's tree (possibly a
/// fixture), while these metrics are about this process, wherever it runs (client_golang's
/// process collector reads /proc the same way).
const PROC: &str = "/proc";

/// Appends the `process_*` families. A figure that can't be read is left out (and logged at
/// debug level): an unknown value produces no series. Per scrape this costs one small procfs
/// read (`statm`), an fstat of `self/fd` (a listing before Linux 6.2; both on descriptors kept
/// open) and two system calls; the start time is read once.
pub(crate) fn families(set: &mut MetricSet) {
    let proc = Path::new(PROC);
    // getrusage counts every thread, as utime + stime of /proc/self/stat do, without a file.
    match nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            set.family(&catalogue::PROCESS_CPU_SECONDS_TOTAL)
                .push(&[], secs(u.user_time()) + secs(u.system_time()));
        }
        Err(e) => tracing::debug!("process metrics: getrusage: {e}"),
    }
    let statm = match kept() {
        Some(k) => k.statm(),
        None => selfstat::read_statm(proc),
    };
    match statm {
        Ok((size, resident)) => {
            let page = page_size();
            set.family(&catalogue::PROCESS_VIRTUAL_MEMORY_BYTES)
                .push_opt(&[], page.map(|p| size as f64 * p));
            set.family(&catalogue::PROCESS_RESIDENT_MEMORY_BYTES)
                .push_opt(&[], page.map(|p| resident as f64 * p));
        }
        Err(e) => tracing::debug!("process metrics: {e}"),
    }
    set.family(&catalogue::PROCESS_START_TIME_SECONDS)
        .push_opt(&[], start_time());
    let open_fds = match kept() {
        Some(k) => k.open_fds(),
        None => selfstat::count_open_fds(proc),
    };
    match open_fds {
        Ok(n) => set.family(&catalogue::PROCESS_OPEN_FDS).push(&[], n as f64),
        Err(e) => tracing::debug!("process metrics: {e}"),
    }
    // The soft limit of this process, as "Max open files" of /proc/self/limits shows it.
    match nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE) {
        Ok((soft, _)) if soft != nix::sys::resource::RLIM_INFINITY => set
            .family(&catalogue::PROCESS_MAX_FDS)
            .push(&[], soft as f64),
        Ok(_) => {}
        Err(e) => tracing::debug!("process metrics: getrlimit: {e}"),
    }
}

/// `/proc/self/statm` and `/proc/self/fd`, opened at the first scrape and kept open: a scrape
/// then reads statm with one `pread` and lists fd after a rewind, with no path walk, open,
/// stat or close (7 of the 12 system calls a scrape made). Both descriptors count in
/// `process_open_fds`, as the one a listing opened did.
struct Kept {
    statm: std::fs::File,
    fd: std::sync::Mutex<nix::dir::Dir>,
}

impl Kept {
    fn statm(&self) -> Result<(u64, u64), ProcError> {
        use std::os::unix::fs::FileExt;
        let err = |problem: String| ProcError {
            path: format!("{PROC}/self/statm"),
            problem,
        };
        // statm is one short line (seven numbers); a seq file is made again at offset 0.
        let mut buf = [0u8; 256];
        let n = self
            .statm
            .read_at(&mut buf, 0)
            .map_err(|e| err(e.to_string()))?;
        let text = std::str::from_utf8(&buf[..n]).map_err(|e| err(e.to_string()))?;
        selfstat::parse_statm(text).map_err(|e| err(e.to_string()))
    }

    /// Never an error (a listing skips what it can't read), typed as the path-based count is.
    fn open_fds(&self) -> Result<u64, ProcError> {
        let mut dir = self.fd.lock().unwrap_or_else(|e| e.into_inner());
        // Since Linux 6.2 the size of a /proc/PID/fd directory is its number of open
        // descriptors: one fstat instead of a listing, which builds a dentry per descriptor (two
        // getdents64 and a rewind; a sixth of the daemon's CPU per gzip scrape of a large host).
        // An older kernel says 0 there, which no process can have while this one is open.
        if let Some(n) = fd_dir_size(&*dir) {
            return Ok(n);
        }
        // The iterator rewinds the directory when it is dropped, ready for the next scrape.
        let n = (dir.iter())
            .filter_map(Result::ok)
            .filter(|e| !matches!(e.file_name().to_bytes(), b"." | b".."))
            .count();
        Ok(n as u64)
    }
}

/// The size a /proc/PID/fd directory reports: its open descriptors on Linux 6.2 and later;
/// None where it reports none (older kernels say 0) or can't be asked.
fn fd_dir_size(dir: &impl std::os::fd::AsFd) -> Option<u64> {
    let st = nix::sys::stat::fstat(dir.as_fd()).ok()?;
    u64::try_from(st.st_size).ok().filter(|n| *n > 0)
}

/// The kept files; `None` (and the path-based reads) where they can't be opened.
fn kept() -> Option<&'static Kept> {
    static KEPT: OnceLock<Option<Kept>> = OnceLock::new();
    KEPT.get_or_init(|| {
        let statm = std::fs::File::open(Path::new(PROC).join("self/statm")).ok()?;
        let fd = nix::dir::Dir::open(
            &Path::new(PROC).join("self/fd"),
            nix::fcntl::OFlag::O_RDONLY
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .ok()?;
        Some(Kept {
            statm,
            fd: std::sync::Mutex::new(fd),
        })
    })
    .as_ref()
}

/// Unix time the process started: boot time plus its start in ticks after boot. Computed once:
/// neither changes while the process runs.
fn start_time() -> Option<f64> {
    static START: OnceLock<Option<f64>> = OnceLock::new();
    *START.get_or_init(|| {
        let proc = Path::new(PROC);
        let start_ticks = selfstat::read_stat(proc)
            .map_err(|e| tracing::debug!("process metrics: {e}"))
            .ok()?
            .start_ticks;
        let btime = selfstat::read_btime(proc).ok().flatten()?;
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

    /// The kept descriptors read the present, not what they saw first: a listing after a
    /// rewind sees a file opened since, and statm moves with the memory.
    #[test]
    fn the_kept_procfs_files_are_read_afresh_each_time() {
        if !crate::testing::alone("process::tests::the_kept_procfs_files_are_read_afresh_each_time")
        {
            return;
        }
        let k = kept().expect("/proc/self is readable");
        let before = k.open_fds().unwrap();
        let files: Vec<_> = (0..64)
            .map(|_| std::fs::File::open("/proc/self/stat").unwrap())
            .collect();
        assert!(k.open_fds().unwrap() > before + 32);
        drop(files);
        let (_, rss) = k.statm().unwrap();
        let big = vec![1u8; 64 << 20];
        let (_, rss_after) = k.statm().unwrap();
        assert!(rss_after > rss, "{rss} -> {rss_after}");
        drop(big);
    }

    /// Where the kernel tells the count as the directory's size, it is the listing's count.
    #[test]
    fn the_fd_directorys_size_counts_what_a_listing_counts() {
        if !crate::testing::alone(
            "process::tests::the_fd_directorys_size_counts_what_a_listing_counts",
        ) {
            return;
        }
        let dir = nix::dir::Dir::open(
            "/proc/self/fd",
            nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY,
            nix::sys::stat::Mode::empty(),
        )
        .expect("open /proc/self/fd");
        let Some(before) = fd_dir_size(&dir) else {
            // A kernel before 6.2: the listing is used, as the test above covers.
            return;
        };
        let files: Vec<_> = (0..64)
            .map(|_| std::fs::File::open("/proc/self/stat").unwrap())
            .collect();
        let during = fd_dir_size(&dir).expect("a size");
        assert!(during > before + 32, "{before} -> {during}");
        let listed = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
        // The listing's own descriptor is one more.
        assert!(
            listed.abs_diff(during) <= 2,
            "listed {listed}, size {during}"
        );
        drop(files);
        assert!(fd_dir_size(&dir).expect("a size") < during - 32);
    }

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
        // The two sources agree: the limit from getrlimit is the one /proc/self/limits shows.
        assert_eq!(
            Some(v("process_max_fds") as u64),
            selfstat::read_max_open_files(Path::new("/proc")).unwrap()
        );
        // CPU from getrusage against utime + stime of /proc/self/stat (ticks: 10 ms), read
        // after it, so it can only be ahead by the time between the two reads.
        let stat = selfstat::read_stat(Path::new("/proc")).unwrap();
        let from_stat =
            (stat.utime_ticks + stat.stime_ticks) as f64 / clock_ticks_per_second().unwrap();
        let cpu = v("process_cpu_seconds_total");
        assert!((from_stat - cpu).abs() < 0.5, "{from_stat} vs {cpu}");
        let now = crate::time::unix_now();
        let start = v("process_start_time_seconds");
        // Started before now, and not before this test binary could have been built.
        assert!(
            start <= now + 1.0 && start > now - 3600.0,
            "{start} vs {now}"
        );
    }
}
