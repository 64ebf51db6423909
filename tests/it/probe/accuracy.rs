//! Accuracy against a reference (root): `ssdwatch probe run` and fio running the same pattern on
//! the same file, alternated, on a loop-mounted ext4 and in a directory on the machine's own disk.
//! A short run of benches/probe_vs_fio.sh; the p50s must agree within the bands below (median
//! over the rounds of each ssdwatch run's p50 over the adjacent fio run's, which drifting load
//! can't skew); where fio and a plain loop of the same syscalls disagree, the plain loop judges.

use crate::support::*;

/// One place's figures: ssdwatch/fio (paired), and with a plain loop as a third opinion,
/// ssdwatch/plain and fio/plain.
struct Place {
    name: String,
    paired: f64,
    plain: Option<(f64, f64)>,
}

/// Runs the comparison (`plain`: also time a plain loop); returns the figures per place, and
/// the script's output.
fn compare(rounds: u32, ops: u32, plain: bool) -> (Vec<Place>, String) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/probe_vs_fio.sh");
    let mut cmd = std::process::Command::new("sh");
    cmd.arg(script)
        .env("SSDWATCH", bin())
        .env("ROUNDS", rounds.to_string())
        .env("OPS", ops.to_string())
        .env("KINDS", "sync_write_4k");
    if plain {
        cmd.env("PLAIN", "1");
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let figures = |prefix: &str| -> Vec<(String, f64)> {
        stdout
            .lines()
            .filter_map(|l| l.strip_prefix(prefix))
            .map(|l| {
                let (place, r) = l.rsplit_once(' ').unwrap();
                (place.to_string(), r.parse().unwrap())
            })
            .collect()
    };
    let (ours_plain, fio_plain) = (
        figures("PLAIN sync_write_4k "),
        figures("FIOPLAIN sync_write_4k "),
    );
    let places: Vec<Place> = figures("PAIRED sync_write_4k ")
        .into_iter()
        .map(|(name, paired)| {
            let of = |v: &[(String, f64)]| v.iter().find(|(p, _)| *p == name).map(|(_, r)| *r);
            let plain = of(&ours_plain).zip(of(&fio_plain));
            Place {
                name,
                paired,
                plain,
            }
        })
        .collect();
    assert_eq!(places.len(), 2, "loop ext4 and root disk: {stdout}");
    if plain {
        assert!(
            places.iter().all(|p| p.plain.is_some()),
            "plain loop figures: {stdout}"
        );
    }
    (places, stdout)
}

/// Allowed ssdwatch/fio ratio: the ±15% target, on the loop device (direct I/O to its backing
/// file) and on the root disk alike. Runs are 500 or 1000 writes long: in short runs the first I/Os of
/// a freshly started process weigh on the p50 (for both tools, but not equally), which had put
/// the ratio anywhere in 0.95-1.28 with 150 writes; with 1000 it has stayed within 0.92-1.08.
const BAND: std::ops::RangeInclusive<f64> = 0.85..=1.15;

/// Whether ssdwatch agrees with the reference at this place: with fio; or, where fio itself
/// disagrees with a plain loop of the same syscalls by more than the band (fio's own per-I/O
/// work shows on a disk whose writes take under 100 us: a CI machine's root disk measured
/// fio 100 us against ssdwatch 83 us), with the plain loop.
fn agrees(p: &Place) -> bool {
    BAND.contains(&p.paired)
        || p.plain
            .is_some_and(|(ours, fio)| BAND.contains(&ours) && !BAND.contains(&fio))
}

#[test]
fn sync_write_p50_within_15_percent_of_fio_on_loop_ext4_and_on_the_root_disk() {
    if !require_root("probe vs fio")
        || !require_cmd("probe vs fio", "fio", "fio")
        || !require_cmd("probe vs fio", "python3", "python3")
    {
        return;
    }
    // A shared machine's fsync latency swings with everyone else's writes: when the short
    // comparison is off, alternate more and longer runs before judging. The first look is short (11 rounds of 500 writes: the median of 11 ratios holds within
    // the band on a quiet machine), with the plain loop from the start: on a disk whose writes
    // take under 100 us fio's own work always shows. Only a disagreement pays for the long one.
    let (mut places, mut out) = compare(11, 500, true);
    print!("{out}");
    if !places.iter().all(agrees) {
        (places, out) = compare(25, 1000, true);
        print!("{out}");
    }
    for p in &places {
        assert!(
            agrees(p),
            "{}: ssdwatch/fio p50 ratio {}, allowed {BAND:?}; against a plain loop \
             (ssdwatch/plain, fio/plain): {:?}",
            p.name,
            p.paired,
            p.plain
        );
    }
}
