//! The product's story on a drive whose behaviour we know: a QEMU guest's NVMe drive is the
//! simulated SSD of tests/vm/ftl/ftl.py (docs/ftl-model.md), and the real daemon probes an ext4
//! filesystem on it while the guest fills it to 95 %, deletes everything, leaves it idle and
//! trims it (tests/vm/guest-degrade.sh). Every check reads the daemon's own metrics: the drive
//! gets slow as it fills, stays slow after the delete, partly recovers when idle, and recovers
//! after fstrim, and the discard counter agrees with fstrim.
//!
//! It boots a VM for about four minutes under software emulation, so it is opt-in:
//! `cargo test --test vm_degrade -- --ignored`. `SSDWATCH_VM_DEGRADE_RESULTS=DIR` checks what an
//! earlier run left in DIR instead of booting.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const MOUNTPOINT: &str = "/mnt/ftl";
/// How much slower the full (and the deleted-but-untrimmed) drive must write than the empty one.
const SLOWDOWN: f64 = 5.0;

fn guest() -> &'static Path {
    static RESULTS: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let r = RESULTS.get_or_init(|| {
        if let Some(dir) = std::env::var_os("SSDWATCH_VM_DEGRADE_RESULTS") {
            return Ok(PathBuf::from(dir));
        }
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("vm-degrade");
        let _ = std::fs::remove_dir_all(&out);
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vm/degrade.sh");
        let status = Command::new(&script)
            .arg(env!("CARGO_BIN_EXE_ssdwatch"))
            .arg(&out)
            .status()
            .map_err(|e| format!("running {}: {e}", script.display()))?;
        match status.code() {
            Some(0) => Ok(out),
            Some(77) => Err(format!(
                "{} found a prerequisite missing (see its message above)",
                script.display()
            )),
            _ => Err(format!(
                "{} failed ({status}); console log: {}",
                script.display(),
                out.join("console.log").display()
            )),
        }
    });
    match r {
        Ok(p) => p,
        Err(e) => panic!("the degradation guest did not run: {e}"),
    }
}

fn read(name: &str) -> String {
    let path = guest().join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("the guest left no {}: {e}", path.display()))
}

/// One scrape of the daemon's /metrics in the guest, with the guest's wall-clock time.
struct Scrape {
    /// The step of the story: empty, fill20 … fill95, deleted, idle, trimmed, trimmed2.
    step: String,
    file: String,
    time: f64,
    text: String,
}

impl Scrape {
    /// The value of the first series of `family` whose label text contains every part.
    fn get(&self, family: &str, parts: &[&str]) -> Option<f64> {
        self.text
            .lines()
            .filter(|l| {
                l.starts_with(&format!("{family}{{")) || l.starts_with(&format!("{family} "))
            })
            .filter(|l| parts.iter().all(|p| l.contains(p)))
            .find_map(|l| l.rsplit(' ').next()?.parse().ok())
    }

    fn must(&self, family: &str, parts: &[&str]) -> f64 {
        self.get(family, parts)
            .unwrap_or_else(|| panic!("{}: no {family} with {parts:?}", self.file))
    }

    /// p50 of the last sync_write_4k run: the daemon's per-run quantile.
    fn p50(&self) -> f64 {
        self.must(
            "ssdwatch_probe_last_latency_seconds",
            &[r#"probe="sync_write_4k""#, r#"quantile="0.5""#, &mp()],
        )
    }

    fn fill(&self) -> f64 {
        self.must("ssdwatch_probe_context_fill_ratio", &[&mp()])
    }
}

fn mp() -> String {
    format!(r#"mountpoint="{MOUNTPOINT}""#)
}

/// Every scrape, in the order taken (scrapes.txt: "FILE UNIX_TIME UPTIME").
fn scrapes() -> &'static [Scrape] {
    static S: OnceLock<Vec<Scrape>> = OnceLock::new();
    S.get_or_init(|| {
        read("scrapes.txt")
            .lines()
            .map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                assert!(w.len() >= 2, "scrapes.txt: {l}");
                let file = w[0].to_string();
                let step = file
                    .trim_end_matches(".prom")
                    .splitn(3, '-')
                    .nth(2)
                    .unwrap_or_else(|| panic!("scrapes.txt: unexpected name {file}"))
                    .to_string();
                Scrape {
                    step,
                    time: w[1]
                        .parse()
                        .unwrap_or_else(|e| panic!("scrapes.txt: {l}: {e}")),
                    text: read(&file),
                    file,
                }
            })
            .collect()
    })
}

fn step(name: &str) -> &'static Scrape {
    scrapes()
        .iter()
        .find(|s| s.step == name)
        .unwrap_or_else(|| panic!("the guest took no scrape '{name}' (see log.txt)"))
}

fn ms(s: f64) -> String {
    format!("{:.2} ms", s * 1e3)
}

/// The run's figures, printed by every test that uses them (`--nocapture` shows them).
fn table() -> String {
    let empty = step("empty").p50();
    let mut t = String::from("step       fill    sync_write_4k p50   × empty\n");
    for s in scrapes() {
        let p = s.p50();
        t += &format!(
            "{:<10} {:>5.1} % {:>12} {:>12.1}\n",
            s.step,
            100.0 * s.fill(),
            ms(p),
            p / empty
        );
    }
    t
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test vm_degrade -- --ignored"]
fn the_drive_gets_slow_as_it_fills() {
    let t = table();
    println!("{t}");
    let empty = step("empty").p50();
    // Every step was reached, as the daemon saw it.
    for pct in [20, 40, 60, 80, 90, 95] {
        let s = step(&format!("fill{pct}"));
        let fill = s.fill();
        assert!(
            (fill - f64::from(pct) / 100.0).abs() < 0.03,
            "{}: fill ratio {fill} for the {pct} % step\n{t}",
            s.file
        );
    }
    let full = scrapes()
        .iter()
        .filter(|s| s.step.starts_with("fill") && s.fill() >= 0.9)
        .map(Scrape::p50)
        .fold(0.0, f64::max);
    assert!(
        full >= SLOWDOWN * empty,
        "at ≥ 90 % fill the write probe's p50 is {} , the empty drive's {}: less than {SLOWDOWN}×\n{t}",
        ms(full),
        ms(empty)
    );
    // Low fill is no slower than empty: the rise comes with the fill, not with time.
    let low = step("fill20").p50();
    assert!(low < 2.0 * empty, "20 % fill: {} \n{t}", ms(low));
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test vm_degrade -- --ignored"]
fn a_delete_without_trim_leaves_the_drive_slow() {
    let t = table();
    let empty = step("empty").p50();
    let deleted = step("deleted");
    // The filesystem is empty again, the drive does not know it.
    assert!(
        deleted.fill() < 0.1,
        "fill after the delete: {}",
        deleted.fill()
    );
    assert!(
        deleted.p50() >= SLOWDOWN * empty,
        "after the delete the p50 is {}, the empty drive's {}\n{t}",
        ms(deleted.p50()),
        ms(empty)
    );
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test vm_degrade -- --ignored"]
fn idle_time_brings_part_of_the_speed_back() {
    let t = table();
    let empty = step("empty").p50();
    let (deleted, idle) = (step("deleted").p50(), step("idle").p50());
    let idle_s: f64 = read("ftl-idle-seconds.txt")
        .trim()
        .parse()
        .expect("idle seconds");
    // The model's background GC ran (the drive saw no I/O for longer than its threshold) and
    // refilled part of the clean pool: faster than before the rest, but the live data it cannot
    // drop (deleted, not trimmed) leaves it short of the empty drive.
    let ctx = step("idle").must("ssdwatch_probe_context_idle_seconds", &[&mp()]);
    assert!(
        ctx >= idle_s,
        "the first run after the rest saw the drive idle {ctx} s, less than the model's {idle_s} s"
    );
    assert!(
        idle < 0.8 * deleted,
        "after the rest the p50 is {}, before it {}: no recovery\n{t}",
        ms(idle),
        ms(deleted)
    );
    assert!(
        idle > 1.5 * empty,
        "after the rest the p50 is {}, the empty drive's {}: a full recovery, the model predicts part\n{t}",
        ms(idle),
        ms(empty)
    );
}

/// Bytes fstrim -v reported: "/mnt/ftl: 93.4 MiB (97935360 bytes) trimmed" (util-linux).
fn fstrim_bytes() -> f64 {
    let text = read("fstrim.txt");
    let words: Vec<&str> = text.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| w.trim_end_matches(')') == "bytes")
        .unwrap_or_else(|| panic!("fstrim.txt: no byte count: {text}"));
    words[at - 1]
        .trim_start_matches('(')
        .parse()
        .unwrap_or_else(|e| panic!("fstrim.txt: {text}: {e}"))
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test vm_degrade -- --ignored"]
fn fstrim_brings_the_drive_back_and_is_counted_to_the_byte() {
    let t = table();
    let empty = step("empty").p50();
    let trimmed = step("trimmed");
    let trim_start: f64 = read("trim-start.txt").trim().parse().expect("trim start");
    // The first run after the trim: it ran after fstrim started and measured the discard.
    let ran = trimmed.must("ssdwatch_probe_last_run_timestamp_seconds", &[&mp()]);
    assert!(
        ran >= trim_start,
        "the last run at {ran} began before the trim at {trim_start}"
    );
    // Nothing discarded before fstrim (mkfs and the mount are nodiscard): a run that knows the
    // time since a discard began after the trim's.
    let since = trimmed.must("ssdwatch_probe_context_since_discard_seconds", &[&mp()]);
    assert!(
        since >= 0.0 && since < trimmed.time - trim_start + 1.0,
        "since discard {since} s"
    );
    assert!(
        trimmed.p50() <= 1.5 * empty,
        "the first run after fstrim: p50 {}, the empty drive's {}\n{t}",
        ms(trimmed.p50()),
        ms(empty)
    );
    // The daemon's discard counter grew by exactly what fstrim reported: mkfs and the mount
    // sent no discards, so fstrim's were the only ones.
    let dev = read("device.txt").trim().to_string();
    let d = format!(r#"device="{dev}""#);
    let m = "ssdwatch_disk_discarded_bytes_total";
    let grew = step("trimmed2").must(m, &[&d]) - step("idle").must(m, &[&d]);
    assert_eq!(
        grew,
        fstrim_bytes(),
        "{dev}: discarded bytes grew by {grew}"
    );
    assert_eq!(read("fstrim.rc").trim(), "0");
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test vm_degrade -- --ignored"]
fn no_probe_was_skipped_for_space_on_the_way_up() {
    let skipped = |s: &Scrape| {
        s.get(
            "ssdwatch_probe_skipped_total",
            &[&mp(), r#"reason="low_space""#],
        )
        .unwrap_or(0.0)
    };
    let (first, top) = (step("empty"), step("fill95"));
    assert_eq!(
        skipped(top),
        skipped(first),
        "probes skipped for low space between {} and {}",
        first.file,
        top.file
    );
    // And every step had its probe runs.
    let runs = |s: &Scrape| s.must("ssdwatch_probe_runs_total", &[&mp()]);
    for w in scrapes().windows(2) {
        assert!(
            runs(&w[1]) > runs(&w[0]),
            "no probe run between {} and {}",
            w[0].file,
            w[1].file
        );
    }
}

#[test]
#[ignore = "boots a QEMU guest; run with: cargo test --test vm_degrade -- --ignored"]
fn the_scenario_fits_its_time_budget() {
    let secs: f64 = read("scenario-seconds.txt")
        .trim()
        .parse()
        .expect("seconds");
    println!(
        "scenario {secs} s in the guest; {}; accel {}",
        read("timing.txt").trim(),
        read("accel.txt").trim()
    );
    // The target is four minutes under TCG; this bound catches a scenario that has grown.
    assert!(secs <= 360.0, "the scenario took {secs} s");
}
