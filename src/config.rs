//! The YAML configuration as typed structs with built-in defaults.
//! Unknown keys and bad values are errors that name the file, the key path and the line.

use crate::registry::CollectorsConfig;
pub use crate::validate::Invalid;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The default listen address. Port 10150 is not taken in the Prometheus project's list of
/// default exporter port allocations (see docs/running.md, "Listen port").
pub const DEFAULT_LISTEN_ADDRESS: &str = "0.0.0.0:10150";

/// The largest config file read: the commented example is about 10 KiB.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub web: WebConfig,
    pub log: LogConfig,
    /// Where the daemon keeps state that must survive restarts (probe budgets, discard
    /// history, the history store).
    pub state_dir: PathBuf,
    pub collectors: CollectorsConfig,
    /// The long-term history store on the host and its forecasts.
    pub history: crate::history::HistoryConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            web: WebConfig::default(),
            log: LogConfig::default(),
            state_dir: PathBuf::from("/var/lib/ssdwatch"),
            collectors: CollectorsConfig::default(),
            history: crate::history::HistoryConfig::default(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WebConfig {
    /// One address or a list (each is bound), in exporter-toolkit's forms: `:PORT`,
    /// `HOST:PORT`, `[IPv6]:PORT`.
    #[serde(deserialize_with = "one_or_many")]
    pub listen_address: Vec<String>,
}

impl Default for WebConfig {
    fn default() -> Self {
        WebConfig {
            listen_address: vec![DEFAULT_LISTEN_ADDRESS.to_string()],
        }
    }
}

/// A string or a list of strings, as `listen_address: ":10150"` or `listen_address: [a, b]`.
/// A visitor rather than an untagged enum, whose buffering loses the key path in errors.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct OneOrMany;
    impl<'de> serde::de::Visitor<'de> for OneOrMany {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an address or a list of addresses")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Vec<String>, E> {
            Ok(vec![v.to_string()])
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Vec<String>, A::Error> {
            let mut out = Vec::new();
            while let Some(s) = seq.next_element::<String>()? {
                out.push(s);
            }
            Ok(out)
        }
    }
    d.deserialize_any(OneOrMany)
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A level name or tracing directives (`ssdwatch=debug,info`); `--log.level` overrides it.
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".to_string(),
        }
    }
}

/// The log filter of a level spec: a level name, or tracing directives that each name a level
/// (`ssdwatch=debug,info`). A bare word that is not a level is refused: tracing would take it
/// for a module name and quietly log nothing of ours.
pub fn log_filter(spec: &str) -> Result<tracing_subscriber::filter::Targets, String> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    let names_a_level = |d: &str| {
        let level = d.rsplit_once('=').map_or(d, |(_, l)| l);
        LEVELS.contains(&level.trim().to_ascii_lowercase().as_str())
    };
    if spec.trim().is_empty() || !spec.split(',').all(names_a_level) {
        return Err(
            "not a log level: use error, warn, info, debug or trace, or directives such as ssdwatch=debug,info"
                .into(),
        );
    }
    spec.parse::<tracing_subscriber::filter::Targets>()
        .map_err(|e| e.to_string())
}

/// Why a config file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not a regular file but {0}; a config file must be one")]
    NotRegular(&'static str),
    #[error("larger than {0} bytes; not a config file")]
    TooLarge(u64),
}

/// Reads a config file whole (`--config`, `--web.config.file` and the files it names), refusing
/// what would hang or exhaust the daemon: anything but a regular file (a FIFO waits for a writer
/// forever, `/dev/zero` never ends) and more than `max` bytes (a log file given by mistake).
/// Opened non-blocking, so not even the open of a FIFO can wait; a regular file's reads ignore
/// the flag.
pub fn read_config_file(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    use crate::small_file::{Links, SmallFileError, read_small};
    read_small(path, max, Links::Follow).map_err(|e| match e {
        SmallFileError::Io(e) => ReadError::Io(e),
        SmallFileError::NotRegular(kind) => ReadError::NotRegular(kind),
        SmallFileError::TooLarge { max, .. } => ReadError::TooLarge(max),
    })
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {path}: {source}")]
    Read { path: PathBuf, source: ReadError },
    /// serde_yaml_ng's message names the key path and the line/column.
    #[error("config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    /// A value serde read but validation refused: the key path, and where it is written
    /// (` at line N`, as serde_yaml_ng's own errors say it) or that it is the default.
    #[error("config file {path}: {key}: {message}{place}")]
    Invalid {
        path: PathBuf,
        key: String,
        message: String,
        place: crate::yaml_line::Place,
    },
}

impl WebConfig {
    /// The addresses to bind, each parsed; an empty list is refused (nothing would serve), and
    /// so is one longer than a host has reasons for (each address is a socket).
    pub(crate) fn listen_addresses(&self) -> Result<Vec<crate::listen::ListenAddr>, Invalid> {
        const MAX: usize = 64;
        if self.listen_address.is_empty() {
            return Err(Invalid::new(
                "web.listen_address",
                "an empty list: at least one address is needed, such as :10150",
            ));
        }
        if self.listen_address.len() > MAX {
            return Err(Invalid::new(
                "web.listen_address",
                format!("{} addresses; at most {MAX}", self.listen_address.len()),
            ));
        }
        (self.listen_address.iter())
            .map(|a| {
                crate::listen::parse(a)
                    .map_err(|e| Invalid::new("web.listen_address", e.to_string()))
            })
            .collect()
    }
}

impl Config {
    /// Loads the config from `path`, or the built-in defaults when `path` is `None`.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let Some(path) = path else {
            return Ok(Config::default());
        };
        let bytes =
            read_config_file(path, MAX_CONFIG_BYTES).map_err(|source| ConfigError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        let text = String::from_utf8(bytes).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        })?;
        Self::parse(&text, path)
    }

    /// Parses YAML text; `path` only names the source in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        // An empty file (or one of comments only) means "all defaults".
        let cfg: Config = if text.lines().all(|l| {
            let t = l.trim();
            t.is_empty() || t.starts_with('#') || t == "---"
        }) {
            Config::default()
        } else {
            crate::yaml_guard::check_depth(text).map_err(|e| ConfigError::Parse {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
            serde_yaml_ng::from_str(text).map_err(|e| ConfigError::Parse {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?
        };
        cfg.validate().map_err(|i| ConfigError::Invalid {
            path: path.to_path_buf(),
            place: crate::yaml_line::locate(text, &i.key),
            key: i.key,
            message: i.message,
        })?;
        Ok(cfg)
    }

    /// Checks values serde can't: ranges, paths, combinations.
    pub fn validate(&self) -> Result<(), Invalid> {
        self.web.listen_addresses()?;
        if let Err(e) = log_filter(&self.log.level) {
            return Err(Invalid::new(
                "log.level",
                format!("{:?}: {e}", self.log.level),
            ));
        }
        crate::validate::check_absolute_path("state_dir", &self.state_dir)?;
        self.collectors.validate()?;
        self.history.validate("history")
    }

    /// The keys whose change between `self` and `new` takes a restart to apply (everything
    /// but `log.level`, which a reload applies), in file order.
    pub fn restart_needed(&self, new: &Config) -> Vec<String> {
        let mut keys = Vec::new();
        if self.web != new.web {
            keys.push("web.listen_address".to_string());
        }
        if self.state_dir != new.state_dir {
            keys.push("state_dir".to_string());
        }
        keys.extend(
            self.collectors
                .changed_sections(&new.collectors)
                .into_iter()
                .map(|n| format!("collectors.{n}")),
        );
        if self.history != new.history {
            keys.push("history".to_string());
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Config, ConfigError> {
        Config::parse(s, Path::new("/etc/ssdwatch/ssdwatch.yaml"))
    }

    #[test]
    fn a_state_dir_with_a_nul_byte_is_refused_at_start_naming_its_line() {
        let e = Config::parse(
            "log:\n  level: info\nstate_dir: \"/var/lib/ssd\\0watch\"\n",
            Path::new("c.yaml"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("state_dir: contains a NUL byte"), "{e}");
        assert!(e.contains("line 3"), "{e}");
    }

    #[test]
    fn empty_file_is_all_defaults() {
        assert_eq!(parse("# nothing\n").unwrap(), Config::default());
        assert_eq!(parse("").unwrap(), Config::default());
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let err = parse("web:\n  listen_address: 127.0.0.1:1\n  bogus: 1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("/etc/ssdwatch/ssdwatch.yaml"), "{err}");
        assert!(err.contains("bogus"), "{err}");
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn wrong_type_names_key_path_and_line() {
        let err = parse("collectors:\n  diskstats:\n    enabled: maybe\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("collectors.diskstats.enabled"), "{err}");
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn the_slow_commit_level_is_a_factor_or_a_latency_and_out_of_range_names_the_key() {
        let c = parse("collectors:\n  probe:\n    targets:\n      - path: /srv/pg\n").unwrap();
        let level = crate::history::slow::level_of(&c.collectors.probe.targets[0]);
        assert_eq!((level.factor, level.absolute_seconds), (3.0, None));
        let c = parse(
            "collectors:\n  probe:\n    targets:\n      - path: /srv/pg\n        \
             slow_latency_factor: 2.5\n        slow_latency: 2ms\n",
        )
        .unwrap();
        let level = crate::history::slow::level_of(&c.collectors.probe.targets[0]);
        assert_eq!((level.factor, level.absolute_seconds), (2.5, Some(0.002)));
        for (bad, what) in [
            ("slow_latency_factor: 1.0", "must be a number in 1.2..100"),
            ("slow_latency_factor: .nan", "must be a number in 1.2..100"),
            ("slow_latency: 2min", "the maximum is 1m"),
            ("slow_latency: 0s", "the minimum is 1us"),
        ] {
            let err = parse(&format!(
                "collectors:\n  probe:\n    targets:\n      - path: /srv/pg\n        {bad}\n"
            ))
            .unwrap_err()
            .to_string();
            let key = bad.split(':').next().unwrap_or_default();
            assert!(
                err.contains(&format!("collectors.probe.targets[0].{key}")),
                "{err}"
            );
            assert!(err.contains(what), "{bad}: {err}");
            assert!(err.contains("line 5"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_size_takes_a_unit_and_a_bad_one_names_key_file_and_line() {
        let c = parse(
            "collectors:\n  probe:\n    targets:\n      - path: /srv/pg\n        \
             free_floor_bytes: 64MiB\n        budget_bytes_per_day: 1GB\n",
        )
        .unwrap();
        let t = &c.collectors.probe.targets[0];
        assert_eq!(
            (t.free_floor_bytes, t.budget_bytes_per_day),
            (64 << 20, 1_000_000_000)
        );
        let err = parse(
            "collectors:\n  probe:\n    targets:\n      - path: /srv/pg\n        \
             free_floor_bytes: 64 lemons\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("/etc/ssdwatch/ssdwatch.yaml"), "{err}");
        assert!(
            err.contains("collectors.probe.targets[0].free_floor_bytes"),
            "{err}"
        );
        assert!(err.contains("expected a size such as 64MiB"), "{err}");
        assert!(err.contains("line 5"), "{err}");
    }

    #[test]
    fn bad_listen_address_is_named() {
        let err = parse("web:\n  listen_address: nowhere\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("web.listen_address"), "{err}");
        assert!(err.ends_with(" at line 2"), "{err}");
        let err = parse("web:\n  listen_address: [\":10150\", \"::1:10150\"]\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("web.listen_address: \"::1:10150\": an IPv6 address must be in brackets"),
            "{err}"
        );
        let err = parse("web:\n  listen_address: []\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("at least one address"), "{err}");
    }

    #[test]
    fn listen_address_is_one_address_or_a_list() {
        let one = parse("web:\n  listen_address: \":10150\"\n").unwrap();
        assert_eq!(one.web.listen_address, [":10150"]);
        let two =
            parse("web:\n  listen_address: [\"127.0.0.1:10150\", \"[::1]:10150\"]\n").unwrap();
        assert_eq!(two.web.listen_address, ["127.0.0.1:10150", "[::1]:10150"]);
    }

    #[test]
    fn a_value_out_of_range_names_file_key_and_the_line_it_is_written_on() {
        let text = "# ssdwatch\nhistory:\n  retention_raw: 7days\n\n  flush_interval: 0s\n";
        let err = parse(text).unwrap_err().to_string();
        assert_eq!(
            err,
            "config file /etc/ssdwatch/ssdwatch.yaml: history.flush_interval: 0s is too short; \
             the minimum is 1s at line 5"
        );
        // A cross-field check names the key it reports, at its line.
        let text = "history:\n  retention_raw: 30days\n  retention_hourly: 20days\n";
        let err = parse(text).unwrap_err().to_string();
        assert!(
            err.contains("history.retention_hourly: must be at least retention_raw")
                && err.ends_with(" at line 3"),
            "{err}"
        );
        // A list entry's field.
        let text = "collectors:\n  probe:\n    targets:\n      - path: /srv/a\n      - path: /srv/b\n        queue_depth: 0\n";
        let err = parse(text).unwrap_err().to_string();
        assert!(
            err.contains("collectors.probe.targets[1].queue_depth") && err.ends_with(" at line 6"),
            "{err}"
        );
        match parse(text).unwrap_err() {
            ConfigError::Invalid { place, .. } => assert_eq!(place.line(), Some(6)),
            e => panic!("{e}"),
        }
    }

    #[test]
    fn a_default_refused_with_the_rest_of_the_file_says_so_and_names_the_nearest_line() {
        // A probe target without a path: the key is not written, so the error says the value
        // is the default, and where the target is.
        let text = "collectors:\n  probe:\n    targets:\n      - kinds: [seq_write]\n";
        let err = parse(text).unwrap_err().to_string();
        assert_eq!(
            err,
            "config file /etc/ssdwatch/ssdwatch.yaml: collectors.probe.targets[0].path: must be \
             an absolute path (not set in the file: the default; collectors.probe.targets[0] is \
             at line 4)"
        );
    }

    #[test]
    fn a_bad_log_level_in_the_file_is_refused_naming_the_key() {
        let err = parse("log:\n  level: loud\n").unwrap_err().to_string();
        assert!(err.contains("log.level") && err.contains("loud"), "{err}");
        assert_eq!(
            parse("log:\n  level: ssdwatch=debug,info\n")
                .unwrap()
                .log
                .level,
            "ssdwatch=debug,info"
        );
    }

    #[test]
    fn log_levels_and_directives_are_accepted_and_other_words_refused() {
        for ok in [
            "info",
            "DEBUG",
            "off",
            "ssdwatch=debug,info",
            "warn,tower=error",
        ] {
            assert!(log_filter(ok).is_ok(), "{ok}");
        }
        for bad in ["loud", "", "ssdwatch", "info,verbose", "ssdwatch=chatty"] {
            assert!(log_filter(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_reload_names_what_needs_a_restart_and_not_the_log_level() {
        let old = Config::default();
        let mut new = old.clone();
        new.log.level = "debug".into();
        assert!(old.restart_needed(&new).is_empty());
        new.collectors.smart.interval = std::time::Duration::from_secs(60);
        new.web.listen_address = vec!["127.0.0.1:1".into()];
        new.history.enabled = false;
        assert_eq!(
            old.restart_needed(&new),
            ["web.listen_address", "collectors.smart", "history"]
        );
    }

    #[test]
    fn missing_file_names_the_path() {
        let err = Config::load(Some(Path::new("/nonexistent/ssdwatch.yaml")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("/nonexistent/ssdwatch.yaml"), "{err}");
    }

    #[test]
    fn an_endless_or_huge_file_is_refused_naming_it_without_reading_it_all() {
        let err = Config::load(Some(Path::new("/dev/zero")))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/dev/zero") && err.contains("not a regular file"),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        let huge = dir.path().join("huge.yaml");
        std::fs::write(&huge, "# padding\n".repeat(200_000)).unwrap();
        let err = Config::load(Some(&huge)).unwrap_err().to_string();
        assert!(
            err.contains("huge.yaml") && err.contains("larger than"),
            "{err}"
        );
        // A FIFO with no writer: refused at once, not waited on.
        let fifo = dir.path().join("fifo.yaml");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = Config::load(Some(&fifo)).unwrap_err().to_string();
        assert!(
            err.contains("fifo.yaml") && err.contains("not a regular file but a FIFO"),
            "{err}"
        );
        let bin = dir.path().join("binary.yaml");
        std::fs::write(&bin, b"web:\n  listen_address: \xff\n").unwrap();
        let err = Config::load(Some(&bin)).unwrap_err().to_string();
        assert!(
            err.contains("binary.yaml") && err.contains("not UTF-8"),
            "{err}"
        );
    }

    #[test]
    fn example_config_parses_and_equals_defaults() {
        let text = include_str!("../config/ssdwatch.example.yaml");
        let cfg = parse(text).expect("example config must parse");
        assert_eq!(cfg, Config::default(), "the example documents the defaults");
    }
}
