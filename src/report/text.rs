//! The plain-text rendering of a [`Report`]: what a DBA reads in a terminal or an email.

use super::view::{self, Cell, Table, UNKNOWN};
use super::{DriveReport, FsReport, Report, bytes, date, datetime, latency, pct};
use crate::history::curve::Recovery;
use crate::history::degradation::Group;
use crate::history::slow::Assessment;
use crate::time::DAY_F64;
use std::fmt::Write;

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| UNKNOWN.into())
}

/// The report as text for a terminal: every control character but the newline is written
/// `\xNN`, so nothing in it (a mount point, a drive's model string, a store written by an older
/// version) can send an escape sequence to the terminal that shows it.
pub fn render(r: &Report) -> String {
    let text = render_raw(r);
    if !text.chars().any(|c| c.is_control() && c != '\n') {
        return text;
    }
    let mut o = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c.is_control() && c != '\n' {
            let _ = write!(o, "\\x{:02x}", c as u32);
        } else {
            o.push(c);
        }
    }
    o
}

/// The report's sections in order, control characters as they are.
fn render_raw(r: &Report) -> String {
    let mut o = String::new();
    header(&mut o, r);
    filesystems(&mut o, &r.filesystems);
    what_is_filling(&mut o, &r.filesystems);
    drives(&mut o, r);
    latency_by_fill(&mut o, &r.degradation);
    performance_full(&mut o, &r.performance_full);
    not_known(&mut o, &r.unknown);
    o
}

fn header(o: &mut String, r: &Report) {
    let _ = writeln!(o, "ssdwatch report: {}", r.host);
    let _ = writeln!(
        o,
        "generated {} UTC from {}; history since {}",
        datetime(r.generated_unix),
        r.source,
        Cell::date(r.history_since_unix).words()
    );
}

fn filesystems(o: &mut String, filesystems: &[FsReport]) {
    let _ = writeln!(o, "\nFILESYSTEMS");
    if filesystems.is_empty() {
        let _ = writeln!(o, "  none recorded yet");
    }
    for f in filesystems {
        filesystem(o, f);
    }
}

/// A filesystem's fill, growth and predicted-full date (or why there is none).
fn filesystem(o: &mut String, f: &FsReport) {
    let _ = writeln!(
        o,
        "  {}  ({})",
        f.mountpoint,
        f.device.as_deref().unwrap_or("device unknown")
    );
    let _ = writeln!(
        o,
        "    fill {}  used {} of {}",
        f.fill_words(pct),
        opt(f.used_bytes, bytes),
        opt(f.size_bytes, bytes)
    );
    let _ = writeln!(
        o,
        "    growth {}/day over 7 days, {}/day over 30 days",
        opt(f.growth_7d_bytes_per_day, bytes),
        opt(f.growth_30d_bytes_per_day, bytes)
    );
    let full = match (f.predicted_full_unix, &f.full_note) {
        (Some(t), note) => format!(
            "{}{}{}{}",
            date(t),
            f.full_layer_words(),
            super::band(f.full_earliest_unix, f.full_latest_unix),
            note.as_ref().map(|n| format!("; {n}")).unwrap_or_default()
        ),
        (None, Some(n)) => n.clone(),
        (None, None) => UNKNOWN.into(),
    };
    let _ = writeln!(o, "    predicted full: {full}");
    if let Some(t) = &f.top_contributor {
        let _ = writeln!(o, "    what fills it: {t}");
    }
    if let Some(first) = f.runs_out_first() {
        let _ = writeln!(
            o,
            "    layers below (runs out first: {}, {} free):",
            first.title(),
            bytes(first.avail_bytes)
        );
        table(o, &view::layers(f), "      ");
    }
}

/// Each mount's database components: size, growth over a day and a week, share of the
/// mount's growth over the day.
fn what_is_filling(o: &mut String, filesystems: &[FsReport]) {
    let with: Vec<&FsReport> = filesystems
        .iter()
        .filter(|f| !f.filling.is_empty())
        .collect();
    if with.is_empty() {
        return;
    }
    let _ = writeln!(o, "\nWHAT IS FILLING IT");
    let signed = super::filling::signed_bytes;
    for f in with {
        let _ = writeln!(
            o,
            "  {}  (grew {} over the last day)",
            f.mountpoint,
            opt(f.used_growth_1d_bytes, signed)
        );
        table(o, &view::filling(&f.filling), "    ");
    }
}

fn drives(o: &mut String, r: &Report) {
    let _ = writeln!(o, "\nDRIVES");
    if r.drives.is_empty() {
        let _ = writeln!(o, "  none recorded yet");
    }
    for d in &r.drives {
        drive(o, d);
        drive_trim(o, d, &r.degradation);
    }
}

/// A drive's identity, wear, writes and endurance.
fn drive(o: &mut String, d: &DriveReport) {
    let _ = writeln!(
        o,
        "  {}  {}  serial {}",
        d.name(),
        d.model.as_deref().unwrap_or("model unknown"),
        d.serial.as_deref().unwrap_or("unknown")
    );
    let _ = writeln!(
        o,
        "    wear used {}  ({}/day)  predicted wear-out: {}",
        opt(d.wear_used_ratio, pct),
        opt(d.wear_rate_per_day, |x| format!("{:.4} %", x * 100.0)),
        opt(d.predicted_wear_out_unix, |t| format!(
            "{}{}",
            date(t),
            super::band(d.wear_out_earliest_unix, d.wear_out_latest_unix)
        ))
    );
    let _ = writeln!(
        o,
        "    written by the host {} (TBW consumed{})  {}/day over 30 days",
        opt(d.host_written_bytes, bytes),
        d.endurance_used_ratio
            .map(|e| format!(": {} of the rating", pct(e)))
            .unwrap_or_default(),
        opt(d.host_bytes_per_day_30d, bytes)
    );
    let _ = writeln!(
        o,
        "    write amplification (30 days) {}  endurance exhausted: {}",
        opt(d.write_amplification_30d, |w| format!("{w:.2}")),
        opt(d.predicted_endurance_exhausted_unix, date)
    );
    let h = &d.health;
    if h != &super::DriveHealth::default() {
        let _ = writeln!(
            o,
            "    error log {} ({} new in 7 days)  latest self-test: {}{}  temperature {} (its warning limit {})  fsync durable: {}",
            opt(h.error_log_entries, |n| format!("{n:.0}")),
            opt(h.error_log_entries_new_7d, |n| format!("{n:.0}")),
            h.self_test.as_deref().unwrap_or("none logged"),
            h.self_test_age_seconds
                .map(|s| format!(", {:.0} power-on days ago", s / DAY_F64))
                .unwrap_or_default(),
            opt(h.temperature_celsius, |t| format!("{t:.0} °C")),
            opt(h.temperature_warning_celsius, |t| format!("{t:.0} °C")),
            match h.durability.as_deref() {
                Some("none") => "no sign otherwise".to_string(),
                Some(r) => r.to_string(),
                None => "unknown".to_string(),
            }
        );
        if let Some(n) = h.layer_errors_new_7d {
            let _ = writeln!(
                o,
                "    errors under the filesystem (btrfs, ZFS, md on it): {n:.0} new in 7 days"
            );
        }
        for c in h.concerns() {
            let _ = writeln!(o, "    ! {c}");
        }
    }
}

/// A drive's discard bursts, and the recovery after the last one of each probe on it.
fn drive_trim(o: &mut String, d: &DriveReport, degradation: &[Group]) {
    let trims: Vec<_> = degradation
        .iter()
        .filter(|g| g.device.is_some() && g.device == d.device)
        .filter_map(|g| Some((g.probe, g.trim.last()?)))
        .collect();
    let _ = writeln!(
        o,
        "    TRIM: {} discard burst(s) recorded, last {}{}",
        d.discard_bursts,
        opt(d.last_discard_unix, datetime),
        d.last_discard_bytes
            .map(|b| format!(" ({})", bytes(b as f64)))
            .unwrap_or_default()
    );
    for (probe, t) in trims {
        let _ = writeln!(
            o,
            "      recovery ({}) after the last one: {:.2} ({} → {})",
            probe.as_str(),
            t.ratio,
            latency(t.before_seconds),
            latency(t.after_seconds)
        );
    }
}

/// One line per commit-probe target: where its commits got slow and when.
fn performance_full(o: &mut String, assessed: &[Assessment]) {
    if assessed.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\nPERFORMANCE-FULL (sync_write_4k median on the trimmed curve against its slow level)"
    );
    for a in assessed {
        let _ = writeln!(o, "  {}", super::performance_full_line(a));
    }
}

fn latency_by_fill(o: &mut String, degradation: &[Group]) {
    let _ = writeln!(
        o,
        "\nLATENCY BY FILL (median of the runs' p50 / p99; a p99 needs runs of 100 I/Os or more)"
    );
    if degradation.is_empty() {
        let _ = writeln!(o, "  no probe run recorded yet");
    }
    for g in degradation {
        curve(o, g);
        for (what, list) in [("TRIM", &g.trim), ("idle", &g.idle)] {
            recoveries(o, what, list);
        }
    }
}

/// A probe target's runs and its latency by fill bin.
fn curve(o: &mut String, g: &Group) {
    let _ = writeln!(
        o,
        "  {}: {} runs {} .. {}",
        super::group_title(g),
        g.runs,
        date(g.first_run),
        date(g.last_run)
    );
    table(o, &view::curve(g), "    ");
}

/// The newest 5 recoveries after `what` (TRIM or idle), newest first; nothing without any.
fn recoveries(o: &mut String, what: &str, list: &[Recovery]) {
    if list.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "    {what} recovery (p50 hour after ÷ hour before), newest {} event(s):",
        list.len().min(5)
    );
    for e in list.iter().rev().take(5) {
        // Run counts are 0 where the query API was the source: it doesn't have them.
        let runs = if e.runs_before + e.runs_after > 0 {
            format!(", {}+{} runs", e.runs_before, e.runs_after)
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "      {}  {:.2}  ({} → {}{runs})",
            datetime(e.start),
            e.ratio,
            latency(e.before_seconds),
            latency(e.after_seconds),
        );
    }
}

/// A table as aligned columns under `indent`, its headers first: words to the left, figures to
/// the right; a marked row ends "<- its mark".
fn table(o: &mut String, t: &Table, indent: &str) {
    let lines: Vec<(Vec<String>, Option<&str>)> =
        std::iter::once((t.headers.iter().map(|h| h.to_string()).collect(), None))
            .chain(
                t.rows
                    .iter()
                    .map(|r| (r.cells.iter().map(Cell::words).collect(), r.mark)),
            )
            .collect();
    let mut widths = vec![0; t.headers.len()];
    for (cells, _) in &lines {
        for (w, c) in widths.iter_mut().zip(cells) {
            *w = (*w).max(c.chars().count());
        }
    }
    // Words to the left (the first column, and a column of words only), figures to the right.
    let left: Vec<bool> = (0..widths.len())
        .map(|i| {
            i == 0
                || t.rows
                    .iter()
                    .all(|r| matches!(r.cells.get(i), Some(Cell::Text(_))))
        })
        .collect();
    let last = widths.len().saturating_sub(1);
    for (cells, mark) in lines {
        o.push_str(indent);
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i > 0 {
                o.push_str("  ");
            }
            // A last column of words is not padded: no line ends in spaces.
            let _ = match (left[i], i == last && mark.is_none()) {
                (true, true) => write!(o, "{c}"),
                (true, false) => write!(o, "{c:<w$}"),
                (false, _) => write!(o, "{c:>w$}"),
            };
        }
        if let Some(m) = mark {
            let _ = write!(o, "  <- {m}");
        }
        o.push('\n');
    }
}

fn not_known(o: &mut String, unknown: &[String]) {
    if !unknown.is_empty() {
        let _ = writeln!(o, "\nNOT KNOWN YET");
        for u in unknown {
            let _ = writeln!(o, "  - {u}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::LayerReport;

    fn drive(health: super::super::DriveHealth) -> DriveReport {
        DriveReport {
            device: Some("sda".into()),
            model: Some("INTEL SSDSC2KB240G7".into()),
            serial: Some("S1".into()),
            wwn: None,
            capacity_bytes: None,
            first_seen_unix: 0,
            last_seen_unix: None,
            wear_used_ratio: Some(0.45),
            wear_rate_per_day: None,
            predicted_wear_out_unix: None,
            wear_out_earliest_unix: None,
            wear_out_latest_unix: None,
            host_written_bytes: None,
            endurance_used_ratio: None,
            predicted_endurance_exhausted_unix: None,
            write_amplification_30d: None,
            host_bytes_per_day_30d: None,
            discard_bursts: 0,
            last_discard_unix: None,
            last_discard_bytes: None,
            wear: Vec::new(),
            health,
        }
    }

    #[test]
    fn a_drive_failing_its_self_test_with_fsync_unprotected_says_so_and_a_quiet_one_does_not() {
        let bad = drive(super::super::DriveHealth {
            error_log_entries: Some(14.0),
            error_log_entries_new_7d: Some(2.0),
            self_test: Some("extended failed".into()),
            self_test_age_seconds: Some(3.0 * DAY_F64),
            temperature_celsius: Some(71.0),
            temperature_warning_celsius: Some(70.0),
            above_warning_seconds_7d: Some(1200.0),
            durability: Some("cache_flushes_off".into()),
            ..Default::default()
        });
        let mut o = String::new();
        super::drive(&mut o, &bad);
        for want in [
            "error log 14 (2 new in 7 days)",
            "latest self-test: extended failed, 3 power-on days ago",
            "temperature 71 °C (its warning limit 70 °C)",
            "fsync durable: cache_flushes_off",
            "! 2 new error-log entries in 7 days",
            "! latest self-test: extended failed",
            "! 20 min above its warning temperature in 7 days",
            "! fsync may not be durable (cache_flushes_off)",
        ] {
            assert!(o.contains(want), "{want}: {o}");
        }
        // A store-backed report knows none of it: no health line at all.
        let mut o = String::new();
        super::drive(&mut o, &drive(Default::default()));
        assert!(!o.contains("self-test") && !o.contains('!'), "{o}");
        // Healthy and known: the line, no concern.
        let ok = drive(super::super::DriveHealth {
            error_log_entries: Some(8382.0),
            error_log_entries_new_7d: Some(0.0),
            self_test: Some("short passed".into()),
            durability: Some("none".into()),
            ..Default::default()
        });
        let mut o = String::new();
        super::drive(&mut o, &ok);
        assert!(o.contains("error log 8382 (0 new in 7 days)"), "{o}");
        assert!(o.contains("fsync durable: no sign otherwise"), "{o}");
        assert!(!o.contains('!'), "{o}");
    }

    #[test]
    fn an_escape_sequence_in_a_mount_point_never_reaches_the_terminal() {
        let fs = FsReport {
            mountpoint: "/mnt/\u{1b}[2J\u{1b}]0;owned\u{7}x".into(),
            device: Some("sda1".into()),
            ..Default::default()
        };
        let r = Report {
            host: "db1".into(),
            generated_unix: 0,
            source: "test".into(),
            history_since_unix: None,
            filesystems: vec![fs],
            drives: Vec::new(),
            degradation: Vec::new(),
            performance_full: Vec::new(),
            unknown: Vec::new(),
        };
        let text = render(&r);
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(text.contains("/mnt/\\x1b[2J\\x1b]0;owned\\x07x"), "{text}");
    }

    fn layer(layer: &str, name: &str, avail: f64, size: f64, limiting: bool) -> LayerReport {
        LayerReport {
            layer: layer.into(),
            name: name.into(),
            avail_bytes: avail,
            size_bytes: Some(size),
            fill_ratio: Some(1.0 - avail / size),
            limiting,
        }
    }

    #[test]
    fn a_mount_on_a_filling_thin_pool_says_the_pool_runs_out_first() {
        let mut fs = FsReport {
            mountpoint: "/var/lib/mysql".into(),
            device: Some("dm-3".into()),
            size_bytes: Some(400e6),
            used_bytes: Some(396e6),
            fill_ratio: Some(0.99),
            layers: vec![
                layer("filesystem", "", 200e6, 400e6, false),
                layer("thin_pool", "vg-pool-tpool", 4e6, 256e6, true),
            ],
            ..Default::default()
        };
        let mut o = String::new();
        filesystem(&mut o, &fs);
        assert!(
            o.contains("layers below (runs out first: thin pool vg-pool-tpool, 4.00 MB free):"),
            "{o}"
        );
        // The headline fill: df's, and the effective one with the layer that limits it.
        assert!(
            o.contains(
                "fill 99.0 % (df); effective fill 99.3 %, thin pool vg-pool-tpool runs out first"
            ),
            "{o}"
        );
        let rows: Vec<&str> = o
            .lines()
            .skip_while(|l| !l.contains("layers below"))
            .skip(1)
            .collect();
        assert_eq!(rows.len(), 3, "{o}");
        let header: Vec<&str> = rows[0].split_whitespace().collect();
        assert_eq!(header, ["layer", "free", "size", "fill"], "{o}");
        assert!(
            rows[1].trim_start().starts_with("filesystem ") && rows[1].ends_with(" 50.0 %"),
            "{o}"
        );
        assert!(
            rows[2].contains("thin pool vg-pool-tpool")
                && rows[2].contains("4.00 MB")
                && rows[2].contains("256.00 MB")
                && rows[2].contains(" 98.4 %"),
            "{o}"
        );
        assert!(rows[2].ends_with("<- runs out first"), "{o}");
        // The filesystem alone (no layer below): nothing said.
        fs.layers.truncate(1);
        let mut o = String::new();
        filesystem(&mut o, &fs);
        assert!(!o.contains("layers below"), "{o}");
    }

    #[test]
    fn what_is_filling_a_mount_is_a_table_under_its_own_heading_and_a_line_by_its_forecast() {
        use crate::databases::component::{Component, Kind};
        let db = "/var/lib/postgresql/15/main";
        let comp = |component: Component, bytes: f64, g1: Option<f64>, g7: Option<f64>| {
            super::super::filling::ComponentReport {
                database: db.into(),
                kind: Kind::Postgres.label().into(),
                component: component.label().into(),
                bytes,
                growth_1d_bytes: g1,
                growth_7d_bytes: g7,
                share_1d: None,
                stale_since: None,
            }
        };
        let filling = super::super::filling::with_shares(
            vec![
                comp(Component::Relations, 9e9, Some(-2e6), None),
                comp(Component::Wal, 2.1e9, Some(0.91e9), Some(2e9)),
            ],
            Some(1e9),
        );
        let fs = FsReport {
            mountpoint: "/srv/pg".into(),
            predicted_full_unix: Some(1_767_225_600),
            used_growth_1d_bytes: Some(1e9),
            top_contributor: Some(
                "91 % of the last day's growth (+1.00 GB) is pg_wal (WAL)".into(),
            ),
            filling,
            ..Default::default()
        };
        let quiet = FsReport {
            mountpoint: "/".into(),
            ..Default::default()
        };
        let r = Report {
            host: "db1".into(),
            generated_unix: 0,
            source: "test".into(),
            history_since_unix: None,
            filesystems: vec![quiet, fs],
            drives: Vec::new(),
            degradation: Vec::new(),
            performance_full: Vec::new(),
            unknown: Vec::new(),
        };
        let text = render(&r);
        assert!(
            text.contains("predicted full: 2026-01-01\n    what fills it: 91 % of the last day's growth (+1.00 GB) is pg_wal (WAL)\n"),
            "{text}"
        );
        let section: Vec<&str> = text
            .lines()
            .skip_while(|l| *l != "WHAT IS FILLING IT")
            .take_while(|l| !l.is_empty())
            .collect();
        assert_eq!(section.len(), 5, "{text}");
        assert_eq!(section[1], "  /srv/pg  (grew +1.00 GB over the last day)");
        // The HTML page's columns in its order.
        let mut at = 0;
        for h in view::filling(&[]).headers {
            at += section[2][at..]
                .find(h)
                .unwrap_or_else(|| panic!("{h}: {}", section[2]));
        }
        // The fastest-growing first, with its share; a shrinking one signed, an unknown week;
        // each figure in its column.
        for (line, want) in [
            (
                section[3],
                [
                    "pg_wal (WAL)",
                    db,
                    "2.10 GB",
                    "+910.00 MB",
                    "+2.00 GB",
                    "91 % of growth",
                ],
            ),
            (
                section[4],
                [
                    "tables and indexes (base, global)",
                    db,
                    "9.00 GB",
                    "-2.00 MB",
                    "unknown",
                    "-0 % of growth",
                ],
            ),
        ] {
            let mut at = 0;
            for w in want {
                at += line[at..].find(w).unwrap_or_else(|| panic!("{w}: {line}"));
            }
        }
    }
}
