//! The SMART collector's tests' ground: the fake smartctl (tests/fake-smartctl/smartctl) behind
//! a wrapper in a temp dir that holds its state, each drive's answer (`<dev>.mode`) and what it was
//! asked (`<dev>.argv`); and a collector sampled on a host of its own with nothing on it.

use super::testing::nvme_log_dump;
use ssdwatch::collector::smart::SmartCollector;
use ssdwatch::collector::{Collector, Context};
use ssdwatch::shared::Shared;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A saved smartctl output of the fixture corpus.
pub fn smart_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/smart")
        .join(name)
}

/// A temp dir holding a `smartctl` wrapper that runs the fake with its state dir.
pub struct Fake {
    pub dir: tempfile::TempDir,
}

impl Fake {
    pub fn new() -> Fake {
        let dir = tempfile::tempdir().expect("tempdir");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake-smartctl/smartctl");
        let wrapper = dir.path().join("smartctl");
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nFAKE_STATE='{}' exec sh '{}' \"$@\"\n",
                dir.path().display(),
                script.display()
            ),
        )
        .expect("write wrapper");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Fake { dir }
    }

    /// A SMART config reading `devs` (kernel names) through this fake: every sample reads every
    /// drive (tests build the collector directly, below the config file's 1 s minimum), always
    /// with the smartctl backend (never libatasmart, even where `auto` would pick it), no
    /// discovery.
    pub fn config<S: AsRef<str>>(
        &self,
        devs: &[S],
        timeout: std::time::Duration,
        parallelism: usize,
    ) -> ssdwatch::collector::smart::SmartConfig {
        use ssdwatch::collector::smart::{Backend, DeviceEntry, SmartConfig};
        SmartConfig {
            interval: std::time::Duration::ZERO,
            smartctl_path: self.bin(),
            backend: Backend::Smartctl,
            timeout,
            parallelism,
            discover: false,
            devices: devs
                .iter()
                .map(|d| DeviceEntry {
                    path: format!("/dev/{}", d.as_ref()),
                    dev_type: None,
                    label: None,
                })
                .collect(),
            ..SmartConfig::default()
        }
    }

    /// The wrapper, to give as `smartctl_path`.
    pub fn bin(&self) -> PathBuf {
        self.dir.path().join("smartctl")
    }

    /// How the fake answers for `dev` (a line of the modes its script lists).
    pub fn mode(&self, dev: &str, line: &str) {
        std::fs::write(self.dir.path().join(format!("{dev}.mode")), line).expect("mode");
    }

    /// The drive answers with a saved smartctl output from the fixture corpus.
    pub fn ok(&self, dev: &str, fixture_name: &str) {
        self.mode(
            dev,
            &format!("ok {}", smart_fixture(fixture_name).display()),
        );
    }

    /// Every command line the fake was run with for `dev`, one per line.
    pub fn argv(&self, dev: &str) -> String {
        self.file(&format!("{dev}.argv"))
    }

    /// A file the fake wrote in its state dir (empty when absent).
    pub fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }
}

/// A collector's context on a host with no devices, no mounts and no history (the drives are
/// listed in the collector's config); the host's directory goes when this is dropped.
pub struct EmptyHost {
    pub ctx: Context,
    _dir: tempfile::TempDir,
}

impl EmptyHost {
    pub fn new() -> EmptyHost {
        let dir = tempfile::tempdir().expect("tempdir");
        EmptyHost {
            ctx: Context {
                roots: Arc::new(ssdwatch::Roots::fixture(dir.path())),
                shared: Arc::new(Shared::default()),
                topology_max_age: Duration::from_secs(60),
                history: None,
                door: Default::default(),
            },
            _dir: dir,
        }
    }
}

/// One sample of `c` on an empty host, on a runtime of its own: the exposition and the errors.
pub fn sample(c: &mut SmartCollector) -> (String, Vec<String>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let host = EmptyHost::new();
    let s = rt
        .block_on(c.sample(&host.ctx))
        .expect("sample never fails");
    (
        super::exposition(&s),
        s.errors.iter().map(|e| e.to_string()).collect(),
    )
}

/// A real NVMe capture (Samsung PM9A3) and the same run with a hand-made OCP SMART log (C0h)
/// dumped in it (no real C0h dump is in the corpus): flash writes 1.5 x the host's, log page
/// version 3, the OCP GUID AFD514C9-7C6F-4F9C-A4F2-BFEA2810AFC5 at bytes 496-511.
pub struct OcpCapture {
    pub base: PathBuf,
    pub with_log: tempfile::NamedTempFile,
    pub host: u64,
    pub nand: u64,
}

impl OcpCapture {
    pub fn new() -> OcpCapture {
        let base = smart_fixture("nvme-samsung-pm9a3-mzql23t8hcls.json");
        let text = std::fs::read_to_string(&base).expect("fixture");
        let mut v: serde_json::Value = serde_json::from_str(&text).expect("fixture json");
        let units = v["nvme_smart_health_information_log"]["data_units_written"]
            .as_u64()
            .expect("data units");
        // NVMe data units are 512,000 bytes.
        let host = units * 512_000;
        let nand = host + host / 2;
        let mut log = vec![0u8; 512];
        log[..16].copy_from_slice(&u128::from(nand).to_le_bytes());
        log[494..496].copy_from_slice(&3u16.to_le_bytes());
        log[496..].copy_from_slice(&0xAFD5_14C9_7C6F_4F9C_A4F2_BFEA_2810_AFC5u128.to_le_bytes());
        v["smartctl"]["output"] = serde_json::json!(nvme_log_dump(0xc0, &log));
        let with_log = tempfile::NamedTempFile::new().expect("temp");
        std::fs::write(with_log.path(), v.to_string()).expect("write");
        // Readable by the unit's user where a test runs the daemon as nobody.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(with_log.path(), std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
        OcpCapture {
            base,
            with_log,
            host,
            nand,
        }
    }

    /// The fake's mode: the base capture, or the one with the log when asked for it.
    pub fn mode(&self) -> String {
        format!(
            "ocp {} {}",
            self.base.display(),
            self.with_log.path().display()
        )
    }
}

/// A `smartctl --scan-open --json=c` of a host with a MegaRAID controller, written by hand in
/// the shape smartctl 7.x gives (no real capture of one is in the corpus): a SAS port, a SATA
/// port behind it, a port that would not open, and an NVMe drive (/sys discovery's, not a port).
pub const RAID_SCAN: &str = r#"{"json_format_version":[1,0],
  "smartctl":{"version":[7,3],"argv":["smartctl","--scan-open","--json=c"],"exit_status":0},
  "devices":[
    {"name":"/dev/bus/0","info_name":"/dev/bus/0 [megaraid_disk_08]","type":"megaraid,8","protocol":"SCSI"},
    {"name":"/dev/bus/0","info_name":"/dev/bus/0 [megaraid_disk_09] [SAT]","type":"sat+megaraid,9","protocol":"ATA"},
    {"name":"/dev/bus/0","info_name":"/dev/bus/0 [megaraid_disk_10]","type":"megaraid,10","protocol":"SCSI","open_error":"INQUIRY failed"},
    {"name":"/dev/nvme0","info_name":"/dev/nvme0","type":"nvme","protocol":"NVMe"}
  ]}"#;
