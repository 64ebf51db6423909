//! A host's history with a known story, written into a real store: shared by the report tests,
//! the report bench and the example page in docs/.
//!
//! The story: a database filesystem on one NVMe drive fills from 30 % to 90 % over the run
//! (plus a ±2 GB daily cycle), so it has a growth figure and a predicted-full date; a quiet
//! filesystem stays flat (no date). The drive wears by 1 % every 20 days and writes 50 GB a
//! day with a write amplification of 2.5. A probe target runs sync_write_4k every 5 minutes:
//! 100 µs below 80 % full, then 100 µs × (1 + 10 × (fill − 0.8)); a weekly fstrim (Sundays
//! 03:00) brings the hour after it to 0.6 × that, and a 30-minute idle every day at 12:00
//! brings the hour after it to 0.8 ×. From 6 hours to 65 minutes before each fstrim the
//! filesystem holds 2 % deleted but not trimmed (the runs then are a curve of their own; their
//! latency is the story's all the same). Extra quiet filesystems and drives scale it to the
//! history bench's host (50 filesystems, 10 drives). Below the database filesystem is an LVM
//! thin pool that its volume shares with others: it fills as the filesystem's trend does
//! (the volume's blocks stay allocated through the daily cycle), and at the end it has 40 GB
//! free, less than the filesystem's ~100 GB, so the pool is what runs out first: 4 days after
//! the last sample ([`Story::pool_full`]), where the filesystem itself would fill in ~10. A PostgreSQL on the database
//! filesystem holds its relations (a fifth of the filesystem's growth) and a 1 GB WAL, until
//! its archiver fails two days before the end: from then the WAL grows by four fifths of the
//! filesystem's growth and the segments wait for the archiver. The drive's error log gains 2
//! entries three days before the end, and it spends 20 minutes above its warning temperature
//! on the last day.

use ssdwatch::databases::component::{Component, Kind};
use ssdwatch::history::{
    ComponentSize, DatabaseFacts, DatabaseSample, DiscardEvent, DriveHealthRecord, DriveKey,
    DriveSample, FsKey, FsLayers, FsSample, HistoryConfig, IdlePeriod, LayerRow, ProbeRecord,
    Store,
};
use ssdwatch::probe::ProbeKind;

pub const DAY: i64 = 86_400;
pub const SIZE: f64 = 1e12;
pub const DB_MOUNT: &str = "/var/lib/postgresql";
pub const TARGET: &str = "/var/lib/postgresql/ssdwatch";
pub const HOST_PER_DAY: f64 = 50e9;
pub const WA: f64 = 2.5;
pub const THIN_POOL: &str = "vg0-pool-tpool";
pub const THIN_POOL_SIZE: u64 = 1_200_000_000_000;
pub const THIN_POOL_FREE: u64 = 40_000_000_000;
pub const PG_DATA: &str = "/var/lib/postgresql/15/main";
/// The WAL before the archiver fails, and a WAL segment.
pub const WAL_BASE: f64 = 1e9;
pub const WAL_SEGMENT: f64 = 16.0 * 1024.0 * 1024.0;

pub struct Story {
    /// The last sample is just before this (Unix seconds, a multiple of 5 minutes).
    pub end: i64,
    pub days: i64,
    /// Quiet filesystems and drives besides the database's.
    pub extra_fs: usize,
    pub extra_drives: usize,
    /// Filesystem sample interval (the store keeps one per raw_interval, 5 min).
    pub fs_every: i64,
}

impl Story {
    /// A story of `days` ending now (a report made right after it sees it as current).
    pub fn small(days: i64) -> Story {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("the clock is after 1970")
            .as_secs() as i64;
        Story {
            end: now - now % 300,
            days,
            extra_fs: 0,
            extra_drives: 0,
            fs_every: 900,
        }
    }

    pub fn start(&self) -> i64 {
        self.end - self.days * DAY
    }

    /// The database filesystem's fill at `t` (without the daily cycle).
    pub fn fill(&self, t: i64) -> f64 {
        0.3 + 0.6 * (t - self.start()) as f64 / (self.days * DAY) as f64
    }

    fn cycle(t: i64) -> f64 {
        2e9 * (2.0 * std::f64::consts::PI * (t % DAY) as f64 / DAY as f64).sin()
    }

    /// The database filesystem's growth a day.
    pub fn growth_per_day(&self) -> f64 {
        0.6 * SIZE / self.days as f64
    }

    /// The last filesystem sample's time (one each `fs_every` from the start).
    pub fn last(&self) -> i64 {
        let start = self.start();
        start + (self.end - 1 - start) / self.fs_every * self.fs_every
    }

    /// The thin pool's free bytes at `t`: [`THIN_POOL_FREE`] at the last sample, 1 GB more
    /// for each gigabyte the filesystem's trend grew since `t`.
    pub fn pool_avail(&self, t: i64) -> u64 {
        let later = (self.last() - t) as f64 / DAY as f64 * self.growth_per_day();
        (THIN_POOL_FREE as f64 + later) as u64
    }

    /// When the thin pool runs out: the story's known truth of the mount's full date.
    // The report bench includes this file and checks no date.
    #[allow(dead_code)]
    pub fn pool_full(&self) -> i64 {
        self.last() + (THIN_POOL_FREE as f64 / self.growth_per_day() * DAY as f64) as i64
    }

    /// The stack under the database filesystem at `t`: the filesystem with `fs_avail` free,
    /// then the thin pool, which runs out first.
    pub fn stack(&self, t: i64, fs_avail: u64) -> FsLayers {
        FsLayers {
            key: FsKey {
                mountpoint: DB_MOUNT.into(),
                uuid: None,
            },
            device: "nvme0n1p1".into(),
            t,
            layers: vec![
                LayerRow {
                    layer: "filesystem".into(),
                    name: String::new(),
                    avail_bytes: fs_avail,
                    size_bytes: Some(SIZE as u64),
                    limiting: false,
                },
                LayerRow {
                    layer: "thin_pool".into(),
                    name: THIN_POOL.into(),
                    avail_bytes: self.pool_avail(t),
                    size_bytes: Some(THIN_POOL_SIZE),
                    limiting: true,
                },
            ],
        }
    }

    /// When the archiver starts failing.
    pub fn archiver_fails(&self) -> i64 {
        self.end - 2 * DAY
    }

    /// The WAL's bytes at `t`: 1 GB, then four fifths of the filesystem's growth since the
    /// archiver failed.
    pub fn wal(&self, t: i64) -> f64 {
        let failing = (t - self.archiver_fails()).max(0) as f64 / DAY as f64;
        WAL_BASE + 0.8 * self.growth_per_day() * failing
    }

    /// The database's sample at `t`.
    pub fn database(&self, t: i64) -> DatabaseSample {
        let d = (t - self.start()) as f64 / DAY as f64;
        let wal = self.wal(t);
        let failing = t >= self.archiver_fails();
        let component = |c: Component, b: f64| ComponentSize {
            component: c,
            mountpoint: DB_MOUNT.into(),
            bytes: b as u64,
        };
        DatabaseSample {
            database: PG_DATA.into(),
            kind: Kind::Postgres,
            t,
            components: vec![
                component(Component::Wal, wal),
                component(
                    Component::Relations,
                    0.15 * SIZE + 0.2 * self.growth_per_day() * d,
                ),
            ],
            facts: DatabaseFacts {
                archive_ready_segments: Some(((wal - WAL_BASE) / WAL_SEGMENT) as u64),
                archive_oldest_ready_age_seconds: Some(if failing {
                    (t - self.archiver_fails()) as u64
                } else {
                    0
                }),
                ..Default::default()
            },
        }
    }

    /// Drive `i`'s health at `t`: drive 0's error log gains 2 entries three days before the
    /// end, and it is 20 minutes above its warning temperature on the last day.
    pub fn health(&self, i: usize, t: i64) -> DriveHealthRecord {
        let first = i == 0;
        DriveHealthRecord {
            error_log_entries: Some(if first && t >= self.end - 3 * DAY {
                16
            } else {
                14
            }),
            self_test: Some("short passed".into()),
            self_test_age_seconds: Some(((t - self.start()) % (7 * DAY)) as u64),
            temperature_warning_celsius: Some(70.0),
            above_warning_seconds: Some(if first && t >= self.end - DAY {
                1200
            } else {
                0
            }),
            durability: Some("none".into()),
        }
    }

    /// The probe latency the story gives at fill `f`, before any recovery.
    pub fn latency(f: f64) -> f64 {
        if f < 0.8 {
            100e-6
        } else {
            100e-6 * (1.0 + 10.0 * (f - 0.8))
        }
    }

    /// The weekly fstrims: Sundays 03:00 UTC.
    /// Whether a run at `t` is 65 minutes to 6 hours before an fstrim: made while 2 % of the
    /// filesystem was deleted and not trimmed.
    pub fn untrimmed_before_trim(t: i64) -> bool {
        (13..=72).any(|k| Self::is_trim(t + k * 300))
    }

    pub fn is_trim(t: i64) -> bool {
        // 1970-01-04 was a Sunday.
        (t - 3 * DAY).rem_euclid(7 * DAY) == 3 * 3600
    }

    pub fn drive(i: usize) -> DriveKey {
        DriveKey {
            wwn: Some(format!("eui.0025388b91c0e4{i:02x}")),
            serial: Some(format!("S6B0NX0T{:06}", 100 + i)),
            model: Some("SAMSUNG MZQL23T8HCLS-00A07".into()),
        }
    }

    /// Writes the story into `store`, downsampling once a simulated day.
    pub fn write(&self, store: &mut Store) {
        let start = self.start();
        let mut t = start;
        while t < self.end {
            let day_end = t + DAY;
            let (mut fs, mut drives, mut probes) = (Vec::new(), Vec::new(), Vec::new());
            let (mut discards, mut idles, mut databases) = (Vec::new(), Vec::new(), Vec::new());
            let mut stacks = Vec::new();
            while t < day_end && t < self.end {
                let fill = self.fill(t);
                if (t - start) % self.fs_every == 0 {
                    let used = (fill * SIZE + Self::cycle(t)).clamp(0.0, SIZE);
                    fs.push(fs_sample(DB_MOUNT, "nvme0n1p1", t, used));
                    stacks.push(self.stack(t, (SIZE - used) as u64));
                    for i in 0..self.extra_fs + 1 {
                        let mp = if i == 0 {
                            "/".to_string()
                        } else {
                            format!("/srv/quiet{i}")
                        };
                        fs.push(fs_sample(&mp, "nvme1n1p1", t, 0.2 * SIZE));
                    }
                }
                if (t - start) % 900 == 0 {
                    let d = (t - start) as f64 / DAY as f64;
                    for i in 0..1 + self.extra_drives {
                        let host = 2e12 + HOST_PER_DAY * d;
                        drives.push(DriveSample {
                            key: Self::drive(i),
                            kernel_name: format!("nvme{i}n1"),
                            capacity_bytes: Some(3_840_000_000_000),
                            t,
                            wear_used_ratio: Some((0.10 + d / 20.0 / 100.0) * 100.0)
                                .map(|w: f64| w.floor() / 100.0),
                            spare_ratio: Some(1.0),
                            host_written_bytes: Some(host as u64),
                            nand_written_bytes: Some((host * WA) as u64),
                            media_errors: Some(0),
                            power_on_hours: Some(((t - start) / 3600) as u64),
                            temperature_celsius: Some(40.0),
                            discarded_bytes: None,
                            health: self.health(i, t),
                        });
                    }
                    databases.push(self.database(t));
                }
                if Self::is_trim(t) {
                    discards.push(DiscardEvent {
                        drive: Self::drive(0),
                        t,
                        bytes: 120_000_000_000,
                    });
                }
                if t % DAY == 12 * 3600 {
                    idles.push(IdlePeriod {
                        drive: Self::drive(0),
                        start: t,
                        seconds: 1800,
                    });
                }
                let in_idle = t % DAY >= 12 * 3600 && t % DAY < 12 * 3600 + 1800;
                if (t - start) % 300 == 0 && !in_idle && !Self::is_trim(t) {
                    let mut p50 = Self::latency(fill);
                    let last_trim = (0..=12).map(|k| t - k * 300).find(|&x| Self::is_trim(x));
                    if last_trim.is_some_and(|x| x < t) {
                        p50 *= 0.6;
                    } else if t % DAY > 12 * 3600 + 1800 && t % DAY <= 13 * 3600 + 1800 {
                        p50 *= 0.8;
                    }
                    probes.push(ProbeRecord {
                        target: TARGET.into(),
                        drive: Some(Self::drive(0)),
                        t,
                        kind: ProbeKind::SyncWrite4k,
                        ops: 256,
                        p50_seconds: p50,
                        p99_seconds: Some(4.0 * p50),
                        max_seconds: 10.0 * p50,
                        throughput_bytes_per_second: None,
                        fill_ratio: Some(fill),
                        since_discard_seconds: None,
                        idle_seconds: None,
                        utilization_ratio: None,
                        utilization_before_ratio: None,
                        written_since_discard_bytes: None,
                        untrimmed_ratio: Some(if Self::untrimmed_before_trim(t) {
                            0.02
                        } else {
                            0.0
                        }),
                    });
                }
                t += 300;
            }
            store.record_fs(&fs).expect("fs samples");
            store.record_fs_layers(&stacks).expect("layers");
            store.record_drives(&drives).expect("drive samples");
            store.record_probes(&probes).expect("probe results");
            store.record_discards(&discards).expect("discards");
            store.record_idle(&idles).expect("idle periods");
            store
                .record_databases(&databases)
                .expect("database samples");
            store.downsample(t).expect("downsample");
        }
    }

    /// A new store in `dir` with the story written.
    pub fn store(&self, dir: &std::path::Path) -> Store {
        let mut store = Store::open(dir, &HistoryConfig::default()).expect("open the store");
        self.write(&mut store);
        store
    }
}

fn fs_sample(mp: &str, dev: &str, t: i64, used: f64) -> FsSample {
    FsSample {
        key: FsKey {
            mountpoint: mp.into(),
            uuid: None,
        },
        device: dev.into(),
        t,
        size_bytes: SIZE as u64,
        avail_bytes: (SIZE - used) as u64,
        free_bytes: (SIZE - used) as u64,
        files_free: None,
    }
}
