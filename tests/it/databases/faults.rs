//! Faults under the databases collector: a watched directory on a mount whose listing hangs
//! costs only its own item, within the deadline, with one thread held however many samples
//! pass; a watched path that is a symlink loop or vanishes is its own error.

use crate::support;
use ssdwatch::collector::Collector;
use ssdwatch::collector::databases::{DatabasesCollector, DatabasesConfig, WatchConfig};
use ssdwatch::collector::{Context, Sample};
use std::time::{Duration, Instant};

fn watch(name: &str, path: &std::path::Path) -> WatchConfig {
    WatchConfig {
        name: name.into(),
        path: path.to_path_buf(),
    }
}

/// This process's threads waiting for a FUSE server's answer (their wait channel).
fn threads_in_fuse() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("wchan"))
                .is_ok_and(|w| w.contains("request_wait_answer"))
        })
        .count()
}

fn errors(s: &Sample) -> Vec<String> {
    s.errors.iter().map(|e| e.to_string()).collect()
}

#[test]
fn a_watched_directory_whose_listing_hangs_costs_only_its_own_item() {
    let test = "a_watched_directory_whose_listing_hangs_costs_only_its_own_item";
    if !support::require_root(test) || !support::fuse_available(test) {
        return;
    }
    if !support::alone(module_path!(), test) {
        return;
    }
    // Made before the hung mount so that, on a panic, the mount (and its server) is dropped
    // first: a runtime dropped while one of its threads waits on the mount would wait forever.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let hung = support::HungFuse::serving("hung_readdir_fs.py");
    let ok = tempfile::tempdir().unwrap();
    std::fs::write(ok.path().join("dump.sql"), vec![1u8; 20_000]).unwrap();
    let cfg = DatabasesConfig {
        discover: false,
        interval: Duration::from_secs(1),
        size_interval: Duration::from_secs(1),
        timeout: Duration::from_millis(500),
        size_time_per_pass: Duration::from_millis(500),
        watch: vec![watch("hung", &hung.mountpoint), watch("backups", ok.path())],
        ..DatabasesConfig::default()
    };
    let ctx = Context::new(ssdwatch::Roots::default(), Duration::from_secs(60));
    let mut c = DatabasesCollector::new(&cfg);
    let threads_before = support::thread_count();
    let mut threads = Vec::new();
    for round in 0..5 {
        let start = Instant::now();
        let s = rt.block_on(c.sample(&ctx)).unwrap();
        let took = start.elapsed();
        // At most the pass's deadline (1 s here), never the hung call's forever.
        assert!(took < Duration::from_secs(5), "round {round}: {took:?}");
        let text = support::exposition(&s);
        assert!(
            super::component(&text, "backups", "all").is_some_and(|b| b >= 20_000.0),
            "round {round}: {text}"
        );
        assert!(
            !text.contains("database=\"hung\",component"),
            "round {round}: {text}"
        );
        let e = errors(&s);
        assert_eq!(e.len(), 1, "round {round}: {e:?}");
        let want = if round == 0 {
            "no answer within"
        } else {
            "not started again until it does"
        };
        assert!(
            e[0].contains("hung") && e[0].contains(want),
            "round {round}: {e:?}"
        );
        threads.push((support::thread_count(), threads_in_fuse()));
    }
    // One thread stays held in the hung listing, whatever the number of samples; the others
    // are the runtime's pool, reused.
    assert!(
        threads
            .iter()
            .all(|&(n, f)| f == 1 && n <= threads_before + 6),
        "{threads_before} then (threads, in FUSE) {threads:?}"
    );
    drop(hung);
    drop(rt);
}

#[tokio::test]
async fn a_watched_symlink_loop_a_vanished_path_and_a_good_one_each_stand_alone() {
    let t = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(t.path().join("loop"), t.path().join("loop")).unwrap();
    let good = t.path().join("good");
    std::fs::create_dir_all(good.join("a/b")).unwrap();
    std::fs::write(good.join("a/b/f"), vec![0u8; 9000]).unwrap();
    // A link inside the good tree pointing back up: not followed, so no loop.
    std::os::unix::fs::symlink(&good, good.join("a/b/up")).unwrap();
    let going = t.path().join("going");
    std::fs::create_dir_all(&going).unwrap();
    let cfg = DatabasesConfig {
        discover: false,
        watch: vec![
            watch("loop", &t.path().join("loop")),
            watch("good", &good),
            watch("going", &going),
        ],
        ..DatabasesConfig::default()
    };
    let ctx = Context::new(ssdwatch::Roots::default(), Duration::from_secs(60));
    let mut c = DatabasesCollector::new(&cfg);
    let s = c.sample(&ctx).await.unwrap();
    let text = support::exposition(&s);
    assert!(
        super::component(&text, "good", "all").is_some_and(|b| b >= 9000.0),
        "{text}"
    );
    // A link to itself can't be resolved: its own error, and nothing else is lost.
    let e = errors(&s);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].contains("loop") && e[0].contains("symbolic links"),
        "{e:?}"
    );
    std::fs::remove_dir_all(&going).unwrap();
    let s = c.sample(&ctx).await.unwrap();
    let e = errors(&s);
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(
        e.iter()
            .any(|e| e.contains("going") && e.contains("No such file")),
        "{e:?}"
    );
    assert!(support::exposition(&s).contains("database=\"good\""));
}

#[test]
fn a_process_search_that_hangs_is_one_item_and_the_collector_still_succeeds() {
    let test = "a_process_search_that_hangs_is_one_item_and_the_collector_still_succeeds";
    if !support::require_root(test) || !support::fuse_available(test) {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // The /proc the collector reads is a mount whose listing never returns.
    let hung = support::HungFuse::serving("hung_readdir_fs.py");
    let cfg = DatabasesConfig {
        timeout: Duration::from_millis(500),
        ..DatabasesConfig::default()
    };
    let roots = ssdwatch::Roots {
        proc: hung.mountpoint.clone(),
        ..ssdwatch::Roots::default()
    };
    let ctx = Context::new(roots, Duration::from_secs(60));
    let mut c = DatabasesCollector::new(&cfg);
    for (round, want) in ["no answer within", "not started again until it does"]
        .iter()
        .enumerate()
    {
        let s = rt.block_on(c.sample(&ctx)).unwrap();
        let e = errors(&s);
        assert_eq!(e.len(), 1, "round {round}: {e:?}");
        assert!(
            e[0].contains("process search") && e[0].contains(want),
            "round {round}: {e:?}"
        );
    }
    drop(hung);
    drop(rt);
}
