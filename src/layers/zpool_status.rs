//! The integrity signal of ZFS pools from `zpool status`: each vdev's and leaf device's read,
//! write and checksum error counters and state, and each pool's count of permanent data errors
//! (its "errors:" line). Parses the JSON of OpenZFS 2.3 and later (`zpool status -j -p`) and the
//! text of earlier ones (`zpool status -p`). Pure; running the command is the collector's. Never
//! reads the list of damaged files (`-v`): one series per vdev, never per file.

use crate::label::label_form;
use serde_json::Value;

/// The vdev states exported, as the text form names them.
pub const VDEV_STATES: &[&str] = &[
    "ONLINE", "DEGRADED", "FAULTED", "OFFLINE", "UNAVAIL", "REMOVED",
];

/// Deepest vdev tree read (root, top-level vdev, a replacing or spare vdev, its leaves): a
/// deeper one is not a real pool.
const MAX_DEPTH: usize = 8;

/// One pool's status.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PoolStatus {
    pub pool: String,
    /// Blocks with permanent (unrepaired) errors in the pool's error log: "errors: N data
    /// errors" (0 for "No known data errors"); None when zpool printed no such line.
    pub data_errors: Option<u64>,
    /// The root vdev (named as the pool), the top-level vdevs and their leaves, the log, cache
    /// and special vdevs, in zpool's order. Spares have no counters and are not listed.
    pub vdevs: Vec<Vdev>,
}

/// One vdev (a mirror, a raidz group, the root) or leaf device.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Vdev {
    /// As zpool names it (`mirror-0`, `sda`, a by-id name), in its label form.
    pub name: String,
    /// Whether it has no children: a device (disk, partition, file).
    pub leaf: bool,
    /// One of [`VDEV_STATES`]; None for a state zpool names otherwise.
    pub state: Option<&'static str>,
    /// I/O errors the vdev returned for reads and writes, and blocks whose checksum did not
    /// match, since the pool was imported or last cleared (`zpool clear`).
    pub read_errors: u64,
    pub write_errors: u64,
    pub checksum_errors: u64,
}

/// A state as zpool's JSON (OpenZFS 2.3: the kernel's vdev state names) or its text gives it,
/// in the text form's words.
fn state(s: &str) -> Option<&'static str> {
    let s = match s {
        // The JSON of OpenZFS 2.3.0 names the states as the kernel does.
        "HEALTHY" => "ONLINE",
        "CANT_OPEN" => "UNAVAIL",
        "CLOSED" => "OFFLINE",
        s => s,
    };
    VDEV_STATES.iter().copied().find(|k| *k == s)
}

/// An error count as zpool prints it with `-p`: a plain number. Without `-p` it may say `1.2K`,
/// which is not a count.
fn count(s: &str) -> Result<u64, StatusReason> {
    s.parse()
        .map_err(|_| StatusReason::NotACount(s.to_string()))
}

/// A problem with the output, named by pool and line (text) or pool and vdev (JSON).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("zpool status: {where_}: {reason}")]
pub struct StatusError {
    pub where_: String,
    pub reason: StatusReason,
}

/// What was wrong at that place.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatusReason {
    /// A counter as printed; without `-p` zpool may say `1.2K`.
    #[error("{0:?} is not an error count (zpool status run without -p?)")]
    NotACount(String),
    /// The text after `errors:`.
    #[error("{0:?} is not an error count")]
    NotADataErrorCount(String),
    /// A JSON value that is no count (a negative or fractional number, an object).
    #[error("{0} is not an error count")]
    NotAJsonCount(String),
    #[error("no {0}")]
    NoCounter(String),
    #[error("nested deeper than a pool can be")]
    TooDeep,
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("no \"pools\" object")]
    NoPools,
}

fn err(where_: impl Into<String>, reason: StatusReason) -> StatusError {
    StatusError {
        where_: where_.into(),
        reason,
    }
}

/// Parses `zpool status -p`: each pool's block (from its `pool:` line), its `config:` table
/// and its `errors:` line. A line that can't be read is an error naming it; the rest is read.
pub fn parse_text(text: &str) -> (Vec<PoolStatus>, Vec<StatusError>) {
    let mut pools: Vec<PoolStatus> = Vec::new();
    let mut errors = Vec::new();
    // Inside a pool's config table; the rows above the current one that may be its parent:
    // (depth, index in the pool's vdevs).
    let mut in_table = false;
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = || format!("line {}", i + 1);
        let trimmed = line.trim();
        if let Some(name) = trimmed.strip_prefix("pool:") {
            pools.push(PoolStatus {
                pool: label_form(name.trim().as_bytes()),
                ..Default::default()
            });
            in_table = false;
            continue;
        }
        let Some(pool) = pools.last_mut() else {
            continue;
        };
        if let Some(rest) = trimmed.strip_prefix("errors:") {
            in_table = false;
            match data_errors(rest.trim()) {
                Some(n) => pool.data_errors = Some(n),
                None => errors.push(err(
                    at(),
                    StatusReason::NotADataErrorCount(rest.trim().to_string()),
                )),
            }
            continue;
        }
        if trimmed.starts_with("NAME") && trimmed.contains("CKSUM") {
            in_table = true;
            stack.clear();
            continue;
        }
        if !in_table {
            continue;
        }
        if trimmed.is_empty() {
            in_table = false;
            continue;
        }
        // Rows are a tab, then two spaces per level, then the name.
        let body = line.strip_prefix('\t').unwrap_or(line);
        let depth = (body.len() - body.trim_start_matches(' ').len()) / 2;
        let f: Vec<&str> = trimmed.split_whitespace().collect();
        if f.len() < 5 {
            // A class heading (logs, cache, special, dedup, spares) or a spare (AVAIL, INUSE):
            // no counters. A heading ends the rows above it.
            if depth == 0 {
                stack.clear();
            }
            continue;
        }
        if depth >= MAX_DEPTH {
            errors.push(err(at(), StatusReason::TooDeep));
            continue;
        }
        let counts = [count(f[2]), count(f[3]), count(f[4])];
        let [Ok(r), Ok(w), Ok(c)] = counts else {
            if let Some(reason) = counts.into_iter().find_map(Result::err) {
                errors.push(err(at(), reason));
            }
            continue;
        };
        // The nearest row above at a lesser depth is its parent: no longer a leaf.
        while stack.last().is_some_and(|(d, _)| *d >= depth) {
            stack.pop();
        }
        if let Some((_, parent)) = stack.last() {
            pool.vdevs[*parent].leaf = false;
        }
        stack.push((depth, pool.vdevs.len()));
        pool.vdevs.push(Vdev {
            name: label_form(f[0].as_bytes()),
            leaf: true,
            state: state(f[1]),
            read_errors: r,
            write_errors: w,
            checksum_errors: c,
        });
    }
    (pools, errors)
}

/// The text after `errors:`: "No known data errors" or "N data errors, use '-v' for a list".
fn data_errors(s: &str) -> Option<u64> {
    if s.starts_with("No known data errors") {
        return Some(0);
    }
    s.split_whitespace().next()?.parse().ok()
}

/// Parses `zpool status -j -p` (OpenZFS 2.3 and later; numbers as strings, or integers with
/// `--json-int`). A vdev that can't be read is an error naming it; the rest is read. Output
/// that is not this JSON at all is one error.
pub fn parse_json(text: &str) -> Result<(Vec<PoolStatus>, Vec<StatusError>), StatusError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| err("output", StatusReason::NotJson(e.to_string())))?;
    let pools = v
        .get("pools")
        .and_then(Value::as_object)
        .ok_or_else(|| err("output", StatusReason::NoPools))?;
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (key, p) in pools {
        let name = p.get("name").and_then(Value::as_str).unwrap_or(key);
        let mut pool = PoolStatus {
            pool: label_form(name.as_bytes()),
            ..Default::default()
        };
        let at = |what: &str| format!("pool {}: {what}", pool_label(name));
        match p.get("error_count") {
            None => {}
            Some(n) => match json_count(n) {
                Ok(n) => pool.data_errors = Some(n),
                Err(e) => errors.push(err(at("error_count"), e)),
            },
        }
        // The data vdevs under the root, then each allocation class's; spares and cache
        // devices' own keys hold vdevs too.
        for class in ["vdevs", "dedup", "special", "logs", "l2cache"] {
            if let Some(vdevs) = p.get(class).and_then(Value::as_object) {
                for (k, vd) in vdevs {
                    walk(vd, k, 0, &mut pool, &mut errors, name);
                }
            }
        }
        out.push(pool);
    }
    Ok((out, errors))
}

fn pool_label(name: &str) -> String {
    label_form(name.as_bytes())
}

fn json_count(v: &Value) -> Result<u64, StatusReason> {
    match v {
        Value::String(s) => count(s),
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| StatusReason::NotAJsonCount(n.to_string())),
        other => Err(StatusReason::NotAJsonCount(other.to_string())),
    }
}

/// One vdev and its children, depth first (zpool's order).
fn walk(
    v: &Value,
    key: &str,
    depth: usize,
    pool: &mut PoolStatus,
    errors: &mut Vec<StatusError>,
    pool_name: &str,
) {
    let name = v.get("name").and_then(Value::as_str).unwrap_or(key);
    let at = || {
        format!(
            "pool {}: vdev {}",
            pool_label(pool_name),
            label_form(name.as_bytes())
        )
    };
    if depth >= MAX_DEPTH {
        errors.push(err(at(), StatusReason::TooDeep));
        return;
    }
    let children = v.get("vdevs").and_then(Value::as_object);
    // A spare in a spare's place or an available spare: no counters of its own.
    if v.get("read_errors").is_some() || v.get("checksum_errors").is_some() {
        let get = |k: &str| {
            v.get(k)
                .ok_or_else(|| StatusReason::NoCounter(k.to_string()))
                .and_then(json_count)
        };
        let counts = [
            get("read_errors"),
            get("write_errors"),
            get("checksum_errors"),
        ];
        match counts {
            [Ok(r), Ok(w), Ok(c)] => pool.vdevs.push(Vdev {
                name: label_form(name.as_bytes()),
                leaf: children.is_none_or(|c| c.is_empty()),
                state: v.get("state").and_then(Value::as_str).and_then(state),
                read_errors: r,
                write_errors: w,
                checksum_errors: c,
            }),
            counts => {
                if let Some(reason) = counts.into_iter().find_map(Result::err) {
                    errors.push(err(at(), reason));
                }
            }
        }
    }
    if let Some(children) = children {
        for (k, c) in children {
            walk(c, k, depth + 1, pool, errors, pool_name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real captures (tests/fixtures/layers/SOURCES.md): a user's raidz2 whose sda saw one
    /// write error (text), and the JSON example of OpenZFS's own zpool-status(8).
    const RAIDZ2: &str =
        include_str!("../../tests/fixtures/layers/zpool-status-raidz2-write-error.txt");
    const MANPAGE_JSON: &str =
        include_str!("../../tests/fixtures/layers/zpool-status-j-manpage.json");

    /// Real `zpool status -p` of this project's layers guest (OpenZFS 2.1.11): before and after
    /// 32 MiB of `tank`'s only device were overwritten and scrubbed; `safe` a mirror with a
    /// faulted side, its note ("external device fault") after the counters.
    const GUEST_BEFORE: &str = include_str!("../../tests/fixtures/layers/zpool-status-p.txt");
    const GUEST_SCRUBBED: &str =
        include_str!("../../tests/fixtures/layers/zpool-status-p-scrub-errors.txt");

    #[test]
    fn a_scrub_over_overwritten_blocks_shows_checksum_and_data_errors_as_zpool_printed() {
        let (before, errors) = parse_text(GUEST_BEFORE);
        assert!(errors.is_empty(), "{errors:?}");
        let (after, errors) = parse_text(GUEST_SCRUBBED);
        assert!(errors.is_empty(), "{errors:?}");
        for pools in [&before, &after] {
            let names: Vec<&str> = pools.iter().map(|p| p.pool.as_str()).collect();
            assert_eq!(names, ["safe", "tank"]);
            let safe = &pools[0];
            assert_eq!(safe.data_errors, Some(0));
            let leaves: Vec<(&str, Option<&str>)> = safe
                .vdevs
                .iter()
                .filter(|v| v.leaf)
                .map(|v| (v.name.as_str(), v.state))
                .collect();
            assert_eq!(
                leaves,
                [("zvde", Some("ONLINE")), ("zvdf", Some("FAULTED"))]
            );
            assert_eq!(find(safe, "mirror-0").state, Some("DEGRADED"));
        }
        let tank = |p: &[PoolStatus]| p[1].clone();
        assert_eq!(tank(&before).data_errors, Some(0));
        assert_eq!(find(&tank(&before), "zvdd").checksum_errors, 0);
        let t = tank(&after);
        assert_eq!(t.data_errors, Some(256));
        let zvdd = find(&t, "zvdd");
        assert_eq!(
            (
                zvdd.leaf,
                zvdd.read_errors,
                zvdd.write_errors,
                zvdd.checksum_errors
            ),
            (true, 0, 0, 514)
        );
        // The pool's root repaired nothing and counted nothing of its own.
        assert_eq!(find(&t, "tank").checksum_errors, 0);
    }

    fn find<'a>(p: &'a PoolStatus, name: &str) -> &'a Vdev {
        p.vdevs
            .iter()
            .find(|v| v.name == name)
            .unwrap_or_else(|| panic!("{name} not in {:?}", p.vdevs))
    }

    #[test]
    fn a_raidz2_with_one_write_error_on_one_disk_reads_as_zpool_printed_it() {
        let (pools, errors) = parse_text(RAIDZ2);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(pools.len(), 1);
        let p = &pools[0];
        assert_eq!(p.pool, "tank");
        assert_eq!(p.data_errors, Some(0));
        let names: Vec<&str> = p.vdevs.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            ["tank", "raidz2-0", "sde", "sdd", "sdc", "sdb", "sda"]
        );
        assert!(!find(p, "tank").leaf && !find(p, "raidz2-0").leaf);
        let sda = find(p, "sda");
        assert!(sda.leaf);
        assert_eq!(
            (
                sda.read_errors,
                sda.write_errors,
                sda.checksum_errors,
                sda.state
            ),
            (0, 1, 0, Some("ONLINE"))
        );
        let total: u64 = p.vdevs.iter().map(|v| v.write_errors).sum();
        assert_eq!(total, 1);
    }

    #[test]
    fn the_json_of_openzfs_2_3_reads_every_class_and_names_states_as_the_text_does() {
        let (pools, errors) = parse_json(MANPAGE_JSON).unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        let p = &pools[0];
        assert_eq!(p.pool, "tank");
        assert_eq!(p.data_errors, Some(0));
        // The root, raidz1-0 and its three disks; the dedup mirror and its two; the special
        // device: nine, each once.
        assert_eq!(p.vdevs.len(), 9, "{:?}", p.vdevs);
        let root = find(p, "tank");
        assert!(!root.leaf);
        assert_eq!(root.state, None, "the example's root has no state");
        let raidz = find(p, "raidz1-0");
        assert_eq!((raidz.state, raidz.leaf), (Some("ONLINE"), false));
        assert!(!find(p, "mirror-2").leaf);
        let special = find(p, "25d418f8-92bd-4327-b59f-7ef5d5f50d81");
        assert!(special.leaf);
        assert_eq!(special.state, Some("ONLINE"), "HEALTHY is ONLINE");
        assert_eq!(p.vdevs.iter().filter(|v| v.leaf).count(), 6);
        assert!(
            p.vdevs
                .iter()
                .all(|v| v.read_errors + v.write_errors + v.checksum_errors == 0)
        );
    }

    /// The same pool's JSON with `--json-int` (numbers, not strings) and with errors: the
    /// counts and the pool's data errors read the same way.
    #[test]
    fn json_counts_as_integers_or_strings_and_bad_ones_name_the_vdev() {
        let text = MANPAGE_JSON
            .replace(
                "\"checksum_errors\": \"0\",\n                  \"vendor\": \"ATA\",\n                  \"model\": \"WDC WD40EFZX-68AWUN0\",\n                  \"size\": \"3.6T\"\n                },\n                \"97cd",
                "\"checksum_errors\": 14,\n                  \"vendor\": \"ATA\",\n                  \"model\": \"WDC WD40EFZX-68AWUN0\",\n                  \"size\": \"3.6T\"\n                },\n                \"97cd",
            )
            .replace("\"error_count\": \"0\"", "\"error_count\": 3");
        let (pools, errors) = parse_json(&text).unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        let p = &pools[0];
        assert_eq!(p.data_errors, Some(3));
        assert_eq!(
            find(p, "ca1eb824-c371-491d-ac13-37637e35c683").checksum_errors,
            14
        );
        // Without -p zpool rounds a count: 1.2K is no count, and says so.
        let bad = MANPAGE_JSON.replacen("\"read_errors\": \"0\"", "\"read_errors\": \"1.2K\"", 2);
        let (pools, errors) = parse_json(&bad).unwrap();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert_eq!(
            errors[0].to_string(),
            "zpool status: pool tank: vdev tank: \"1.2K\" is not an error count (zpool status run without -p?)"
        );
        assert_eq!(pools[0].vdevs.len(), 7, "the rest is read");
        for garbage in ["", "zpool: invalid option 'j'", "[1,2]", "{\"pool\": {}}"] {
            let e = parse_json(garbage).unwrap_err();
            assert!(e.to_string().starts_with("zpool status: output: "), "{e}");
        }
    }

    /// zpool's text layout (OpenZFS 2.1, `-p`) with a log mirror, a cache device and a spare,
    /// as its print_status_config writes them: headings and spares carry no counters.
    #[test]
    fn log_cache_and_spare_rows_in_the_text_are_placed_or_passed_over() {
        let text = "  pool: db\n state: DEGRADED\nconfig:\n\n\
            \tNAME        STATE     READ WRITE CKSUM\n\
            \tdb          DEGRADED     0     0     0\n\
            \t  mirror-0  DEGRADED     0     0     0\n\
            \t    sda     ONLINE       0     0     0\n\
            \t    sdb     FAULTED     12     0     0  too many errors\n\
            \tlogs\n\
            \t  mirror-1  ONLINE       0     0     0\n\
            \t    nvme0n1 ONLINE       0     0     0\n\
            \t    nvme1n1 ONLINE       0     0     0\n\
            \tcache\n\
            \t  sdc       ONLINE       0     0     0\n\
            \tspares\n\
            \t  sdd       AVAIL\n\
            \nerrors: 2 data errors, use '-v' for a list\n";
        let (pools, errors) = parse_text(text);
        assert!(errors.is_empty(), "{errors:?}");
        let p = &pools[0];
        assert_eq!(p.data_errors, Some(2));
        let names: Vec<(&str, bool)> = p.vdevs.iter().map(|v| (v.name.as_str(), v.leaf)).collect();
        assert_eq!(
            names,
            [
                ("db", false),
                ("mirror-0", false),
                ("sda", true),
                ("sdb", true),
                ("mirror-1", false),
                ("nvme0n1", true),
                ("nvme1n1", true),
                ("sdc", true),
            ]
        );
        let sdb = find(p, "sdb");
        assert_eq!((sdb.read_errors, sdb.state), (12, Some("FAULTED")));
        assert_eq!(find(p, "db").state, Some("DEGRADED"));
    }

    #[test]
    fn text_without_p_or_garbage_is_an_error_naming_the_line_and_the_rest_is_read() {
        let text = RAIDZ2
            .replace(
                "sda     ONLINE       0     1     0",
                "sda     ONLINE       0  1.5K     0",
            )
            .replace("No known data errors", "lots");
        let (pools, errors) = parse_text(&text);
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert_eq!(
            errors[0].to_string(),
            "zpool status: line 18: \"1.5K\" is not an error count (zpool status run without -p?)"
        );
        assert_eq!(
            errors[1].to_string(),
            "zpool status: line 20: \"lots\" is not an error count"
        );
        assert_eq!(pools[0].vdevs.len(), 6);
        assert_eq!(pools[0].data_errors, None);
        // Output of some other command: nothing, no error.
        assert_eq!(parse_text("no pools available\n"), (vec![], vec![]));
        // A state no zpool names: the counters without a state.
        let (pools, _) = parse_text(&RAIDZ2.replace("sde     ONLINE", "sde     HAPPY "));
        assert_eq!(find(&pools[0], "sde").state, None);
    }
}
