//! A server that stops (shut down, or crashed on a full disk) leaves its data directory
//! behind, with the WAL, slots and archive backlog that filled the disk: the directory stays
//! watched with `ssdwatch_database_up 0` until the server is back or the directory goes. The
//! process table is a fixture tree, so no root is needed.

use crate::support;
use ssdwatch::collector::Collector;
use ssdwatch::collector::Context;
use ssdwatch::collector::databases::{DatabasesCollector, DatabasesConfig};
use std::path::Path;
use std::time::Duration;

fn postmaster(proc_root: &Path, pid: u32, dir: &str) {
    let d = proc_root.join(pid.to_string());
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("stat"),
        format!("{pid} (postgres) S 1 {pid} {pid} 0 -1 4194560 31 0 0 0\n"),
    )
    .unwrap();
    std::fs::write(d.join("cmdline"), format!("postgres\0-D\0{dir}\0")).unwrap();
}

#[test]
fn a_server_that_stopped_stays_watched_with_up_0_until_its_directory_goes() {
    let host = tempfile::tempdir().unwrap();
    let (proc_root, root) = (host.path().join("proc"), host.path().join("rootfs"));
    let data = root.join("srv/pg");
    for sub in ["global", "pg_wal/archive_status", "pg_replslot"] {
        std::fs::create_dir_all(data.join(sub)).unwrap();
    }
    std::fs::write(data.join("PG_VERSION"), "15\n").unwrap();
    std::fs::write(data.join("postmaster.pid"), "300\n/srv/pg\n").unwrap();
    // Three segments waiting for the archiver (1 MiB each, as initdb --wal-segsize=1 makes).
    for n in 1..=3 {
        let name = format!("00000001000000000000000{n}");
        std::fs::write(data.join("pg_wal").join(&name), vec![0u8; 1 << 20]).unwrap();
        std::fs::write(
            data.join("pg_wal/archive_status")
                .join(format!("{name}.ready")),
            "",
        )
        .unwrap();
    }
    std::fs::create_dir_all(&proc_root).unwrap();
    postmaster(&proc_root, 300, "/srv/pg");
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
    let sample =
        |c: &mut DatabasesCollector| support::exposition(&rt.block_on(c.sample(&ctx)).unwrap());
    let up = "ssdwatch_database_up{database=\"/srv/pg\"}";
    let ready = "ssdwatch_postgres_archive_ready_segments{database=\"/srv/pg\"}";
    let m = sample(&mut c);
    assert_eq!(support::value(&m, up), Some(1.0), "{m}");
    assert_eq!(support::value(&m, ready), Some(3.0), "{m}");
    // The server crashed: its process is gone, its directory and backlog are not.
    std::fs::remove_dir_all(proc_root.join("300")).unwrap();
    for _ in 0..3 {
        let m = sample(&mut c);
        assert_eq!(support::value(&m, up), Some(0.0), "{m}");
        assert_eq!(support::value(&m, ready), Some(3.0), "{m}");
        assert!(
            m.contains("ssdwatch_database_info{database=\"/srv/pg\""),
            "{m}"
        );
    }
    // Back: up again.
    postmaster(&proc_root, 301, "/srv/pg");
    std::fs::write(data.join("postmaster.pid"), "301\n/srv/pg\n").unwrap();
    let m = sample(&mut c);
    assert_eq!(support::value(&m, up), Some(1.0), "{m}");
    // Stopped again, then the directory removed: no longer watched.
    std::fs::remove_dir_all(proc_root.join("301")).unwrap();
    assert_eq!(support::value(&sample(&mut c), up), Some(0.0));
    std::fs::remove_dir_all(&data).unwrap();
    let m = sample(&mut c);
    assert!(!m.contains("database=\"/srv/pg\""), "{m}");
    drop(rt);
}
