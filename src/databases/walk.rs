//! Sizing directory trees in bounded passes: a walk takes at most so many entries and so much
//! time per pass and resumes where it stopped on the next one (an open directory stays open
//! between passes), so a data directory of millions of files costs a little each minute and
//! never one long stall. No symlink is followed and no other filesystem is entered (as
//! `du -x`), so a link loop can't make it run forever. No scheduling or metrics here.

use std::collections::VecDeque;
use std::fs::ReadDir;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::postgres::allocated;

/// One tree to size, counted under `component` (what the caller sums by: a component, a
/// tablespace...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root<K> {
    pub component: K,
    pub path: PathBuf,
}

/// A component's total once a walk is over; `error` is the first thing that could not be read
/// (its total is then a lower bound and is not published), `problems` how many there were.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Total {
    pub bytes: u64,
    pub entries: u64,
    pub error: Option<String>,
    pub problems: u64,
}

/// A walk over several roots, resumable; its totals are kept by the roots' `K`.
#[derive(Debug)]
pub struct Walk<K> {
    /// Directories left, each with its component and the filesystem it must stay on.
    pending: VecDeque<(usize, PathBuf, u64)>,
    /// The directory being read: kept open across passes.
    current: Option<(usize, PathBuf, u64, ReadDir)>,
    /// Paths not to enter (sized as another component, e.g. `base/pgsql_tmp`).
    skip: Vec<PathBuf>,
    pub components: Vec<(K, Total)>,
    pub started: Instant,
    /// Passes taken so far.
    pub passes: u64,
}

/// How a pass ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    Done,
    /// Stopped at its entry or time budget; call `step` again.
    More,
}

fn component_index<K: PartialEq + Clone>(components: &mut Vec<(K, Total)>, key: &K) -> usize {
    match components.iter().position(|(c, _)| c == key) {
        Some(i) => i,
        None => {
            components.push((key.clone(), Total::default()));
            components.len() - 1
        }
    }
}

impl<K: PartialEq + Clone> Walk<K> {
    /// A walk of `roots` (several roots may share a component), never entering `skip`. A root
    /// that is missing counts nothing; one that can't be read is its component's error.
    pub fn new(roots: Vec<Root<K>>, skip: Vec<PathBuf>) -> Walk<K> {
        let mut w = Walk {
            pending: VecDeque::new(),
            current: None,
            skip,
            components: Vec::new(),
            started: Instant::now(),
            passes: 0,
        };
        for r in roots {
            let i = component_index(&mut w.components, &r.component);
            match std::fs::symlink_metadata(&r.path) {
                Ok(m) if m.is_dir() => {
                    w.components[i].1.bytes += allocated(&m);
                    w.pending.push_back((i, r.path, m.dev()));
                }
                Ok(m) => w.components[i].1.bytes += allocated(&m),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => w.problem(i, &r.path, &e),
            }
        }
        w
    }

    /// Components that exist even with nothing under them (a data directory without a `log`
    /// directory has a log of 0 bytes, not an unknown one).
    pub fn declare(mut self, components: &[K]) -> Walk<K> {
        for c in components {
            component_index(&mut self.components, c);
        }
        self
    }

    fn problem(&mut self, i: usize, path: &Path, e: &std::io::Error) {
        let t = &mut self.components[i].1;
        t.problems += 1;
        if t.error.is_none() {
            t.error = Some(format!("{}: {e}", path.display()));
        }
    }

    /// Takes up to `max_entries` entries or until `deadline`, whichever comes first.
    pub fn step(&mut self, max_entries: u64, deadline: Instant) -> Progress {
        self.passes += 1;
        let mut taken = 0u64;
        loop {
            if self.current.is_none() {
                let Some((i, path, dev)) = self.pending.pop_front() else {
                    return Progress::Done;
                };
                match std::fs::read_dir(&path) {
                    Ok(rd) => self.current = Some((i, path, dev, rd)),
                    // Removed since it was listed (a dropped table's directory).
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => self.problem(i, &path, &e),
                }
                continue;
            }
            if taken >= max_entries {
                return Progress::More;
            }
            // The clock is read once every 256 entries: cheap against the stat of each.
            if taken % 256 == 255 && Instant::now() >= deadline {
                return Progress::More;
            }
            let Some((i, path, dev, rd)) = self.current.as_mut() else {
                continue;
            };
            let (i, dev) = (*i, *dev);
            match rd.next() {
                None => self.current = None,
                Some(Err(e)) => {
                    let p = path.clone();
                    self.current = None;
                    self.problem(i, &p, &e);
                }
                Some(Ok(e)) => {
                    taken += 1;
                    // fstatat on the open directory: no path lookup, no symlink followed.
                    match e.metadata() {
                        Ok(m) => {
                            let t = &mut self.components[i].1;
                            t.entries += 1;
                            t.bytes = t.bytes.saturating_add(allocated(&m));
                            if m.is_dir() && m.dev() == dev {
                                let p = e.path();
                                if !self.skip.contains(&p) {
                                    self.pending.push_back((i, p, dev));
                                }
                            }
                        }
                        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                        Err(err) => {
                            let p = e.path();
                            self.problem(i, &p, &err);
                        }
                    }
                }
            }
        }
    }

    /// Runs passes until done (no entry cap), for small trees sized in one go: stops at
    /// `max_entries` and says so in the component's error.
    pub fn run_capped(mut self, max_entries: u64, deadline: Instant) -> Vec<(K, Total)> {
        if self.step(max_entries, deadline) == Progress::More {
            let msg =
                format!("more than {max_entries} entries or past the time allowed; not sized");
            for (_, t) in &mut self.components {
                t.problems += 1;
                t.error.get_or_insert_with(|| msg.clone());
            }
        }
        self.components
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::databases::component::Component;

    fn later() -> Instant {
        Instant::now() + crate::time::HOUR_DURATION
    }

    fn tree(root: &Path, dirs: usize, files: usize) {
        for d in 0..dirs {
            let dir = root.join(format!("d{d}"));
            std::fs::create_dir_all(&dir).unwrap();
            for f in 0..files {
                std::fs::write(dir.join(format!("f{f}")), vec![7u8; 5000]).unwrap();
            }
        }
    }

    #[test]
    fn a_walk_in_small_passes_sums_what_one_pass_does() {
        let d = tempfile::tempdir().unwrap();
        tree(d.path(), 5, 40);
        let roots = || {
            vec![Root {
                component: Component::Relations,
                path: d.path().to_path_buf(),
            }]
        };
        let mut one = Walk::new(roots(), Vec::new());
        assert_eq!(one.step(u64::MAX, later()), Progress::Done);
        let mut many = Walk::new(roots(), Vec::new());
        let mut passes = 0;
        while many.step(7, later()) == Progress::More {
            passes += 1;
        }
        assert!(passes > 25, "{passes}");
        assert_eq!(one.components, many.components);
        let t = &one.components[0].1;
        assert_eq!(t.entries, 205);
        // 200 files of 5000 bytes take at least 4 KiB blocks each.
        assert!(t.bytes >= 200 * 5000, "{}", t.bytes);
        assert_eq!(t.error, None);
    }

    #[test]
    fn symlinks_are_not_followed_so_a_loop_ends() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("a/b")).unwrap();
        std::os::unix::fs::symlink(d.path(), d.path().join("a/b/loop")).unwrap();
        std::os::unix::fs::symlink("self", d.path().join("self")).unwrap();
        let mut w = Walk::new(
            vec![Root {
                component: Component::Other,
                path: d.path().to_path_buf(),
            }],
            Vec::new(),
        );
        assert_eq!(w.step(1000, later()), Progress::Done);
        assert_eq!(w.components[0].1.entries, 4);
    }

    #[test]
    fn skipped_paths_and_missing_roots_count_nothing() {
        let d = tempfile::tempdir().unwrap();
        tree(&d.path().join("base"), 1, 3);
        tree(&d.path().join("base/pgsql_tmp"), 1, 3);
        let mut w = Walk::new(
            vec![
                Root {
                    component: Component::Relations,
                    path: d.path().join("base"),
                },
                Root {
                    component: Component::Log,
                    path: d.path().join("log"),
                },
            ],
            vec![d.path().join("base/pgsql_tmp")],
        );
        assert_eq!(w.step(1000, later()), Progress::Done);
        assert_eq!(w.components[0].1.entries, 5); // d0, its 3 files, pgsql_tmp itself
        assert_eq!(w.components[1].1, Total::default());
    }

    #[test]
    fn a_capped_walk_of_a_big_tree_says_it_was_not_sized() {
        let d = tempfile::tempdir().unwrap();
        tree(d.path(), 2, 10);
        let w = Walk::new(
            vec![Root {
                component: Component::Temp,
                path: d.path().to_path_buf(),
            }],
            Vec::new(),
        );
        let out = w.run_capped(5, later());
        assert!(
            out[0]
                .1
                .error
                .as_deref()
                .unwrap()
                .contains("more than 5 entries")
        );
    }

    #[test]
    fn a_directory_removed_mid_walk_is_skipped_quietly() {
        let d = tempfile::tempdir().unwrap();
        tree(d.path(), 3, 50);
        let mut w = Walk::new(
            vec![Root {
                component: Component::Relations,
                path: d.path().to_path_buf(),
            }],
            Vec::new(),
        );
        // The first pass lists the top level and queues d0..d2.
        assert_eq!(w.step(3, later()), Progress::More);
        std::fs::remove_dir_all(d.path().join("d1")).unwrap();
        while w.step(10, later()) == Progress::More {}
        let t = &w.components[0].1;
        assert_eq!(t.error, None);
        assert_eq!(t.entries, 103);
    }
}
