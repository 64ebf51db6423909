//! A real PostgreSQL (Debian's server package), started by the test in a temp directory on its
//! own port and socket directory, as the postgres user. Its archive_command fails and a physical
//! slot holds WAL back: ssdwatch's series show the backlog and the retained bytes, equal to what
//! the server itself says; then the archiver is fixed and the slot dropped, and they clear.

use crate::support::unix_now as now_f64;
use crate::support::{self, Daemon, value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// initdb, pg_ctl and postgres of the newest PostgreSQL installed.
pub(super) fn bin_dir() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|d| d.join("postgres").exists() && d.join("initdb").exists())
        .collect();
    dirs.sort();
    dirs.pop()
}

/// One server, stopped (pg_ctl stop, which signals the pid its postmaster.pid names) on drop.
pub struct Postgres {
    _dir: tempfile::TempDir,
    pub data: PathBuf,
    /// The server's own log (pg_ctl -l): what it says when it stops.
    pub log: PathBuf,
    pub sock: PathBuf,
    pub port: u16,
    bin: PathBuf,
}

fn as_postgres(bin: &Path, args: &[&str]) -> std::process::Output {
    let out = Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("runuser {}: {e}", bin.display()));
    assert!(
        out.status.success(),
        "{} {args:?}: {}\n{}",
        bin.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

impl Postgres {
    /// A cluster with 1 MiB WAL segments (so a test makes dozens in a second), group access
    /// (mode 0750), archiving on with a failing archive_command.
    pub fn start(bin: PathBuf) -> Postgres {
        Postgres::start_with(bin, "")
    }

    /// The same, with more settings appended to its postgresql.conf.
    pub fn start_with(bin: PathBuf, extra_conf: &str) -> Postgres {
        Postgres::start_in(bin, &std::env::temp_dir(), extra_conf)
    }

    /// The same, its directory made under `parent` (a filesystem of the test's own).
    pub fn start_in(bin: PathBuf, parent: &Path, extra_conf: &str) -> Postgres {
        // The postgres user owns the tree; its group may read it (group access).
        let (dir, pg) = support::dir_owned_by_in("postgres", parent);
        let data = dir.path().join("data");
        let sock = dir.path().join("sock");
        let port = support::free_port();
        as_postgres(
            &bin.join("initdb"),
            &[
                "-D",
                data.to_str().unwrap(),
                "-U",
                "postgres",
                "-A",
                "trust",
                "--wal-segsize=1",
                "--allow-group-access",
                "--no-sync",
            ],
        );
        as_postgres(
            Path::new("/bin/mkdir"),
            &["-m", "0750", sock.to_str().unwrap()],
        );
        let conf = format!(
            "port = {port}\nlisten_addresses = ''\nunix_socket_directories = '{}'\n\
             archive_mode = on\narchive_command = '/bin/false'\nfsync = off\n\
             max_wal_size = 64MB\nmin_wal_size = 8MB\nwal_keep_size = 0\n{extra_conf}",
            sock.display()
        );
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .unwrap();
        std::io::Write::write_all(&mut f, conf.as_bytes()).unwrap();
        let log = dir.path().join("server.log");
        let p = Postgres {
            _dir: dir,
            data,
            log: log.clone(),
            sock,
            port,
            bin,
        };
        let _ = std::fs::File::create(&log);
        nix::unistd::chown(&log, Some(pg.uid), Some(pg.gid)).unwrap();
        as_postgres(
            &p.bin.join("pg_ctl"),
            &[
                "-D",
                p.data.to_str().unwrap(),
                "-l",
                log.to_str().unwrap(),
                "-w",
                "start",
            ],
        );
        p
    }

    /// Runs SQL through psql over the socket; the output, unaligned and tuples only.
    pub fn sql(&self, sql: &str) -> String {
        self.try_sql(sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// The same, psql's complaint as the error (the server may be gone).
    pub fn try_sql(&self, sql: &str) -> Result<String, String> {
        let out = Command::new("psql")
            .args(["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1"])
            .arg("-h")
            .arg(&self.sock)
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                "postgres",
            ])
            .args(["-c", sql])
            .output()
            .map_err(|e| format!("running psql: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// The postmaster's pid, from the first line of postmaster.pid (None once it is gone).
    pub fn postmaster_pid(&self) -> Option<i32> {
        let t = std::fs::read_to_string(self.data.join("postmaster.pid")).ok()?;
        t.lines().next()?.trim().parse().ok()
    }

    /// The data directory as the daemon labels it.
    pub fn label(&self) -> String {
        std::fs::canonicalize(&self.data)
            .unwrap()
            .display()
            .to_string()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let stopped = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "-w", "stop"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !stopped && let Some(pid) = self.postmaster_pid() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGQUIT,
            );
        }
    }
}

/// An LSN as PostgreSQL prints it (`16/B374D848`).
fn lsn(s: &str) -> u64 {
    let (hi, lo) = s.trim().split_once('/').unwrap();
    (u64::from_str_radix(hi, 16).unwrap() << 32) | u64::from_str_radix(lo, 16).unwrap()
}

/// A daemon with only the databases collector, sampling every second, on the real /proc.
fn daemon() -> Daemon {
    let mut cfg = ssdwatch::config::Config::default();
    for e in ssdwatch::registry::COLLECTORS {
        cfg.collectors.set_enabled(e.name, e.name == "databases");
    }
    cfg.collectors.databases.interval = Duration::from_secs(1);
    cfg.collectors.databases.size_interval = Duration::from_secs(1);
    cfg.history.enabled = false;
    Daemon::start(cfg, ssdwatch::Roots::default())
}

pub(super) fn setup(test: &str) -> Option<PathBuf> {
    if !support::require_root(test)
        || !support::require_cmd(test, "psql", "postgresql-client")
        || !support::require_cmd(test, "runuser", "util-linux")
    {
        return None;
    }
    match bin_dir() {
        Some(b) => Some(b),
        None => {
            support::skip(test, "no PostgreSQL server (apt-get install postgresql)");
            None
        }
    }
}

#[test]
fn a_failing_archiver_and_an_abandoned_slot_show_then_clear_once_fixed() {
    let Some(bin) = setup("a_failing_archiver_and_an_abandoned_slot_show_then_clear_once_fixed")
    else {
        return;
    };
    let pg = Postgres::start(bin);
    let label = pg.label();
    pg.sql("create table t (x int)");
    for _ in 0..6 {
        pg.sql("insert into t select generate_series(1, 2000); select pg_switch_wal()");
    }
    // The archiver fails on each: the segments wait.
    let ready_sql =
        "select count(*) from pg_ls_dir('pg_wal/archive_status') f where f like '%.ready'";
    let waiting: f64 = pg.sql(ready_sql).parse().unwrap();
    assert!(waiting >= 6.0, "{waiting}");
    let failed: f64 = pg
        .sql("select failed_count from pg_stat_archiver")
        .parse()
        .unwrap();
    assert!(failed >= 1.0, "the archiver has not failed yet");

    // A physical slot that reserves WAL now, with no consumer; more WAL and a checkpoint move
    // the redo point past it.
    pg.sql("select pg_create_physical_replication_slot('s1', true)");
    for _ in 0..5 {
        pg.sql("insert into t select generate_series(1, 2000); select pg_switch_wal()");
    }
    pg.sql("checkpoint");
    let restart =
        lsn(&pg.sql("select restart_lsn from pg_replication_slots where slot_name = 's1'"));
    let redo = lsn(&pg.sql("select redo_lsn from pg_control_checkpoint()"));
    let seg = 1u64 << 20;
    let expected_retained = (redo / seg - restart / seg) * seg;
    assert!(expected_retained >= 5 * seg, "{restart:x} {redo:x}");
    let waiting: f64 = pg.sql(ready_sql).parse().unwrap();

    let ready = format!("ssdwatch_postgres_archive_ready_segments{{database=\"{label}\"}}");
    let age = format!("ssdwatch_postgres_archive_oldest_ready_age_seconds{{database=\"{label}\"}}");
    let slot = format!(
        "ssdwatch_postgres_replication_slot_retained_bytes{{database=\"{label}\",slot=\"s1\",type=\"physical\"}}"
    );
    let d = daemon();
    let m = d.wait_metrics("the backlog and the slot", Duration::from_secs(60), |m| {
        value(m, &ready) == Some(waiting)
            && value(m, &slot) == Some(expected_retained as f64)
            && value(m, &age).is_some_and(|a| a > 0.0)
    });
    assert!(
        m.contains(&format!(
            "ssdwatch_database_info{{database=\"{label}\",kind=\"postgresql\",version=\""
        )),
        "{m}"
    );
    let wal = super::component(&m, &label, "wal").unwrap();
    assert!(wal >= (waiting as u64 * seg) as f64, "{wal}");

    // Relations: the big trees are sized by passes; compare with the server's own figure.
    let m = d.wait_metrics("relations sized", Duration::from_secs(60), |m| {
        super::component(m, &label, "relations").is_some()
    });
    let rel = super::component(&m, &label, "relations").unwrap();
    let server: f64 = pg
        .sql("select sum(pg_database_size(oid)) from pg_database")
        .parse()
        .unwrap();
    assert!(
        rel >= server * 0.9 && rel <= server * 1.5 + 2e6,
        "relations {rel} against the server's {server}"
    );

    // Fixed: a working archive_command (the reload wakes the archiver), the slot dropped.
    pg.sql("alter system set archive_command = '/bin/true'");
    pg.sql("select pg_reload_conf()");
    pg.sql("select pg_drop_replication_slot('s1')");
    let m = d.wait_metrics("the backlog cleared", Duration::from_secs(90), |m| {
        value(m, &ready) == Some(0.0) && value(m, &age) == Some(0.0) && !m.contains(&slot)
    });
    assert!(!m.contains("slot=\"s1\""), "{m}");
    assert_eq!(pg.sql(ready_sql), "0");
    drop(d);
}

#[test]
fn a_server_log_on_another_mount_is_counted_there() {
    let test = "a_server_log_on_another_mount_is_counted_there";
    let Some(bin) = setup(test) else { return };
    let pg_user = nix::unistd::User::from_name("postgres").unwrap().unwrap();
    let mnt = tempfile::tempdir().unwrap();
    let logs = mnt.path().join("pglog");
    let _fs = support::Tmpfs::mount(
        &logs,
        &format!("size=16m,mode=0750,uid={},gid={}", pg_user.uid, pg_user.gid),
    );
    // The logging collector writes into log_directory, an absolute path on the tmpfs.
    let pg = Postgres::start_with(
        bin,
        &format!(
            "logging_collector = on\nlog_directory = '{}'\nlog_statement = 'all'\n",
            logs.display()
        ),
    );
    let label = pg.label();
    for i in 0..200 {
        pg.sql(&format!("select '{}', {i}", "x".repeat(2000)));
    }
    let logs_host = std::fs::canonicalize(&logs).unwrap();
    let at_logs = format!(
        "ssdwatch_database_component_bytes{{database=\"{label}\",component=\"log\",mountpoint=\"{}\"}}",
        logs_host.display()
    );
    let d = daemon();
    let m = d.wait_metrics("the log on its mount", Duration::from_secs(60), |m| {
        value(m, &at_logs).is_some_and(|b| b >= 200.0 * 2000.0)
    });
    // Sized as du does: what the tmpfs holds is the log files.
    let used: u64 = std::fs::read_dir(&logs_host)
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .sum();
    let got = value(&m, &at_logs).unwrap();
    assert!(got >= used as f64 * 0.9, "log {got} against {used} written");
    // Nothing of it is counted on the data directory's mount (the log component declared
    // there, with no log directory inside, is 0).
    let on_data_mount: Vec<f64> = m
        .lines()
        .filter(|l| {
            l.starts_with(&format!(
                "ssdwatch_database_component_bytes{{database=\"{label}\",component=\"log\""
            )) && !l.starts_with(&at_logs)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    assert!(on_data_mount.iter().all(|v| *v == 0.0), "{m}");
    drop(d);
}

/// `ssdwatch sample` as an unprivileged user (nobody), with and without the postgres group: a
/// directory it may not read is an item error naming it; with the group (PostgreSQL's group
/// access) the series are there.
pub(super) fn sample_as_nobody(groups: &[u32]) -> (String, String) {
    let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("ssdwatch.yaml");
    let mut yaml = format!(
        "state_dir: {}\nhistory:\n  enabled: false\ncollectors:\n",
        dir.path().display()
    );
    for e in ssdwatch::registry::COLLECTORS {
        if e.name != "databases" {
            yaml.push_str(&format!("  {}:\n    enabled: false\n", e.name));
        }
    }
    std::fs::write(&cfg, yaml).unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
    let mut cmd = Command::new("setpriv");
    cmd.arg(format!("--reuid={}", nobody.uid))
        .arg(format!("--regid={}", nobody.gid));
    if groups.is_empty() {
        cmd.arg("--clear-groups");
    } else {
        cmd.arg(format!("--groups={}", groups.join(",")));
    }
    let out = cmd
        .arg(env!("CARGO_BIN_EXE_ssdwatch"))
        .arg("--config")
        .arg(&cfg)
        .arg("sample")
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_data_directory_the_daemon_may_not_read_is_an_error_until_it_joins_the_group() {
    let test = "a_data_directory_the_daemon_may_not_read_is_an_error_until_it_joins_the_group";
    let Some(bin) = setup(test) else { return };
    if !support::require_cmd(test, "setpriv", "util-linux") {
        return;
    }
    let pg = Postgres::start(bin);
    let label = pg.label();
    pg.sql("select pg_switch_wal()");
    let (out, err) = sample_as_nobody(&[]);
    assert!(
        err.contains(&label) && err.contains("Permission denied"),
        "stderr: {err}\nstdout: {out}"
    );
    assert!(
        value(
            &out,
            "ssdwatch_collector_failing_items{collector=\"databases\"}"
        )
        .is_some_and(|n| n >= 1.0),
        "{out}"
    );
    assert!(value(&out, "ssdwatch_collector_success{collector=\"databases\"}") == Some(1.0));
    assert!(!out.contains(&format!("database=\"{label}\"")), "{out}");

    let group = nix::unistd::Group::from_name("postgres").unwrap().unwrap();
    let (out, err) = sample_as_nobody(&[group.gid.as_raw()]);
    let segs = format!("ssdwatch_postgres_wal_segments{{database=\"{label}\"}}");
    assert!(
        value(&out, &segs).is_some_and(|n| n >= 1.0),
        "stdout: {out}\nstderr: {err}"
    );
    assert!(
        value(
            &out,
            &format!("ssdwatch_postgres_archive_ready_segments{{database=\"{label}\"}}")
        )
        .is_some_and(|n| n >= 1.0),
        "{out}"
    );
}

/// The history's view of a mount and a database: the filesystem's key and newest point, and
/// the database's newest component sizes and facts; None until a commit holds all of them.
fn stored_view(
    store: &Path,
    mountpoint: &str,
    database: &str,
) -> Option<(
    ssdwatch::history::FsInfo,
    ssdwatch::history::FsPoint,
    ssdwatch::history::DatabaseSample,
)> {
    let s = ssdwatch::history::Store::open_read_only(store).ok()?;
    let now = unix_now();
    let fs = s
        .filesystems()
        .ok()?
        .into_iter()
        .find(|f| f.key.mountpoint == mountpoint)?;
    let point = s.fs_series(fs.id, 0, now).ok()?.pop()?;
    let components: Vec<_> = s
        .components(0, now)
        .ok()?
        .into_iter()
        .filter(|c| c.database == database)
        .collect();
    let (kind, t, facts) = s.database_facts().ok()?.remove(database)?;
    components.iter().any(|c| c.component == "wal").then(|| {
        use ssdwatch::databases::component::{Component, Kind};
        let sample = ssdwatch::history::DatabaseSample {
            database: database.to_string(),
            kind: Kind::from_label(&kind).expect("a kind this version writes"),
            t,
            components: components
                .iter()
                .map(|c| ssdwatch::history::ComponentSize {
                    component: Component::from_label(&c.component)
                        .expect("a component this version writes"),
                    mountpoint: c.mountpoint.clone(),
                    bytes: c.sizes.last().unwrap().1,
                })
                .collect(),
            facts,
        };
        (fs, point, sample)
    })
}

/// A daemon with the filesystem and databases collectors and the history on, committing every
/// second, its store in `state`.
fn daemon_with_history(state: &Path) -> Daemon {
    let mut cfg = ssdwatch::config::Config::default();
    for e in ssdwatch::registry::COLLECTORS {
        cfg.collectors
            .set_enabled(e.name, e.name == "databases" || e.name == "filesystem");
    }
    cfg.collectors.databases.interval = Duration::from_secs(1);
    cfg.collectors.databases.size_interval = Duration::from_secs(1);
    cfg.collectors.filesystem.interval = Duration::from_secs(1);
    cfg.history.enabled = true;
    cfg.history.raw_interval = Duration::from_secs(1);
    cfg.history.flush_interval = Duration::from_secs(1);
    cfg.state_dir = state.to_path_buf();
    Daemon::start(cfg, ssdwatch::Roots::default())
}

/// What fills the mount, from the real daemon's own records: a first daemon's view of the mount
/// and the database is stored again a day earlier ("yesterday"), then WAL piles up behind the
/// failing archiver and a second daemon records "today". The report names pg_wal and the
/// archiver's backlog as the server counts it; once the archiver works, it no longer does.
#[test]
fn the_report_names_the_wal_behind_a_failing_archiver_as_what_fills_the_mount_until_fixed() {
    let test =
        "the_report_names_the_wal_behind_a_failing_archiver_as_what_fills_the_mount_until_fixed";
    let Some(bin) = setup(test) else { return };
    let fs = support::LoopFs::new(512);
    for p in [fs.dir.path(), fs.mountpoint.as_path()] {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let pg = Postgres::start_in(bin, &fs.mountpoint, "");
    let label = pg.label();
    pg.sql("create table t (x int)");

    // Yesterday: what a first daemon stored, a day and an hour earlier.
    let a = tempfile::tempdir().unwrap();
    let a_store = a.path().join("history.db");
    let (info, point, mut db) = {
        let _d = daemon_with_history(a.path());
        support::wait_for(
            "the first daemon's records",
            Duration::from_secs(90),
            || stored_view(&a_store, fs.mp(), &label),
        )
    };
    assert_eq!(db.kind.label(), "postgresql", "as the store keeps it");
    let yesterday = unix_now() - 86_400 - 3_600;
    let y = tempfile::tempdir().unwrap();
    {
        let mut s =
            ssdwatch::history::Store::open(y.path(), &ssdwatch::history::HistoryConfig::default())
                .unwrap();
        s.record_fs(&[ssdwatch::history::FsSample {
            key: info.key.clone(),
            device: info.device.clone().unwrap_or_default(),
            t: yesterday,
            size_bytes: point.size.last as u64,
            avail_bytes: point.avail.last as u64,
            free_bytes: point.free.last as u64,
            files_free: point.files_free.map(|f| f.last as u64),
        }])
        .unwrap();
        db.t = yesterday;
        s.record_databases(&[db]).unwrap();
    }

    // Today: 40 segments more, each waiting for the archiver.
    for _ in 0..40 {
        pg.sql("insert into t select generate_series(1, 500); select pg_switch_wal()");
    }
    let ready_sql =
        "select count(*) from pg_ls_dir('pg_wal/archive_status') f where f like '%.ready'";
    let ready: u64 = pg.sql(ready_sql).parse().unwrap();
    assert!(ready >= 40, "{ready}");
    let y_store = y.path().join("history.db");
    let report = || {
        ssdwatch::cli::report::report_of(
            &y_store,
            "db1",
            unix_now(),
            &ssdwatch::config::Config::default(),
        )
        .ok()?
        .filesystems
        .into_iter()
        .find(|f| f.mountpoint == fs.mp())
    };
    let d = daemon_with_history(y.path());
    let cause = format!(
        "is pg_wal (WAL) of {label}; {} segments wait for the archiver, the oldest ",
        ssdwatch::report::filling::thousands(ready)
    );
    let f = support::wait_for("the report naming the WAL", Duration::from_secs(90), || {
        report().filter(|f| {
            f.top_contributor
                .as_deref()
                .is_some_and(|t| t.contains(&cause))
        })
    });
    let top = f.top_contributor.as_deref().unwrap();
    println!("what fills {}: {top}", fs.mp());
    let wal = f.filling.iter().find(|c| c.component == "wal").unwrap();
    // The mount grew by the WAL and a few MB of table: the WAL is most of it.
    assert!(wal.share_1d.unwrap() >= 0.5, "{f:?}");
    assert!(
        wal.growth_1d_bytes.unwrap() >= (ready << 20) as f64 * 0.9,
        "{wal:?}: {ready} segments of 1 MiB"
    );
    assert_eq!(
        f.filling[0].component, "wal",
        "the fastest-growing first: {f:?}"
    );
    assert!(
        top.ends_with(" h") || top.ends_with(" min") || top.ends_with(" s"),
        "{top}"
    );
    let text = ssdwatch::report::text::render(
        &ssdwatch::cli::report::report_of(
            &y_store,
            "db1",
            unix_now(),
            &ssdwatch::config::Config::default(),
        )
        .unwrap(),
    );
    assert!(text.contains("WHAT IS FILLING IT"), "{text}");
    assert!(text.contains(&format!("what fills it: {top}")), "{text}");

    // Fixed: the backlog is archived, and the report no longer blames the archiver.
    pg.sql("alter system set archive_command = '/bin/true'");
    pg.sql("select pg_reload_conf()");
    let f = support::wait_for(
        "the archiver no longer named",
        Duration::from_secs(90),
        || {
            report().filter(|f| {
                !f.top_contributor
                    .as_deref()
                    .is_some_and(|t| t.contains("archiver"))
            })
        },
    );
    assert_eq!(pg.sql(ready_sql), "0");
    assert!(f.filling.iter().any(|c| c.component == "wal"), "{f:?}");
    drop(d);
}

/// The wall clock in whole Unix seconds, as the store keys its rows.
fn unix_now() -> i64 {
    now_f64() as i64
}

/// A cluster made as Debian makes them (`pg_createcluster`, started by `pg_ctlcluster`),
/// dropped again when the test ends, whatever happens.
struct DebianCluster {
    version: String,
    name: String,
}

impl Drop for DebianCluster {
    fn drop(&mut self) {
        let _ = Command::new("pg_dropcluster")
            .args(["--stop", &self.version, &self.name])
            .output();
    }
}

/// Debian's pg_ctlcluster sends the server's own log (standard error) to
/// /var/log/postgresql/postgresql-V-C.log, outside the data directory: a log flood there fills
/// `/` while the data directory stays the same size. The daemon counts that file as the
/// database's `log`, on the mount that holds it.
#[test]
fn a_debian_clusters_log_in_var_log_postgresql_is_counted_as_its_log() {
    let test = "a_debian_clusters_log_in_var_log_postgresql_is_counted_as_its_log";
    let Some(bin) = setup(test) else { return };
    if !support::require_cmd(test, "pg_createcluster", "postgresql-common") {
        return;
    }
    let version = bin
        .parent()
        .and_then(|v| v.file_name())
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let name = format!("sswt{}", std::process::id());
    let port = support::free_port().to_string();
    let cluster = DebianCluster {
        version: version.clone(),
        name: name.clone(),
    };
    let out = Command::new("pg_createcluster")
        .args([&version, &name, "-p", &port, "--start"])
        .args(["-o", "log_statement=all", "-o", "listen_addresses="])
        .output()
        .expect("pg_createcluster");
    assert!(
        out.status.success(),
        "pg_createcluster: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let psql = |sql: &str| {
        let out = Command::new("runuser")
            .args(["-u", "postgres", "--", "psql", "-X", "-q", "-p", &port])
            .args(["-h", "/var/run/postgresql", "-c", sql])
            .output()
            .expect("psql");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    for i in 0..200 {
        psql(&format!("select '{}', {i}", "x".repeat(2000)));
    }
    let log = PathBuf::from(format!(
        "/var/log/postgresql/postgresql-{version}-{name}.log"
    ));
    let logged = std::fs::metadata(&log).unwrap().len();
    assert!(
        logged >= 200 * 2000,
        "{} holds {logged} bytes",
        log.display()
    );
    let data = std::fs::canonicalize(format!("/var/lib/postgresql/{version}/{name}")).unwrap();
    let label = data.display().to_string();
    let d = daemon();
    let m = d.wait_metrics("the cluster's log", Duration::from_secs(60), |m| {
        m.lines().any(|l| {
            l.starts_with("ssdwatch_database_component_bytes{")
                && l.contains(&format!("database=\"{label}\",component=\"log\""))
                && l.rsplit(' ')
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .is_some_and(|b| b >= 200.0 * 2000.0)
        })
    });
    assert!(
        m.contains(&format!("database=\"{label}\",kind=\"postgresql\"")),
        "{m}"
    );
    drop(d);
    drop(cluster);
}
