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
        .env("OPS", "150")
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

/// Allowed ssdwatch/fio ratio per place: a guard against gross error (a probe timing the wrong
/// thing is off by 2x or more: reads of never-written extents gave 0.29). The ±15% target itself
/// is a benchmark figure (benches/probe_vs_fio.sh, reported in the README), not a timed test: on
/// a shared 2-core VM the paired ratio of sync_write_4k has ranged 0.99-1.20 on the root disk and
/// 0.95-1.28 on the loop device, whose flushes also go through the host filesystem's fsync.
fn band(place: &str) -> std::ops::RangeInclusive<f64> {
    if place.starts_with("/tmp/probe-vs-fio.") {
        0.7..=1.4
    } else {
        0.8..=1.25
    }
}

#[test]
fn sync_write_p50_agrees_with_fio_on_loop_ext4_and_on_the_root_disk() {
    if !require_root("probe vs fio")
        || !require_cmd("probe vs fio", "fio", "fio")
        || !require_cmd("probe vs fio", "python3", "python3")
    {
        return;
    }
    let within = |r: &[(String, f64)]| r.iter().all(|(p, x)| band(p).contains(x));
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
            band(place).contains(r),
            "{place}: ssdwatch/fio p50 ratio {r}, allowed {:?}",
            band(place)
        );
    }
}
