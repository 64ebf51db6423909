//! A local user who names a process `postgres` or `mysqld` chooses what its data directory's
//! files are: a FIFO, `/dev/zero` behind a symlink, a 2 GB sparse file. Each is refused with
//! one error naming the file, the daemon's memory stays flat, and the real server beside them
//! is still found, and a backend just forked under the postmaster's command line is no
//! server of its own. The process table is a fixture tree, so no root is needed.

use crate::support;
use ssdwatch::collector::Collector;
use ssdwatch::collector::databases::{DatabasesCollector, DatabasesConfig};
use ssdwatch::collector::{Context, Sample};
use std::path::Path;
use std::time::Duration;

fn process(proc_root: &Path, pid: u32, comm: &str, args: &[&str]) {
    let d = proc_root.join(pid.to_string());
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("comm"), format!("{comm}\n")).unwrap();
    let mut cmd = Vec::new();
    for a in args {
        cmd.extend_from_slice(a.as_bytes());
        cmd.push(0);
    }
    std::fs::write(d.join("cmdline"), cmd).unwrap();
}

fn fifo(p: &Path) {
    nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
}

fn sparse(p: &Path, len: u64) {
    std::fs::File::create(p).unwrap().set_len(len).unwrap();
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn errors(s: &Sample) -> Vec<String> {
    s.errors.iter().map(|e| e.to_string()).collect()
}

/// A PostgreSQL data directory under `root` at `dir`, whose postmaster.pid names `pid`.
fn pg_dir(root: &Path, dir: &str, pid: u32) -> std::path::PathBuf {
    let d = root.join(dir.trim_start_matches('/'));
    for sub in ["global", "pg_wal", "pg_replslot"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    std::fs::write(d.join("PG_VERSION"), "15\n").unwrap();
    std::fs::write(
        d.join("postmaster.pid"),
        format!("{pid}\n{dir}\n1700000000\n5432\n/var/run/postgresql\n*\n  1 2\nready\n"),
    )
    .unwrap();
    d
}

/// The hostile host: a real server's data directory, six whose `postmaster.pid` or `PG_VERSION`
/// is a FIFO, `/dev/zero` or 2 GB of zeroes, a backend of the real server under its command
/// line, and a mysqld whose option file is a FIFO and whose binary log index is `/dev/zero`.
/// (the host, its /proc, its root)
fn hostile_host() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let host = tempfile::tempdir().unwrap();
    let (proc_root, root) = (host.path().join("proc"), host.path().join("rootfs"));
    std::fs::create_dir_all(&proc_root).unwrap();
    // The real server.
    pg_dir(&root, "/srv/good", 100);
    process(
        &proc_root,
        100,
        "postgres",
        &["postgres", "-D", "/srv/good"],
    );
    // A backend it just forked, still under the postmaster's command line: not a server, not
    // a "stale postmaster.pid".
    process(
        &proc_root,
        110,
        "postgres",
        &["postgres", "-D", "/srv/good"],
    );
    std::fs::write(
        proc_root.join("110/stat"),
        "110 (postgres) S 100 100 100 0 -1 4194560 31 0 0 0\n",
    )
    .unwrap();
    // postmaster.pid, then PG_VERSION, as a FIFO, as /dev/zero, as 2 GB of zeroes.
    for (pid, name, file, how) in [
        (101, "pid-fifo", "postmaster.pid", 0),
        (102, "pid-zero", "postmaster.pid", 1),
        (103, "pid-huge", "postmaster.pid", 2),
        (104, "ver-fifo", "PG_VERSION", 0),
        (105, "ver-zero", "PG_VERSION", 1),
        (106, "ver-huge", "PG_VERSION", 2),
    ] {
        let d = pg_dir(&root, &format!("/srv/{name}"), pid);
        let f = d.join(file);
        std::fs::remove_file(&f).unwrap();
        match how {
            0 => fifo(&f),
            1 => std::os::unix::fs::symlink("/dev/zero", &f).unwrap(),
            _ => sparse(&f, 2 << 30),
        }
        let dir = format!("/srv/{name}");
        process(&proc_root, pid, "postgres", &["postgres", "-D", &dir]);
    }
    // A mysqld whose option file is a FIFO and whose binary log index is /dev/zero.
    let my = root.join("srv/my");
    std::fs::create_dir_all(my.join("mysql")).unwrap();
    fifo(&root.join("srv/my.cnf"));
    std::os::unix::fs::symlink("/dev/zero", my.join("bin.index")).unwrap();
    process(
        &proc_root,
        107,
        "mariadbd",
        &[
            "mariadbd",
            "--defaults-file=/srv/my.cnf",
            "--datadir=/srv/my",
            "--log-bin=/srv/my/bin",
        ],
    );

    (host, proc_root, root)
}

#[test]
fn fifos_devices_and_huge_files_in_a_data_directory_are_refused_by_name_with_memory_flat() {
    let (_host, proc_root, root) = hostile_host();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cfg = DatabasesConfig {
        interval: Duration::from_secs(1),
        size_interval: Duration::from_secs(1),
        ..DatabasesConfig::default()
    };
    let roots = ssdwatch::Roots {
        proc: proc_root.clone(),
        rootfs: root.clone(),
        ..ssdwatch::Roots::default()
    };
    let ctx = Context::new(roots, Duration::from_secs(60));
    let mut c = DatabasesCollector::new(&cfg);
    let before = rss_kib();
    let mut last = None;
    for _ in 0..3 {
        last = Some(rt.block_on(c.sample(&ctx)).unwrap());
    }
    let grew = rss_kib().saturating_sub(before);
    assert!(grew < 64 * 1024, "RSS grew {grew} KiB");
    let s = last.unwrap();
    let text = support::exposition(&s);
    let e = errors(&s);
    assert!(
        text.contains("database=\"/srv/good\""),
        "the real server is found: {text}\n{e:?}"
    );
    assert!(text.contains("database=\"/srv/my\""), "{text}\n{e:?}");
    assert!(
        !e.iter()
            .any(|m| m.contains("pid 110") || m.contains("pid 100")),
        "{e:?}"
    );
    for (name, file, why) in [
        ("pid-fifo", "postmaster.pid", "a FIFO"),
        (
            "pid-zero",
            "postmaster.pid",
            "Too many levels of symbolic links",
        ),
        ("pid-huge", "postmaster.pid", "larger than"),
        ("ver-fifo", "PG_VERSION", "a FIFO"),
        (
            "ver-zero",
            "PG_VERSION",
            "Too many levels of symbolic links",
        ),
        ("ver-huge", "PG_VERSION", "larger than"),
    ] {
        let dir = format!("/srv/{name}");
        let mine: Vec<_> = e.iter().filter(|m| m.contains(&dir)).collect();
        assert_eq!(mine.len(), 1, "{name}: {e:?}");
        assert!(
            mine[0].contains(file) && mine[0].contains(why),
            "{name}: {mine:?}"
        );
        assert!(!text.contains(&format!("database=\"{dir}\"")), "{text}");
    }
    assert!(
        e.iter()
            .any(|m| m.contains("bin.index") && m.contains("character device")),
        "{e:?}"
    );
}

/// The same host under the unit's `MemoryMax=128M`: `ssdwatch sample` as its own process in a
/// memory cgroup of 128 MiB is not killed, names each refused file, and finds the real server
/// (before, `/dev/zero` as `postmaster.pid` took 1.5 GB within seconds: an OOM kill).
#[test]
fn the_hostile_files_are_refused_under_a_128_mib_memory_limit() {
    let test = "the_hostile_files_are_refused_under_a_128_mib_memory_limit";
    if !support::require_root(test) {
        return;
    }
    let cg = match support::cgroup::MemoryCgroup::create(128 << 20) {
        Ok(cg) => cg,
        Err(why) => {
            support::not_applicable(test, &why);
            return;
        }
    };
    let (host, proc_root, root) = hostile_host();
    let cfg = host.path().join("ssdwatch.yaml");
    let mut yaml = format!(
        "state_dir: {}\nhistory:\n  enabled: false\ncollectors:\n",
        host.path().join("state").display()
    );
    for e in ssdwatch::registry::COLLECTORS {
        if e.name != "databases" {
            yaml.push_str(&format!("  {}:\n    enabled: false\n", e.name));
        }
    }
    std::fs::write(&cfg, yaml).unwrap();
    std::fs::create_dir_all(host.path().join("sys")).unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ssdwatch"));
    cmd.arg("--config")
        .arg(&cfg)
        .arg("--path.procfs")
        .arg(&proc_root)
        .arg("--path.rootfs")
        .arg(&root)
        .arg("--path.sysfs")
        .arg(host.path().join("sys"))
        .arg("sample");
    cg.enter_on_start(&mut cmd);
    let out = cmd.output().expect("run ssdwatch sample");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), None, "killed: {stderr}");
    assert!(
        stdout.contains("database=\"/srv/good\""),
        "{stdout}\n{stderr}"
    );
    for (name, file) in [
        ("pid-fifo", "postmaster.pid"),
        ("pid-zero", "postmaster.pid"),
        ("pid-huge", "postmaster.pid"),
        ("ver-fifo", "PG_VERSION"),
        ("ver-zero", "PG_VERSION"),
        ("ver-huge", "PG_VERSION"),
    ] {
        assert!(
            stderr
                .lines()
                .any(|l| l.contains(&format!("/srv/{name}")) && l.contains(file)),
            "{name}: {stderr}"
        );
    }
}
