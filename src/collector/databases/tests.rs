use super::jobs::lock;
use super::*;
use crate::databases::postgres::tests::{control_file, slot_file};
use std::path::Path;

const SEG: u64 = 1 << 20;

fn write(p: &Path, data: &[u8]) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, data).unwrap();
}

/// A host tree: a postmaster (pid 812) of /srv/pg with 6 WAL segments of 1 MiB, 2 waiting
/// for the archiver, slot s1 holding segments 2 and 3; a postmaster (pid 900) whose
/// directory's postmaster.pid names another pid; its checkpointer child.
fn host(t: &Path) -> crate::Roots {
    let proc = t.join("proc");
    let rootfs = t.join("rootfs");
    write(&proc.join("812/comm"), b"postgres\n");
    write(
        &proc.join("812/cmdline"),
        b"/usr/lib/postgresql/15/bin/postgres\0-D\0/srv/pg\0",
    );
    write(&proc.join("813/comm"), b"postgres\n");
    write(&proc.join("813/cmdline"), b"postgres: checkpointer ");
    write(&proc.join("900/comm"), b"postgres\n");
    write(&proc.join("900/cmdline"), b"postgres\0-D\0/srv/stale\0");
    let pg = rootfs.join("srv/pg");
    write(&pg.join("PG_VERSION"), b"15\n");
    write(
        &pg.join("postmaster.pid"),
        b"812\n/srv/pg\n1700000000\n5432\n",
    );
    write(&pg.join("global/pg_control"), &control_file(4 * SEG + 0x28));
    for i in 1..=6u64 {
        let name = format!("00000001{:08X}{:08X}", 0, i);
        write(&pg.join("pg_wal").join(&name), &vec![1u8; SEG as usize]);
        if i <= 2 {
            write(
                &pg.join("pg_wal/archive_status")
                    .join(format!("{name}.ready")),
                b"",
            );
        }
    }
    write(
        &pg.join("pg_replslot/s1/state"),
        &slot_file("s1", 0, 2 * SEG + 8),
    );
    write(&pg.join("base/5/16384"), &vec![2u8; 3 * 8192]);
    write(&pg.join("base/pgsql_tmp/pgsql_tmp812.0"), &vec![3u8; 8192]);
    write(&pg.join("log/postgresql.log"), &vec![4u8; 4096]);
    let stale = rootfs.join("srv/stale");
    write(&stale.join("PG_VERSION"), b"15\n");
    write(&stale.join("postmaster.pid"), b"4444\n/srv/stale\n");
    write(&rootfs.join("srv/backups/dump.sql"), &vec![5u8; 10_000]);
    crate::Roots {
        proc,
        rootfs,
        ..crate::Roots::default()
    }
}

fn value(s: &Sample, family: &Family, labels: &[(&str, &str)]) -> Option<f64> {
    s.metrics.value(family.name, labels)
}

use crate::catalogue::{self as c, Family};

#[tokio::test]
async fn a_postgres_found_from_its_process_shows_its_wal_backlog_slot_and_components() {
    let t = tempfile::tempdir().unwrap();
    let ctx = Context::new(host(t.path()), Duration::from_secs(60));
    let cfg = watching_backups_and_a_gone_path();
    let mut col = DatabasesCollector::new(&cfg);
    let s = col.sample(&ctx).await.unwrap();
    let db = [("database", "/srv/pg")];
    assert_eq!(value(&s, &c::POSTGRES_WAL_SEGMENTS, &db), Some(6.0));
    assert_eq!(
        value(&s, &c::POSTGRES_ARCHIVE_READY_SEGMENTS, &db),
        Some(2.0)
    );
    assert!(value(&s, &c::POSTGRES_ARCHIVE_OLDEST_READY_AGE_SECONDS, &db).unwrap() < 600.0);
    assert_eq!(
        value(
            &s,
            &c::POSTGRES_REPLICATION_SLOT_RETAINED_BYTES,
            &[
                ("database", "/srv/pg"),
                ("slot", "s1"),
                ("type", "physical")
            ]
        ),
        Some((2 * SEG) as f64)
    );
    let comp = |s: &Sample, db: &str, c: Component| {
        value(
            s,
            &c::DATABASE_COMPONENT_BYTES,
            &[("database", db), ("component", c.label())],
        )
    };
    assert!(comp(&s, "/srv/pg", Component::Wal).unwrap() >= (6 * SEG) as f64);
    assert!(comp(&s, "/srv/pg", Component::Temp).unwrap() >= 8192.0);
    assert!(comp(&s, "/srv/pg", Component::Relations).unwrap() >= 3.0 * 8192.0);
    assert!(comp(&s, "/srv/pg", Component::Log).unwrap() >= 4096.0);
    // The temporary file is counted once, under temp, not also under relations.
    let rel = comp(&s, "/srv/pg", Component::Relations).unwrap();
    assert!(rel < (3 * 8192 + 8192 + 5 * 4096) as f64, "{rel}");
    assert!(comp(&s, "backups", Component::All).unwrap() >= 10_000.0);
    assert_eq!(
        value(
            &s,
            &c::DATABASE_INFO,
            &[
                ("database", "/srv/pg"),
                ("kind", Kind::Postgres.label()),
                ("version", "15"),
                ("mountpoint", "")
            ]
        ),
        Some(1.0)
    );
    // The stale directory and the missing watched path are their own errors; nothing else
    // is lost, and the checkpointer is not taken for a server.
    let errors: Vec<String> = s.errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors
            .iter()
            .any(|e| e.contains("pid 900") && e.contains("names pid \"4444\", not 900")),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains("gone") && e.contains("/srv/gone")),
        "{errors:?}"
    );
    assert!(!s.metrics.families().iter().any(|f| {
        f.samples
            .iter()
            .any(|x| f.labels(x).any(|(_, v)| v == "/srv/stale"))
    }));
}

#[tokio::test]
async fn the_archiver_fixed_and_the_slot_dropped_clear_the_series() {
    let t = tempfile::tempdir().unwrap();
    let roots = host(t.path());
    let pg = roots.rootfs.join("srv/pg");
    let ctx = Context::new(roots, Duration::from_secs(60));
    let mut col = DatabasesCollector::new(&DatabasesConfig::default());
    col.sample(&ctx).await.unwrap();
    for e in std::fs::read_dir(pg.join("pg_wal/archive_status")).unwrap() {
        let p = e.unwrap().path();
        std::fs::rename(&p, p.with_extension("done")).unwrap();
    }
    std::fs::remove_dir_all(pg.join("pg_replslot/s1")).unwrap();
    let s = col.sample(&ctx).await.unwrap();
    let db = [("database", "/srv/pg")];
    assert_eq!(
        value(&s, &c::POSTGRES_ARCHIVE_READY_SEGMENTS, &db),
        Some(0.0)
    );
    assert_eq!(
        value(&s, &c::POSTGRES_ARCHIVE_OLDEST_READY_AGE_SECONDS, &db),
        Some(0.0)
    );
    assert!(s.metrics.families().iter().all(|f| f.name
        != c::POSTGRES_REPLICATION_SLOT_RETAINED_BYTES.name
        || f.samples.is_empty()));
}

#[tokio::test]
async fn a_big_tree_is_sized_over_several_samples_and_the_last_figure_kept_meanwhile() {
    let t = tempfile::tempdir().unwrap();
    let roots = host(t.path());
    let base = roots.rootfs.join("srv/pg/base/5");
    for i in 0..450 {
        write(&base.join(format!("{}", 20000 + i)), b"x");
    }
    let ctx = Context::new(roots, Duration::from_secs(60));
    let cfg = DatabasesConfig {
        size_entries_per_pass: 100,
        ..DatabasesConfig::default()
    };
    let mut col = DatabasesCollector::new(&cfg);
    let rel = |s: &Sample| {
        value(
            s,
            &c::DATABASE_COMPONENT_BYTES,
            &[
                ("database", "/srv/pg"),
                ("component", Component::Relations.label()),
            ],
        )
    };
    let mut samples = 0;
    let first = loop {
        let s = col.sample(&ctx).await.unwrap();
        samples += 1;
        // The cheap parts are there from the first sample on.
        assert!(value(&s, &c::POSTGRES_WAL_SEGMENTS, &[("database", "/srv/pg")]).is_some());
        if let Some(r) = rel(&s) {
            assert_eq!(
                value(&s, &c::DATABASE_SIZE_ENTRIES, &[("database", "/srv/pg")]),
                Some(455.0)
            );
            break r;
        }
        assert!(samples < 10);
    };
    assert_eq!(samples, 5, "450 files and a few more at 100 a pass");
    // Not due again for size_interval: the figure stays without a new pass.
    let s = col.sample(&ctx).await.unwrap();
    assert_eq!(rel(&s), Some(first));
    assert!(lock(&col.targets["/srv/pg"].size).walk.is_none());
}

#[tokio::test]
async fn a_mariadb_shows_its_binlogs_innodb_files_and_schemas() {
    let t = tempfile::tempdir().unwrap();
    let proc = t.path().join("proc");
    let rootfs = t.path().join("rootfs");
    write(&proc.join("700/comm"), b"mariadbd\n");
    write(
        &proc.join("700/cmdline"),
        b"/usr/sbin/mariadbd\0--datadir=/srv/mysql\0--user=mysql\0",
    );
    let my = rootfs.join("srv/mysql");
    mariadb_datadir(&my);
    // Its last write ten days ago.
    let old = SystemTime::now() - Duration::from_secs(10 * 86400);
    std::fs::File::options()
        .write(true)
        .open(my.join("mysql-bin.000001"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    let ctx = Context::new(
        crate::Roots {
            proc,
            rootfs,
            ..crate::Roots::default()
        },
        Duration::from_secs(60),
    );
    let mut col = DatabasesCollector::new(&DatabasesConfig::default());
    let s = col.sample(&ctx).await.unwrap();
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    let db = [("database", "/srv/mysql")];
    assert_eq!(value(&s, &c::MYSQL_BINLOG_FILES, &db), Some(2.0));
    let age = value(&s, &c::MYSQL_BINLOG_OLDEST_AGE_SECONDS, &db).unwrap();
    assert!((age - 864_000.0).abs() < 600.0, "{age}");
    assert_eq!(
        value(&s, &c::MYSQL_BINLOG_RETENTION_SECONDS, &db),
        Some(30.0 * 86400.0)
    );
    let comp = |c: Component| {
        value(
            &s,
            &c::DATABASE_COMPONENT_BYTES,
            &[("database", "/srv/mysql"), ("component", c.label())],
        )
    };
    assert!(comp(Component::Binlog).unwrap() >= (24 << 10) as f64);
    assert!(comp(Component::InnodbSystem).unwrap() >= (12 << 10) as f64);
    assert!(comp(Component::InnodbUndo).unwrap() >= (8 << 10) as f64);
    assert!(comp(Component::InnodbRedo).unwrap() >= (16 << 10) as f64);
    assert!(comp(Component::InnodbTemp).unwrap() >= (4 << 10) as f64);
    let schemas = comp(Component::Schemas).unwrap();
    assert!(schemas >= (64 << 10) as f64, "{schemas}");
    // The logs and InnoDB's files are not counted again under other.
    let other = comp(Component::Other).unwrap();
    assert!(other < (20 << 10) as f64, "{other}");
    assert_eq!(comp(Component::RelayLog), None);
}

#[tokio::test]
async fn each_component_is_labelled_with_the_mount_holding_it() {
    let t = tempfile::tempdir().unwrap();
    let roots = host(t.path());
    // pg_wal moved to its own filesystem (initdb -X), linked from the data directory.
    let pg = roots.rootfs.join("srv/pg");
    let wal = roots.rootfs.join("srv/wal/pg_wal");
    std::fs::create_dir_all(wal.parent().unwrap()).unwrap();
    std::fs::rename(pg.join("pg_wal"), &wal).unwrap();
    // Relative, so it resolves inside the fixture's rootfs.
    std::os::unix::fs::symlink("../wal/pg_wal", pg.join("pg_wal")).unwrap();
    write(
        &roots.proc.join("self/mountinfo"),
        b"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 8:17 / /srv/wal rw - xfs /dev/sdb1 rw\n",
    );
    let ctx = Context::new(roots, Duration::from_secs(60));
    let mut col = DatabasesCollector::new(&DatabasesConfig::default());
    let s = col.sample(&ctx).await.unwrap();
    let at = |component: Component, mount: &str| {
        value(
            &s,
            &c::DATABASE_COMPONENT_BYTES,
            &[
                ("database", "/srv/pg"),
                ("component", component.label()),
                ("mountpoint", mount),
            ],
        )
    };
    assert!(at(Component::Wal, "/srv/wal").is_some_and(|b| b >= (6 * SEG) as f64));
    assert!(at(Component::Relations, "/").is_some());
    assert!(at(Component::Temp, "/").is_some());
    assert_eq!(
        value(&s, &c::POSTGRES_WAL_SEGMENTS, &[("database", "/srv/pg")]),
        Some(6.0)
    );
}

#[tokio::test]
async fn a_server_log_outside_the_data_directory_is_counted_on_its_own_mount() {
    let t = tempfile::tempdir().unwrap();
    let roots = host(t.path());
    let pg = roots.rootfs.join("srv/pg");
    // ALTER SYSTEM SET log_directory: postgresql.auto.conf, read after postgresql.conf.
    write(&pg.join("postgresql.conf"), b"log_directory = 'log'\n");
    log_in_var_log(&roots.rootfs, &pg);
    write(
        &roots.proc.join("self/mountinfo"),
        b"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 8:17 / /var/log rw - xfs /dev/sdb1 rw\n",
    );
    let ctx = Context::new(roots.clone(), Duration::from_secs(60));
    let mut col = DatabasesCollector::new(&DatabasesConfig::default());
    let s = col.sample(&ctx).await.unwrap();
    let at = |s: &Sample, component: Component, mount: &str| {
        value(
            s,
            &c::DATABASE_COMPONENT_BYTES,
            &[
                ("database", "/srv/pg"),
                ("component", component.label()),
                ("mountpoint", mount),
            ],
        )
    };
    let outside = at(&s, Component::Log, "/var/log").unwrap();
    assert!(outside >= (64 << 10) as f64, "{outside}");
    // The old log directory inside keeps its own series, on the data directory's mount.
    let inside = at(&s, Component::Log, "/").unwrap();
    assert!((4096.0..(64 << 10) as f64).contains(&inside), "{inside}");

    // The same directory on the data directory's mount: one series, the sum of both.
    write(
        &roots.proc.join("self/mountinfo"),
        b"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n",
    );
    let mut col = DatabasesCollector::new(&DatabasesConfig::default());
    let s = col.sample(&ctx).await.unwrap();
    assert_eq!(at(&s, Component::Log, "/"), Some(inside + outside));

    // A relative log_directory names a top-level directory of the data directory: the log,
    // not "other".
    write(
        &pg.join("postgresql.auto.conf"),
        b"log_directory = 'logs'\n",
    );
    write(&pg.join("logs/postgresql.log"), &vec![7u8; 256 << 10]);
    let mut col = DatabasesCollector::new(&DatabasesConfig::default());
    let s = col.sample(&ctx).await.unwrap();
    let log = at(&s, Component::Log, "/").unwrap();
    assert!(log >= ((256 << 10) + 4096) as f64, "{log}");
    assert!(at(&s, Component::Other, "/").unwrap() < (256 << 10) as f64);

    // A log_directory holding the data directory (a mistake, or '/') is not walked: the
    // data directory would count twice, and the whole tree with it.
    write(
        &pg.join("postgresql.auto.conf"),
        b"log_directory = '/srv'\n",
    );
    let mut col = DatabasesCollector::new(&DatabasesConfig::default());
    let s = col.sample(&ctx).await.unwrap();
    assert_eq!(at(&s, Component::Log, "/"), Some(inside));
}

/// PostgreSQL writes a tablespace's link absolute (`/data/ts1`): under `--path.rootfs` it
/// leads to the host's /data/ts1, never to a directory of the daemon's own root.
#[tokio::test]
async fn an_absolute_tablespace_link_leads_into_the_hosts_root_not_the_daemons() {
    let t = tempfile::tempdir().unwrap();
    let roots = host(t.path());
    let pg = roots.rootfs.join("srv/pg");
    let ts = roots.rootfs.join("data/ts1/PG_15_202209061");
    write(&ts.join("5/16391"), &vec![1u8; 40_000]);
    write(&ts.join("pgsql_tmp/pgsql_tmp812.1"), &vec![1u8; 20_000]);
    std::fs::create_dir_all(pg.join("pg_tblspc")).unwrap();
    // The host's path, absolute, as PostgreSQL writes it; the daemon's own /data/ts1 must not
    // be what is read (it does not exist here, and would be another directory if it did).
    std::os::unix::fs::symlink("/data/ts1", pg.join("pg_tblspc/16390")).unwrap();
    let ctx = Context::new(roots, Duration::from_secs(60));
    let mut col = DatabasesCollector::new(&watching_backups_and_a_gone_path());
    let s = col.sample(&ctx).await.unwrap();
    let space = [
        ("database", "/srv/pg"),
        ("tablespace", "16390"),
        ("location", "/data/ts1"),
        ("mountpoint", ""),
    ];
    let bytes = value(&s, &c::POSTGRES_TABLESPACE_BYTES, &space);
    // The relation file at least (its temporary file is counted under temp, not here).
    assert!(bytes.is_some_and(|b| b >= 40_000.0), "{bytes:?}");
    let temp = (s.metrics.families().iter())
        .filter(|f| f.name == c::DATABASE_COMPONENT_BYTES.name)
        .flat_map(|f| {
            (f.samples.iter())
                .filter(move |x| f.label(x, "component") == Some("temp"))
                .filter(move |x| f.label(x, "database") == Some("/srv/pg"))
        })
        .map(|x| x.value)
        .next();
    // base/pgsql_tmp's 8192 bytes and the tablespace's 20,000.
    assert!(temp.is_some_and(|b| b >= 28_192.0), "{temp:?}");
}

#[test]
fn the_binlog_retention_is_the_configs_else_the_servers_else_30_days() {
    let day = Duration::from_secs(86_400);
    assert_eq!(binlog_retention(Some(7 * day), Some(86_400)), 7 * day);
    assert_eq!(binlog_retention(None, Some(3 * 86_400)), 3 * day);
    assert_eq!(binlog_retention(None, Some(0)), 30 * day, "never purged");
    assert_eq!(binlog_retention(None, None), 30 * day);
}

/// The history record of `db` as the old read-back from the published series made it: the
/// oracle the typed records are held to (what is stored is what was exported).
fn read_back(set: &crate::metrics::MetricSet, db: &str, kind: Kind) -> DatabaseSample {
    use crate::metrics::{MetricFamily, Sample as Point};
    let family = |name: &str| set.families().iter().find(|f| f.name == name);
    let label = |f: &MetricFamily, s: &Point, k: &str| f.label(s, k).unwrap_or("").to_string();
    let of = |f: &MetricFamily, s: &Point| f.label(s, "database") == Some(db);
    let fact = |fam: &Family| {
        let f = family(fam.name)?;
        (f.samples.iter())
            .find(|s| of(f, s))
            .map(|s| s.value.max(0.0) as u64)
    };
    let components = family(c::DATABASE_COMPONENT_BYTES.name)
        .map(|f| {
            (f.samples.iter())
                .filter(|s| of(f, s))
                .map(|s| crate::history::ComponentSize {
                    component: Component::from_label(f.label(s, "component").unwrap()).unwrap(),
                    mountpoint: label(f, s, "mountpoint"),
                    bytes: s.value.max(0.0) as u64,
                })
                .collect()
        })
        .unwrap_or_default();
    let slot = family(c::POSTGRES_REPLICATION_SLOT_RETAINED_BYTES.name).and_then(|f| {
        (f.samples.iter())
            .filter(|s| of(f, s))
            .max_by(|a, b| a.value.total_cmp(&b.value))
            .map(|s| (label(f, s, "slot"), s.value.max(0.0) as u64))
    });
    DatabaseSample {
        database: db.to_string(),
        kind,
        t: 0,
        components,
        facts: crate::history::DatabaseFacts {
            archive_ready_segments: fact(&c::POSTGRES_ARCHIVE_READY_SEGMENTS),
            archive_oldest_ready_age_seconds: fact(&c::POSTGRES_ARCHIVE_OLDEST_READY_AGE_SECONDS),
            slot,
            binlog_files: fact(&c::MYSQL_BINLOG_FILES),
            binlog_oldest_age_seconds: fact(&c::MYSQL_BINLOG_OLDEST_AGE_SECONDS),
            binlog_retention_seconds: fact(&c::MYSQL_BINLOG_RETENTION_SECONDS),
        },
    }
}

/// Each record equals what the sample's series say of its database.
fn records_match_series((s, records): &(Sample, Vec<DatabaseSample>)) {
    assert!(!records.is_empty());
    for r in records {
        assert_eq!(
            *r,
            read_back(&s.metrics, &r.database, r.kind),
            "{}",
            r.database
        );
    }
}

async fn sample_rec(col: &mut DatabasesCollector, ctx: &Context) -> (Sample, Vec<DatabaseSample>) {
    let mut s = Sample::default();
    let r = col.sample_into(ctx, &mut s).await.unwrap().unwrap();
    (s, r)
}

/// Tablespaces, watched paths, relay logs, a log and pg_wal on mounts of their own: the
/// history record built with the series holds the same figures the series do.
#[tokio::test]
async fn the_history_keeps_exactly_what_was_exported_tablespaces_relay_logs_and_logs_elsewhere_included()
 {
    // A: postgres with tablespaces and watches, two samples.
    let t = tempfile::tempdir().unwrap();
    let roots = host(t.path());
    let pg = roots.rootfs.join("srv/pg");
    write(
        &pg.join("pg_tblspc/16500/PG_15_202209061/pgsql_tmp/pgsql_tmp1.0"),
        &vec![1u8; 9000],
    );
    write(
        &pg.join("pg_tblspc/16500/PG_15_202209061/5/20000"),
        &vec![1u8; 20000],
    );
    write(
        &roots.rootfs.join("ts2/PG_15_202209061/5/30000"),
        &vec![1u8; 40000],
    );
    std::os::unix::fs::symlink("../../../ts2", pg.join("pg_tblspc/16501")).unwrap();
    write(&pg.join("pg_xact/0000"), &vec![1u8; 8192]);
    let ctx = Context::new(roots.clone(), Duration::from_secs(60));
    let cfg = watching_backups_and_a_gone_path();
    let mut col = DatabasesCollector::new(&cfg);
    let s = sample_rec(&mut col, &ctx).await;
    records_match_series(&s);
    let s = sample_rec(&mut col, &ctx).await;
    records_match_series(&s);
    // Each tablespace is its own series, its temporary files counted under temp.
    let ts = |oid: &str| {
        let f = s.0.metrics.families().iter();
        f.filter(|f| f.name == c::POSTGRES_TABLESPACE_BYTES.name)
            .flat_map(|f| {
                f.samples
                    .iter()
                    .filter(move |x| f.label(x, "tablespace") == Some(oid))
            })
            .map(|x| x.value)
            .next()
    };
    assert!(ts("16500").is_some_and(|b| b >= 29_000.0));
    assert!(ts("16501").is_some_and(|b| b >= 40_000.0));
    let pg = s.1.iter().find(|r| r.database == "/srv/pg").unwrap();
    let temp = pg
        .components
        .iter()
        .find(|c| c.component == Component::Temp);
    assert!(temp.is_some_and(|c| c.bytes >= 8192 + 9000));

    // B: mariadb with relay logs and an error log elsewhere.
    let t = tempfile::tempdir().unwrap();
    let proc = t.path().join("proc");
    let rootfs = t.path().join("rootfs");
    write(&proc.join("700/comm"), b"mariadbd\n");
    write(
        &proc.join("700/cmdline"),
        b"/usr/sbin/mariadbd\0--datadir=/srv/mysql\0--log-error=/var/log/mysql/error.log\0--user=mysql\0",
    );
    write(&rootfs.join("var/log/mysql/error.log"), &vec![1u8; 30000]);
    let my = rootfs.join("srv/mysql");
    mariadb_datadir(&my);
    write(&my.join("aria_log.00000001"), &vec![0u8; 4 << 10]);
    write(&my.join("host-relay-bin.000001"), &vec![0u8; 6 << 10]);
    write(
        &my.join("host-relay-bin.index"),
        b"./host-relay-bin.000001\n",
    );
    write(
        &proc.join("self/mountinfo"),
        b"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 8:17 / /var/log rw - xfs /dev/sdb1 rw\n",
    );
    let ctx = Context::new(
        crate::Roots {
            proc,
            rootfs,
            ..crate::Roots::default()
        },
        Duration::from_secs(60),
    );
    let mut col = DatabasesCollector::new(&DatabasesConfig::default());
    let s = sample_rec(&mut col, &ctx).await;
    records_match_series(&s);

    // C: wal on its own mount, log elsewhere on another.
    let t = tempfile::tempdir().unwrap();
    let roots = host(t.path());
    let pg = roots.rootfs.join("srv/pg");
    let wal = roots.rootfs.join("srv/wal/pg_wal");
    std::fs::create_dir_all(wal.parent().unwrap()).unwrap();
    std::fs::rename(pg.join("pg_wal"), &wal).unwrap();
    std::os::unix::fs::symlink("../wal/pg_wal", pg.join("pg_wal")).unwrap();
    log_in_var_log(&roots.rootfs, &pg);
    write(
        &roots.proc.join("self/mountinfo"),
        b"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 8:17 / /srv/wal rw - xfs /dev/sdb1 rw\n3 1 8:33 / /var/log rw - xfs /dev/sdc1 rw\n",
    );
    let ctx = Context::new(roots, Duration::from_secs(60));
    let mut col = DatabasesCollector::new(&DatabasesConfig::default());
    let s = sample_rec(&mut col, &ctx).await;
    records_match_series(&s);
}

/// The watched paths the fixture hosts are read with: one that exists, one that does not.
fn watching_backups_and_a_gone_path() -> DatabasesConfig {
    DatabasesConfig {
        watch: vec![
            WatchConfig {
                name: "backups".into(),
                path: "/srv/backups".into(),
            },
            WatchConfig {
                name: "gone".into(),
                path: "/srv/gone".into(),
            },
        ],
        ..DatabasesConfig::default()
    }
}

/// ALTER SYSTEM SET log_directory = '/var/log/postgresql/main' for the cluster at `pg`, and a
/// 64 KiB log file there.
fn log_in_var_log(rootfs: &Path, pg: &Path) {
    write(
        &pg.join("postgresql.auto.conf"),
        b"log_directory = '/var/log/postgresql/main'\n",
    );
    write(
        &rootfs.join("var/log/postgresql/main/postgresql-Fri.log"),
        &vec![6u8; 64 << 10],
    );
}

/// A MariaDB data directory's files at `my`: a database's table, the system tablespace, an
/// undo tablespace, a redo log, the temporary tablespace and two binary logs with their index.
fn mariadb_datadir(my: &Path) {
    write(&my.join("mysql/db.opt"), b"x");
    write(&my.join("shop/orders.ibd"), &vec![1u8; 64 << 10]);
    write(&my.join("ibdata1"), &vec![0u8; 12 << 10]);
    write(&my.join("undo001"), &vec![0u8; 8 << 10]);
    write(&my.join("ib_logfile0"), &vec![0u8; 16 << 10]);
    write(&my.join("ibtmp1"), &vec![0u8; 4 << 10]);
    write(&my.join("mysql-bin.000001"), &vec![0u8; 20 << 10]);
    write(&my.join("mysql-bin.000002"), &vec![0u8; 4 << 10]);
    write(
        &my.join("mysql-bin.index"),
        b"./mysql-bin.000001\n./mysql-bin.000002\n",
    );
}
