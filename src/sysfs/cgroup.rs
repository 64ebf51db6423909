//! The task limit of the daemon's own cgroup (`TasksMax=` of its systemd unit): which cgroup
//! `/proc/self/cgroup` names, and `pids.max` / `pids.current` of it and its ancestors under
//! `/sys/fs/cgroup`. cgroup v2, and the v1 pids hierarchy of hybrid hosts. No decisions here.

use std::path::{Path, PathBuf};

/// The tightest task limit over the daemon's cgroup and its ancestors: the level with the
/// fewest tasks left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskLimit {
    /// `pids.max`: threads and processes the cgroup may hold.
    pub max: u64,
    /// `pids.current`: threads and processes it holds now.
    pub current: u64,
    /// The cgroup directory these were read from.
    pub dir: PathBuf,
}

impl TaskLimit {
    /// Tasks that can still be started.
    pub fn left(&self) -> u64 {
        self.max.saturating_sub(self.current)
    }
}

impl std::fmt::Display for TaskLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "task limit {} ({}/pids.max), {} in use",
            self.max,
            self.dir.display(),
            self.current
        )
    }
}

/// Why the task limit could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("reading {}: {cause}", path.display())]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{}: {value:?} is not a number of tasks", path.display())]
    Parse { path: PathBuf, value: String },
}

/// The cgroup paths of `/proc/self/cgroup` that can hold the pids controller: the v2 one
/// (`0::/path`) and the v1 hierarchy whose controllers include `pids` (`5:pids:/path`), each
/// with the directory its hierarchy is mounted at under `/sys/fs/cgroup` by convention.
pub fn parse_proc_cgroup(text: &str) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(ctrls), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if ctrls.is_empty() {
            out.push(("", path.to_string()));
        } else if ctrls.split(',').any(|c| c == "pids") {
            out.push(("pids", path.to_string()));
        }
    }
    out
}

fn read_count(path: &Path) -> Result<Option<u64>, CgroupError> {
    let text = std::fs::read_to_string(path).map_err(|cause| CgroupError::Read {
        path: path.to_path_buf(),
        cause,
    })?;
    let v = text.trim();
    if v == "max" {
        return Ok(None);
    }
    v.parse().map(Some).map_err(|_| CgroupError::Parse {
        path: path.to_path_buf(),
        value: v.to_string(),
    })
}

/// The daemon's task limit: None when no cgroup of it has one (no pids controller, `max` all
/// the way up, not Linux cgroups at all). `proc` and `sys` are `--path.procfs` and
/// `--path.sysfs`; `/proc/self` is the daemon itself.
pub fn read_task_limit(proc: &Path, sys: &Path) -> Result<Option<TaskLimit>, CgroupError> {
    let own = proc.join("self/cgroup");
    let text = match std::fs::read_to_string(&own) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(cause) => return Err(CgroupError::Read { path: own, cause }),
    };
    let base = sys.join("fs/cgroup");
    let mut tightest: Option<TaskLimit> = None;
    for (hierarchy, path) in parse_proc_cgroup(&text) {
        // v2 at /sys/fs/cgroup (or /sys/fs/cgroup/unified on a hybrid host); v1 pids at
        // /sys/fs/cgroup/pids.
        let roots: &[PathBuf] = if hierarchy.is_empty() {
            &[base.clone(), base.join("unified")]
        } else {
            &[base.join("pids")]
        };
        for root in roots {
            let mut dir = root.join(path.trim_start_matches('/'));
            // Each level up to (not including) the hierarchy's root, which has no pids.max.
            while dir.starts_with(root) && dir != *root {
                let max_file = dir.join("pids.max");
                if max_file.exists()
                    && let Some(max) = read_count(&max_file)?
                {
                    let current = read_count(&dir.join("pids.current"))?.unwrap_or(0);
                    let l = TaskLimit {
                        max,
                        current,
                        dir: dir.clone(),
                    };
                    if tightest.as_ref().is_none_or(|t| l.left() < t.left()) {
                        tightest = Some(l);
                    }
                }
                if !dir.pop() {
                    break;
                }
            }
        }
    }
    Ok(tightest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, text: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn proc_cgroup_lines_of_v2_and_of_the_v1_pids_hierarchy() {
        let text = "12:pids:/system.slice/ssdwatch.service\n\
                    4:memory:/system.slice/ssdwatch.service\n\
                    1:name=systemd:/system.slice/ssdwatch.service\n\
                    0::/system.slice/ssdwatch.service\n";
        assert_eq!(
            parse_proc_cgroup(text),
            [
                ("pids", "/system.slice/ssdwatch.service".to_string()),
                ("", "/system.slice/ssdwatch.service".to_string())
            ]
        );
        assert!(parse_proc_cgroup("garbage\n").is_empty());
    }

    /// A unit with `TasksMax=128` in a slice allowing 4,915: the unit's is the tighter.
    #[test]
    fn the_limit_is_the_level_with_the_fewest_tasks_left() {
        let dir = tempfile::tempdir().unwrap();
        let (proc, sys) = (dir.path().join("proc"), dir.path().join("sys"));
        write(
            &proc.join("self/cgroup"),
            "0::/system.slice/ssdwatch.service\n",
        );
        let cg = sys.join("fs/cgroup");
        write(&cg.join("cgroup.controllers"), "cpu memory pids\n");
        write(&cg.join("system.slice/pids.max"), "4915\n");
        write(&cg.join("system.slice/pids.current"), "700\n");
        let unit = cg.join("system.slice/ssdwatch.service");
        write(&unit.join("pids.max"), "128\n");
        write(&unit.join("pids.current"), "21\n");
        let l = read_task_limit(&proc, &sys).unwrap().unwrap();
        assert_eq!((l.max, l.current, l.left()), (128, 21, 107));
        assert_eq!(l.dir, unit);
        // The slice nearly full: now it is the tighter one.
        write(&cg.join("system.slice/pids.current"), "4900\n");
        let l = read_task_limit(&proc, &sys).unwrap().unwrap();
        assert_eq!((l.max, l.left()), (4915, 15));
        // No limit anywhere.
        write(&unit.join("pids.max"), "max\n");
        write(&cg.join("system.slice/pids.max"), "max\n");
        assert_eq!(read_task_limit(&proc, &sys).unwrap(), None);
    }

    #[test]
    fn the_v1_pids_hierarchy_of_a_hybrid_host_and_no_cgroup_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let (proc, sys) = (dir.path().join("proc"), dir.path().join("sys"));
        assert_eq!(read_task_limit(&proc, &sys).unwrap(), None, "no /proc");
        write(&proc.join("self/cgroup"), "9:pids:/ssdwatch\n0::/\n");
        let cg = sys.join("fs/cgroup/pids/ssdwatch");
        write(&cg.join("pids.max"), "128\n");
        write(&cg.join("pids.current"), "30\n");
        let l = read_task_limit(&proc, &sys).unwrap().unwrap();
        assert_eq!((l.max, l.current), (128, 30));
        write(&cg.join("pids.max"), "lots\n");
        let e = read_task_limit(&proc, &sys).unwrap_err().to_string();
        assert!(e.contains("pids.max") && e.contains("lots"), "{e}");
    }
}
