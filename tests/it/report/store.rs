//! `ssdwatch report` on real stores: a month with a known story reads back as that story, a
//! brand-new or empty store says what it can't know yet, and the report reads the store while
//! the daemon writes it.

#![allow(clippy::field_reassign_with_default)]

use crate::support::story;

use crate::support::story::{DAY, Story};
use crate::support::*;
use ssdwatch::config::Config;
use ssdwatch::history::{HistoryConfig, Store, store::FILE_NAME};
use std::process::Command;
use std::time::Duration;

fn report(store: &std::path::Path, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin())
        .args(["report", "--store"])
        .arg(store)
        .args(extra)
        .output()
        .expect("run ssdwatch report");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn close(got: f64, want: f64, rel: f64) -> bool {
    (got / want - 1.0).abs() <= rel
}

#[test]
fn a_month_of_history_reads_back_as_its_story() {
    let dir = tempfile::tempdir().unwrap();
    const DAYS: i64 = 35;
    let s = Story::small(DAYS);
    let trims = (0..DAYS * 288)
        .filter(|i| Story::is_trim(s.start() + i * 300))
        .count();
    drop(s.store(dir.path()));
    let path = dir.path().join(FILE_NAME);
    let now = s.end;
    let r = ssdwatch::cli::report::report_of(&path, "db1", now, &Config::default()).unwrap();

    // The database filesystem: 90 % full, growing 0.6 TB / 35 days = 17 GB a day, so full in
    // about (100 GB - the 2 GB daily excursion) / 17 GB/day ≈ 5.7 days.
    let fs = r
        .filesystems
        .iter()
        .find(|f| f.mountpoint == story::DB_MOUNT)
        .expect("the database filesystem");
    assert!(close(fs.fill_ratio.unwrap(), 0.9, 0.01), "{fs:?}");
    let growth = 0.6 * story::SIZE / DAYS as f64;
    assert!(
        close(fs.growth_7d_bytes_per_day.unwrap(), growth, 0.05),
        "{fs:?}"
    );
    assert!(
        close(fs.growth_30d_bytes_per_day.unwrap(), growth, 0.05),
        "{fs:?}"
    );
    // The mount's date is the earliest of its layers': the thin pool under it, with 40 GB
    // free at the same 17 GB a day, runs out in 2.4 days, before the filesystem would (in
    // about (100 GB - the 2 GB daily excursion) / 17 GB/day ≈ 5.7 days).
    let full = fs.predicted_full_unix.expect("a full date");
    let want = s.pool_full();
    assert!(
        (full - want).abs() <= DAY,
        "full at {full}, want the pool's {want}: {fs:?}"
    );
    let fs_own = now + ((0.1 * story::SIZE - 2e9) / growth * DAY as f64) as i64;
    assert!(
        full < fs_own - 2 * DAY,
        "{full} vs the filesystem's own {fs_own}"
    );
    assert_eq!(
        fs.full_layer.as_deref(),
        Some(format!("thin pool {}", story::THIN_POOL).as_str())
    );
    // One point per UTC day the story's samples touch ([start, end): 36 days, or 35 when it
    // ends on a midnight).
    let days_touched = (s.end - 1).div_euclid(DAY) - s.start().div_euclid(DAY) + 1;
    assert_eq!(fs.usage.len() as i64, days_touched);
    // The quiet root filesystem: flat, so no date, and the report says why.
    let root = r.filesystems.iter().find(|f| f.mountpoint == "/").unwrap();
    assert_eq!(root.predicted_full_unix, None);
    assert_eq!(root.full_note.as_deref(), Some("not growing: no full date"));
    assert!(root.layers.is_empty(), "nothing below the root filesystem");
    // Below the database filesystem: the thin pool, with less free than the filesystem shows,
    // runs out first.
    let layers: Vec<(String, bool)> = fs.layers.iter().map(|l| (l.title(), l.limiting)).collect();
    assert_eq!(
        layers,
        [
            ("filesystem".to_string(), false),
            (format!("thin pool {}", story::THIN_POOL), true)
        ]
    );
    let pool = fs.runs_out_first().expect("a layer runs out first");
    assert_eq!(pool.avail_bytes, story::THIN_POOL_FREE as f64);
    let pool_fill = 1.0 - story::THIN_POOL_FREE as f64 / story::THIN_POOL_SIZE as f64;
    assert!(close(pool.fill_ratio.unwrap(), pool_fill, 1e-9), "{pool:?}");
    assert!(fs.layers[0].avail_bytes > pool.avail_bytes);

    // What fills it: the WAL behind the failing archiver, four fifths of the last day's growth.
    let grew = fs.used_growth_1d_bytes.expect("a day's growth");
    assert!(close(grew, s.growth_per_day(), 0.02), "{grew}");
    let parts: Vec<&str> = fs.filling.iter().map(|c| c.component.as_str()).collect();
    assert_eq!(parts, ["wal", "relations"], "the fastest-growing first");
    let wal = &fs.filling[0];
    assert_eq!(
        (wal.database.as_str(), wal.kind.as_str()),
        (story::PG_DATA, "postgresql")
    );
    let last = s.end - 900;
    assert_eq!(wal.bytes, s.wal(last).floor());
    assert!(
        close(wal.growth_1d_bytes.unwrap(), 0.8 * s.growth_per_day(), 0.05),
        "{wal:?}"
    );
    let share = wal.share_1d.unwrap();
    assert!(close(share, 0.8, 0.06), "{wal:?}");
    // A week ago the archiver still worked: the WAL grew by what it gained since it failed.
    assert!(
        close(
            wal.growth_7d_bytes.unwrap(),
            s.wal(last) - story::WAL_BASE,
            0.01
        ),
        "{wal:?}"
    );
    let rel = &fs.filling[1];
    assert!(close(rel.share_1d.unwrap(), 0.2, 0.06), "{rel:?}");
    let ready = s.database(last).facts.archive_ready_segments.unwrap();
    assert!(ready > 1000, "{ready}");
    let ready = ssdwatch::report::filling::thousands(ready);
    let top = fs.top_contributor.as_deref().expect("a top contributor");
    println!("what fills {}: {top}", story::DB_MOUNT);
    assert_eq!(
        top,
        format!(
            "{:.0} % of the last day's growth (+{}) is pg_wal (WAL) of {}; {ready} segments wait \
             for the archiver, the oldest 1 d 23 h",
            share * 100.0,
            ssdwatch::report::bytes(grew),
            story::PG_DATA
        )
    );
    // The quiet root filesystem: nothing of a database on it, no sentence.
    let root_fs = r.filesystems.iter().find(|f| f.mountpoint == "/").unwrap();
    assert!(root_fs.filling.is_empty() && root_fs.top_contributor.is_none());

    // The drive: 1 % of wear every 20 days, 50 GB a day, write amplification 2.5.
    let d = &r.drives[0];
    assert_eq!(d.device.as_deref(), Some("nvme0n1"));
    assert!(close(d.wear_rate_per_day.unwrap(), 0.0005, 0.25), "{d:?}");
    let wear_out = d.predicted_wear_out_unix.unwrap();
    // 11 % used, wearing a staircase of 1 % steps: the date is where the fitted rate takes
    // what is left to 100 % (~1,780 days at the story's 0.05 %/day).
    let rate = d.wear_rate_per_day.unwrap();
    let left_days = (1.0 - d.wear_used_ratio.unwrap()) / rate;
    let days = (wear_out - now) as f64 / DAY as f64;
    assert!(
        close(days, left_days, 0.02),
        "{days} days, {left_days} expected: {d:?}"
    );
    assert!(close(
        d.host_bytes_per_day_30d.unwrap(),
        story::HOST_PER_DAY,
        0.01
    ));
    assert!(close(d.write_amplification_30d.unwrap(), story::WA, 0.001));
    assert_eq!(d.discard_bursts, trims, "Sundays in {DAYS} days");
    // Its health from the store: 2 error-log entries and 20 minutes above the warning
    // temperature in the last 7 days.
    assert_eq!(
        d.health,
        ssdwatch::report::DriveHealth {
            error_log_entries: Some(16.0),
            error_log_entries_new_7d: Some(2.0),
            self_test: Some("short passed".into()),
            self_test_age_seconds: d.health.self_test_age_seconds,
            temperature_celsius: Some(40.0),
            temperature_warning_celsius: Some(70.0),
            above_warning_seconds_7d: Some(1200.0),
            durability: Some("none".into()),
            layer_errors_new_7d: None,
            layer_errors_grown: Vec::new(),
        }
    );
    assert!(d.health.self_test_age_seconds.is_some());
    assert!(trims >= 5);

    // Latency by fill: flat 100 µs below 80 %, then 100 µs × (1 + 10 × (fill − 0.8)), whose
    // median in a 5 % bin is its value at the bin's middle (the fill rises linearly).
    let g = &r.degradation[0];
    assert_eq!(g.mountpoint.as_deref(), Some(story::DB_MOUNT));
    assert_eq!(g.device.as_deref(), Some("nvme0n1"));
    let bins: Vec<&str> = g
        .curve
        .iter()
        .map(|b| ssdwatch::history::curve::FILL_BIN_LABELS[b.bin])
        .collect();
    assert_eq!(
        bins,
        [
            "0.30-0.40",
            "0.40-0.50",
            "0.50-0.60",
            "0.60-0.70",
            "0.70-0.80",
            "0.80-0.85",
            "0.85-0.90"
        ]
    );
    for b in &g.curve[..5] {
        assert!(close(b.p50_seconds, 100e-6, 0.011), "{b:?}");
    }
    assert!(
        close(g.curve[5].p50_seconds, Story::latency(0.825), 0.02),
        "{:?}",
        g.curve[5]
    );
    assert!(
        close(g.curve[6].p50_seconds, Story::latency(0.875), 0.02),
        "{:?}",
        g.curve[6]
    );
    assert!(close(
        g.curve[6].p99_seconds.unwrap(),
        4.0 * Story::latency(0.875),
        0.02
    ));
    // Rising with fill, as the story says.
    assert!(g.curve[6].p50_seconds > g.curve[5].p50_seconds);
    assert!(g.curve[5].p50_seconds > g.curve[4].p50_seconds);
    // TRIM: the hour after each fstrim runs at 0.6 × the hour before (whose fill is within a
    // hair of it); idle: 0.8 ×.
    assert_eq!(g.trim.len(), trims, "{:?}", g.trim);
    for t in &g.trim {
        assert!(close(t.ratio, 0.6, 0.01), "{t:?}");
        assert_eq!((t.runs_before, t.runs_after), (12, 12));
    }
    assert!(g.idle.len() as i64 >= DAYS - 1, "{}", g.idle.len());
    for t in &g.idle {
        // Above 80 % the fill's rise over the 2.5 hours around a rest adds up to 1.1 %.
        assert!(close(t.ratio, 0.8, 0.015), "{t:?}");
    }

    // The text and JSON say the same.
    let (code, text, err) = report(&path, &[]);
    assert_eq!(code, 0, "{err}");
    let fill = format!("fill {}", ssdwatch::report::pct(fs.fill_ratio.unwrap()));
    let full = format!(
        "predicted full: {} (thin pool {} runs out first)",
        ssdwatch::report::date(full),
        story::THIN_POOL
    );
    for want in [
        "FILESYSTEMS",
        story::DB_MOUNT,
        &fill,
        &full,
        "DRIVES",
        "nvme0n1  SAMSUNG MZQL23T8HCLS-00A07",
        "write amplification (30 days) 2.50",
        "discard burst(s) recorded",
        "recovery (sync_write_4k) after the last one: 0.60",
        "0.85-0.90",
        "layers below (runs out first: thin pool vg0-pool-tpool, 40.00 GB free):",
        "<- runs out first",
        "what fills it: ",
        "WHAT IS FILLING IT",
        "pg_wal (WAL)",
        "error log 16 (2 new in 7 days)",
        "! 2 new error-log entries in 7 days",
        "! 20 min above its warning temperature in 7 days",
    ] {
        assert!(text.contains(want), "{want:?} missing in:\n{text}");
    }
    let (code, json, err) = report(&path, &["--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).expect("report --json is JSON");
    let fsj = v["filesystems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["mountpoint"] == story::DB_MOUNT)
        .unwrap();
    assert_eq!(fsj["predicted_full_unix"].as_i64(), fs.predicted_full_unix);
    assert_eq!(
        fsj["full_layer"],
        format!("thin pool {}", story::THIN_POOL).as_str()
    );
    assert_eq!(fsj["layers"][1]["layer"], "thin_pool");
    assert_eq!(fsj["layers"][1]["name"], story::THIN_POOL);
    assert_eq!(fsj["layers"][1]["limiting"], true);
    assert_eq!(v["degradation"][0]["probe"], "sync_write_4k");
    assert!(close(
        v["degradation"][0]["trim"][trims - 1]["ratio"]
            .as_f64()
            .unwrap(),
        0.6,
        0.01
    ));
}

#[test]
fn a_brand_new_or_empty_store_says_what_it_cannot_know_yet() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    // No file at all: a report that says so, exit 0, and no file created.
    let (code, text, err) = report(&path, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("NOT KNOWN YET"), "{text}");
    assert!(text.contains("nothing is known yet"), "{text}");
    assert!(!path.exists(), "the report must not create the store");
    // A store the daemon just created: tables, no rows.
    drop(Store::open(dir.path(), &HistoryConfig::default()).unwrap());
    let (code, json, err) = report(&path, &["--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let unknown: Vec<&str> = v["unknown"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u.as_str())
        .collect();
    assert_eq!(unknown.len(), 3, "{unknown:?}");
    assert!(unknown[0].starts_with("no filesystem samples yet"));
    assert!(unknown[1].starts_with("no SMART samples"));
    // This command's config has no probe target, which need not be the daemon's: it says
    // what it knows, and does not tell the user to configure one.
    assert!(
        unknown[2].starts_with("no probe run recorded yet"),
        "{unknown:?}"
    );
    assert!(!unknown[2].contains("configure"), "{unknown:?}");
    // A day-old store: figures, but no growth and no date yet, and the reason.
    let dir = tempfile::tempdir().unwrap();
    let day = Story::small(1);
    drop(day.store(dir.path()));
    let r = ssdwatch::cli::report::report_of(
        &dir.path().join(FILE_NAME),
        "db1",
        day.end,
        &Config::default(),
    )
    .unwrap();
    let fs = &r.filesystems[0];
    assert!(fs.fill_ratio.is_some());
    assert_eq!(fs.predicted_full_unix, None);
    assert!(
        fs.full_note
            .as_deref()
            .unwrap()
            .starts_with("not enough history yet"),
        "{fs:?}"
    );
    // Not a store: an error naming the file, exit 1.
    let bad = dir.path().join("garbage.db");
    std::fs::write(&bad, vec![0x5a; 8192]).unwrap();
    let (code, _, err) = report(&bad, &[]);
    assert_eq!(code, 1);
    assert!(err.contains("garbage.db"), "{err}");
}

#[test]
fn the_report_reads_the_store_while_the_daemon_writes_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Config::default();
    c.state_dir = dir.path().to_path_buf();
    c.collectors.smart.enabled = false;
    c.collectors.probe.enabled = false;
    c.collectors.filesystem.interval = Duration::from_secs(1);
    c.collectors.diskstats.interval = Duration::from_secs(1);
    c.history.flush_interval = Duration::from_secs(1);
    c.history.raw_interval = Duration::from_secs(1);
    let daemon = Daemon::start(c, ssdwatch::Roots::default());
    let path = dir.path().join(FILE_NAME);
    let written = |m: &str| value(m, "ssdwatch_history_records_written_total").unwrap_or(0.0);
    let m = daemon.wait_metrics("records written", Duration::from_secs(20), |m| {
        written(m) > 0.0
    });
    let before = written(&m);
    // Reports back to back while the daemon commits every second: each succeeds, sees the
    // root filesystem, and the daemon goes on writing.
    for _ in 0..5 {
        let (code, json, err) = report(&path, &["--json"]);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert!(
            v["filesystems"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["mountpoint"] == "/" && f["fill_ratio"].as_f64().is_some()),
            "{json}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    daemon.wait_metrics("more records written", Duration::from_secs(20), |m| {
        written(m) > before
    });
    let m = daemon.get("/metrics");
    assert_eq!(
        value(&m, "ssdwatch_collector_success{collector=\"history\"}"),
        Some(1.0),
        "{m}"
    );
}

use crate::support::binary;

#[test]
fn the_daemon_serves_the_report_behind_the_same_basic_auth_as_metrics() {
    let host = binary::host();
    let state = host.path().join("state");
    drop(Story::small(35).store(&state));
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let web = host.path().join("web.yml");
    std::fs::write(&web, format!("basic_auth_users:\n  dba: {hash}\n")).unwrap();
    let d = binary::Daemon::start_in(host, &["--web.config.file", web.to_str().unwrap()]);
    assert_eq!(d.get_status("/report"), 401);
    assert_eq!(d.get_status("/metrics"), 401);
    let agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(30)))
        .http_status_as_error(false)
        .build()
        .new_agent();
    let auth = format!(
        "Basic {}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "dba:s3cret")
    );
    let get = |path: &str| {
        let mut r = agent
            .get(&format!("http://{}{path}", d.addr))
            .header("Authorization", &auth)
            .call()
            .unwrap();
        (r.status().as_u16(), r.body_mut().read_to_string().unwrap())
    };
    let (status, html) = get("/report");
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains("<svg") && html.contains(story::DB_MOUNT),
        "{html}"
    );
    assert!(
        html.contains("<path class=\"forecast\""),
        "the forecast lines"
    );
    assert!(
        html.contains(&format!(
            "Runs out first: <b>thin pool {}</b> (40.00 GB free)",
            story::THIN_POOL
        )),
        "the layers under the database filesystem: {html}"
    );
    let (status, json) = get("/report?format=json");
    assert_eq!(status, 200, "{json}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(
        v["filesystems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["mountpoint"] == story::DB_MOUNT && f["predicted_full_unix"].is_i64()),
        "{json}"
    );
    let (status, text) = get("/report?format=text");
    assert_eq!(status, 200);
    assert!(text.contains("LATENCY BY FILL"), "{text}");
    let (status, body) = get("/report?format=pdf");
    assert_eq!(status, 400);
    assert!(body.contains("one of html, json, text"), "{body}");

    // The daemon's first forecast pass (30 s after start) publishes the curve and the last
    // recoveries of the stored story on /metrics, and they pass promtool.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let metrics = loop {
        let (status, m) = get("/metrics");
        assert_eq!(status, 200);
        if m.contains("ssdwatch_trim_recovery_ratio{") {
            break m;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no curve metrics after 90 s:\n{m}"
        );
        std::thread::sleep(Duration::from_secs(1));
    };
    let l = format!(
        "device=\"nvme0n1\",mountpoint=\"{}\",probe=\"sync_write_4k\"",
        story::DB_MOUNT
    );
    let ratio = value(&metrics, &format!("ssdwatch_trim_recovery_ratio{{{l}}}")).unwrap();
    assert!((ratio - 0.6).abs() < 0.01, "{ratio}");
    let p50 = value(
        &metrics,
        &format!(
            "ssdwatch_degradation_latency_seconds{{{l},fill_bin=\"0.85-0.90\",quantile=\"0.5\"}}"
        ),
    )
    .unwrap();
    assert!((p50 / Story::latency(0.875) - 1.0).abs() < 0.02, "{p50}");
    let ours: String = metrics
        .lines()
        .filter(|l| l.contains("degradation") || l.contains("recovery"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_promtool_clean("the daemon's curve metrics", &ours);
}

#[test]
fn the_degradation_and_recovery_gauges_pass_promtool() {
    if !require_cmd(
        "the_degradation_and_recovery_gauges_pass_promtool",
        "promtool",
        "prometheus",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = Story::small(35);
    let store = s.store(dir.path());
    let groups = ssdwatch::history::degradation::analyse(&store, 0, s.end).unwrap();
    let mut m = ssdwatch::metrics::MetricSet::new();
    ssdwatch::history::degradation::push_metrics(&groups, &mut m);
    let mut text = String::new();
    ssdwatch::render::render_families(&mut text, m.families());
    // 7 bins with runs × 2 quantiles, and one TRIM and one idle recovery with their times.
    assert_eq!(
        text.matches("ssdwatch_degradation_latency_seconds{")
            .count(),
        14,
        "{text}"
    );
    for name in [
        "ssdwatch_trim_recovery_ratio{",
        "ssdwatch_trim_recovery_event_timestamp_seconds{",
        "ssdwatch_idle_recovery_ratio{",
        "ssdwatch_idle_recovery_event_timestamp_seconds{",
    ] {
        assert_eq!(text.matches(name).count(), 1, "{name}: {text}");
    }
    assert_promtool_clean("degradation gauges", &text);
}

/// Performance-full on the month's story: commits rise from 100 µs below 80 % fill to 175 µs at
/// 85-90 %, and the filesystem has reached 90 %. At the default 3× the curve never crosses, and
/// the report says how far it has seen instead of guessing; at 1.5× (configured on the target)
/// it crosses at 85 %, which the filesystem is past already.
#[test]
fn commits_slow_past_a_fill_the_curve_has_seen_and_never_beyond() {
    let dir = tempfile::tempdir().unwrap();
    let s = Story::small(35);
    let store = s.store(dir.path());
    let path = dir.path().join(FILE_NAME);
    let now = s.end;
    use ssdwatch::history::slow::SlowFill;

    let r = ssdwatch::cli::report::report_of(&path, "db1", now, &Config::default()).unwrap();
    assert_eq!(r.performance_full.len(), 1, "{:?}", r.performance_full);
    let a = &r.performance_full[0];
    assert_eq!(a.mountpoint.as_deref(), Some(story::DB_MOUNT));
    match &a.slow {
        SlowFill::NotReached {
            max_fill,
            baseline_seconds,
            level_seconds,
        } => {
            assert!(close(*max_fill, 0.9, 0.01), "{a:?}");
            assert!(close(*baseline_seconds, 100e-6, 0.011), "{a:?}");
            assert!(close(*level_seconds, 3.0 * baseline_seconds, 1e-9), "{a:?}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        a.slow_at_unix, None,
        "no date for a fill the curve has not seen"
    );
    let (code, text, err) = report(&path, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("PERFORMANCE-FULL"), "{text}");
    // The level is 3× the sketch's baseline (within 1 % of 100 µs), written as the report does.
    let level = ssdwatch::report::latency(a.slow.level_seconds().unwrap());
    assert!(
        text.contains(&format!(
            "{}: commits never passed {level} on the fills seen: not reached at 90.0 % fill",
            story::DB_MOUNT
        )),
        "{text}"
    );

    let (code, json, err) = report(&path, &["--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).expect("report --json is JSON");
    let pf = &v["performance_full"][0];
    assert_eq!(pf["slow"]["state"], "not_reached", "{pf}");
    assert!(
        close(pf["slow"]["max_fill"].as_f64().unwrap(), 0.9, 0.01),
        "{pf}"
    );
    assert!(pf["slow_at_unix"].is_null(), "{pf}");

    // The target's own level: 1.5× the baseline, 150 µs; the 85-90 % bin's 175 µs crosses it.
    let mut cfg = Config::default();
    cfg.collectors
        .probe
        .targets
        .push(ssdwatch::probe::TargetConfig {
            path: story::TARGET.into(),
            slow_latency_factor: 1.5,
            ..Default::default()
        });
    let r = ssdwatch::cli::report::report_of(&path, "db1", now, &cfg).unwrap();
    let a = &r.performance_full[0];
    match &a.slow {
        SlowFill::Reached {
            fill, p50_seconds, ..
        } => {
            assert_eq!(*fill, 0.85, "{a:?}");
            assert!(close(*p50_seconds, Story::latency(0.875), 0.02), "{a:?}");
        }
        other => panic!("{other:?}"),
    }
    // The filesystem is at 90 % and growing: past the slow fill already, so the date is now
    // (never one in the past), before the predicted full date.
    assert_eq!(a.slow_at_unix, Some(now));
    let full = r
        .filesystems
        .iter()
        .find(|f| f.mountpoint == story::DB_MOUNT)
        .and_then(|f| f.predicted_full_unix)
        .unwrap();
    assert_eq!(a.full_at_unix, Some(full));
    assert!(ssdwatch::report::performance_full_line(a).ends_with("; already there"));

    // What the forecast pass exports from the same store: the five gauges pass promtool.
    let groups = ssdwatch::history::degradation::analyse(&store, 0, now).unwrap();
    let mut forecasts = std::collections::BTreeMap::new();
    for f in &r.filesystems {
        forecasts.insert(f.mountpoint.clone(), f.forecast.clone());
    }
    let levels = ssdwatch::history::slow::levels_of(&cfg.collectors.probe.targets);
    let assessed = ssdwatch::history::slow::assess(&groups, &forecasts, &levels, now);
    let mut m = ssdwatch::metrics::MetricSet::new();
    ssdwatch::history::slow::push_metrics(&assessed, &mut m);
    let mut text = String::new();
    ssdwatch::render::render_families(&mut text, m.families());
    assert!(
        text.contains(&format!(
            "ssdwatch_probe_slow_fill_ratio{{device=\"nvme0n1\",mountpoint=\"{}\"}} 0.85",
            story::DB_MOUNT
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "ssdwatch_probe_predicted_slow_timestamp_seconds{{device=\"nvme0n1\",mountpoint=\"{}\"}} {now}",
            story::DB_MOUNT
        )),
        "{text}"
    );
    assert!(
        !text.contains("ssdwatch_probe_curve_max_fill_ratio{"),
        "crossed: no 'not reached' series: {text}"
    );
    if require_cmd(
        "commits_slow_past_a_fill_the_curve_has_seen_and_never_beyond",
        "promtool",
        "prometheus",
    ) {
        assert_promtool_clean("performance-full gauges", &text);
    }
}

/// The daemon's forecast pass exports the mount's date as the report gives it: the earliest of
/// its layers', the thin pool's, which runs out days before the filesystem on it would.
#[test]
fn the_daemons_predicted_full_gauge_is_the_thin_pools_date_as_the_reports() {
    let host = binary::host();
    let state = host.path().join("state");
    let s = Story::small(35);
    drop(s.store(&state));
    let db = state.join(FILE_NAME);
    let d = binary::Daemon::start_in(host, &[]);
    // The first forecast pass comes 30 s after the start.
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let gauge = loop {
        let m = d.metrics();
        if let Some(v) = value_matching(
            &m,
            "ssdwatch_filesystem_predicted_full_timestamp_seconds",
            &format!("mountpoint=\"{}\"", story::DB_MOUNT),
        ) {
            break v as i64;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no date of {}: {}",
            story::DB_MOUNT,
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let truth = s.pool_full();
    assert!(
        (gauge - truth).abs() <= DAY,
        "exported {gauge}, the pool runs out at {truth}"
    );
    let (code, json, err) = report(&db, &["--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let fs = v["filesystems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["mountpoint"] == story::DB_MOUNT)
        .cloned()
        .unwrap();
    // The same code on the same days: the same date (the report is made a little later; the
    // long-term leg counts from its last day, so it may move by the minutes between).
    let reported = fs["predicted_full_unix"].as_i64().expect("a date");
    assert!((reported - gauge).abs() <= 3600, "{reported} vs {gauge}");
    assert_eq!(
        fs["full_layer"],
        format!("thin pool {}", story::THIN_POOL).as_str()
    );
}

/// The host: a thin pool at 94 % under an ext4 df shows at 23 %. The daemon stores
/// the mount's effective free bytes (its forecast must see the pool), and the stack with the
/// filesystem's own: the report says df's 23 % and the effective 94 % with the pool's name,
/// never the filesystem as 79 % or 94 % full.
#[test]
fn a_thin_pool_at_94_percent_under_an_ext4_at_23_is_an_effective_fill_not_a_full_filesystem() {
    use ssdwatch::history::{FsKey, FsLayers, FsSample, LayerRow};
    let dir = tempfile::tempdir().unwrap();
    let now = crate::support::unix_now() as i64;
    let gb = 1_000_000_000u64;
    let key = FsKey {
        mountpoint: "/mnt/db".into(),
        uuid: None,
    };
    {
        let mut store = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
        let t = now - 600;
        store
            .record_fs(&[FsSample {
                key: key.clone(),
                device: "dm-3".into(),
                t,
                size_bytes: 100 * gb,
                // What the filesystem collector stores: the least of the stack's.
                avail_bytes: 6 * gb,
                free_bytes: 77 * gb,
                files_free: None,
            }])
            .unwrap();
        store
            .record_fs_layers(&[FsLayers {
                key: key.clone(),
                device: "dm-3".into(),
                t,
                layers: vec![
                    LayerRow {
                        layer: "filesystem".into(),
                        name: String::new(),
                        avail_bytes: 77 * gb,
                        size_bytes: Some(100 * gb),
                        limiting: false,
                    },
                    LayerRow {
                        layer: "thin_pool".into(),
                        name: "vg-pool-tpool".into(),
                        avail_bytes: 6 * gb,
                        size_bytes: Some(100 * gb),
                        limiting: true,
                    },
                ],
            }])
            .unwrap();
    }
    let (code, text, err) = report(&dir.path().join(FILE_NAME), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains(
            "fill 23.0 % (df); effective fill 94.0 %, thin pool vg-pool-tpool runs out first"
        ),
        "{text}"
    );
    assert!(
        !text.contains("79.3 %") && !text.contains("94.0 % (df)"),
        "{text}"
    );
    let (code, json, err) = report(&dir.path().join(FILE_NAME), &["--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let fs = &v["filesystems"][0];
    assert!(
        close(fs["fill_ratio"].as_f64().unwrap(), 0.23, 1e-9),
        "{fs}"
    );
    assert_eq!(fs["reserved_bytes"].as_f64(), Some(0.0), "{fs}");
}

/// Errors under the filesystem in the drive-health table: a btrfs device on nvme0n1 had 5
/// errors ten days ago (outside the window) and counts 320 reads more over the last 3 days
/// after a quiet week; a ZFS vdev on the same drive stays at its old 514; an md member on no
/// single drive gains 8. The drive's row says 320 new in 7 days and names the btrfs device;
/// the md member's are named as in no drive's row. Text, JSON and HTML say the same.
#[test]
fn errors_counted_under_the_filesystem_show_in_the_drive_health_table() {
    use ssdwatch::history::{LayerErrorCounts, LayerErrorKind, LayerErrorsSample};
    let dir = tempfile::tempdir().unwrap();
    let s = Story::small(14);
    let mut store = s.store(dir.path());
    let mut x = Vec::new();
    let mut t = s.start();
    while t < s.end {
        let recent = t >= s.end - 3 * DAY;
        let btrfs_read = if recent {
            5 + 320 * (t - (s.end - 3 * DAY)) / (3 * DAY)
        } else {
            5
        };
        // The last reading holds all 320.
        let btrfs_read = if t + 3600 >= s.end { 325 } else { btrfs_read };
        x.push(LayerErrorsSample {
            kind: LayerErrorKind::BtrfsDevice,
            container: "50bd3755-c9e5-4988-984e-568186d825d1".into(),
            member: "nvme0n1p2".into(),
            drive: Some("nvme0n1".into()),
            t,
            counts: LayerErrorCounts {
                read: Some(btrfs_read as u64),
                write: Some(0),
                checksum: Some(0),
                other: Some(0),
            },
        });
        x.push(LayerErrorsSample {
            kind: LayerErrorKind::ZfsVdev,
            container: "tank".into(),
            member: "nvme0n1p3".into(),
            drive: Some("nvme0n1".into()),
            t,
            counts: LayerErrorCounts {
                read: Some(0),
                write: Some(0),
                checksum: Some(514),
                other: None,
            },
        });
        x.push(LayerErrorsSample {
            kind: LayerErrorKind::MdMember,
            container: "md2".into(),
            member: "dm-4".into(),
            drive: None,
            t,
            counts: LayerErrorCounts {
                read: Some(if recent { 8 } else { 0 }),
                ..Default::default()
            },
        });
        t += 3600;
    }
    store.record_layer_errors(&x).unwrap();
    drop(store);
    let path = dir.path().join(FILE_NAME);
    let (code, json, err) = report(&path, &["--json"]);
    assert_eq!(code, 0, "{err}");
    let r: serde_json::Value = serde_json::from_str(&json).unwrap();
    let d = &r["drives"][0];
    assert_eq!(d["device"], "nvme0n1");
    let h = &d["health"];
    assert_eq!(h["layer_errors_new_7d"], 320.0, "{h}");
    let grown = h["layer_errors_grown"].as_array().unwrap();
    assert_eq!(grown.len(), 1, "only the btrfs device grew: {h}");
    assert_eq!(grown[0]["kind"], "btrfs_device");
    assert_eq!(grown[0]["member"], "nvme0n1p2");
    assert_eq!(grown[0]["new_7d"], 320.0);
    let unknown: Vec<&str> = r["unknown"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u.as_str())
        .collect();
    let md =
        "md member dm-4 of md2: 8 errors in 7 days on no single drive (not in the drive table)";
    assert!(unknown.contains(&md), "{unknown:?}");
    // The other drive-less components and the quiet vdev are not in that list.
    assert_eq!(
        unknown
            .iter()
            .filter(|u| u.contains("on no single drive"))
            .count(),
        1
    );

    let (code, text, err) = report(&path, &[]);
    assert_eq!(code, 0, "{err}");
    for want in [
        "errors under the filesystem (btrfs, ZFS, md on it): 320 new in 7 days",
        "! 320 errors counted under the filesystem in 7 days (btrfs device nvme0n1p2 of 50bd3755 320)",
        md,
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    let page = dir.path().join("report.html");
    let out = Command::new(bin())
        .args(["report", "--store"])
        .arg(&path)
        .arg("--html")
        .arg(&page)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("320 errors counted under the filesystem in 7 days (btrfs device nvme0n1p2 of 50bd3755 320)"),
        "the drive-health cell"
    );
}
