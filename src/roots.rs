//! Where the daemon reads the host: `/sys`, `/proc` and the host's root filesystem, each from a
//! flag, and the one way a host path becomes a path to open here, symlinks resolved inside the
//! host's root (a container's own `/data` never stands in for the host's).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// Most symlinks followed in one path, as the kernel's limit (ELOOP past it).
pub(crate) const MAX_SYMLINKS: usize = 40;

/// Where every reader looks: the `--path.sysfs`, `--path.procfs` and `--path.rootfs` flags
/// (node_exporter's meaning), so the whole daemon runs against a fixture tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Roots {
    pub sys: PathBuf,
    pub proc: PathBuf,
    pub rootfs: PathBuf,
    /// Test seam: statvfs answers read from this YAML file instead of the kernel
    /// (fixture trees have no real filesystems behind their mount points).
    pub statvfs_fixture: Option<PathBuf>,
    /// Test seam: probe outcomes played back from this JSON file instead of running probes.
    pub probe_fixture: Option<PathBuf>,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            sys: PathBuf::from("/sys"),
            proc: PathBuf::from("/proc"),
            rootfs: PathBuf::from("/"),
            statvfs_fixture: None,
            probe_fixture: None,
        }
    }
}

impl Roots {
    /// A fixture tree laid out as `<dir>/sys`, `<dir>/proc`, `<dir>/statvfs.yaml`.
    pub fn fixture(dir: &Path) -> Self {
        let statvfs = dir.join("statvfs.yaml");
        Roots {
            sys: dir.join("sys"),
            proc: dir.join("proc"),
            rootfs: dir.join("rootfs"),
            statvfs_fixture: statvfs.exists().then_some(statvfs),
            probe_fixture: None,
        }
    }

    /// A path inside the host's root filesystem as seen from here (`--path.rootfs`).
    pub fn in_rootfs(&self, p: &Path) -> PathBuf {
        in_rootfs(&self.rootfs, p)
    }

    /// `host` (a path as the host sees it) with every symlink resolved inside the host's
    /// root, as the host's kernel would: an absolute link target starts again at the host's
    /// `/`, `..` never climbs above it. Returns (host path, path to open here).
    pub fn canonical(&self, host: &Path) -> std::io::Result<(PathBuf, PathBuf)> {
        canonical(&self.rootfs, host)
    }
}

/// [`Roots::in_rootfs`] for code handed only the root filesystem's path.
pub(crate) fn in_rootfs(rootfs: &Path, p: &Path) -> PathBuf {
    rootfs.join(p.strip_prefix("/").unwrap_or(p))
}

/// [`Roots::canonical`] for code handed only the root filesystem's path: the one way a host
/// path that may hold symlinks (a data directory, a tablespace, an option file, a binary log
/// named in its index) becomes a path to open here.
pub(crate) fn canonical(rootfs: &Path, host: &Path) -> std::io::Result<(PathBuf, PathBuf)> {
    let real = resolve(rootfs, host)?;
    let inside = in_rootfs(rootfs, &real);
    Ok((real, inside))
}

/// The resolution behind [`canonical`]: the host path, links read under the rootfs; ELOOP past
/// [`MAX_SYMLINKS`], NotFound at a missing component.
fn resolve(rootfs: &Path, host: &Path) -> std::io::Result<PathBuf> {
    let mut todo: VecDeque<OsString> = VecDeque::new();
    push_components(&mut todo, host, false);
    let mut out = PathBuf::from("/");
    let mut links = 0;
    while let Some(c) = todo.pop_front() {
        match c.to_str() {
            Some("/") => out = PathBuf::from("/"),
            Some(".") => {}
            Some("..") => {
                out.pop();
            }
            _ => {
                let next = out.join(&c);
                match std::fs::read_link(in_rootfs(rootfs, &next)) {
                    Ok(target) => {
                        links += 1;
                        if links > MAX_SYMLINKS {
                            return Err(std::io::Error::from_raw_os_error(libc::ELOOP));
                        }
                        push_components(&mut todo, &target, true);
                    }
                    // Not a link: as it is.
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => out = next,
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(out)
}

/// The components of `p` onto `todo`, at its front (a link's target, read next) or back.
pub(crate) fn push_components(todo: &mut VecDeque<OsString>, p: &Path, front: bool) {
    let parts: Vec<OsString> = p
        .components()
        .map(|c| match c {
            Component::RootDir => "/".into(),
            Component::ParentDir => "..".into(),
            Component::CurDir => ".".into(),
            Component::Normal(n) => n.to_os_string(),
            Component::Prefix(p) => p.as_os_str().to_os_string(),
        })
        .collect();
    if front {
        for c in parts.into_iter().rev() {
            todo.push_front(c);
        }
    } else {
        todo.extend(parts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// The Debian and container layout: `/srv/pgdata -> /data/pg15` on the host, seen by a
    /// daemon whose own root has no `/data`, or a `/data` of its own.
    #[test]
    fn an_absolute_symlink_resolves_inside_the_hosts_root_not_the_daemons() {
        let host = tempfile::tempdir().unwrap();
        let r = Roots {
            rootfs: host.path().to_path_buf(),
            ..Roots::default()
        };
        std::fs::create_dir_all(host.path().join("data/pg15")).unwrap();
        std::fs::create_dir_all(host.path().join("srv")).unwrap();
        symlink("/data/pg15", host.path().join("srv/pgdata")).unwrap();
        let (h, inside) = r.canonical(Path::new("/srv/pgdata")).unwrap();
        assert_eq!(h, Path::new("/data/pg15"));
        assert_eq!(inside, host.path().join("data/pg15"));
        // Relative links, `..` at the root, a chain of links.
        symlink("../data/./pg15/", host.path().join("srv/rel")).unwrap();
        symlink("/srv/rel", host.path().join("srv/chain")).unwrap();
        assert_eq!(
            r.canonical(Path::new("/srv/chain")).unwrap().0,
            Path::new("/data/pg15")
        );
        symlink("/../../..//data", host.path().join("up")).unwrap();
        assert_eq!(
            r.canonical(Path::new("/up/pg15")).unwrap().0,
            Path::new("/data/pg15")
        );
        // A loop is ELOOP, a missing component NotFound.
        symlink("/loop", host.path().join("loop")).unwrap();
        let e = r.canonical(Path::new("/loop")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
        let e = r.canonical(Path::new("/srv/none/x")).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        // The default root is the daemon's own.
        let d = Roots::default();
        assert_eq!(d.canonical(Path::new("/")).unwrap().0, Path::new("/"));
    }
}
