//! Helpers for tests that need the real kernel: root checks, loop-mounted filesystems, a hung
//! FUSE mount. Everything set up is torn down by Drop guards, also when a test panics.

pub mod binary;
pub mod browser;
pub mod cgroup;
pub mod logs;
pub mod prometheus;
pub mod smart;
pub mod story;

pub mod exposition;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// True when running as root; otherwise prints why the test is skipped.
/// Seconds since the Unix epoch, as the daemon stamps its samples.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_secs_f64()
}

pub fn require_root(test: &str) -> bool {
    nix::unistd::Uid::effective().is_root() || skip(test, "needs root (loop devices, mount, FUSE)")
}

// `skip` is the one the crate's unit tests use, so both halves of the suite skip, and fail
// under strict mode, alike. The crate keeps it to its own tests (`#[cfg(test)]`, not part of the
// library), so it is taken from its file rather than imported.
#[path = "../../../src/testing.rs"]
mod testing;
pub(crate) use testing::skip;

/// For a test whose premise is a behaviour of this machine's kernel or hypervisor that the test
/// itself checks first (not a missing tool, privilege or device class the suite can provide):
/// says so and returns false, also under `SSDWATCH_TESTS_STRICT`, since no set-up of the suite
/// could make it apply. Use `skip` for anything the suite could have provided.
pub fn not_applicable(test: &str, why: &str) -> bool {
    say(&format!(
        "SKIP {test} (not applicable on this machine): {why}"
    ));
    false
}

/// Written to the process's stderr directly: the test harness captures `eprintln!` of passing
/// tests, and a skip nobody sees is a pass nobody earned.
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// The name the test harness knows a test of this binary by (`history::crash::a_writer_...`),
/// which `--exact` takes when a test runs this binary again: `module` is the test's
/// `module_path!()`, whose first segment is the binary's own name.
pub fn test_path(module: &str, test: &str) -> String {
    match module.split_once("::") {
        Some((_, path)) => format!("{path}::{test}"),
        None => test.to_string(),
    }
}

/// For a test that measures this whole process (its threads, its descriptors, its children):
/// beside it in one test binary, other tests' threads and children come and go. So the test runs
/// again, alone, in a process of its own (this binary, `--exact`), and this says whether the
/// caller is that process: the test goes on when true and returns when false, its verdict then
/// the other process's, asserted here (with its output).
pub fn alone(module: &str, test: &str) -> bool {
    const ALONE: &str = "SSDWATCH_TEST_ALONE";
    let name = test_path(module, test);
    if std::env::var_os(ALONE).is_some_and(|v| v == name.as_str()) {
        return true;
    }
    let out = Command::new(std::env::current_exe().expect("the test binary"))
        .args([name.as_str(), "--exact", "--test-threads=1"])
        .env(ALONE, &name)
        .output()
        .unwrap_or_else(|e| panic!("{name}: running it in a process of its own: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // What it wrote straight to stderr (a skip) is seen as if it had run here.
    if !stderr.trim().is_empty() {
        say(stderr.trim_end());
    }
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{name}, in a process of its own ({}):\n{stdout}{stderr}",
        out.status
    );
    false
}

/// `cmd` without the variables `cargo test` sets for a test process (`CARGO_MANIFEST_DIR`,
/// `CARGO_PKG_*`, ...), as if started from a shell. A cargo build inside it (the .deb's release
/// build) then finds the one tests/run.sh or a developer already made: some build scripts (ring's)
/// track those variables, and a build that saw them differ starts over.
pub fn as_from_shell(cmd: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        if matches!(
            name,
            "CARGO"
                | "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_MANIFEST_LINKS"
                | "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_TARGET_TMPDIR"
                | "OUT_DIR"
        ) || name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_BIN_EXE_")
        {
            cmd.env_remove(name);
        }
    }
    cmd
}

/// Whether a command is on PATH; otherwise prints why the test is skipped.
pub fn require_cmd(test: &str, cmd: &str, package: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    found
        || skip(
            test,
            &format!("{cmd} not installed (apt-get install {package})"),
        )
}

pub fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// This machine's drives smartctl may be asked about (NVMe, sd, virtio), by kernel name and
/// kind, from `/sys`.
pub fn smart_drives() -> Vec<(String, ssdwatch::sysfs::topology::DeviceKind)> {
    use ssdwatch::sysfs::topology::{DeviceKind, Topology};
    let topo = Topology::read(Path::new("/sys")).expect("read /sys");
    topo.drives()
        .into_iter()
        .filter(|d| {
            matches!(
                d.kind(),
                DeviceKind::Nvme | DeviceKind::Scsi | DeviceKind::Virtio
            )
        })
        .map(|d| (d.name.clone(), d.kind()))
        .collect()
}

/// A loopback TCP port free a moment ago, for a server a test starts (the test's own, stopped
/// by PID).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// Runs `cmd` with `args`: whether it succeeded, and its stdout and stderr together (for a tool
/// whose verdict is both its exit status and what it says: promtool, systemd-analyze).
pub fn run_status(cmd: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {cmd}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// An ext4 filesystem on a loop device over a sparse file, mounted in a temp dir.
pub struct LoopFs {
    /// Holds the image file (disk.img) and the mount point.
    pub dir: tempfile::TempDir,
    pub device: String,
    pub mountpoint: PathBuf,
}

impl LoopFs {
    pub fn new(size_mib: u64) -> LoopFs {
        Self::with_mkfs(size_mib, &["-q", "-F"])
    }

    pub fn with_mkfs(size_mib: u64, mkfs_args: &[&str]) -> LoopFs {
        Self::build(size_mib, "mkfs.ext4", mkfs_args, "mnt")
    }

    /// Another filesystem: `mkfs` (mkfs.xfs, mkfs.btrfs) with its own arguments.
    pub fn of_type(size_mib: u64, mkfs: &str, mkfs_args: &[&str]) -> LoopFs {
        Self::build(size_mib, mkfs, mkfs_args, "mnt")
    }

    /// Mounted on a directory of the given name (e.g. with a space, which the kernel escapes as
    /// `\040` in mountinfo).
    pub fn named(size_mib: u64, mount_dir: &str) -> LoopFs {
        Self::build(size_mib, "mkfs.ext4", &["-q", "-F"], mount_dir)
    }

    fn build(size_mib: u64, mkfs: &str, mkfs_args: &[&str], mount_dir: &str) -> LoopFs {
        let dir = tempfile::tempdir().expect("tempdir");
        let image = dir.path().join("disk.img");
        let f = std::fs::File::create(&image).expect("create image");
        f.set_len(size_mib << 20).expect("size image");
        drop(f);
        let device = run("losetup", &["-f", "--show", image.to_str().unwrap()])
            .trim()
            .to_string();
        let mountpoint = dir.path().join(mount_dir);
        std::fs::create_dir(&mountpoint).unwrap();
        let mut fs = LoopFs {
            dir,
            device,
            mountpoint,
        };
        let mut args: Vec<&str> = mkfs_args.to_vec();
        args.push(&fs.device);
        run(mkfs, &args);
        run("mount", &[&fs.device, fs.mountpoint.to_str().unwrap()]);
        fs.mountpoint = fs.mountpoint.canonicalize().unwrap();
        fs
    }

    /// Kernel name of the loop device (`loop3`).
    pub fn kernel_name(&self) -> String {
        self.device.trim_start_matches("/dev/").to_string()
    }

    pub fn mp(&self) -> &str {
        self.mountpoint.to_str().unwrap()
    }

    /// ext4 without blocks reserved for root, so space arithmetic in tests is exact.
    pub fn no_reserve(size_mib: u64) -> LoopFs {
        Self::with_mkfs(size_mib, &["-q", "-F", "-m", "0"])
    }

    /// Bytes available to unprivileged users (statvfs `f_bavail`).
    pub fn avail(&self) -> u64 {
        let v = nix::sys::statvfs::statvfs(&self.mountpoint).expect("statvfs");
        v.blocks_available() as u64 * v.fragment_size() as u64
    }

    /// The directory the probes own on this filesystem.
    pub fn probe_dir(&self) -> PathBuf {
        self.mountpoint.join(".ssdwatch-probe")
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.mountpoint)
            .status();
        let _ = Command::new("losetup").arg("-d").arg(&self.device).status();
    }
}

/// A FUSE mount whose statfs never returns. Dropping it SIGKILLs the server (the only thing that
/// releases threads blocked in statvfs) and lazily unmounts.
pub struct HungFuse {
    /// Holds the mount point.
    _dir: tempfile::TempDir,
    pub mountpoint: PathBuf,
    server: Option<Child>,
}

impl HungFuse {
    pub fn new() -> HungFuse {
        HungFuse::serving("hung_statfs_fs.py")
    }

    /// A mount served by `script` (under tests/it/support), which hangs some other call.
    pub fn serving(script: &str) -> HungFuse {
        let dir = tempfile::tempdir().expect("tempdir");
        let mountpoint = dir.path().join("hung");
        std::fs::create_dir(&mountpoint).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/it/support")
            .join(script);
        let server = Command::new(system_python())
            .arg(script)
            .arg(&mountpoint)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start FUSE server");
        let mut hf = HungFuse {
            _dir: dir,
            mountpoint,
            server: Some(server),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !mounted(&hf.mountpoint) {
            // A server that died (no libfuse2, no /dev/fuse access) says why on stderr.
            if let Some(c) = hf.server.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                let mut err = String::new();
                if let Some(mut e) = c.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                panic!("FUSE server exited ({status}) before mounting: {err}");
            }
            assert!(Instant::now() < deadline, "FUSE mount did not appear");
            std::thread::sleep(Duration::from_millis(50));
        }
        hf
    }

    /// SIGKILLs the server but leaves the mount in place: calls blocked on it return ENOTCONN
    /// and the mount stays listed (a dead server, as a user would find it) until unmounted.
    pub fn kill_server_only(&mut self) {
        if let Some(mut c) = self.server.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Lazily unmounts (works on a mount whose server is dead).
    pub fn unmount(&self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.mountpoint)
            .stderr(Stdio::null())
            .status();
    }

    pub fn kill_server(&mut self) {
        let had_server = self.server.is_some();
        self.kill_server_only();
        if had_server || mounted(&self.mountpoint) {
            self.unmount();
        }
    }
}

impl Drop for HungFuse {
    fn drop(&mut self) {
        self.kill_server();
    }
}

/// Root and /dev/fuse (for [`HungFuseSet`]), or a skip saying which is missing.
pub fn fuse_device_available(test: &str) -> bool {
    if !require_root(test) {
        return false;
    }
    Path::new("/dev/fuse").exists()
        || skip(
            test,
            "no /dev/fuse (FUSE not available in this kernel/container)",
        )
}

/// Root, /dev/fuse and fusepy (for [`HungFuse`]), or a skip saying which is missing.
pub fn fuse_available(test: &str) -> bool {
    if !fuse_device_available(test) {
        return false;
    }
    let fusepy = "import importlib.util as u, sys; sys.exit(0 if u.find_spec('fusepy') or u.find_spec('fuse') else 1)";
    if Command::new(system_python())
        .args(["-c", fusepy])
        .status()
        .map(|s| !s.success())
        .unwrap_or(true)
    {
        return skip(
            test,
            "python3 fusepy missing (apt-get install python3-fusepy)",
        );
    }
    true
}

/// FUSE mounts whose server never answers: this process opens /dev/fuse for each, mounts it and
/// never reads a request, as a wedged FUSE daemon would. Every call on them (statvfs, stat)
/// blocks in the kernel, like statvfs on a dead NFS server. No helper process: dropping the set
/// closes the descriptors, which ends every blocked call with ENOTCONN, then lazily unmounts
/// them, also when a test panics (a test killed outright leaves no caller hung either: the kernel
/// closes its descriptors).
pub struct HungFuseSet {
    pub dir: tempfile::TempDir,
    /// Canonical mount points: never stat one while it is mounted, that hangs too.
    pub mountpoints: Vec<PathBuf>,
    fds: Vec<std::fs::File>,
}

impl HungFuseSet {
    /// `n` hung mounts at `<dir>/hung000`, `<dir>/hung001`, ...
    pub fn mount(n: usize) -> HungFuseSet {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().canonicalize().expect("canonical tempdir");
        let mut set = HungFuseSet {
            dir,
            mountpoints: Vec::with_capacity(n),
            fds: Vec::with_capacity(n),
        };
        for i in 0..n {
            let mp = base.join(format!("hung{i:03}"));
            std::fs::create_dir(&mp).unwrap();
            let dev = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/fuse")
                .unwrap_or_else(|e| panic!("opening /dev/fuse: {e}"));
            let opts = format!(
                "fd={},rootmode=40000,user_id=0,group_id=0,allow_other",
                dev.as_raw_fd()
            );
            let c = |s: &str| std::ffi::CString::new(s).unwrap();
            let (target, opts) = (c(mp.to_str().unwrap()), c(&opts));
            // SAFETY: NUL-terminated strings that outlive the call.
            let r = unsafe {
                libc::mount(
                    c"ssdwatch-hung".as_ptr(),
                    target.as_ptr(),
                    c"fuse.hung".as_ptr(),
                    0,
                    opts.as_ptr().cast(),
                )
            };
            if r != 0 {
                panic!(
                    "mounting FUSE at {}: {}",
                    mp.display(),
                    std::io::Error::last_os_error()
                );
            }
            set.fds.push(dev);
            set.mountpoints.push(mp);
        }
        set
    }

    /// Mount points as strings.
    pub fn mps(&self) -> impl Iterator<Item = &str> {
        self.mountpoints.iter().map(|p| p.to_str().unwrap())
    }
}

impl Drop for HungFuseSet {
    fn drop(&mut self) {
        // The descriptors first: that aborts the connections and frees every blocked caller.
        self.fds.clear();
        for mp in &self.mountpoints {
            if let Ok(c) = std::ffi::CString::new(mp.as_os_str().as_encoded_bytes()) {
                // SAFETY: a NUL-terminated path that outlives the call.
                unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
            }
        }
    }
}

/// A tmpfs mounted for a test, lazily unmounted when dropped.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    pub fn mount(at: &Path, options: &str) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        run(
            "mount",
            &["-t", "tmpfs", "-o", options, "tmpfs", at.to_str().unwrap()],
        );
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Whether a path is a mount point in this process's mount table.
pub fn mounted(path: &Path) -> bool {
    listed_in("/proc/self/mountinfo", path)
}

fn listed_in(table: &str, path: &Path) -> bool {
    let Ok(text) = std::fs::read(table) else {
        return false;
    };
    let (mounts, _) = ssdwatch::procfs::mountinfo::parse_mountinfo_bytes(&text);
    mounts.iter().any(|m| m.mount_path == path)
}

/// Roots for an in-process daemon that must see the mounts this test made. The daemon reads pid
/// 1's mount table (the host's view); when the test runs in a mount namespace of its own
/// (`unshare -m`, a sandboxed CI runner), that table lacks our mounts, so `--path.procfs` then
/// points at a tree holding only `self` (-> /proc/self) and the daemon falls back to its own table.
pub fn roots_seeing(mountpoints: &[&Path]) -> ssdwatch::Roots {
    if mountpoints
        .iter()
        .all(|mp| listed_in("/proc/1/mountinfo", mp))
    {
        return ssdwatch::Roots::default();
    }
    eprintln!("note: pid 1 doesn't see this test's mounts (own mount namespace); using /proc/self");
    let proc_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("proc-self-only");
    let _ = std::fs::create_dir_all(&proc_dir);
    let link = proc_dir.join("self");
    if std::fs::read_link(&link).is_err() {
        std::os::unix::fs::symlink("/proc/self", &link).expect("symlink proc-self-only/self");
    }
    ssdwatch::Roots {
        proc: proc_dir,
        ..ssdwatch::Roots::default()
    }
}

/// Debian's python3 (where python3-fusepy installs), falling back to whatever python3 is on PATH.
pub fn system_python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// Threads of this process.
pub fn thread_count() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// A running in-process daemon on 127.0.0.1:<free port>; stops on drop.
pub struct Daemon {
    pub base: String,
    rt: Option<tokio::runtime::Runtime>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// The state directory given to a config that kept the default one: a test never writes the
    /// host's /var/lib/ssdwatch.
    _state: Option<tempfile::TempDir>,
}

impl Daemon {
    pub fn start(mut config: ssdwatch::config::Config, roots: ssdwatch::Roots) -> Daemon {
        let state =
            (config.state_dir == ssdwatch::config::Config::default().state_dir).then(|| {
                let dir = tempfile::tempdir().unwrap();
                config.state_dir = dir.path().to_path_buf();
                dir
            });
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        rt.spawn(async move {
            if let Err(e) = ssdwatch::run_with_listener(config, roots, listener, async {
                let _ = rx.await;
            })
            .await
            {
                eprintln!("daemon failed: {e:#}");
            }
        });
        Daemon {
            base: format!("http://{addr}"),
            rt: Some(rt),
            stop: Some(tx),
            _state: state,
        }
    }

    /// GET a path; returns the body, panicking on HTTP errors.
    pub fn get(&self, path: &str) -> String {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(5)))
            .build()
            .new_agent();
        agent
            .get(&format!("{}{path}", self.base))
            .call()
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
            .body_mut()
            .read_to_string()
            .unwrap()
    }

    /// Waits until `pred` holds for /metrics, returning that exposition.
    pub fn wait_metrics(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let m = self.get("/metrics");
            if pred(&m) {
                return m;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; last scrape:\n{m}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(2));
        }
    }
}

/// Reads one series' value from an exposition, given the exact series text before the value.
pub fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// The value of the first series of a family whose labels contain `label_part`.
pub fn value_matching(text: &str, family: &str, label_part: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")) && l.contains(label_part))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

/// A child process killed (SIGKILL) and reaped on drop.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A collector sample rendered as the text exposition.
pub fn exposition(s: &ssdwatch::collector::Sample) -> String {
    let mut text = String::new();
    ssdwatch::render::render_families(&mut text, s.metrics.families());
    text
}

/// A block device's counters as the kernel shows them now (/sys/block/<dev>/stat).
pub fn block_stat(dev: &str) -> ssdwatch::sysfs::blockstat::BlockStat {
    ssdwatch::sysfs::blockstat::read_one(Path::new("/sys"), dev)
        .unwrap_or_else(|e| panic!("{e}"))
        .stat
}

/// How far the kernel's busy count can lag the wall clock at either end of a window: io_ticks
/// advances in whole ticks (10 ms at HZ=100), and only when an I/O starts or ends, so one long
/// flush can straddle a window's edge by tens of milliseconds.
pub const TICK_LAG: Duration = Duration::from_millis(100);

/// The kernel's busy count of a drive over a stretch of wall time.
pub struct Busy {
    pub ticks: Duration,
    pub wall: Duration,
}

/// A stretch of wall time being watched: [`BusyWatch::stop`] gives the drive's busy count over it.
pub struct BusyWatch {
    dev: String,
    ticks: u64,
    t0: Instant,
}

impl BusyWatch {
    pub fn start(dev: &str) -> BusyWatch {
        BusyWatch {
            dev: dev.to_string(),
            ticks: block_stat(dev).io_time_ms,
            t0: Instant::now(),
        }
    }

    pub fn stop(self) -> Busy {
        let ticks = block_stat(&self.dev).io_time_ms.saturating_sub(self.ticks);
        Busy {
            ticks: Duration::from_millis(ticks),
            wall: self.t0.elapsed(),
        }
    }
}

impl Busy {
    /// Runs `f`, counting the drive's busy time around it.
    pub fn around<T>(dev: &str, f: impl FnOnce() -> T) -> (T, Busy) {
        let w = BusyWatch::start(dev);
        let v = f();
        (v, w.stop())
    }

    pub fn ratio(&self) -> f64 {
        (self.ticks.as_secs_f64() / self.wall.as_secs_f64()).min(1.0)
    }

    /// Bounds on the utilization measured over any window inside this one lasting at least
    /// `min`. Its busy time can't exceed all of this one's (the counter only grows, and both
    /// read it), and it misses at most this one's busy time outside it (at most that stretch's
    /// length, give or take TICK_LAG at each end).
    pub fn bounds_inside(&self, min: Duration) -> (f64, f64) {
        let (ticks, wall, min) = (
            self.ticks.as_secs_f64(),
            self.wall.as_secs_f64(),
            min.as_secs_f64(),
        );
        let idle = wall - ticks + 2.0 * TICK_LAG.as_secs_f64();
        let lo = (1.0 - idle / min).clamp(0.0, 1.0);
        let hi = (ticks / min).min(1.0);
        (lo, hi)
    }
}

/// A target with small sizes so tests take seconds, and no 1 GiB floor (loop filesystems are tiny).
pub fn small_target(path: &Path) -> ssdwatch::probe::TargetConfig {
    ssdwatch::probe::TargetConfig {
        path: path.to_path_buf(),
        file_size_bytes: 4 << 20,
        seq_write_bytes: 2 << 20,
        free_floor_bytes: 8 << 20,
        free_floor_ratio: 0.0,
        ..Default::default()
    }
}

/// Sorted entry names of a directory; none when it doesn't exist.
pub fn names_in(dir: &Path) -> Vec<String> {
    ssdwatch::sysfs::dir_names(dir).unwrap_or_default()
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ssdwatch")
}

/// Asserts that `promtool check metrics` passes an exposition with no complaint at all
/// (promtool exits 0 even on some lint findings); the panic names `what` and says what
/// promtool said.
pub fn assert_promtool_clean(what: &str, text: &str) {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: running promtool (apt-get install prometheus): {e}"));
    // promtool stops reading at the first parse error: feed it from a thread and keep what it
    // says rather than a broken pipe.
    let mut stdin = child.stdin.take().expect("stdin");
    let owned = text.to_owned();
    let writer = std::thread::spawn(move || stdin.write_all(owned.as_bytes()));
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("{what}: promtool: {e}"));
    let _ = writer.join();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "{what}: promtool check metrics complains:\n{said}"
    );
}

/// Runs a QEMU guest script once (`tests/vm/<script>` BINARY OUT) and returns where it left its
/// results, or why not; `results_env` names a variable that points at the results of an earlier
/// run instead (no boot).
pub fn run_guest(script: &str, results_env: &str, out_name: &str) -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os(results_env) {
        return Ok(PathBuf::from(dir));
    }
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(out_name);
    let _ = std::fs::remove_dir_all(&out);
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vm")
        .join(script);
    let status = Command::new(&script)
        .arg(env!("CARGO_BIN_EXE_ssdwatch"))
        .arg(&out)
        .status()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    match status.code() {
        Some(0) => Ok(out),
        Some(77) => Err(format!(
            "{} found a prerequisite missing (see its message above)",
            script.display()
        )),
        _ => Err(format!(
            "{} failed ({status}); console log: {}",
            script.display(),
            out.join("console.log").display()
        )),
    }
}

/// Runs `benches/<script>` in its short mode (`SHORT=1`) against the binary `ssdwatch`, so the
/// bench can't rot; panics with its output when it fails, returns its stdout otherwise.
pub fn run_bench_short(script: &str, ssdwatch: &Path) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches")
        .join(script);
    let out = Command::new("bash")
        .arg(&path)
        .env("SHORT", "1")
        .env("SSDWATCH", ssdwatch)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", path.display()));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{script}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The flags that point `ssdwatch` at a fixture host (tests/fixtures/hosts/NAME): its sysfs,
/// procfs and root trees and its recorded statvfs answers.
pub fn fixture_host_flags(host_dir: &Path) -> Vec<std::ffi::OsString> {
    let mut flags = Vec::new();
    for (flag, sub) in [
        ("--path.sysfs", "sys"),
        ("--path.procfs", "proc"),
        ("--path.rootfs", "rootfs"),
        ("--fixture.statvfs", "statvfs.yaml"),
    ] {
        flags.push(flag.into());
        flags.push(host_dir.join(sub).into_os_string());
    }
    flags
}

/// A temporary directory owned by the system user `name` (a database server's), mode 0750 so
/// the user's group may read it; and that user.
pub fn dir_owned_by(name: &str) -> (tempfile::TempDir, nix::unistd::User) {
    dir_owned_by_in(name, &std::env::temp_dir())
}

/// The same, made under `parent` (a filesystem of the test's own).
pub fn dir_owned_by_in(name: &str, parent: &Path) -> (tempfile::TempDir, nix::unistd::User) {
    let dir = tempfile::tempdir_in(parent).unwrap();
    let user = nix::unistd::User::from_name(name)
        .unwrap()
        .unwrap_or_else(|| panic!("no user {name}"));
    nix::unistd::chown(dir.path(), Some(user.uid), Some(user.gid)).unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o750),
    )
    .unwrap();
    (dir, user)
}

/// Stops a child of the test as systemd would: SIGTERM, then up to `grace` for it to exit, then
/// SIGKILL. True when it exited on SIGTERM within the grace.
pub fn stop_child(child: &mut Child, grace: Duration) -> bool {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

/// Calls `f` every 50 ms until it gives something, at most `within`; panics naming `what`.
pub fn wait_for<T>(what: &str, within: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Calls `f` every 50 ms until it holds, at most `within`; panics naming `what`.
pub fn wait_until(what: &str, within: Duration, mut f: impl FnMut() -> bool) {
    wait_for(what, within, || f().then_some(()))
}
