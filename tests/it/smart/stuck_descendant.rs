//! A smartctl wrapper whose child is stuck in the kernel (uninterruptible sleep, here a statfs on
//! a FUSE mount whose server got the request and never answers,
//! tests/it/support/hung_statfs_told_fs.py): SIGKILL can't end that child until its I/O returns.
//! The drive shows as stuck and no new run starts until the child is gone, so stuck processes
//! don't pile up one per run; whatever the wrapper printed is still used. In the collector run
//! in-process and in the daemon, where smartctl runs under the SMART helper.

use crate::support;
use crate::support::binary as web_common;

use ssdwatch::collector::smart::{Backend, DeviceEntry, SmartCollector, SmartConfig};
use ssdwatch::collector::{Collector, Context};
use ssdwatch::shared::Shared;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A FUSE mount whose statfs never answers, and whose server lists the pids whose statfs it
/// got. Dropping it SIGKILLs the server (which ends the blocked calls) and lazily unmounts.
struct HungMount {
    dir: tempfile::TempDir,
    mountpoint: PathBuf,
    server: Option<Child>,
}

impl HungMount {
    fn new() -> HungMount {
        let dir = tempfile::tempdir().expect("tempdir");
        let mountpoint = dir.path().join("hung");
        std::fs::create_dir(&mountpoint).expect("mountpoint");
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/support/hung_statfs_told_fs.py");
        let server = Command::new(support::system_python())
            .arg(script)
            .arg(&mountpoint)
            .arg(dir.path().join("calls"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start FUSE server");
        let mut m = HungMount {
            dir,
            mountpoint,
            server: Some(server),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !support::mounted(&m.mountpoint) {
            if let Some(c) = m.server.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                let mut err = String::new();
                if let Some(mut e) = c.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                panic!("FUSE server exited ({status}) before mounting: {err}");
            }
            assert!(Instant::now() < deadline, "the FUSE mount did not appear");
            std::thread::sleep(Duration::from_millis(50));
        }
        m
    }

    /// Where the server lists the pids whose statfs it got.
    fn calls(&self) -> PathBuf {
        self.dir.path().join("calls")
    }

    /// The server dies: the calls blocked on the mount return (ENOTCONN).
    fn kill_server(&mut self) {
        if let Some(mut c) = self.server.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for HungMount {
    fn drop(&mut self) {
        self.kill_server();
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.mountpoint)
            .stderr(Stdio::null())
            .status();
    }
}

/// Wear of the Samsung 860 EVO capture (attribute 177, 81% life left).
const WEAR_860EVO: f64 = 0.19;

/// How the wrapper ends once its child is stuck.
#[derive(Clone, Copy)]
enum Then {
    /// Prints the capture and exits 0: the child is left in the run's group.
    Answer,
    /// Waits for the child: the run times out and the group is killed; the wrapper dies, the
    /// child can't.
    Wait,
}

/// A smartctl stand-in in a temp dir: each run appends its pid to `runs`; unless `calm` exists
/// it starts a `stat -f` on the hung mount (pid appended to `children`), and goes on only once
/// the mount's server got that child's statfs (from then on SIGKILL can't end the child).
struct Wrapper {
    dir: tempfile::TempDir,
}

impl Wrapper {
    fn new(hung: &HungMount, then: Then) -> Wrapper {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().display().to_string();
        let capture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/smart/ata-samsung-860evo.json");
        let after = match then {
            Then::Answer => "",
            Then::Wait => "    wait\n",
        };
        let script = format!(
            "#!/bin/sh\n\
             echo $$ >> '{state}/runs'\n\
             if [ ! -e '{state}/calm' ]; then\n\
             \x20   stat -f '{hung}' >/dev/null 2>&1 &\n\
             \x20   child=$!\n\
             \x20   echo $child >> '{state}/children'\n\
             \x20   n=0\n\
             \x20   until grep -qx \"$child\" '{calls}' 2>/dev/null || [ $n -ge 1200 ]; do\n\
             \x20       sleep 0.05; n=$((n + 1))\n\
             \x20   done\n\
             {after}\
             fi\n\
             cat '{capture}'\n",
            hung = hung.mountpoint.display(),
            calls = hung.calls().display(),
            capture = capture.display(),
        );
        let bin = dir.path().join("smartctl");
        std::fs::write(&bin, script).expect("write wrapper");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Wrapper { dir }
    }

    fn bin(&self) -> PathBuf {
        self.dir.path().join("smartctl")
    }

    fn runs(&self) -> usize {
        self.lines("runs").len()
    }

    /// Children it started that are still there (neither gone nor a zombie).
    fn children_alive(&self) -> Vec<String> {
        self.lines("children")
            .into_iter()
            .filter(|p| alive(p))
            .collect()
    }

    /// From now on runs start no child.
    fn calm(&self) {
        std::fs::write(self.dir.path().join("calm"), "").expect("calm");
    }

    fn lines(&self, name: &str) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join(name))
            .unwrap_or_default()
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect()
    }
}

fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|x| x.1.trim().to_string()))
        .is_some_and(|rest| !rest.starts_with('Z') && !rest.starts_with('X'))
}

fn val(text: &str, family: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .filter(|l| l.contains("device=\"sda\""))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

fn config(bin: PathBuf, timeout: Duration) -> SmartConfig {
    SmartConfig {
        interval: Duration::ZERO,
        smartctl_path: bin,
        backend: Backend::Smartctl,
        timeout,
        discover: false,
        devices: vec![DeviceEntry {
            path: "/dev/sda".into(),
            dev_type: None,
            label: None,
        }],
        ..SmartConfig::default()
    }
}

/// Samples the collector as the daemon does, on a runtime of two workers.
struct Sampler {
    rt: tokio::runtime::Runtime,
    ctx: Context,
    _root: tempfile::TempDir,
}

impl Sampler {
    fn new() -> Sampler {
        let root = tempfile::tempdir().expect("tempdir");
        Sampler {
            rt: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime"),
            ctx: Context {
                roots: Arc::new(ssdwatch::Roots::fixture(root.path())),
                shared: Arc::new(Shared::default()),
                topology_max_age: Duration::from_secs(60),
                history: None,
                door: Default::default(),
            },
            _root: root,
        }
    }

    /// The door's series for the SMART collector, as a scrape shows them.
    fn door(&self, family: &str) -> Option<f64> {
        let mut set = ssdwatch::metrics::MetricSet::new();
        self.ctx.door.families(&mut set);
        let mut text = String::new();
        ssdwatch::render::render_families(&mut text, set.families());
        let want = format!("{family}{{collector=\"smart\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(want.as_str())?.parse().ok())
    }

    fn run(&self, c: &mut SmartCollector) -> (String, Vec<String>) {
        let s = self.rt.block_on(c.sample(&self.ctx)).expect("sample");
        (
            support::exposition(&s),
            s.errors.iter().map(|e| e.to_string()).collect(),
        )
    }
}

/// Six samples with the child stuck: one run, one stuck process, the drive stuck throughout;
/// then the mount's server goes, the child with it, and the drive is read again.
fn one_stuck_child_however_many_samples(then: Then, timeout: Duration, first_error: &str) {
    let mut hung = HungMount::new();
    let w = Wrapper::new(&hung, then);
    let mut c = SmartCollector::new(&config(w.bin(), timeout)).expect("collector");
    let sampler = Sampler::new();
    let (text, errors) = sampler.run(&mut c);
    assert!(errors.iter().any(|e| e.contains(first_error)), "{errors:?}");
    assert_eq!(val(&text, "ssdwatch_device_smartctl_stuck"), Some(1.0));
    if let Then::Answer = then {
        assert_eq!(
            val(&text, "ssdwatch_device_wear_used_ratio"),
            Some(WEAR_860EVO),
            "what the wrapper printed is used"
        );
        assert_eq!(val(&text, "ssdwatch_device_smart_sample_ok"), Some(1.0));
    }
    for round in 1..6 {
        let (text, errors) = sampler.run(&mut c);
        assert_eq!(
            val(&text, "ssdwatch_device_smartctl_stuck"),
            Some(1.0),
            "round {round}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains("still stuck in the kernel")),
            "round {round}: {errors:?}"
        );
    }
    assert_eq!(w.runs(), 1, "no new run while its child is stuck");
    assert_eq!(
        w.children_alive().len(),
        1,
        "one stuck process, not one per run"
    );
    // The stuck child holds the drive's door mark: one stuck call, one timeout, a refusal per
    // sample since, and no thread.
    assert_eq!(sampler.door("ssdwatch_blocking_stuck_calls"), Some(1.0));
    assert_eq!(sampler.door("ssdwatch_blocking_timeouts_total"), Some(1.0));
    assert_eq!(sampler.door("ssdwatch_blocking_refused_total"), Some(5.0));
    assert_eq!(sampler.door("ssdwatch_blocking_threads"), Some(0.0));

    // The I/O returns (the server dies): the killed child ends, and the drive is read again.
    w.calm();
    hung.kill_server();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (text, errors) = sampler.run(&mut c);
        if val(&text, "ssdwatch_device_smartctl_stuck") == Some(0.0) && w.runs() >= 2 {
            assert!(errors.is_empty(), "{errors:?}");
            assert_eq!(
                val(&text, "ssdwatch_device_wear_used_ratio"),
                Some(WEAR_860EVO)
            );
            break;
        }
        assert!(Instant::now() < deadline, "sda never read again:\n{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(w.children_alive().is_empty(), "{:?}", w.children_alive());
    assert_eq!(sampler.door("ssdwatch_blocking_stuck_calls"), Some(0.0));
}

#[test]
fn a_wrapper_that_answers_and_leaves_a_child_stuck_in_the_kernel_makes_the_drive_stuck() {
    if !support::fuse_available("a smartctl child stuck in the kernel after an answer") {
        return;
    }
    one_stuck_child_however_many_samples(
        Then::Answer,
        Duration::from_secs(30),
        "left 1 process(es) stuck in the kernel",
    );
}

#[test]
fn a_wrapper_killed_at_its_timeout_whose_child_is_stuck_in_the_kernel_makes_the_drive_stuck() {
    if !support::fuse_available("a smartctl child stuck in the kernel at a timeout") {
        return;
    }
    // The wrapper reaches its wait only once the child is stuck; the timeout leaves room for
    // that on a busy machine.
    one_stuck_child_however_many_samples(
        Then::Wait,
        Duration::from_secs(10),
        "stuck in the kernel (D state)",
    );
}

/// The daemon as it runs: smartctl under the SMART helper, which tells the daemon the drive is
/// stuck with the output, and when the stuck child is gone.
#[test]
fn through_the_smart_helper_a_stuck_child_makes_the_drive_stuck_until_it_is_gone() {
    if !support::fuse_available("a smartctl child stuck in the kernel, through the helper") {
        return;
    }
    let mut hung = HungMount::new();
    let w = Wrapper::new(&hung, Then::Answer);
    let dir = web_common::host();
    std::fs::write(
        dir.path().join("ssdwatch.yaml"),
        format!(
            "state_dir: {}\ncollectors:\n  filesystem:\n    enabled: false\n  probe:\n    enabled: false\n  smart:\n    smartctl_path: {}\n    backend: smartctl\n    interval: 1s\n    timeout: 30s\n    discover: false\n    devices:\n      - path: /dev/sda\n",
            dir.path().join("state").display(),
            w.bin().display()
        ),
    )
    .expect("config");
    let d = web_common::Daemon::start_in(dir, &[]);
    let metrics = || d.metrics();
    let wait = |what: &str, pred: &dyn Fn(&str) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let m = metrics();
            if pred(&m) {
                return m;
            }
            assert!(
                Instant::now() < deadline,
                "{what}\nlast scrape:\n{m}\nlog:\n{}",
                d.log_text()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let text = wait("sda read and stuck", &|m| {
        val(m, "ssdwatch_device_smartctl_stuck") == Some(1.0)
    });
    assert_eq!(
        val(&text, "ssdwatch_device_wear_used_ratio"),
        Some(WEAR_860EVO)
    );
    // Samples go on each second (the read's age grows with them) and start no run on sda.
    let text = wait("sda's read 3 s old", &|m| {
        val(m, "ssdwatch_device_smart_sample_age_seconds").is_some_and(|a| a >= 3.0)
    });
    assert_eq!(val(&text, "ssdwatch_device_smartctl_stuck"), Some(1.0));
    // Through the helper too, the drive's door mark is held, stuck, while the helper says so.
    assert!(
        text.contains("ssdwatch_blocking_stuck_calls{collector=\"smart\"} 1\n"),
        "{text}"
    );
    assert_eq!(w.runs(), 1, "no new run while its child is stuck");
    assert_eq!(w.children_alive().len(), 1);

    w.calm();
    hung.kill_server();
    wait("sda read again", &|m| {
        val(m, "ssdwatch_device_smartctl_stuck") == Some(0.0)
            && val(m, "ssdwatch_device_smart_sample_age_seconds").is_some_and(|a| a < 3.0)
            && w.runs() >= 2
    });
    assert!(w.children_alive().is_empty(), "{:?}", w.children_alive());
    let text = metrics();
    assert!(
        text.contains("ssdwatch_blocking_stuck_calls{collector=\"smart\"} 0\n"),
        "{text}"
    );
}
