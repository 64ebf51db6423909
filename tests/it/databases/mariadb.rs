//! A real MariaDB (Debian's mariadb-server), started by the test in a temp directory with its own
//! socket and no network, binary logging on. Binary logs are flushed and purged: ssdwatch's count
//! follows `SHOW BINARY LOGS`, and InnoDB's files and the schemas show as their components.

use crate::support::{self, Daemon, value};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One server, a child of the test, stopped by its PID (SIGTERM, then SIGKILL) on drop.
struct Mariadb {
    _dir: tempfile::TempDir,
    data: PathBuf,
    sock: PathBuf,
    child: Child,
}

impl Mariadb {
    fn start() -> Mariadb {
        Mariadb::start_with(&[])
    }

    /// The same, with more options on its command line (the last of an option wins).
    fn start_with(extra: &[String]) -> Mariadb {
        Mariadb::start_env(extra, &[])
    }

    /// The same, with `env` set for mariadb-install-db and mariadbd (as a systemd drop-in's
    /// `Environment=` would).
    fn start_env(extra: &[String], env: &[(&str, &str)]) -> Mariadb {
        let (dir, _) = crate::support::dir_owned_by("mysql");
        let data = dir.path().join("data");
        let sock = dir.path().join("mysqld.sock");
        let out = Command::new("mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args([
                "--user=mysql",
                "--skip-test-db",
                "--auth-root-authentication-method=normal",
            ])
            .envs(env.iter().copied())
            .output()
            .expect("mariadb-install-db");
        assert!(
            out.status.success(),
            "mariadb-install-db: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let child = Command::new("mariadbd")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", sock.display()))
            .arg(format!(
                "--pid-file={}",
                dir.path().join("mysqld.pid").display()
            ))
            .arg(format!("--log-bin={}", data.join("mysql-bin").display()))
            .args(["--server-id=1", "--skip-networking", "--user=mysql"])
            .args(["--innodb-buffer-pool-size=16M", "--log-error"])
            .args(extra)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mariadbd");
        let m = Mariadb {
            _dir: dir,
            data,
            sock,
            child,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while m.try_sql("select 1").is_none() {
            assert!(Instant::now() < deadline, "mariadbd did not come up");
            std::thread::sleep(Duration::from_millis(200));
        }
        m
    }

    fn try_sql(&self, sql: &str) -> Option<String> {
        let out = Command::new("mariadb")
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.sock.display()))
            .args(["-u", "root", "-N", "-B", "-e", sql])
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn sql(&self, sql: &str) -> String {
        self.try_sql(sql).unwrap_or_else(|| panic!("{sql}: failed"))
    }

    fn label(&self) -> String {
        std::fs::canonicalize(&self.data)
            .unwrap()
            .display()
            .to_string()
    }
}

impl Drop for Mariadb {
    fn drop(&mut self) {
        crate::support::stop_child(&mut self.child, Duration::from_secs(30));
    }
}

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

#[test]
fn binary_logs_flushed_and_purged_are_counted_as_the_server_lists_them() {
    let test = "binary_logs_flushed_and_purged_are_counted_as_the_server_lists_them";
    if !support::require_root(test)
        || !support::require_cmd(test, "mariadbd", "mariadb-server")
        || !support::require_cmd(test, "mariadb", "mariadb-client")
    {
        return;
    }
    let m = Mariadb::start();
    let label = m.label();
    m.sql("create database shop; create table shop.orders (id int primary key, note text)");
    for i in 0..6 {
        m.sql(&format!(
            "insert into shop.orders values ({i}, repeat('x', 10000)); flush binary logs"
        ));
    }
    let listed = |m: &Mariadb| m.sql("show binary logs").lines().count() as f64;
    let n = listed(&m);
    assert!(n >= 7.0, "{n}");
    let files = format!("ssdwatch_mysql_binlog_files{{database=\"{label}\"}}");
    let d = daemon();
    let metrics = d.wait_metrics("the binary logs", Duration::from_secs(60), |t| {
        value(t, &files) == Some(n)
    });
    assert!(
        super::component(&metrics, &label, "binlog").is_some_and(|b| b > 0.0),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "ssdwatch_database_info{{database=\"{label}\",kind=\"mysql\""
        )),
        "{metrics}"
    );
    let comp = |t: &str, c: &str| super::component(t, &label, c);
    assert!(
        comp(&metrics, "innodb_system").is_some_and(|b| b > 1e6),
        "{metrics}"
    );
    assert!(
        comp(&metrics, "innodb_redo").is_some_and(|b| b > 0.0),
        "{metrics}"
    );
    let metrics = d.wait_metrics("the schemas sized", Duration::from_secs(60), |t| {
        comp(t, "schemas").is_some_and(|b| b > 0.0)
    });
    assert!(comp(&metrics, "other").is_some(), "{metrics}");

    // Purged to the newest: the server keeps what it still needs (a log InnoDB has not
    // checkpointed yet stays), and the count follows what it lists.
    let newest = m.sql("show master status");
    let newest = newest.split_whitespace().next().unwrap().to_string();
    m.sql(&format!("purge binary logs to '{newest}'"));
    let after = listed(&m);
    assert!(after < n && after >= 1.0, "{n} then {after}");
    d.wait_metrics("the purge", Duration::from_secs(60), |t| {
        value(t, &files) == Some(after)
    });
}

#[test]
fn error_and_slow_logs_on_another_mount_are_counted_there() {
    let test = "error_and_slow_logs_on_another_mount_are_counted_there";
    if !support::require_root(test)
        || !support::require_cmd(test, "mariadbd", "mariadb-server")
        || !support::require_cmd(test, "mariadb", "mariadb-client")
    {
        return;
    }
    let mysql = nix::unistd::User::from_name("mysql").unwrap().unwrap();
    let mnt = tempfile::tempdir().unwrap();
    let logs = mnt.path().join("mysql-logs");
    let _fs = support::Tmpfs::mount(
        &logs,
        &format!("size=16m,mode=0750,uid={},gid={}", mysql.uid, mysql.gid),
    );
    // Every statement goes to the slow log (long_query_time 0).
    let m = Mariadb::start_with(&[
        format!("--log-error={}", logs.join("error.log").display()),
        format!("--slow-query-log-file={}", logs.join("slow.log").display()),
        "--slow-query-log=1".into(),
        "--long-query-time=0".into(),
    ]);
    let label = m.label();
    for i in 0..200 {
        m.sql(&format!("select '{}', {i}", "y".repeat(2000)));
    }
    let logs_host = std::fs::canonicalize(&logs).unwrap();
    let at_logs = format!(
        "ssdwatch_database_component_bytes{{database=\"{label}\",component=\"log\",mountpoint=\"{}\"}}",
        logs_host.display()
    );
    let d = daemon();
    let metrics = d.wait_metrics("the logs on their mount", Duration::from_secs(60), |t| {
        value(t, &at_logs).is_some_and(|b| b >= 200.0 * 2000.0)
    });
    // Both files, as du counts them (the error log holds the start-up lines).
    let written: u64 = ["error.log", "slow.log"]
        .iter()
        .map(|f| std::fs::metadata(logs_host.join(f)).unwrap().len())
        .sum();
    let got = value(&metrics, &at_logs).unwrap();
    assert!(
        got >= written as f64 * 0.9,
        "log {got} against {written} written"
    );
    // Not counted on the data directory's mount.
    assert_eq!(
        metrics
            .lines()
            .filter(|l| l.starts_with(&format!(
                "ssdwatch_database_component_bytes{{database=\"{label}\",component=\"log\""
            )))
            .count(),
        1,
        "{metrics}"
    );
}

/// MariaDB creates each new schema's directory with mode 0700 (its UMASK_DIR default), so the
/// group access the docs recommend breaks on the first CREATE DATABASE: with `UMASK_DIR=0750`
/// in the server's environment (the systemd drop-in docs/databases.md gives) a new schema is
/// group-readable and sized; without it the schema is an error naming its directory, and no
/// size is published for the schemas (never an old or partial figure as if current).
#[test]
fn new_schemas_stay_readable_to_the_mysql_group_with_umask_dir_and_are_an_error_without() {
    let test =
        "new_schemas_stay_readable_to_the_mysql_group_with_umask_dir_and_are_an_error_without";
    if !support::require_root(test)
        || !support::require_cmd(test, "mariadbd", "mariadb-server")
        || !support::require_cmd(test, "setpriv", "util-linux")
    {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let gid = nix::unistd::Group::from_name("mysql")
        .unwrap()
        .unwrap()
        .gid
        .as_raw();
    let schemas_of = |out: &str, label: &str| {
        out.lines()
            .find(|l| {
                l.starts_with("ssdwatch_database_component_bytes{")
                    && l.contains(&format!("database=\"{label}\",component=\"schemas\""))
            })
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    let umask_dir = [("UMASK_DIR", "0750")];
    for (env, readable) in [(&umask_dir[..], true), (&[][..], false)] {
        let m = Mariadb::start_env(&[], env);
        // Debian's /var/lib/mysql: mysql:mysql, group-readable.
        nix::unistd::chown(&m.data, None, Some(nix::unistd::Gid::from_raw(gid))).unwrap();
        std::fs::set_permissions(&m.data, std::fs::Permissions::from_mode(0o750)).unwrap();
        // The one-time step of docs/databases.md for the schemas that exist (mysql, sys,
        // performance_schema are made 0700): `chmod g+rx /var/lib/mysql/*/`.
        for e in std::fs::read_dir(&m.data).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(0o750)).unwrap();
            }
        }
        m.sql("create database shop; create table shop.t (x longtext) engine=innodb; insert into shop.t values (repeat('x', 100000))");
        let mode = std::fs::metadata(m.data.join("shop"))
            .unwrap()
            .permissions()
            .mode();
        let label = m.label();
        let (out, err) = super::postgres::sample_as_nobody(&[gid]);
        if readable {
            assert_eq!(mode & 0o777, 0o750, "with UMASK_DIR=0750");
            assert!(
                schemas_of(&out, &label).is_some_and(|b| b >= 100_000.0),
                "{out}\n{err}"
            );
        } else {
            assert_eq!(mode & 0o777, 0o700, "MariaDB's default");
            assert!(schemas_of(&out, &label).is_none(), "{out}");
            let shop = format!("{}/shop", label);
            assert!(
                err.lines()
                    .any(|l| l.contains(&shop) && l.contains("Permission denied")),
                "{err}"
            );
        }
    }
}

/// The binary log retention the alert compares with is the server's own `expire_logs_days`
/// (or `binlog_expire_logs_seconds`), read from its command line and option files, unless the
/// config sets one.
#[test]
fn the_binlog_retention_expected_is_the_servers_own_setting() {
    let test = "the_binlog_retention_expected_is_the_servers_own_setting";
    if !support::require_root(test)
        || !support::require_cmd(test, "mariadbd", "mariadb-server")
        || !support::require_cmd(test, "mariadb", "mariadb-client")
    {
        return;
    }
    let m = Mariadb::start_with(&["--expire-logs-days=3".to_string()]);
    assert_eq!(m.sql("select @@expire_logs_days"), "3.000000");
    m.sql("flush binary logs");
    let label = m.label();
    let retention = format!("ssdwatch_mysql_binlog_retention_seconds{{database=\"{label}\"}}");
    let d = daemon();
    let got = d.wait_metrics("the retention", Duration::from_secs(60), |t| {
        value(t, &retention).is_some()
    });
    assert_eq!(value(&got, &retention), Some(3.0 * 86_400.0), "{got}");
}
