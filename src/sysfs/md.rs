//! md (software RAID) arrays from `/sys/block/md*/md/`: level, state, missing members, the sync
//! action running and how far it is, the mismatch count of the last check, and each member's
//! count of read errors md corrected. A degraded or resyncing array changes what the drives
//! under a database can do. Reads only.

use super::SysDir;
use std::path::Path;

/// The sync actions md reports (`sync_action`).
pub const SYNC_ACTIONS: &[&str] = &[
    "idle", "resync", "recover", "check", "repair", "reshape", "frozen",
];

/// The array states md reports (`array_state`).
pub const ARRAY_STATES: &[&str] = &[
    "clear",
    "inactive",
    "suspended",
    "readonly",
    "read-auto",
    "clean",
    "active",
    "write-pending",
    "active-idle",
    "broken",
];

/// One md array.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Array {
    /// Kernel name (`md0`).
    pub name: String,
    pub level: String,
    /// `array_state` (clean, active, readonly, inactive…).
    pub state: String,
    /// Members the array is made of (`raid_disks`).
    pub disks_required: Option<u64>,
    /// Members missing (`degraded`); None for levels without redundancy.
    pub degraded: Option<u64>,
    /// Member directories (`dev-*`) seen: the counts below are unknown without any.
    pub members: u64,
    pub disks_active: u64,
    pub disks_failed: u64,
    pub disks_spare: u64,
    /// `sync_action`, where the level has one.
    pub sync_action: Option<String>,
    /// Progress of the running sync action, 0..1 (`sync_completed`: done / total sectors).
    pub sync_progress: Option<f64>,
    /// Sectors found inconsistent by the last check or repair (`mismatch_cnt`).
    pub mismatch_sectors: Option<u64>,
    /// Each member (`dev-*`), sorted by name.
    pub member_list: Vec<Member>,
}

/// One member of an array.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Member {
    /// Kernel name of the member's block device (`dev-sdb1` → `sdb1`).
    pub name: String,
    /// Read errors on the member that md corrected (rewrote from the other copies) without
    /// evicting it (`dev-*/errors`); counted since the array was assembled. None when the file
    /// is missing or not a number.
    pub corrected_read_errors: Option<u64>,
}

/// `sync_completed`: "done / total" in sectors, or "none"/"delayed".
pub fn parse_sync_completed(s: &str) -> Option<f64> {
    let (done, total) = s.split_once('/')?;
    let done: u64 = done.trim().parse().ok()?;
    let total: u64 = total.trim().parse().ok()?;
    (total > 0 && done <= total).then(|| done as f64 / total as f64)
}

/// Reads one array's `md/` directory; None when it is not an md array (or is gone). Its files
/// are opened relative to the directory, held open while they are read.
pub fn read_array(sys: &Path, name: &str) -> Option<Array> {
    let md = SysDir::open(&sys.join("block").join(super::name_path(name)).join("md")).ok()?;
    let level = md.attr("level")?;
    let mut a = Array {
        name: name.to_string(),
        level,
        state: md.attr("array_state").unwrap_or_default(),
        disks_required: md.u64("raid_disks"),
        degraded: md.u64("degraded"),
        sync_action: md
            .attr("sync_action")
            .filter(|s| SYNC_ACTIONS.contains(&s.as_str())),
        mismatch_sectors: md.u64("mismatch_cnt"),
        ..Array::default()
    };
    a.sync_progress = match a.sync_action.as_deref() {
        Some("idle") | Some("frozen") | None => None,
        Some(_) => md
            .attr("sync_completed")
            .and_then(|s| parse_sync_completed(&s)),
    };
    for dev in md.names().unwrap_or_default() {
        let Some(member) = dev.strip_prefix("dev-") else {
            continue;
        };
        a.members += 1;
        let dir = md.sub(&dev).ok();
        a.member_list.push(Member {
            name: member.to_string(),
            corrected_read_errors: dir.as_ref().and_then(|d| d.u64("errors")),
        });
        let state = dir.and_then(|d| d.attr("state")).unwrap_or_default();
        let flags: Vec<&str> = state.split(',').collect();
        if flags.contains(&"faulty") {
            a.disks_failed += 1;
        } else if flags.contains(&"in_sync") {
            a.disks_active += 1;
        } else if flags.contains(&"spare") {
            a.disks_spare += 1;
        }
    }
    Some(a)
}

/// Every md array under `<sys>/block`. Listed anew each time (an array made since the block
/// topology was last read is seen at once); only the `md` names are kept from the listing.
pub fn read_all(sys: &Path) -> Vec<Array> {
    super::dir_names_starting(&sys.join("block"), "md")
        .unwrap_or_default()
        .into_iter()
        .filter_map(|n| read_array(sys, &n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, v: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{v}\n")).unwrap();
    }

    /// A RAID1 of two members as the kernel shows it while one member is missing and a spare
    /// rebuilds into its place.
    fn recovering(sys: &Path) {
        let md = sys.join("block/md0/md");
        write(&md.join("level"), "raid1");
        write(&md.join("array_state"), "clean");
        write(&md.join("raid_disks"), "2");
        write(&md.join("degraded"), "1");
        write(&md.join("sync_action"), "recover");
        write(&md.join("sync_completed"), "261632 / 1046528");
        write(&md.join("mismatch_cnt"), "0");
        write(&md.join("dev-vdb/state"), "in_sync");
        write(&md.join("dev-vdb/errors"), "0");
        write(&md.join("dev-vdc/errors"), "12");
        write(&md.join("dev-vdd/errors"), "x");
        write(&md.join("dev-vdc/state"), "spare");
        write(&md.join("dev-vdd/state"), "faulty");
    }

    #[test]
    fn a_recovering_raid1_says_what_is_missing_and_how_far_the_rebuild_is() {
        let t = tempfile::tempdir().unwrap();
        recovering(t.path());
        std::fs::create_dir_all(t.path().join("block/sda")).unwrap();
        let all = read_all(t.path());
        assert_eq!(all.len(), 1);
        let a = &all[0];
        assert_eq!(a.level, "raid1");
        assert_eq!(a.disks_required, Some(2));
        assert_eq!(a.degraded, Some(1));
        assert_eq!((a.disks_active, a.disks_spare, a.disks_failed), (1, 1, 1));
        assert_eq!(a.sync_action.as_deref(), Some("recover"));
        assert_eq!(a.sync_progress, Some(0.25));
        assert_eq!(a.mismatch_sectors, Some(0));
        // Each member's corrected read errors; a file that is not a number is unknown.
        let errors: Vec<(&str, Option<u64>)> = a
            .member_list
            .iter()
            .map(|m| (m.name.as_str(), m.corrected_read_errors))
            .collect();
        assert_eq!(errors, [("vdb", Some(0)), ("vdc", Some(12)), ("vdd", None)]);
    }

    #[test]
    fn a_raid0_has_no_redundancy_figures_and_odd_files_are_unknown() {
        let t = tempfile::tempdir().unwrap();
        let md = t.path().join("block/md1/md");
        write(&md.join("level"), "raid0");
        write(&md.join("array_state"), "clean");
        write(&md.join("raid_disks"), "2");
        let a = read_array(t.path(), "md1").unwrap();
        assert_eq!(a.degraded, None);
        assert_eq!(a.sync_action, None);
        recovering(t.path());
        write(&t.path().join("block/md0/md/sync_completed"), "delayed");
        write(&t.path().join("block/md0/md/degraded"), "many");
        let a = read_array(t.path(), "md0").unwrap();
        assert_eq!(a.sync_progress, None);
        assert_eq!(a.degraded, None);
        assert_eq!(parse_sync_completed("5 / 0"), None);
        assert_eq!(parse_sync_completed("7 / 5"), None);
    }
}
