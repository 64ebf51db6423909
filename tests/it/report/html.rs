//! The HTML report as a browser shows it: a page made from a store with a known story is
//! opened in headless Chromium, which must find the charts' paths in its DOM and paint them
//! (the screenshot holds the measured lines' and the dashed forecast lines' colours); and a new
//! host's first minutes, served by a daemon that has committed nothing yet, drawn sensibly.

// Tests build configs field by field from the defaults; that reads better than one literal.
#![allow(clippy::field_reassign_with_default)]

use crate::support::browser::{chromium, count_colours, dom_of};
use crate::support::story::{self, DAY, Story};
use crate::support::*;
use ssdwatch::history::store::FILE_NAME;
use std::io::Write;
use std::process::Command;
use std::time::Duration;

#[test]
fn the_html_report_draws_its_charts_in_a_real_browser() {
    let test = "the_html_report_draws_its_charts_in_a_real_browser";
    if !require_cmd(test, "chromium", "chromium") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let story = Story::small(60);
    drop(story.store(dir.path()));
    let page = dir.path().join("report.html");
    html_report_of_store(dir.path(), &page);
    let html = std::fs::read_to_string(&page).unwrap();
    // Self-contained: no script, nothing fetched (the SVG namespace is a name, not a fetch).
    assert!(!html.contains("<script"), "no JavaScript");
    let without_ns = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    assert!(!without_ns.contains("http://") && !without_ns.contains("https://"));
    assert!(
        !html.contains(" src=") && !html.contains("<link"),
        "no external resource"
    );

    // The DOM Chromium built: every chart an <svg> with non-empty paths, the usage and wear
    // charts each with a dashed forecast line.
    let dom = dom_of(&page);
    let svgs = dom.matches("<svg").count();
    // 2 filesystems, 1 drive's wear, the latency curve, TRIM and idle recoveries.
    assert_eq!(svgs, 6, "{dom}");
    let paths_with = |class: &str| {
        dom.match_indices(&format!("<path class=\"{class}\" d=\"M"))
            .map(|(i, _)| {
                let d = &dom[i..];
                let d = &d[d.find("d=\"").unwrap() + 3..];
                d[..d.find('"').unwrap()].matches('L').count()
            })
            .collect::<Vec<_>>()
    };
    let measured = paths_with("measured");
    assert_eq!(measured.len(), 6, "{measured:?}");
    assert!(
        measured.iter().all(|&n| n >= 3),
        "each line has points: {measured:?}"
    );
    let forecast = paths_with("forecast");
    assert_eq!(forecast, vec![1, 1], "usage and wear forecasts");
    assert!(dom.contains("full 20"), "the predicted-full marker");
    // The headline date is the thin pool's, which runs out first (40 GB free at 10 GB a day,
    // where the filesystem has 100 GB): within a day of the story's truth, and said so.
    let pool = format!("</b> (thin pool {} runs out first)", story::THIN_POOL);
    let at = dom.find(&pool).expect("the date names the pool");
    let shown = &dom[dom[..at].rfind("<b>").unwrap() + 3..at];
    let truth = story.pool_full();
    let near: Vec<String> = [-DAY, 0, DAY]
        .iter()
        .map(|d| ssdwatch::report::date(truth + d))
        .collect();
    assert!(
        near.iter().any(|d| d == shown),
        "shown {shown}, the pool runs out {}",
        near[1]
    );
    assert!(
        dom.contains(&format!("full {shown} (thin pool {})", story::THIN_POOL)),
        "the chart's marker names the pool"
    );
    // The stack under the database filesystem, the thin pool marked as what runs out first.
    let layers = &dom[dom
        .find("<table class=\"layers\">")
        .expect("the layers table")..];
    let layers = &layers[..layers.find("</table>").unwrap()];
    assert_eq!(
        layers.matches("<tr").count(),
        3,
        "header, filesystem, pool: {layers}"
    );
    assert!(
        layers.contains("<tr class=\"warn\"><td>thin pool vg0-pool-tpool</td><td>40.00 GB</td><td>1.20 TB</td><td>96.7 %</td></tr>"),
        "{layers}"
    );
    assert!(dom.contains("Runs out first: <b>thin pool vg0-pool-tpool</b>"));
    // What fills it: the WAL behind the failing archiver, named by the forecast and in its
    // own section, the fastest-growing component first.
    assert!(dom.contains("<h2>What is filling it</h2>"), "{dom}");
    let filling = &dom[dom
        .find("<table class=\"filling\">")
        .expect("the filling table")..];
    let filling = &filling[..filling.find("</table>").unwrap()];
    assert_eq!(
        filling.matches("<tr").count(),
        3,
        "header, wal, relations: {filling}"
    );
    let first_row = &filling[filling.find("</tr>").unwrap()..];
    assert!(
        first_row.starts_with("</tr><tr><td>pg_wal (WAL)</td><td>/var/lib/postgresql/15/main</td>"),
        "{filling}"
    );
    assert!(first_row.contains("% of growth</td></tr>"), "{filling}");
    assert_eq!(
        dom.matches("segments wait for the archiver, the oldest 1 d 23 h")
            .count(),
        2,
        "by the forecast and over the table: {dom}"
    );

    // The pixels: Chromium painted the measured lines and the forecast lines.
    let shot = dir.path().join("report.png");
    let s = chromium(&[
        &format!("--screenshot={}", shot.display()),
        "--window-size=1000,3400",
        &format!("file://{}", page.display()),
    ]);
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    let counts = count_colours(
        &shot,
        &[(0x1f, 0x77, 0xb4), (0xd6, 0x27, 0x28), (0xff, 0x7f, 0x0e)],
    );
    assert!(counts[0] > 500, "measured lines painted: {counts:?}");
    assert!(counts[1] > 100, "forecast lines painted: {counts:?}");
    assert!(
        counts[2] > 100,
        "p99 and before-event lines painted: {counts:?}"
    );
    if let Some(to) = std::env::var_os("SSDWATCH_REPORT_EXAMPLE_PNG") {
        std::fs::copy(&shot, to).unwrap();
    }
}

/// The texts of the tick labels of one `<svg>` chart, in document order (a y tick, then an x
/// tick, five times).
fn ticks(svg: &str) -> Vec<String> {
    svg.match_indices("<text class=\"tick\"")
        .filter_map(|(i, _)| {
            let rest = &svg[i..];
            let v = &rest[rest.find('>')? + 1..];
            Some(v[..v.find('<')?].to_string())
        })
        .collect()
}

/// The checks of a young history's page as Chromium built it: no "(?)", no NaN, no advice to
/// configure; every chart has something drawn (a measured dot, or a line with more than one
/// point), five different x ticks, latency by fill on 0-100 %. Returns how many charts.
fn assert_drawn_sensibly(dom: &str) -> usize {
    assert!(!dom.contains("(?)"), "no unknown drive in a heading: {dom}");
    assert!(!dom.contains("NaN"), "{dom}");
    assert!(!dom.contains("configure"), "{dom}");
    let svgs: Vec<&str> = dom.split("<svg").skip(1).collect();
    for svg in &svgs {
        let svg = &svg[..svg.find("</svg>").unwrap()];
        let title = &svg[svg.find("<title>").unwrap() + 7..svg.find("</title>").unwrap()];
        let line = svg.split("<path class=\"measured\" d=\"").nth(1);
        assert!(
            svg.contains("<circle class=\"measured\"")
                || line.is_some_and(|d| d[..d.find('"').unwrap()].contains('L')),
            "{title}: something is drawn, not empty axes: {svg}"
        );
        let t = ticks(svg);
        assert_eq!(t.len(), 10, "{title}: {t:?}");
        let x: Vec<&str> = t.iter().skip(1).step_by(2).map(String::as_str).collect();
        let mut distinct = x.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), 5, "{title}: x ticks repeat: {x:?}");
        if title.contains("latency by fill") {
            assert_eq!(x, ["0 %", "25 %", "50 %", "75 %", "100 %"], "{title}");
        }
    }
    svgs.len()
}

/// A store holding a new host's first 15 minutes (written through the store's own code, as the
/// daemon's first commit writes it): a filesystem with a root reserve sampled 3 times, a drive
/// known by its serial only, 3 runs of each default probe kind at 16-64 writes. In Chromium the
/// page has its usage chart, its wear chart and a latency-by-fill chart per kind, each drawn
/// sensibly; no p99 is shown for runs too short to have one. No root needed.
#[test]
fn a_store_with_fifteen_minutes_of_data_draws_sensibly_in_a_real_browser() {
    use ssdwatch::history::{
        DriveKey, DriveSample, FsKey, FsSample, HistoryConfig, ProbeRecord, Store,
    };
    use ssdwatch::probe::ProbeKind;
    let test = "a_store_with_fifteen_minutes_of_data_draws_sensibly_in_a_real_browser";
    if !require_cmd(test, "chromium", "chromium") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let drive = DriveKey {
        wwn: None,
        serial: Some("S6B0NX0T000200".into()),
        model: Some("SAMSUNG MZQL23T8HCLS-00A07".into()),
    };
    {
        let mut store = Store::open(dir.path(), &HistoryConfig::default()).unwrap();
        let gb = 1_000_000_000u64;
        let fs: Vec<FsSample> = (0..3)
            .map(|i| FsSample {
                key: FsKey {
                    mountpoint: "/var/lib/postgresql".into(),
                    uuid: None,
                },
                device: "nvme0n1p1".into(),
                t: now - 900 + i * 300,
                // 1 TB, 5 % reserved for root, 400 GB used and 1 GB more each sample.
                size_bytes: 1000 * gb,
                free_bytes: 600 * gb - i as u64 * gb,
                avail_bytes: 550 * gb - i as u64 * gb,
                files_free: None,
            })
            .collect();
        store.record_fs(&fs).unwrap();
        store
            .record_drives(&[DriveSample {
                key: drive.clone(),
                // Not seen by kernel name yet: named by its serial.
                kernel_name: String::new(),
                t: now - 600,
                wear_used_ratio: Some(0.03),
                ..Default::default()
            }])
            .unwrap();
        let mut runs = Vec::new();
        for i in 0..3 {
            for (kind, ops, p50) in [
                (ProbeKind::SyncWrite4k, 16, 2e-3),
                (ProbeKind::RandRead4k, 64, 90e-6),
            ] {
                runs.push(ProbeRecord {
                    target: "/var/lib/postgresql/ssdwatch".into(),
                    drive: Some(drive.clone()),
                    t: now - 900 + i * 300,
                    kind,
                    ops,
                    p50_seconds: p50,
                    p99_seconds: None,
                    max_seconds: 5.0 * p50,
                    throughput_bytes_per_second: None,
                    fill_ratio: Some(0.42),
                    since_discard_seconds: None,
                    idle_seconds: None,
                    utilization_ratio: None,
                    utilization_before_ratio: None,
                    written_since_discard_bytes: None,
                    untrimmed_ratio: Some(0.0),
                });
            }
        }
        store.record_probes(&runs).unwrap();
    }
    let page = dir.path().join("report.html");
    let out = html_report_of_store(dir.path(), &page);
    let text = String::from_utf8_lossy(&out.stdout);
    // The last sample: 402 GB used, 548 GB available: df's 42.3 %, not (size - avail) / size
    // = 45.2 %.
    assert!(text.contains("fill 42.3 %"), "df's fill: {text}");
    let dom = dom_of(&page);
    // Usage, wear, and latency by fill for each of the two kinds.
    assert_eq!(assert_drawn_sensibly(&dom), 4, "{dom}");
    assert!(dom.contains("serial S6B0NX0T000200"), "{dom}");
    assert!(
        !dom.contains("<path class=\"second\""),
        "no p99 line from runs of 16 and 64 writes"
    );
    assert!(dom.contains("none: runs under 100 I/Os"), "{dom}");
}

/// A new user's first minutes, as they would try it: a daemon watching an ext4 with a 25 %
/// root reserve and probing a second filesystem, asked for /report long before its history's
/// first commit (15 minutes). The report shows what the daemon holds (the filesystems, the
/// first probe runs), its fill is df's to the digit, the probed drive is named (loopN, never
/// "(?)"), nothing tells the user to configure the target they configured; and in Chromium
/// every chart has something drawn (a single sample is a dot), latency by fill spans 0-100 %,
/// no time axis repeats a tick, no NaN anywhere.
#[test]
fn a_new_hosts_first_minutes_report_shows_what_the_daemon_holds_with_dfs_fill() {
    let test = "a_new_hosts_first_minutes_report_shows_what_the_daemon_holds_with_dfs_fill";
    if !require_root(test) || !require_cmd(test, "chromium", "chromium") {
        return;
    }
    let reserved = LoopFs::with_mkfs(128, &["-q", "-F", "-m", "25"]);
    let probed = LoopFs::no_reserve(64);
    {
        // 40 MiB of data: df's Use% and (size - avail) / size then differ by tens of points.
        let mut f = std::fs::File::create(reserved.mountpoint.join("data")).unwrap();
        let chunk = vec![0x5Au8; 1 << 20];
        for _ in 0..40 {
            f.write_all(&chunk).unwrap();
        }
        f.sync_all().unwrap();
    }
    let mut config = ssdwatch::config::Config::default();
    config.state_dir = reserved.dir.path().join("state");
    config.collectors.smart.enabled = false;
    config.collectors.filesystem.interval = Duration::from_secs(1);
    config.collectors.filesystem.mount_points_include = Some(vec![format!(
        "^({}|{})$",
        regex_lite::escape(reserved.mp()),
        regex_lite::escape(probed.mp())
    )]);
    config.collectors.diskstats.interval = Duration::from_secs(1);
    config.collectors.probe.interval = Duration::from_secs(3600);
    config.collectors.probe.jitter_ratio = 0.0;
    config.collectors.probe.busy_window = Duration::ZERO;
    config.collectors.probe.targets = vec![small_target(&probed.mountpoint)];
    let daemon = Daemon::start(
        config,
        roots_seeing(&[&reserved.mountpoint, &probed.mountpoint]),
    );
    daemon.wait_metrics("the first probe run", Duration::from_secs(60), |m| {
        value_matching(m, "ssdwatch_probe_runs_total", "").is_some_and(|v| v >= 1.0)
            && value_matching(
                m,
                "ssdwatch_filesystem_avail_bytes",
                &format!("mountpoint=\"{}\"", reserved.mp()),
            )
            .is_some()
    });

    let json: serde_json::Value = serde_json::from_str(&daemon.get("/report?format=json")).unwrap();
    // df as the user runs it; nothing has written to the reserved filesystem since.
    let df = run("df", &["-B1", "--output=used,avail,pcent", reserved.mp()]);
    let row: Vec<&str> = df.lines().nth(1).unwrap().split_whitespace().collect();
    let (used, avail): (f64, f64) = (row[0].parse().unwrap(), row[1].parse().unwrap());
    let fs = json["filesystems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["mountpoint"] == reserved.mp())
        .unwrap_or_else(|| panic!("the reserved filesystem, before any commit: {json:#}"));
    let fill = fs["fill_ratio"].as_f64().unwrap();
    assert_eq!(fill, used / (used + avail), "df: {df}");
    assert_eq!(fs["used_bytes"].as_f64(), Some(used), "df: {df}");
    // df's Use% is rounded up.
    assert_eq!(format!("{}%", (fill * 100.0).ceil()), row[2], "df: {df}");
    let size = fs["size_bytes"].as_f64().unwrap();
    assert!(
        (size - avail) / size - fill > 0.15,
        "the reserve makes the old definition read far higher: {fill} vs {}",
        (size - avail) / size
    );
    let groups = json["degradation"].as_array().unwrap();
    assert!(!groups.is_empty(), "the first probe runs: {json:#}");
    let dev = probed.kernel_name();
    assert!(
        groups.iter().all(|g| g["device"] == dev.as_str()),
        "the probed loop device is named: {json:#}"
    );
    let unknown = json["unknown"].to_string();
    assert!(!unknown.contains("configure"), "{unknown}");
    let text = daemon.get("/report?format=text");
    assert!(!text.contains("(?)") && !text.contains("NaN"), "{text}");
    assert!(text.contains(&format!("({dev})")), "{text}");

    // The page in a real browser.
    let page = reserved.dir.path().join("first-day.html");
    std::fs::write(&page, daemon.get("/report")).unwrap();
    drop(daemon);
    let dom = dom_of(&page);
    let svgs = assert_drawn_sensibly(&dom);
    // Two usage charts, and per probe kind latency by fill.
    assert!(svgs >= 2 + groups.len(), "{dom}");
    let shot = reserved.dir.path().join("first-day.png");
    let s = chromium(&[
        &format!("--screenshot={}", shot.display()),
        "--window-size=1000,2000",
        &format!("file://{}", page.display()),
    ]);
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    if let Some(to) = std::env::var_os("SSDWATCH_REPORT_FIRST_DAY_PNG") {
        std::fs::copy(&shot, to).unwrap();
    }
    // Each chart's blue dot (a dot of radius 3 paints about 20 pixels of the pure colour; the
    // rest is anti-aliased).
    let counts = count_colours(&shot, &[(0x1f, 0x77, 0xb4)]);
    assert!(
        counts[0] >= 15 * svgs,
        "the measured dots are painted in every chart: {counts:?}"
    );
}

/// `ssdwatch report --store DIR/history.db --html PAGE`, which must succeed; its output.
fn html_report_of_store(dir: &std::path::Path, page: &std::path::Path) -> std::process::Output {
    let out = Command::new(bin())
        .args(["report", "--store"])
        .arg(dir.join(FILE_NAME))
        .arg("--html")
        .arg(page)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
