//! Which mounts the filesystem collector reports: the include/exclude filters, one mount per
//! filesystem (bind mounts and mounts hidden under another), and the block device behind each.
//! Pure: no statvfs, no metrics.

use crate::procfs::mountinfo::MountInfo;
use crate::sysfs::topology::Topology;
use regex_lite::Regex;
use std::collections::{BTreeMap, HashMap, HashSet};

/// node_exporter's default, one alternative per entry so users can append to it.
pub const DEFAULT_MOUNT_POINTS_EXCLUDE: &[&str] = &[
    "^/(dev|proc|sys)($|/)",
    "^/run/credentials/.+",
    "^/var/lib/docker/.+",
    "^/var/lib/containers/storage/.+",
];

/// Filesystems that hold no user data, excluded by default.
pub const DEFAULT_FS_TYPES_EXCLUDE: &[&str] = &[
    "autofs",
    "binfmt_misc",
    "bpf",
    "cgroup",
    "cgroup2",
    "configfs",
    "debugfs",
    "devpts",
    "devtmpfs",
    "efivarfs",
    "fusectl",
    "hugetlbfs",
    "iso9660",
    "mqueue",
    "nsfs",
    "overlay",
    "proc",
    "procfs",
    "pstore",
    "ramfs",
    "rpc_pipefs",
    "securityfs",
    "selinuxfs",
    "squashfs",
    "sysfs",
    "tmpfs",
    "tracefs",
];

/// A mount selected for reporting.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectedMount {
    pub info: MountInfo,
    /// Kernel name of the block device behind it, when it is block-backed.
    pub device: Option<String>,
}

/// Patterns of which any may match (regex-lite has no RegexSet; the lists are a handful long).
struct RegexSet(Vec<Regex>);

impl RegexSet {
    fn new(patterns: &[String]) -> Result<Self, regex_lite::Error> {
        patterns
            .iter()
            .map(|p| Regex::new(p))
            .collect::<Result<_, _>>()
            .map(RegexSet)
    }

    fn is_match(&self, s: &str) -> bool {
        self.0.iter().any(|r| r.is_match(s))
    }
}

/// Compiled mount filters.
pub struct Filters {
    exclude: RegexSet,
    include: Option<RegexSet>,
    fs_exclude: HashSet<String>,
    fs_include: Option<HashSet<String>>,
}

impl Filters {
    /// Mount points matching one of `mount_points_exclude` (regular expressions searched in the
    /// path) and filesystem types in `fs_types_exclude` are left out; an include list, when given,
    /// keeps only what it matches.
    pub fn new(
        mount_points_exclude: &[String],
        mount_points_include: Option<&[String]>,
        fs_types_exclude: &[String],
        fs_types_include: Option<&[String]>,
    ) -> Result<Self, regex_lite::Error> {
        Ok(Filters {
            exclude: RegexSet::new(mount_points_exclude)?,
            include: mount_points_include.map(RegexSet::new).transpose()?,
            fs_exclude: fs_types_exclude.iter().cloned().collect(),
            fs_include: fs_types_include.map(|v| v.iter().cloned().collect()),
        })
    }

    pub fn wants(&self, m: &MountInfo) -> bool {
        if self.exclude.is_match(&m.mount_point) || self.fs_exclude.contains(&m.fstype) {
            return false;
        }
        if let Some(inc) = &self.include
            && !inc.is_match(&m.mount_point)
        {
            return false;
        }
        if let Some(fs) = &self.fs_include
            && !fs.contains(&m.fstype)
        {
            return false;
        }
        true
    }
}

/// Picks the mounts to report: filtered, and each filesystem once (bind mounts share major:minor;
/// the mount of the filesystem's root wins, then the shortest mount point).
pub fn select_mounts(
    mounts: &[MountInfo],
    filters: &Filters,
    topo: &Topology,
) -> Vec<SelectedMount> {
    // A mount over another at the same path hides it: statvfs on the path sees the later (top)
    // one only, so the hidden one is not reported (not even when the top one is filtered out).
    let mut top: HashMap<&str, usize> = HashMap::new();
    for (i, m) in mounts.iter().enumerate() {
        top.insert(m.mount_point.as_str(), i);
    }
    let visible = mounts
        .iter()
        .enumerate()
        .filter(|(i, m)| top.get(m.mount_point.as_str()) == Some(i))
        .map(|(_, m)| m);
    let mut best: BTreeMap<(u32, u32), &MountInfo> = BTreeMap::new();
    for m in visible.filter(|m| filters.wants(m)) {
        let key = (m.major, m.minor);
        let better = match best.get(&key) {
            None => true,
            Some(cur) => {
                fn rank(x: &MountInfo) -> (bool, usize, &str) {
                    (x.root != "/", x.mount_point.len(), x.mount_point.as_str())
                }
                rank(m) < rank(cur)
            }
        };
        if better {
            best.insert(key, m);
        }
    }
    let mut out: Vec<SelectedMount> = best
        .into_values()
        .map(|m| SelectedMount {
            device: resolve_device(m, topo),
            info: m.clone(),
        })
        .collect();
    out.sort_by(|a, b| a.info.mount_point.cmp(&b.info.mount_point));
    out
}

pub use crate::sysfs::topology::resolve_device;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs::mountinfo::parse_mountinfo;

    fn mounts(text: &str) -> Vec<MountInfo> {
        parse_mountinfo(text).0
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn defaults() -> Filters {
        let (mp, fs) = (DEFAULT_MOUNT_POINTS_EXCLUDE, DEFAULT_FS_TYPES_EXCLUDE);
        Filters::new(&strings(mp), None, &strings(fs), None).unwrap()
    }

    #[test]
    fn pseudo_filesystems_are_left_out_and_bind_mounts_reported_once() {
        let m = mounts(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             2 1 0:5 / /proc rw - proc proc rw\n\
             3 1 0:22 / /run rw - tmpfs tmpfs rw\n\
             4 1 8:1 /srv/data /srv/data-bind rw - ext4 /dev/sda1 rw\n\
             5 1 8:17 / /var/lib/postgresql rw - xfs /dev/sdb1 rw,discard\n",
        );
        let f = defaults();
        let sel = select_mounts(&m, &f, &Topology::default());
        let mps: Vec<_> = sel.iter().map(|s| s.info.mount_point.as_str()).collect();
        assert_eq!(mps, vec!["/", "/var/lib/postgresql"]);
    }

    #[test]
    fn a_mount_hidden_under_another_at_the_same_path_is_not_reported() {
        let m = mounts(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             2 1 8:17 / /srv/db rw - xfs /dev/sdb1 rw\n\
             3 2 8:33 / /srv/db rw - ext4 /dev/sdc1 rw\n\
             4 1 8:49 / /scratch rw - ext4 /dev/sdd1 rw\n\
             5 4 0:40 / /scratch rw - tmpfs tmpfs rw\n",
        );
        let f = defaults();
        let sel = select_mounts(&m, &f, &Topology::default());
        let got: Vec<_> = sel
            .iter()
            .map(|s| (s.info.mount_point.as_str(), s.info.source.as_str()))
            .collect();
        assert_eq!(got, vec![("/", "/dev/sda1"), ("/srv/db", "/dev/sdc1")]);
    }

    #[test]
    fn include_filters_narrow_the_selection() {
        let m =
            mounts("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n5 1 8:17 / /data rw - xfs /dev/sdb1 rw\n");
        let f = Filters::new(
            &strings(DEFAULT_MOUNT_POINTS_EXCLUDE),
            Some(&["^/data$".to_string()]),
            &strings(DEFAULT_FS_TYPES_EXCLUDE),
            None,
        )
        .unwrap();
        let sel = select_mounts(&m, &f, &Topology::default());
        assert_eq!(sel.len(), 1);
        assert_eq!(sel[0].info.mount_point, "/data");
    }

    #[test]
    fn the_default_exclude_list_keeps_node_exporters_meaning() {
        let m = mounts(
            "1 0 8:1 / /devices rw - ext4 /dev/sda1 rw\n2 1 8:2 / /dev/x rw - ext4 /dev/sda2 rw\n\
             3 1 8:3 / /var/lib/docker/overlay2/a rw - ext4 /dev/sda3 rw\n\
             4 1 8:4 / /var/lib/docker rw - ext4 /dev/sda4 rw\n\
             5 1 8:5 / /run/credentials/x.service rw - ext4 /dev/sda5 rw\n",
        );
        let sel = select_mounts(&m, &defaults(), &Topology::default());
        let mps: Vec<_> = sel.iter().map(|s| s.info.mount_point.as_str()).collect();
        assert_eq!(mps, vec!["/devices", "/var/lib/docker"]);
    }
}
