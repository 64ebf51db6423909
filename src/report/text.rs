//! The plain-text rendering of a [`Report`]: what a DBA reads in a terminal or an email.

use super::{Report, bytes, date, datetime, latency, pct};
use crate::history::curve::FILL_BIN_LABELS;
use std::fmt::Write;

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "unknown".into())
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

fn render_raw(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "ssdwatch report: {}", r.host);
    let _ = writeln!(
        o,
        "generated {} UTC from {}; history since {}",
        datetime(r.generated_unix),
        r.source,
        opt(r.history_since_unix, date)
    );
    let _ = writeln!(o, "\nFILESYSTEMS");
    if r.filesystems.is_empty() {
        let _ = writeln!(o, "  none recorded yet");
    }
    for f in &r.filesystems {
        let _ = writeln!(
            o,
            "  {}  ({})",
            f.mountpoint,
            f.device.as_deref().unwrap_or("device unknown")
        );
        let _ = writeln!(
            o,
            "    fill {}  used {} of {}",
            opt(f.fill_ratio, pct),
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
            (Some(t), _) => date(t),
            (None, Some(n)) => n.clone(),
            (None, None) => "unknown".into(),
        };
        let _ = writeln!(o, "    predicted full: {full}");
    }
    let _ = writeln!(o, "\nDRIVES");
    if r.drives.is_empty() {
        let _ = writeln!(o, "  none recorded yet");
    }
    for d in &r.drives {
        let _ = writeln!(
            o,
            "  {}  {}  serial {}",
            d.device.as_deref().unwrap_or("?"),
            d.model.as_deref().unwrap_or("model unknown"),
            d.serial.as_deref().unwrap_or("unknown")
        );
        let _ = writeln!(
            o,
            "    wear used {}  ({}/day)  predicted wear-out: {}",
            opt(d.wear_used_ratio, pct),
            opt(d.wear_rate_per_day, |x| format!("{:.4} %", x * 100.0)),
            opt(d.predicted_wear_out_unix, date)
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
        let trims: Vec<_> = r
            .degradation
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
    let _ = writeln!(o, "\nLATENCY BY FILL (median of the runs' p50 / p99)");
    if r.degradation.is_empty() {
        let _ = writeln!(o, "  no probe results yet");
    }
    for g in &r.degradation {
        let _ = writeln!(
            o,
            "  {} on {} ({}), {}: {} runs {} .. {}",
            g.target,
            g.mountpoint.as_deref().unwrap_or("?"),
            g.device.as_deref().unwrap_or("?"),
            g.probe.as_str(),
            g.runs,
            date(g.first_run),
            date(g.last_run)
        );
        let _ = writeln!(
            o,
            "    {:<10} {:>8} {:>10} {:>10}",
            "fill", "runs", "p50", "p99"
        );
        for b in &g.curve {
            let _ = writeln!(
                o,
                "    {:<10} {:>8} {:>10} {:>10}",
                FILL_BIN_LABELS[b.bin],
                b.runs,
                latency(b.p50_seconds),
                latency(b.p99_seconds)
            );
        }
        for (what, list) in [("TRIM", &g.trim), ("idle", &g.idle)] {
            if list.is_empty() {
                continue;
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
    }
    if !r.unknown.is_empty() {
        let _ = writeln!(o, "\nNOT KNOWN YET");
        for u in &r.unknown {
            let _ = writeln!(o, "  - {u}");
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::FsReport;

    #[test]
    fn an_escape_sequence_in_a_mount_point_never_reaches_the_terminal() {
        let fs = FsReport {
            mountpoint: "/mnt/\u{1b}[2J\u{1b}]0;owned\u{7}x".into(),
            device: Some("sda1".into()),
            first_seen_unix: 0,
            last_seen_unix: None,
            size_bytes: None,
            used_bytes: None,
            fill_ratio: None,
            growth_7d_bytes_per_day: None,
            growth_30d_bytes_per_day: None,
            predicted_full_unix: None,
            full_note: None,
            usage: Vec::new(),
        };
        let r = Report {
            host: "db1".into(),
            generated_unix: 0,
            source: "test".into(),
            history_since_unix: None,
            filesystems: vec![fs],
            drives: Vec::new(),
            degradation: Vec::new(),
            unknown: Vec::new(),
        };
        let text = render(&r);
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(text.contains("/mnt/\\x1b[2J\\x1b]0;owned\\x07x"), "{text}");
    }
}
