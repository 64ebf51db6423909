//! Log lines as node_exporter and Prometheus write them: logfmt (`time=… level=INFO msg="…"`)
//! or one JSON object a line, with a syslog priority (`<4>`) first when stderr is the journal.
//! Formatting only: where lines go and which are kept is the subscriber's business.

use std::fmt::{self, Write as _};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// `--log.format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// `key=value` pairs, values quoted where they need it (go-logfmt's rules).
    Logfmt,
    /// One JSON object a line.
    Json,
}

/// The event formatter of both formats. Every event is one line: newlines inside values are
/// escaped, so a journald prefix or a log shipper never sees half an event.
pub(crate) struct Formatter {
    format: Format,
    /// Prefix each line with its syslog priority (sd-daemon(3)): stderr is the journal.
    priority: bool,
}

impl Formatter {
    pub(crate) fn new(format: Format, priority: bool) -> Formatter {
        Formatter { format, priority }
    }
}

/// The syslog priority journald reads from a `<N>` line prefix: err, warning, info, debug.
fn priority(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        _ => 7,
    }
}

/// A field's value, kept typed so JSON gets numbers and booleans as such.
#[derive(Debug, PartialEq)]
enum Value {
    Str(String),
    /// A number or boolean, written as is in both formats.
    Raw(String),
}

/// The event's message and its other fields, in the order they were written.
#[derive(Default)]
struct Fields {
    msg: Option<String>,
    rest: Vec<(&'static str, Value)>,
}

impl Fields {
    fn put(&mut self, field: &Field, v: Value) {
        if field.name() == "message" {
            self.msg = Some(match v {
                Value::Str(s) | Value::Raw(s) => s,
            });
        } else {
            self.rest.push((field.name(), v));
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::Str(value.to_string()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::Str(format!("{value:?}")));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::Raw(value.to_string()));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::Raw(value.to_string()));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Raw(value.to_string()));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        if value.is_finite() {
            self.put(field, Value::Raw(value.to_string()));
        } else {
            self.put(field, Value::Str(value.to_string()));
        }
    }
}

impl<S, N> FormatEvent<S, N> for Formatter
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let mut time = String::with_capacity(32);
        tracing_subscriber::fmt::time::SystemTime.format_time(&mut Writer::new(&mut time))?;
        let meta = event.metadata();
        let mut line = String::with_capacity(128);
        if self.priority {
            let _ = write!(line, "<{}>", priority(meta.level()));
        }
        let line_fields = Line {
            time: &time,
            level: meta.level().as_str(),
            target: meta.target(),
            msg: fields.msg.as_deref().unwrap_or(""),
            rest: &fields.rest,
        };
        match self.format {
            Format::Logfmt => line_fields.logfmt(&mut line),
            Format::Json => line_fields.json(&mut line),
        }
        line.push('\n');
        writer.write_str(&line)
    }
}

/// One event's line, before it is written in a format.
struct Line<'a> {
    time: &'a str,
    level: &'a str,
    target: &'a str,
    msg: &'a str,
    rest: &'a [(&'static str, Value)],
}

impl Line<'_> {
    fn logfmt(&self, out: &mut String) {
        for (i, (key, value)) in [
            ("time", self.time),
            ("level", self.level),
            ("target", self.target),
            ("msg", self.msg),
        ]
        .into_iter()
        .enumerate()
        {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(key);
            out.push('=');
            logfmt_value(out, value);
        }
        for (key, value) in self.rest {
            out.push(' ');
            out.push_str(key);
            out.push('=');
            match value {
                Value::Str(s) => logfmt_value(out, s),
                Value::Raw(s) => out.push_str(s),
            }
        }
    }

    fn json(&self, out: &mut String) {
        out.push('{');
        for (i, (key, value)) in [
            ("time", self.time),
            ("level", self.level),
            ("target", self.target),
            ("msg", self.msg),
        ]
        .into_iter()
        .enumerate()
        {
            if i > 0 {
                out.push(',');
            }
            json_string(out, key);
            out.push(':');
            json_string(out, value);
        }
        for (key, value) in self.rest {
            out.push(',');
            json_string(out, key);
            out.push(':');
            match value {
                Value::Str(s) => json_string(out, s),
                Value::Raw(s) => out.push_str(s),
            }
        }
        out.push('}');
    }
}

/// A logfmt value: bare when it can be, else quoted with `"`, `\` and control characters
/// escaped (go-logfmt quotes a value with a space, `=`, `"`, a control character or nothing).
fn logfmt_value(out: &mut String, v: &str) {
    let bare = !v.is_empty()
        && !v
            .chars()
            .any(|c| c <= ' ' || c == '=' || c == '"' || c == '\u{7f}' || c.is_control());
    if bare {
        out.push_str(v);
        return;
    }
    out.push('"');
    escape_into(out, v);
    out.push('"');
}

fn json_string(out: &mut String, v: &str) {
    out.push('"');
    escape_into(out, v);
    out.push('"');
}

/// JSON's string escapes, which are logfmt's too.
fn escape_into(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
}

/// Whether `JOURNAL_STREAM` (`DEVICE:INODE`, decimal, set by systemd for a service whose
/// stderr or stdout is the journal) names the file stderr is (its `st_dev`, `st_ino`). A
/// stderr redirected elsewhere by the service itself no longer matches.
pub(crate) fn journal_stream_is(value: &str, dev: u64, ino: u64) -> bool {
    let Some((d, i)) = value.trim().split_once(':') else {
        return false;
    };
    d.parse() == Ok(dev) && i.parse() == Ok(ino)
}

/// True when stderr is connected to the journal, as systemd.exec(5) says to find out.
pub(crate) fn stderr_is_journal() -> bool {
    let Some(value) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Ok(st) = nix::sys::stat::fstat(std::io::stderr()) else {
        return false;
    };
    journal_stream_is(&value.to_string_lossy(), st.st_dev, st.st_ino)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(rest: Vec<(&'static str, Value)>, msg: &str) -> (String, String) {
        let l = Line {
            time: "2026-05-01T10:00:00.123456Z",
            level: "WARN",
            target: "ssdwatch::web",
            msg,
            rest: &rest,
        };
        let (mut a, mut b) = (String::new(), String::new());
        l.logfmt(&mut a);
        l.json(&mut b);
        (a, b)
    }

    #[test]
    fn a_line_in_logfmt_quotes_only_what_needs_it_and_in_json_keeps_numbers() {
        let (logfmt, json) = line(
            vec![
                ("address", Value::Str("[::]:10150".into())),
                ("max_connections", Value::Raw("1024".into())),
                ("tls", Value::Raw("true".into())),
                ("path", Value::Str("/srv/a b".into())),
                ("empty", Value::Str(String::new())),
            ],
            "serving /metrics",
        );
        assert_eq!(
            logfmt,
            "time=2026-05-01T10:00:00.123456Z level=WARN target=ssdwatch::web \
             msg=\"serving /metrics\" address=[::]:10150 max_connections=1024 tls=true \
             path=\"/srv/a b\" empty=\"\""
        );
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["msg"], "serving /metrics");
        assert_eq!(v["level"], "WARN");
        assert_eq!(v["max_connections"], 1024);
        assert_eq!(v["tls"], true);
        assert_eq!(v["path"], "/srv/a b");
    }

    #[test]
    fn quotes_newlines_and_control_characters_never_break_a_line() {
        let msg = "config \"a.yaml\": bad\nsecond line\tand a \u{1} and \\";
        let (logfmt, json) = line(vec![("k=v", Value::Str("x=y".into()))], msg);
        assert!(!logfmt.contains('\n') && !json.contains('\n'));
        assert!(
            logfmt.contains(r#"msg="config \"a.yaml\": bad\nsecond line\tand a \u0001 and \\""#),
            "{logfmt}"
        );
        assert!(logfmt.ends_with(r#"k=v="x=y""#), "{logfmt}");
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["msg"], msg);
    }

    #[test]
    fn journald_priorities_follow_syslog() {
        let table = [
            (Level::ERROR, 3),
            (Level::WARN, 4),
            (Level::INFO, 6),
            (Level::DEBUG, 7),
            (Level::TRACE, 7),
        ];
        for (level, want) in table {
            assert_eq!(priority(&level), want, "{level}");
        }
    }

    #[test]
    fn journal_stream_matches_only_stderrs_own_device_and_inode() {
        let table = [
            ("8:12345", true),
            ("8:12345\n", true),
            ("8:12346", false),
            ("9:12345", false),
            ("8", false),
            ("", false),
            ("x:y", false),
            ("8:12345:1", false),
        ];
        for (value, want) in table {
            assert_eq!(journal_stream_is(value, 8, 12345), want, "{value:?}");
        }
    }
}
