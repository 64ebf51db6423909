//! The probe engine: one run on one target with every safety gate, its context, its result. The
//! gates are decided in `plan` (pure) and carried out in `run`; no scheduling here (that is the
//! probe collector's job) and no metrics, only plain results.

pub mod budget;
pub mod fsafe;
pub mod io;
pub mod plan;
pub mod replay;
pub mod run;

pub use plan::{
    FILE_FRACTION, Observed, Plan, ProbeDir, ProbeFile, RunPlan, Spec, floor_bytes,
    overwrites_in_place, plan, probe_file_bytes,
};
pub use run::{PlaceError, RunError, RunInputs, place, run_target};

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

pub const MIB: u64 = 1 << 20;

/// Untimed 4 KiB reads at the start of each run.
pub const WARM_UP_READS: u32 = 8;

/// Probe kinds; the names are the `probe` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
pub enum ProbeKind {
    #[serde(rename = "sync_write_4k")]
    SyncWrite4k,
    #[serde(rename = "rand_read_4k")]
    RandRead4k,
    #[serde(rename = "rand_write_4k")]
    RandWrite4k,
    #[serde(rename = "seq_write")]
    SeqWrite,
}

impl ProbeKind {
    pub const ALL: [ProbeKind; 4] = [
        ProbeKind::SyncWrite4k,
        ProbeKind::RandRead4k,
        ProbeKind::RandWrite4k,
        ProbeKind::SeqWrite,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ProbeKind::SyncWrite4k => "sync_write_4k",
            ProbeKind::RandRead4k => "rand_read_4k",
            ProbeKind::RandWrite4k => "rand_write_4k",
            ProbeKind::SeqWrite => "seq_write",
        }
    }

    pub fn parse(s: &str) -> Option<ProbeKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One probe target in the config (`collectors.probe.targets[]`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TargetConfig {
    /// A directory on the filesystem to watch; the daemon works only in `<path>/.ssdwatch-probe/`.
    pub path: PathBuf,
    pub kinds: Vec<ProbeKind>,
    /// Between runs of this target; the collector's interval when absent.
    #[serde(with = "humantime_serde")]
    pub interval: Option<Duration>,
    /// seq_write runs at most this often (it writes the most).
    #[serde(with = "humantime_serde")]
    pub seq_write_interval: Duration,
    /// 4 KiB writes per run of sync_write_4k and of rand_write_4k.
    pub write_ops: u32,
    /// 4 KiB reads per run of rand_read_4k.
    pub read_ops: u32,
    /// Writes in flight for rand_write_4k (one thread each).
    pub queue_depth: u32,
    pub seq_write_bytes: u64,
    pub seq_write_block_bytes: u64,
    /// Size of the preallocated probe file; at most 1/32 of the filesystem (rounded down to
    /// `seq_write_block_bytes`, at least one block), so a small filesystem gets a small file.
    pub file_size_bytes: u64,
    /// Cap on bytes written per UTC day (probe file creation included).
    pub budget_bytes_per_day: u64,
    /// Cap on time spent probing per hour.
    #[serde(with = "humantime_serde")]
    pub budget_time_per_hour: Duration,
    /// Skip (reason busy) when the drive was busier than this (0..1).
    pub busy_threshold: f64,
    /// Free-space floor for a run that consumes space (creating the probe file, or any write on a
    /// copy-on-write or log-structured filesystem): the larger of this fraction of the filesystem
    /// and `free_floor_bytes`.
    pub free_floor_ratio: f64,
    pub free_floor_bytes: u64,
    /// What a run that consumes no space (rewriting the existing, fully allocated probe file on
    /// ext4 or XFS) leaves free at least: a margin for the filesystem's own metadata.
    pub rewrite_reserve_bytes: u64,
    /// Use the idle I/O scheduling class.
    pub idle_priority: bool,
    /// A run not finished by then is reported as an error and its thread left to finish alone.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
}

impl Default for TargetConfig {
    fn default() -> Self {
        TargetConfig {
            path: PathBuf::new(),
            kinds: ProbeKind::ALL.to_vec(),
            interval: None,
            seq_write_interval: Duration::from_secs(24 * 3600),
            write_ops: 16,
            read_ops: 64,
            queue_depth: 4,
            seq_write_bytes: 16 * MIB,
            seq_write_block_bytes: MIB,
            file_size_bytes: 32 * MIB,
            budget_bytes_per_day: 64 * MIB,
            budget_time_per_hour: Duration::from_secs(60),
            busy_threshold: 0.5,
            free_floor_ratio: 0.05,
            free_floor_bytes: 64 * MIB,
            rewrite_reserve_bytes: 4 * MIB,
            idle_priority: true,
            timeout: Duration::from_secs(120),
        }
    }
}

impl TargetConfig {
    pub fn validate(&self, key: &str) -> Result<(), crate::validate::Invalid> {
        use crate::validate::Invalid;
        if !self.path.is_absolute() {
            return Err(Invalid::new(
                format!("{key}.path"),
                "must be an absolute path",
            ));
        }
        if self.kinds.is_empty() {
            return Err(Invalid::new(
                format!("{key}.kinds"),
                "must list at least one kind",
            ));
        }
        let align = io::ALIGN as u64;
        if self.file_size_bytes < MIB || !self.file_size_bytes.is_multiple_of(align) {
            return Err(Invalid::new(
                format!("{key}.file_size_bytes"),
                "must be at least 1 MiB and a multiple of 4096",
            ));
        }
        if !self.seq_write_block_bytes.is_multiple_of(align)
            || self.seq_write_block_bytes == 0
            || self.seq_write_block_bytes > self.file_size_bytes
        {
            return Err(Invalid::new(
                format!("{key}.seq_write_block_bytes"),
                "must be a multiple of 4096, at most file_size_bytes",
            ));
        }
        if !(0.0..=1.0).contains(&self.busy_threshold) {
            return Err(Invalid::new(
                format!("{key}.busy_threshold"),
                "must be in 0..1",
            ));
        }
        if !(0.0..1.0).contains(&self.free_floor_ratio) {
            return Err(Invalid::new(
                format!("{key}.free_floor_ratio"),
                "must be in 0..1",
            ));
        }
        // Floors and reserves beyond any filesystem are refused, not left to overflow.
        for (k, v) in [
            ("free_floor_bytes", self.free_floor_bytes),
            ("rewrite_reserve_bytes", self.rewrite_reserve_bytes),
        ] {
            if v > 1 << 50 {
                return Err(Invalid::new(format!("{key}.{k}"), "must be at most 1 PiB"));
            }
        }
        for (k, v) in [("write_ops", self.write_ops), ("read_ops", self.read_ops)] {
            if v == 0 || v > 1_000_000 {
                return Err(Invalid::new(format!("{key}.{k}"), "must be 1..1000000"));
            }
        }
        if self.queue_depth == 0 || self.queue_depth > 64 {
            return Err(Invalid::new(format!("{key}.queue_depth"), "must be 1..64"));
        }
        Ok(())
    }

    /// Bytes a run of `kind` writes.
    pub fn planned_bytes(&self, kind: ProbeKind) -> u64 {
        match kind {
            ProbeKind::SyncWrite4k | ProbeKind::RandWrite4k => {
                u64::from(self.write_ops) * io::ALIGN as u64
            }
            ProbeKind::RandRead4k => 0,
            ProbeKind::SeqWrite => {
                self.seq_write_bytes.div_ceil(self.seq_write_block_bytes)
                    * self.seq_write_block_bytes
            }
        }
    }
}

/// Why a run did not happen (the `reason` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    Budget,
    Busy,
    LowSpace,
    Readonly,
    Unsafe,
    Error,
}

impl SkipReason {
    pub const ALL: [SkipReason; 6] = [
        SkipReason::Budget,
        SkipReason::Busy,
        SkipReason::LowSpace,
        SkipReason::Readonly,
        SkipReason::Unsafe,
        SkipReason::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Budget => "budget",
            SkipReason::Busy => "busy",
            SkipReason::LowSpace => "low_space",
            SkipReason::Readonly => "readonly",
            SkipReason::Unsafe => "unsafe",
            SkipReason::Error => "error",
        }
    }
}

/// Where a target lives: its mount point and the physical drive(s) under it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    pub mountpoint: String,
    /// Physical drives, sorted; the first is the `device` label.
    pub drives: Vec<String>,
}

impl Placement {
    pub fn device(&self) -> &str {
        self.drives.first().map(String::as_str).unwrap_or("")
    }
}

/// What the drive and filesystem were doing around the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunContext {
    pub fill_ratio: Option<f64>,
    pub since_discard_seconds: Option<f64>,
    pub idle_seconds: Option<f64>,
    /// Utilization measured just before the run (the busy gate).
    pub utilization_before_ratio: Option<f64>,
    /// Utilization of the drive during the run (io_ticks delta / wall time).
    pub utilization_ratio: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KindResult {
    pub probe: ProbeKind,
    pub ops: usize,
    pub bytes_written: u64,
    pub p50_seconds: f64,
    pub p99_seconds: f64,
    pub max_seconds: f64,
    pub throughput_bytes_per_second: Option<f64>,
    /// Every operation's latency, for histograms; not printed (a recorded outcome may carry it).
    #[serde(default, skip_serializing)]
    pub latencies: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub target: PathBuf,
    pub placement: Placement,
    pub context: RunContext,
    pub started_unix: f64,
    pub duration_seconds: f64,
    /// Bytes written by this run, probe file creation included.
    pub written_bytes: u64,
    /// Bytes of which went to creating the probe file.
    pub file_created_bytes: u64,
    pub removed_leftovers: Vec<String>,
    pub results: Vec<KindResult>,
    /// Kinds not run for lack of budget (the rest ran).
    pub budget_skipped: Vec<ProbeKind>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skip {
    pub target: PathBuf,
    pub placement: Option<Placement>,
    pub reason: SkipReason,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    Ran(RunReport),
    Skipped(Skip),
}

/// Histogram upper bounds: 10 µs to 10 s, 1-2.5-5 per decade.
pub const BUCKETS: [f64; 19] = [
    1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];

/// Nearest-rank quantile of a sorted slice.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank_and_max_is_quantile_one() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&v, 1.0), 100.0);
        assert_eq!(quantile(&[7.0], 0.5), 7.0);
        assert!(quantile(&[], 0.5).is_nan());
    }

    #[test]
    fn default_daily_writes_fit_the_default_budget() {
        let t = TargetConfig::default();
        let per_run =
            t.planned_bytes(ProbeKind::SyncWrite4k) + t.planned_bytes(ProbeKind::RandWrite4k);
        let runs = 86400 / 300;
        // Steady state; the probe file's one-time creation comes on top on the first day.
        let day = per_run * runs + t.planned_bytes(ProbeKind::SeqWrite);
        assert!(day <= t.budget_bytes_per_day, "{day}");
        assert_eq!(BUCKETS.first(), Some(&1e-5));
        assert_eq!(BUCKETS.last(), Some(&10.0));
    }

    #[test]
    fn target_config_rejects_bad_values_naming_the_key() {
        let t = TargetConfig {
            path: "/data".into(),
            busy_threshold: 2.0,
            ..TargetConfig::default()
        };
        assert_eq!(t.validate("x").unwrap_err().key, "x.busy_threshold");
        let t = TargetConfig {
            path: "rel".into(),
            ..TargetConfig::default()
        };
        assert_eq!(t.validate("x").unwrap_err().key, "x.path");
    }
}
