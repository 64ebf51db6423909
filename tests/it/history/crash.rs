//! The daemon killed with SIGKILL while it writes history, 50 times: every time the store opens
//! (no "corrupt", nothing moved aside) and at most the transaction in flight is lost.
//! The writer is this test binary re-executed with an environment variable.

use ssdwatch::history::{FsKey, FsSample, HistoryConfig, Store};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const WRITER: &str = "SSDWATCH_HISTORY_CRASH_WRITER";
const T0: i64 = 1_767_225_600;
/// Samples per transaction.
const BATCH: i64 = 10;

fn cfg() -> HistoryConfig {
    HistoryConfig {
        raw_interval: Duration::from_secs(1),
        ..Default::default()
    }
}

fn key() -> FsKey {
    FsKey {
        mountpoint: "/srv/pg".into(),
        uuid: Some("0b9c5f7e-crash".into()),
    }
}

/// How many samples the store holds.
fn stored(store: &Store) -> i64 {
    let Some(id) = store.fs_id_of(&key()).unwrap() else {
        return 0;
    };
    store.fs_series(id, 0, i64::MAX).unwrap().len() as i64
}

/// The writer: one transaction of BATCH samples after another, each followed by a line in
/// the progress file naming how many samples are committed, until killed.
fn writer(dir: &Path) -> ! {
    let mut store = Store::open(dir, &cfg()).expect("writer opens the store");
    let mut progress = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(dir.join("progress"))
        .unwrap();
    let mut n = stored(&store);
    loop {
        let batch: Vec<FsSample> = (n..n + BATCH)
            .map(|i| FsSample {
                key: key(),
                device: "nvme0n1p2".into(),
                t: T0 + i,
                size_bytes: 1 << 40,
                avail_bytes: (1 << 39) - i as u64 * 4096,
                free_bytes: (1 << 39) - i as u64 * 4096,
                files_free: Some(1_000_000),
            })
            .collect();
        store.record_fs(&batch).expect("write");
        n += BATCH;
        writeln!(progress, "{n}").unwrap();
    }
}

#[test]
fn a_writer_killed_50_times_loses_at_most_its_last_transaction() {
    if let Some(dir) = std::env::var_os(WRITER) {
        writer(Path::new(&dir));
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let name = crate::support::test_path(
        module_path!(),
        "a_writer_killed_50_times_loses_at_most_its_last_transaction",
    );
    let mut seed: u64 = 0x5eed_cafe_f00d;
    let mut before = 0;
    for run in 0..50 {
        let progress = dir.path().join("progress");
        let _ = std::fs::remove_file(&progress);
        let mut child = Command::new(&exe)
            .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
            .env(WRITER, dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // xorshift: a different moment each run, the same runs every time.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(20 + seed % 230));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let committed = std::fs::read_to_string(&progress)
            .ok()
            .and_then(|s| s.lines().last().and_then(|l| l.parse::<i64>().ok()))
            .unwrap_or(before);
        let store = Store::open(dir.path(), &cfg())
            .unwrap_or_else(|e| panic!("run {run}: the store does not open: {e}"));
        let n = stored(&store);
        assert!(
            n == committed || n == committed + BATCH,
            "run {run}: {n} samples stored, {committed} reported committed"
        );
        assert_eq!(n % BATCH, 0, "run {run}: a transaction was torn");
        before = n;
    }
    assert!(before > 0, "the writer never committed anything");
    eprintln!("{before} samples survived 50 kills");
}
