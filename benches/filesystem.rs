//! The filesystem collector's own costs on a host with 500 mounts: parsing mountinfo, choosing
//! the mounts (filters, bind-mount dedupe), and one guarded statvfs batch (8 short-lived threads of the door,
//! answers from a fixture so the figure is the guard's overhead, not the filesystems').
// Tests and benchmarks: `pub` marks what a module shares inside this crate, and unwrap and
// expect are how a test says "this must hold".
#![allow(unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use ssdwatch::collector::filesystem::FilesystemConfig;
use ssdwatch::collector::filesystem::select::select_mounts;
use ssdwatch::procfs::mountinfo::parse_mountinfo;
use ssdwatch::statfs::guard::{MAX_STALLED_STATFS, STATFS_WORKERS, StatGuard};
use ssdwatch::statfs::{FixtureAnswer, FsStat, StatSource};
use ssdwatch::sysfs::topology::Topology;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// 500 ext4 mounts with a space in every tenth path, a bind mount of every fifth, and the
/// pseudo filesystems of a systemd host.
fn mountinfo_500() -> String {
    let mut t = String::from(
        "1 0 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n\
         22 1 0:21 / /proc rw,nosuid shared:12 - proc proc rw\n\
         23 1 0:22 / /sys rw,nosuid shared:7 - sysfs sysfs rw\n\
         26 1 0:24 / /run rw,nosuid shared:5 - tmpfs tmpfs rw,size=3273092k,mode=755\n",
    );
    for i in 0..500u32 {
        let name = if i % 10 == 0 {
            format!("/srv/db\\040{i}")
        } else {
            format!("/srv/db{i}")
        };
        t.push_str(&format!(
            "{} 1 259:{} / {name} rw,noatime shared:{} - ext4 /dev/nvme{}n1p{} rw,discard\n",
            100 + i,
            100 + i,
            20 + i,
            i / 8,
            i % 8 + 1
        ));
        if i % 5 == 0 {
            t.push_str(&format!(
                "{} 1 259:{} /backup /mnt/bind{i} rw,noatime - ext4 /dev/nvme{}n1p{} rw\n",
                1000 + i,
                100 + i,
                i / 8,
                i % 8 + 1
            ));
        }
    }
    t
}

fn bench(c: &mut Criterion) {
    let text = mountinfo_500();
    c.bench_function("parse_mountinfo 600 lines", |b| {
        b.iter(|| parse_mountinfo(std::hint::black_box(&text)))
    });

    let (mounts, errors) = parse_mountinfo(&text);
    assert!(errors.is_empty());
    let filters = FilesystemConfig::default().filters().unwrap();
    let topo = Topology::default();
    c.bench_function("select_mounts 600 -> 501", |b| {
        b.iter(|| select_mounts(&mounts, &filters, &topo))
    });

    let selected = select_mounts(&mounts, &filters, &topo);
    assert_eq!(selected.len(), 501);
    let map: BTreeMap<String, FixtureAnswer> = selected
        .iter()
        .map(|m| {
            (
                m.info.mount_point.clone(),
                FixtureAnswer::Stat(FsStat {
                    frsize: 4096,
                    blocks: 1 << 20,
                    ..Default::default()
                }),
            )
        })
        .collect();
    let source = StatSource::Fixture(Arc::new(map));
    let jobs: Vec<(String, PathBuf)> = selected
        .iter()
        .map(|m| {
            (
                m.info.mount_point.clone(),
                PathBuf::from(&m.info.mount_point),
            )
        })
        .collect();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let guard = StatGuard::new(STATFS_WORKERS, 32, MAX_STALLED_STATFS);
    // The door's threads, as in the daemon: this host's task limit counts.
    let door = ssdwatch::door::Door::default();
    c.bench_function("guarded statvfs batch, 501 mounts, 8 threads", |b| {
        b.iter(|| {
            rt.block_on(guard.run(&door, &source, jobs.clone(), Duration::from_secs(5)))
                .results
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
