//! A pids cgroup of one test, as systemd's `TasksMax=` makes one for a unit: made under this
//! process's own cgroup in the hierarchy that has the pids controller (cgroup v2, else the v1
//! pids hierarchy of a hybrid host), a daemon started in it, removed on drop.

use std::path::PathBuf;

pub struct PidsCgroup {
    pub dir: PathBuf,
}

impl PidsCgroup {
    /// Where the pids controller can be used from this process's cgroup: the v2 hierarchy when
    /// it offers the controller, else the v1 pids hierarchy; or why neither.
    fn locate() -> Result<PathBuf, String> {
        let table = std::fs::read("/proc/self/mountinfo")
            .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
        let (mounts, _) = ssdwatch::procfs::mountinfo::parse_mountinfo_bytes(&table);
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("/proc/self/cgroup: {e}"))?;
        if let (Some(m), Some(path)) = (
            mounts.iter().find(|m| m.fstype == "cgroup2"),
            own.lines().find_map(|l| l.strip_prefix("0::")),
        ) {
            let dir = m.mount_path.join(path.trim_start_matches('/'));
            let offered =
                std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
            if offered.split_whitespace().any(|c| c == "pids")
                || std::fs::write(dir.join("cgroup.subtree_control"), "+pids").is_ok()
            {
                return Ok(dir);
            }
        }
        let v1 = own.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
            ctrls.split(',').any(|c| c == "pids").then_some(path)
        });
        if let (Some(m), Some(path)) = (
            mounts
                .iter()
                .find(|m| m.fstype == "cgroup" && m.super_options.iter().any(|o| o == "pids")),
            v1,
        ) {
            return Ok(m.mount_path.join(path.trim_start_matches('/')));
        }
        Err("no cgroup hierarchy with the pids controller usable from this process's cgroup".into())
    }

    /// A new cgroup allowing `max` tasks (threads and processes alike).
    pub fn create(max: u64) -> Result<PidsCgroup, String> {
        let dir = Self::locate()?.join(format!("ssdwatch-test-pids-{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("creating cgroup {}: {e}", dir.display()))?;
        let cg = PidsCgroup { dir };
        let p = cg.dir.join("pids.max");
        std::fs::write(&p, max.to_string())
            .map_err(|e| format!("writing {max} to {}: {e}", p.display()))?;
        Ok(cg)
    }

    /// Makes `cmd`'s process join this cgroup before it runs, so every thread and process of
    /// it counts against the limit.
    pub fn enter_on_start(&self, cmd: &mut std::process::Command) {
        enter_on_start(&self.dir, cmd);
    }

    /// Changes the limit.
    pub fn set_max(&self, max: u64) {
        let p = self.dir.join("pids.max");
        std::fs::write(&p, max.to_string())
            .unwrap_or_else(|e| panic!("writing {max} to {}: {e}", p.display()));
    }

    fn read(&self, file: &str) -> String {
        let p = self.dir.join(file);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// Tasks in the cgroup now.
    pub fn current(&self) -> u64 {
        self.read("pids.current").trim().parse().unwrap_or(0)
    }

    /// How often a fork or a thread was refused for the limit (`pids.events`, max N).
    pub fn refusals(&self) -> Option<u64> {
        std::fs::read_to_string(self.dir.join("pids.events"))
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("max "))
            .and_then(|v| v.trim().parse().ok())
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        // The daemon is gone (killed and reaped) before this; a thread of it may take a moment
        // to leave the cgroup's count.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            eprintln!("removing cgroup {}: {e}", self.dir.display());
        }
    }
}

/// Makes `cmd`'s process join the cgroup `dir` before it runs (writes its pid, "0", to
/// `cgroup.procs` between fork and exec), so all it does is charged there.
pub fn enter_on_start(dir: &std::path::Path, cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let procs = std::ffi::CString::new(
        dir.join("cgroup.procs")
            .into_os_string()
            .into_encoded_bytes(),
    )
    .unwrap();
    // SAFETY: only async-signal-safe calls (open, write, close) on memory made before fork.
    unsafe {
        cmd.pre_exec(move || {
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let n = libc::write(fd, b"0".as_ptr().cast(), 1);
            let err = std::io::Error::last_os_error();
            libc::close(fd);
            if n == 1 { Ok(()) } else { Err(err) }
        });
    }
}

/// A memory cgroup of one test, as systemd's `MemoryMax=` makes one for a unit: under this
/// process's own cgroup, v2 (`memory.max`) or v1 (`memory.limit_in_bytes`), removed on drop.
pub struct MemoryCgroup {
    pub dir: PathBuf,
}

impl MemoryCgroup {
    /// A new cgroup whose memory is capped at `max` bytes; or why none can be made here.
    pub fn create(max: u64) -> Result<MemoryCgroup, String> {
        let table = std::fs::read("/proc/self/mountinfo")
            .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
        let (mounts, _) = ssdwatch::procfs::mountinfo::parse_mountinfo_bytes(&table);
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("/proc/self/cgroup: {e}"))?;
        let name = format!("ssdwatch-test-memory-{}", std::process::id());
        // v1: the hierarchy mounted with the memory controller.
        let v1 = own.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
            ctrls.split(',').any(|c| c == "memory").then_some(path)
        });
        let candidates: Vec<(PathBuf, &str)> = mounts
            .iter()
            .filter_map(|m| {
                if m.fstype == "cgroup" && m.super_options.iter().any(|o| o == "memory") {
                    v1.map(|p| {
                        (
                            m.mount_path.join(p.trim_start_matches('/')),
                            "memory.limit_in_bytes",
                        )
                    })
                } else if m.fstype == "cgroup2" {
                    own.lines()
                        .find_map(|l| l.strip_prefix("0::"))
                        .map(|p| (m.mount_path.join(p.trim_start_matches('/')), "memory.max"))
                } else {
                    None
                }
            })
            .collect();
        let mut why = Vec::new();
        for (parent, file) in candidates {
            let dir = parent.join(&name);
            if let Err(e) = std::fs::create_dir(&dir) {
                why.push(format!("{}: {e}", dir.display()));
                continue;
            }
            let cg = MemoryCgroup { dir };
            match std::fs::write(cg.dir.join(file), max.to_string()) {
                Ok(()) => return Ok(cg),
                Err(e) => why.push(format!("{file}: {e}")),
            }
        }
        Err(format!(
            "no memory cgroup could be made: {}",
            why.join("; ")
        ))
    }

    /// Makes `cmd`'s process join this cgroup before it runs.
    pub fn enter_on_start(&self, cmd: &mut std::process::Command) {
        enter_on_start(&self.dir, cmd);
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}
