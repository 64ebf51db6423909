//! A smartctl whose child leaves the process group with `setsid` and keeps the output pipe
//! open (tests/fake-smartctl/smartctl, modes `escape` and `escape-hang`): the valid JSON it
//! printed is used as soon as smartctl exits, the escaped process is found and killed, no
//! descriptor leaks over many runs, and nothing of a run outlives the daemon's SIGTERM.

use crate::support::smart::{EmptyHost, Fake, smart_fixture};
use crate::support::{binary, wait_until};

use nix::sys::signal::Signal;
use ssdwatch::collector::Collector;
use ssdwatch::collector::smart::{DeviceEntry, SmartCollector, SmartConfig};
use std::path::Path;
use std::time::{Duration, Instant};

/// Wear of the Samsung 860 EVO capture (attribute 177, 81% life left).
const WEAR_860EVO: f64 = 0.19;
const CAPTURE: &str = "ata-samsung-860evo.json";

/// The fake smartctl answering for sda in `mode` (`escape`, `escape-hang`) with the capture.
fn fake(mode: &str) -> Fake {
    let fake = Fake::new();
    fake.mode(
        "sda",
        &format!("{mode} {}", smart_fixture(CAPTURE).display()),
    );
    fake
}

fn pids_in(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Alive: present and neither a zombie nor dead (a killed orphan is reaped by init).
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|x| x.1.trim().to_string()))
        .is_some_and(|rest| !rest.starts_with('Z') && !rest.starts_with('X'))
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").expect("fd dir").count()
}

/// Live processes carrying a run tag of daemon `pid` in their environment.
fn tagged_processes_of(pid: u32) -> Vec<String> {
    let want = format!("SSDWATCH_SMARTCTL_RUN={pid}-");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("proc").flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.bytes().all(|b| b.is_ascii_digit()) || !alive(&name) {
            continue;
        }
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if env
            .split(|b| *b == 0)
            .any(|kv| kv.starts_with(want.as_bytes()))
        {
            out.push(name);
        }
    }
    out
}

fn value(text: &str, family: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(&format!("{family}{{")) && l.contains("device=\"sda\""))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[test]
fn valid_json_is_used_while_a_setsid_grandchild_holds_the_pipe_and_nothing_leaks_over_runs() {
    // It counts the whole process's descriptors and the processes it tags, so it runs in a
    // process of its own.
    if !crate::support::alone(
        module_path!(),
        "valid_json_is_used_while_a_setsid_grandchild_holds_the_pipe_and_nothing_leaks_over_runs",
    ) {
        return;
    }
    const RUNS: usize = 15;
    let fake = fake("escape");
    let (state, bin) = (&fake.dir, fake.bin());
    let mut c = SmartCollector::new(&SmartConfig {
        interval: Duration::ZERO,
        smartctl_path: bin,
        timeout: Duration::from_secs(20),
        discover: false,
        devices: vec![DeviceEntry {
            path: "/dev/sda".into(),
            dev_type: None,
            label: None,
        }],
        ..SmartConfig::default()
    })
    .expect("collector");
    let host = EmptyHost::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut fds_after_first = 0;
    let mut last = String::new();
    for run in 1..=RUNS {
        let started = Instant::now();
        let s = rt
            .block_on(c.sample(&host.ctx))
            .expect("sample never fails");
        let errors: Vec<String> = s.errors.iter().map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "run {run}: {errors:?}");
        last = String::new();
        ssdwatch::render::render_families(&mut last, s.metrics.families());
        assert_eq!(
            value(&last, "ssdwatch_device_wear_used_ratio"),
            Some(WEAR_860EVO),
            "run {run}: the JSON printed before the escape is used\n{last}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "run {run} waited for the grandchild ({:?})",
            started.elapsed()
        );
        if run == 1 {
            fds_after_first = open_fds();
        }
    }
    let escapees = pids_in(&state.path().join("sda.escapees"));
    assert_eq!(escapees.len(), RUNS, "one escapee per run: {escapees:?}");
    for pid in &escapees {
        wait_until(
            &format!("escapee {pid} gone"),
            Duration::from_secs(5),
            || !alive(pid),
        );
    }
    assert!(
        tagged_processes_of(std::process::id()).is_empty(),
        "processes of a run left"
    );
    assert_eq!(
        open_fds(),
        fds_after_first,
        "descriptors after {RUNS} runs vs after the first"
    );
    assert_eq!(
        value(&last, "ssdwatch_device_smartctl_escaped_processes_total"),
        Some(RUNS as f64),
        "each escape is counted\n{last}"
    );
    assert_eq!(value(&last, "ssdwatch_device_smart_sample_ok"), Some(1.0));
}

#[test]
fn sigterm_leaves_no_smartctl_nor_its_setsid_grandchild_behind() {
    let fake = fake("escape-hang");
    let (state, bin) = (&fake.dir, fake.bin());
    let dir = binary::host();
    std::fs::write(
        dir.path().join("ssdwatch.yaml"),
        format!(
            "state_dir: {}\ncollectors:\n  filesystem:\n    enabled: false\n  probe:\n    enabled: false\n  smart:\n    smartctl_path: {}\n    timeout: 5m\n    discover: false\n    devices:\n      - path: /dev/sda\n",
            dir.path().join("state").display(),
            bin.display()
        ),
    )
    .expect("config");
    let mut d = binary::Daemon::start_in(dir, &[]);
    let running = state.path().join("sda.running");
    let escapees = state.path().join("sda.escapees");
    wait_until("smartctl running", Duration::from_secs(20), || {
        running.exists() && !pids_in(&escapees).is_empty()
    });
    let smartctl = pids_in(&running).pop().expect("smartctl pid");
    let escapee = pids_in(&escapees).pop().expect("escapee pid");
    let daemon_pid = d.child.id();
    assert!(alive(&smartctl) && alive(&escapee));
    // smartctl runs under the daemon's SMART helper (daemon → keeper → helper), which tags it.
    let helper = parent_of(&smartctl).expect("smartctl's parent");
    let keeper = parent_of(&helper).expect("the helper's parent");
    assert_eq!(
        parent_of(&keeper).as_deref(),
        Some(daemon_pid.to_string().as_str()),
        "smartctl {smartctl} runs under the daemon's SMART helper {helper}"
    );
    let helper_pid: u32 = helper.parse().expect("pid");
    assert!(
        tagged_processes_of(helper_pid).len() >= 3,
        "smartctl, its sleep and the escapee carry the run's tag"
    );
    d.signal(Signal::SIGTERM);
    wait_until("the daemon exits", Duration::from_secs(10), || {
        matches!(d.child.try_wait(), Ok(Some(_)))
    });
    wait_until(
        "smartctl and its escaped grandchild gone",
        Duration::from_secs(5),
        || !alive(&smartctl) && !alive(&escapee),
    );
    assert_eq!(
        tagged_processes_of(helper_pid),
        Vec::<String>::new(),
        "processes of a run outlived the daemon:\n{}",
        d.log_text()
    );
    wait_until(
        "the SMART helper and its keeper gone with the daemon",
        Duration::from_secs(5),
        || !alive(&helper) && !alive(&keeper),
    );
}

/// The parent pid of a live process (/proc/PID/stat, after the command name).
fn parent_of(pid: &str) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1).map(str::to_string)
}
