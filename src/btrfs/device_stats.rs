//! `btrfs device stats MOUNT`: each device's five error counters where the kernel has no
//! `devinfo/<devid>/error_stats` (before 5.14). Pure: text in, counters out; running the tool
//! (through the privileged helper, as it needs CAP_SYS_ADMIN) is the collector's.

use super::error_stats::ErrorCounts;

/// One device's counters as `btrfs device stats` printed them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceStats {
    /// The device as the series name it: the last part of its path (`/dev/sdb1` → `sdb1`,
    /// `/dev/mapper/flaky` → `flaky`, as the device query names it), `devid<N>` for a missing
    /// device btrfs prints as `devid:N`.
    pub device: String,
    pub counts: ErrorCounts,
}

/// `btrfs device stats`' whole argument list for `mount`: built here for both who run it (the
/// layers collector in-process, the privileged helper after its allow check).
pub fn args(mount: &str) -> Vec<String> {
    vec!["device".into(), "stats".into(), mount.to_string()]
}

/// The counters btrfs prints, in [`ErrorCounts::by_type`]'s order.
const KEYS: [&str; 5] = [
    "write_io_errs",
    "read_io_errs",
    "flush_io_errs",
    "corruption_errs",
    "generation_errs",
];

/// Why `btrfs device stats` output was not read: the line (1-based) or the device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceStatsError {
    #[error("line {line}: {text:?} is not [device].counter count")]
    NotALine { line: usize, text: String },
    #[error("line {line}: {counter} {value:?} is not a count")]
    NotACount {
        line: usize,
        counter: String,
        value: String,
    },
    #[error("line {line}: {device}'s {counter} twice")]
    Twice {
        line: usize,
        device: String,
        counter: String,
    },
    #[error("{device}: {counter} missing")]
    Missing {
        device: String,
        counter: &'static str,
    },
}

/// Parses `btrfs device stats` (lines `[/dev/sdb1].write_io_errs   0`): every device with its
/// five counters, in the order printed. A line that is not `[device].counter count`, a count
/// that is not a number, an unknown counter, a counter twice or one missing is an error naming
/// the line or the device; blank lines are skipped. btrfs-progs' other counters, if a later one
/// adds some, are ignored.
pub fn parse_device_stats(text: &str) -> Result<Vec<DeviceStats>, DeviceStatsError> {
    let mut out: Vec<(String, [Option<u64>; 5])> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = || DeviceStatsError::NotALine {
            line: n,
            text: cut(line),
        };
        let rest = line.strip_prefix('[').ok_or_else(bad)?;
        let (path, rest) = rest.rsplit_once("].").ok_or_else(bad)?;
        let (counter, count) = rest.split_once(char::is_whitespace).ok_or_else(bad)?;
        let count = count.trim();
        let Some(k) = KEYS.iter().position(|k| *k == counter) else {
            continue;
        };
        let count: u64 = count.parse().map_err(|_| DeviceStatsError::NotACount {
            line: n,
            counter: counter.to_string(),
            value: cut(count),
        })?;
        let device = device_name(path).ok_or_else(bad)?;
        let at = match out.iter().position(|(d, _)| *d == device) {
            Some(at) => at,
            None => {
                out.push((device.clone(), [None; 5]));
                out.len() - 1
            }
        };
        if out[at].1[k].replace(count).is_some() {
            return Err(DeviceStatsError::Twice {
                line: n,
                device,
                counter: counter.to_string(),
            });
        }
    }
    out.into_iter()
        .map(|(device, c)| {
            let get = |k: usize| {
                c[k].ok_or_else(|| DeviceStatsError::Missing {
                    device: device.clone(),
                    counter: KEYS[k],
                })
            };
            Ok(DeviceStats {
                counts: ErrorCounts {
                    write: get(0)?,
                    read: get(1)?,
                    flush: get(2)?,
                    corruption: get(3)?,
                    generation: get(4)?,
                },
                device,
            })
        })
        .collect()
}

/// The series' name of a device btrfs printed: its path's last part in label form, or
/// `devid<N>` for `devid:N` (a missing device).
fn device_name(path: &str) -> Option<String> {
    if let Some(id) = path.strip_prefix("devid:") {
        return id.parse::<u64>().ok().map(|d| format!("devid{d}"));
    }
    let last = path.rsplit('/').next().filter(|l| !l.is_empty())?;
    Some(crate::label::label_form(last.as_bytes()))
}

fn cut(s: &str) -> String {
    s.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/layers")
            .join(name);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// The layers guest's btrfs RAID1 after dm-flakey failed the writes, then the reads, of
    /// one device (tests/fixtures/layers/SOURCES.md): its counts, the other device's zeros.
    #[test]
    fn the_guests_capture_with_injected_errors_reads_as_btrfs_printed_it() {
        let got = parse_device_stats(&fixture("btrfs-device-stats-flakey.txt")).unwrap();
        assert_eq!(
            got,
            [
                DeviceStats {
                    device: "vdg".into(),
                    counts: ErrorCounts::default(),
                },
                DeviceStats {
                    device: "flaky".into(),
                    counts: ErrorCounts {
                        write: 5128,
                        read: 320,
                        flush: 2,
                        corruption: 0,
                        generation: 0,
                    },
                },
            ]
        );
    }

    #[test]
    fn a_loop_device_capture_reads_as_one_device_of_zeros() {
        let got = parse_device_stats(&fixture("btrfs-device-stats-loop.txt")).unwrap();
        assert_eq!(
            got,
            [DeviceStats {
                device: "loop0".into(),
                counts: ErrorCounts::default(),
            }]
        );
    }

    #[test]
    fn bad_lines_name_the_line_or_the_device_and_a_missing_device_is_its_devid() {
        let five = |dev: &str| {
            KEYS.iter()
                .map(|k| format!("[{dev}].{k} 1\n"))
                .collect::<String>()
        };
        let got = parse_device_stats(&(five("devid:3") + "\n" + &five("/dev/sdb"))).unwrap();
        assert_eq!(got[0].device, "devid3");
        assert_eq!(got[1].device, "sdb");
        assert_eq!(got[1].counts.generation, 1);
        // A counter a later btrfs-progs adds is no error.
        let more = five("/dev/sdb") + "[/dev/sdb].zone_errs 4\n";
        assert_eq!(parse_device_stats(&more).unwrap().len(), 1);
        for (text, want) in [
            (
                "ERROR: not a btrfs filesystem: /srv\n".to_string(),
                "line 1: \"ERROR: not a btrfs filesystem: /srv\" is not [device].counter count",
            ),
            (
                "[/dev/sdb].write_io_errs lots\n".to_string(),
                "line 1: write_io_errs \"lots\" is not a count",
            ),
            (
                "[/dev/sdb].read_io_errs -1\n".to_string(),
                "line 1: read_io_errs \"-1\" is not a count",
            ),
            (
                five("/dev/sdb") + "[/dev/sdb].read_io_errs 2\n",
                "line 6: sdb's read_io_errs twice",
            ),
            (
                "[/dev/sdb].write_io_errs 1\n".to_string(),
                "sdb: read_io_errs missing",
            ),
            (
                "[].write_io_errs 1\n".to_string(),
                "line 1: \"[].write_io_errs 1\" is not [device].counter count",
            ),
        ] {
            assert_eq!(
                parse_device_stats(&text).map_err(|e| e.to_string()),
                Err(want.to_string()),
                "{text}"
            );
        }
        assert_eq!(parse_device_stats(""), Ok(Vec::new()));
    }
}
