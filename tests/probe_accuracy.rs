//! Accuracy against a reference (root): `ssdwatch probe run` and fio running the same pattern on
//! the same file, alternated, on a loop-mounted ext4 and in a directory on the machine's own disk.
//! A short run of benches/probe_vs_fio.sh; the p50s must agree within ±15% (median over the
//! rounds of each ssdwatch run's p50 over the adjacent fio run's, which drifting load can't skew).

mod probe_support;

use probe_support::*;

#[test]
fn sync_write_p50_agrees_with_fio_within_15_percent_on_loop_ext4_and_the_root_disk() {
    if !require_root("probe vs fio")
        || !require_cmd("probe vs fio", "fio")
        || !require_cmd("probe vs fio", "python3")
    {
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/probe_vs_fio.sh");
    // Single runs vary by 2x on a shared machine; many short alternated runs make medians stable.
    let out = std::process::Command::new("sh")
        .arg(script)
        .env("SSDWATCH", bin())
        .env("ROUNDS", "15")
        .env("OPS", "200")
        .env("KINDS", "sync_write_4k")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    print!("{stdout}");
    let ratios: Vec<(String, f64)> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("PAIRED sync_write_4k "))
        .map(|l| {
            let (place, r) = l.rsplit_once(' ').unwrap();
            (place.to_string(), r.parse().unwrap())
        })
        .collect();
    assert_eq!(ratios.len(), 2, "loop ext4 and root disk: {stdout}");
    for (place, r) in ratios {
        assert!(
            (0.85..=1.15).contains(&r),
            "{place}: ssdwatch/fio p50 ratio {r}"
        );
    }
}
