//! Accuracy against a reference (root): `ssdwatch probe run` and fio running the same pattern on
//! the same file, alternated, on a loop-mounted ext4 and in a directory on the machine's own disk.
//! A short run of benches/probe_vs_fio.sh; the p50s must agree within the bands below (median
//! over the rounds of each ssdwatch run's p50 over the adjacent fio run's, which drifting load
//! can't skew).

mod support;

use support::*;

/// Runs the comparison; returns (place, paired ratio) per place, and the script's output.
fn compare(rounds: u32) -> (Vec<(String, f64)>, String) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/probe_vs_fio.sh");
    let out = std::process::Command::new("sh")
        .arg(script)
        .env("SSDWATCH", bin())
        .env("ROUNDS", rounds.to_string())
        .env("OPS", "1000")
        .env("KINDS", "sync_write_4k")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ratios: Vec<(String, f64)> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("PAIRED sync_write_4k "))
        .map(|l| {
            let (place, r) = l.rsplit_once(' ').unwrap();
            (place.to_string(), r.parse().unwrap())
        })
        .collect();
    assert_eq!(ratios.len(), 2, "loop ext4 and root disk: {stdout}");
    (ratios, stdout)
}

/// Allowed ssdwatch/fio ratio: the ±15% target, on the loop device (direct I/O to its backing
/// file) and on the root disk alike. Runs are 1000 writes long: in short runs the first I/Os of
/// a freshly started process weigh on the p50 (for both tools, but not equally), which had put
/// the ratio anywhere in 0.95-1.28 with 150 writes; with 1000 it has stayed within 0.92-1.08.
const BAND: std::ops::RangeInclusive<f64> = 0.85..=1.15;

#[test]
fn sync_write_p50_within_15_percent_of_fio_on_loop_ext4_and_on_the_root_disk() {
    if !require_root("probe vs fio")
        || !require_cmd("probe vs fio", "fio", "fio")
        || !require_cmd("probe vs fio", "python3", "python3")
    {
        return;
    }
    let within = |r: &[(String, f64)]| r.iter().all(|(_, x)| BAND.contains(x));
    // A shared machine's fsync latency swings with everyone else's writes: when the short
    // comparison is off, alternate more runs before judging.
    let (mut ratios, mut out) = compare(25);
    print!("{out}");
    if !within(&ratios) {
        (ratios, out) = compare(41);
        print!("{out}");
    }
    for (place, r) in &ratios {
        assert!(
            BAND.contains(r),
            "{place}: ssdwatch/fio p50 ratio {r}, allowed {BAND:?}"
        );
    }
}
