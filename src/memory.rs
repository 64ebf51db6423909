//! A process's own resident memory: which pages of code and read-only data it may let go once
//! start-up is over (a pure plan over its mappings), the system call that does it, and when
//! the daemon and its privileged helper do it. No metrics here.

use crate::procfs::selfstat::ProcError;
use crate::procfs::smaps::{self, Mapping};
use std::path::Path;
use std::time::Duration;

/// How long after start a process lets go of the pages only start-up used. By then every
/// collector has sampled (they all start at once; the largest host takes well under a second),
/// the history has opened and checked its store, and the helper has served the first pass.
const START_UP: Duration = Duration::from_secs(20);

/// How often, after that, it lets go of the code pages rarer work mapped since: a SMART pass,
/// the history's commit (every 15 minutes), its hourly maintenance and forecast pass, a reload.
/// Without this they stay mapped until the process ends; with it, at most two minutes after
/// that work. What runs every interval (sampling, a scrape) is mapped back within one
/// interval, about a thousand minor faults (well under a millisecond), and the release itself
/// reads this process's smaps once.
const RARE_WORK: Duration = Duration::from_secs(120);

/// Once start-up is over, unmaps the code and constants it alone touched (clap, the YAML
/// parser, SQLite's schema check, the dynamic linker's binding of every symbol): 1.4-1.6 MiB
/// of the 7.2 MiB of file pages resident at start in the daemon on the large host
/// (benches/rss.sh, docs/benchmarks.md); then again every [`RARE_WORK`]. What the process runs
/// again is mapped back from the page cache at its next use. `who` names the process in the
/// debug log.
pub(crate) async fn release_after_start_up(who: &'static str) {
    tokio::time::sleep(START_UP).await;
    loop {
        // Not the door: this process's own /proc/self/maps and madvise, which cannot hang.
        let released =
            tokio::task::spawn_blocking(|| release_start_up_pages(Path::new("/proc"))).await;
        match released {
            Ok(Ok(r)) => tracing::debug!(
                "{who}: released code pages: {} KiB resident in {} read-only file mappings",
                r.resident_kib,
                r.mappings
            ),
            Ok(Err(e)) => tracing::debug!("{who}: releasing code pages: {e}"),
            Err(e) => tracing::debug!("{who}: releasing code pages: {e}"),
        }
        tokio::time::sleep(RARE_WORK).await;
    }
}

/// What a release let go of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Released {
    pub mappings: usize,
    /// Pages of those mappings that were resident just before, in KiB.
    pub resident_kib: u64,
}

/// The mappings whose pages can be unmapped without losing anything: private, read-only
/// mappings of a file (the binary's and the libraries' code and constants) of which no page
/// was ever written. Such a page is the file's page in the page cache; dropped from this
/// process, it is mapped again from the cache by the next access (a minor fault).
///
/// Excluded, each for a reason:
/// - a page written once (relocations before RELRO made them read-only: `Anonymous` > 0) has
///   no copy but this one, and `MADV_DONTNEED` would throw it away;
/// - writable or shared mappings (data, SQLite's WAL index) are live state;
/// - locked or special mappings (`lo`, `io`, `pf`) refuse `MADV_DONTNEED`;
/// - anonymous memory and pseudo mappings (`[heap]`, `[vdso]`) are not backed by a file.
pub(crate) fn releasable(maps: &[Mapping]) -> Vec<&Mapping> {
    maps.iter()
        .filter(|m| {
            m.is_file()
                && m.readable
                && !m.writable
                && !m.shared
                && m.anonymous_kib == 0
                && m.rss_kib > 0
                && !["lo", "io", "pf"].iter().any(|f| m.has_flag(f))
        })
        .collect()
}

/// Unmaps the resident pages of every releasable mapping of this process (see [`releasable`]),
/// reading its mappings under `proc_root` (normally `/proc`). What start-up alone ran
/// (argument parsing, the YAML config, the first discovery, SQLite's schema check, the
/// dynamic linker's symbol binding) stays out of the resident set; what runs again comes back
/// within one sampling interval, from the page cache.
pub(crate) fn release_start_up_pages(proc_root: &Path) -> Result<Released, ProcError> {
    let maps = smaps::read_self_smaps(proc_root)?;
    let mut out = Released::default();
    for m in releasable(&maps) {
        let len = (m.end - m.start) as usize;
        // SAFETY: the range is a whole mapping of this process, listed by the kernel a moment
        // ago: private, read-only, never written (no anonymous page), so every page in it is
        // a page-cache page of its file that the next access maps again. The range still
        // covers that mapping: the daemon loads and unloads no library after start-up (glibc
        // keeps the name-service modules it loads for a listen address), so nothing unmaps
        // code or maps something else in its place between the listing and this call.
        let rc = unsafe {
            libc::madvise(
                m.start as usize as *mut libc::c_void,
                len,
                libc::MADV_DONTNEED,
            )
        };
        if rc == 0 {
            out.mappings += 1;
            out.resident_kib += m.rss_kib;
        } else {
            tracing::debug!(
                "releasing the pages of {} ({:x}-{:x}): {}",
                m.name,
                m.start,
                m.end,
                std::io::Error::last_os_error()
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(name: &str, perms: &str, rss: u64, anon: u64, flags: &str) -> Mapping {
        let p = perms.as_bytes();
        Mapping {
            start: 0x1000,
            end: 0x2000,
            readable: p[0] == b'r',
            writable: p[1] == b'w',
            executable: p[2] == b'x',
            shared: p[3] == b's',
            name: name.into(),
            rss_kib: rss,
            anonymous_kib: anon,
            vm_flags: flags.split_whitespace().map(String::from).collect(),
        }
    }

    #[test]
    fn only_never_written_read_only_file_pages_are_released() {
        let maps = [
            map("/usr/bin/ssdwatch", "r--p", 832, 0, "rd mr mw me"),
            map("/usr/bin/ssdwatch", "r-xp", 3972, 0, "rd ex mr mw me"),
            // RELRO: relocated at load, then made read-only; the written pages exist only here.
            map("/usr/bin/ssdwatch", "r--p", 136, 136, "rd mr mw me ac"),
            map("/usr/bin/ssdwatch", "rw-p", 24, 24, "rd wr mr mw me ac"),
            map(
                "/usr/lib/x86_64-linux-gnu/libc.so.6",
                "r-xp",
                1072,
                0,
                "rd ex mr mw me",
            ),
            map(
                "/var/lib/ssdwatch/history.db-shm",
                "rw-s",
                32,
                0,
                "rd wr sh mr mw me ms",
            ),
            // Locked code (mlockall): MADV_DONTNEED refuses it.
            map("/usr/lib/libm.so.6", "r-xp", 320, 0, "rd ex mr mw me lo"),
            // Not resident: nothing to release.
            map("/usr/lib/libgcc_s.so.1", "r--p", 0, 0, "rd mr mw me"),
            map("[heap]", "rw-p", 3544, 3544, "rd wr mr mw me ac"),
            map("[vdso]", "r-xp", 8, 0, "rd ex mr mw me de"),
            map("", "r--p", 4, 4, "rd mr mw me"),
        ];
        let got: Vec<(&str, u64)> = releasable(&maps)
            .iter()
            .map(|m| (m.name.as_str(), m.rss_kib))
            .collect();
        assert_eq!(
            got,
            [
                ("/usr/bin/ssdwatch", 832),
                ("/usr/bin/ssdwatch", 3972),
                ("/usr/lib/x86_64-linux-gnu/libc.so.6", 1072),
            ]
        );
    }

    /// The release on this very process: its code's resident pages drop, and everything keeps
    /// working (the code runs on, data written before is intact).
    #[test]
    fn released_code_runs_on_and_comes_back_as_used() {
        let proc = Path::new("/proc");
        let code_rss = || -> u64 {
            smaps::read_self_smaps(proc)
                .unwrap()
                .iter()
                .filter(|m| m.is_file() && m.executable)
                .map(|m| m.rss_kib)
                .sum()
        };
        let table: Vec<u64> = (0..1000).map(|i| i * i).collect();
        let before = code_rss();
        let released = release_start_up_pages(proc).unwrap();
        assert!(released.mappings > 0, "{released:?}");
        // What was resident went (code and read-only data; other tests' threads run on
        // meanwhile and fault some back, so the resident size after the release is no measure
        // of it).
        assert!(
            before > 0 && released.resident_kib > 0,
            "{released:?}, code resident before: {before} KiB"
        );
        // Executing after the release: the test's own code and std's faulted back in.
        assert!(code_rss() > 0);
        assert_eq!(table.iter().sum::<u64>(), 332_833_500);
    }
}
