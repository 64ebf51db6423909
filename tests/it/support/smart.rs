//! The SMART collector's tests' ground: the fake smartctl (tests/fake-smartctl/smartctl) behind
//! a wrapper in a temp dir that holds its state, each drive's answer (`<dev>.mode`) and what it was
//! asked (`<dev>.argv`); and a collector sampled on a host of its own with nothing on it.

use ssdwatch::collector::smart::SmartCollector;
use ssdwatch::collector::{Collector, Context};
use ssdwatch::snapshot::Shared;
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
