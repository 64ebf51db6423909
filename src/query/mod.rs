//! The one client of Prometheus-compatible query APIs (Prometheus, Thanos, Mimir, Cortex,
//! VictoriaMetrics), used by `report --prometheus`, `--fleet` and `history import`: configured
//! by promtool's `--http.config.file` (Prometheus' `http_config`), bounded in time and in the
//! size of an answer, and refusing partial answers. It knows HTTP and the API's JSON; what a
//! series means is its callers'.

pub(crate) mod http_config;
pub(crate) mod tls;

use crate::config::{MAX_CONFIG_BYTES, read_config_file};
use base64::Engine as _;
use http_config::{HttpConfig, header_value_ok};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use ureq::unversioned::resolver::DefaultResolver;
use ureq::unversioned::transport::{ConnectProxyConnector, Connector, TcpConnector};

/// The largest answer taken by default: a report's largest query (30 days of 5-minute probe
/// runs, a few series) is a few MB; far more is a query gone wrong, not history.
pub const DEFAULT_MAX_ANSWER_BYTES: u64 = 32 << 20;
/// A query's time, from connecting to its last byte.
const QUERY_TIMEOUT: Duration = Duration::from_secs(120);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Redirects followed unless the config's `follow_redirects: false`.
const MAX_REDIRECTS: u32 = 3;
/// How much of a non-JSON error body is quoted in an error.
const QUOTED_BODY: usize = 200;

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The HTTP client config (its file, or a file it names) can't be used.
    #[error("{0}")]
    Config(String),
    #[error("{url}: {detail}")]
    Http { url: String, detail: String },
    #[error("{url}: query {query}: {detail}")]
    Api {
        url: String,
        query: String,
        detail: String,
    },
}

/// A Prometheus-compatible query API at `base` (`http://prometheus:9090`,
/// `http://vmselect:8481/select/0/prometheus`).
pub struct Api {
    base: String,
    agent: ureq::Agent,
    /// The http_config and the directory its relative paths are taken from.
    http: Option<(HttpConfig, PathBuf)>,
    max_answer_bytes: u64,
}

type Labels = BTreeMap<String, String>;
/// A query's answer: each series' labels and its (time, value) samples.
pub type Answer = Vec<(Labels, Vec<(i64, f64)>)>;

impl Api {
    /// The API at `base` without auth or client TLS settings (the system's CAs for https).
    pub fn new(base: &str) -> Api {
        Self::build(base, None)
    }

    /// The API at `base` as `--http.config.file` says (`None`: as [`Api::new`]). The file is
    /// read and checked here, the secrets it names at each request.
    pub fn with_config(base: &str, file: Option<&Path>) -> Result<Api, QueryError> {
        let http = match file {
            None => None,
            Some(f) => {
                let bytes = read_config_file(f, MAX_CONFIG_BYTES).map_err(|e| {
                    QueryError::Config(format!("http config file {}: {e}", f.display()))
                })?;
                let text = String::from_utf8(bytes).map_err(|_| {
                    QueryError::Config(format!("http config file {}: not UTF-8", f.display()))
                })?;
                let cfg =
                    HttpConfig::parse(&text, f).map_err(|e| QueryError::Config(e.to_string()))?;
                let dir = f.parent().map(Path::to_path_buf).unwrap_or_default();
                Some((cfg, dir))
            }
        };
        Ok(Self::build(base, http))
    }

    fn build(base: &str, http: Option<(HttpConfig, PathBuf)>) -> Api {
        let cfg = http.as_ref().map(|h| &h.0);
        let proxy = cfg
            .and_then(|c| c.proxy_url.as_deref())
            .and_then(|p| ureq::Proxy::new(p).ok());
        let redirects = if cfg.and_then(|c| c.follow_redirects) == Some(false) {
            0
        } else {
            MAX_REDIRECTS
        };
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(QUERY_TIMEOUT))
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .http_status_as_error(false)
            .max_redirects(redirects)
            .proxy(proxy)
            .user_agent(concat!("ssdwatch/", env!("CARGO_PKG_VERSION")))
            .build();
        let tls_cfg = cfg.and_then(|c| c.tls_config.clone()).unwrap_or_default();
        let dir = http.as_ref().map(|h| h.1.clone()).unwrap_or_default();
        // Built only for an https URL: a plain-HTTP server needs no CA bundle on the host.
        let tls = if base.starts_with("https://") {
            tls::client_config(&tls_cfg, &dir).map_err(std::sync::Arc::new)
        } else {
            Err(std::sync::Arc::new(tls::ClientTlsError::RedirectedToHttps))
        };
        let connector =
            ().chain(ConnectProxyConnector::default())
                .chain(TcpConnector::default())
                .chain(tls::TlsConnector {
                    config: tls,
                    server_name: tls_cfg
                        .server_name
                        .as_deref()
                        .and_then(|n| rustls::pki_types::ServerName::try_from(n.to_string()).ok()),
                });
        Api {
            base: base.trim_end_matches('/').to_string(),
            agent: ureq::Agent::with_parts(config, connector, DefaultResolver::default()),
            http,
            max_answer_bytes: DEFAULT_MAX_ANSWER_BYTES,
        }
    }

    /// Refuses answers larger than `bytes`.
    pub fn with_max_answer_bytes(mut self, bytes: u64) -> Api {
        self.max_answer_bytes = bytes;
        self
    }

    /// The server's base URL, as given.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The headers of the config, secrets read now (a rotated password file takes effect at
    /// the next request, as in Prometheus).
    fn headers(&self) -> Result<Vec<(String, String)>, QueryError> {
        let Some((cfg, dir)) = &self.http else {
            return Ok(Vec::new());
        };
        let secret = |inline: &Option<String>,
                      file: &Option<PathBuf>,
                      key: &str|
         -> Result<Option<String>, QueryError> {
            match (inline, file) {
                (Some(v), _) => Ok(Some(v.clone())),
                (None, Some(p)) => {
                    let p = dir.join(p);
                    let bytes = read_config_file(&p, MAX_CONFIG_BYTES).map_err(|e| {
                        QueryError::Config(format!("http config {key} {}: {e}", p.display()))
                    })?;
                    let text = String::from_utf8(bytes).map_err(|_| {
                        QueryError::Config(format!("http config {key} {}: not UTF-8", p.display()))
                    })?;
                    // Prometheus trims the file's surrounding white space (its newline).
                    Ok(Some(text.trim().to_string()))
                }
                (None, None) => Ok(None),
            }
        };
        let mut out = Vec::new();
        if let Some(b) = &cfg.basic_auth {
            let user = secret(&b.username, &b.username_file, "basic_auth.username_file")?
                .unwrap_or_default();
            let pass = secret(&b.password, &b.password_file, "basic_auth.password_file")?
                .unwrap_or_default();
            let enc = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
            out.push(("Authorization".into(), format!("Basic {enc}")));
        }
        let bearer = match &cfg.authorization {
            Some(a) => secret(
                &a.credentials,
                &a.credentials_file,
                "authorization.credentials_file",
            )?
            .map(|c| (a.kind.clone().unwrap_or_else(|| "Bearer".into()), c)),
            None => secret(
                &cfg.bearer_token,
                &cfg.bearer_token_file,
                "bearer_token_file",
            )?
            .map(|c| ("Bearer".to_string(), c)),
        };
        if let Some((kind, c)) = bearer {
            out.push(("Authorization".into(), format!("{kind} {c}")));
        }
        for (name, h) in cfg.http_headers.iter().flatten() {
            for v in h.values.iter().chain(&h.secrets) {
                out.push((name.clone(), v.clone()));
            }
            for f in &h.files {
                let v = secret(
                    &None,
                    &Some(f.clone()),
                    &format!("http_headers.{name}.files"),
                )?
                .unwrap_or_default();
                out.push((name.clone(), v));
            }
        }
        if let Some((name, _)) = out.iter().find(|(_, v)| !header_value_ok(v)) {
            return Err(QueryError::Config(format!(
                "http config: the value of {name} has a control character"
            )));
        }
        Ok(out)
    }

    fn call(&self, path: &str, params: &[(&str, String)]) -> Result<Value, QueryError> {
        let url = format!("{}{path}", self.base);
        let query = params.first().map(|p| p.1.clone()).unwrap_or_default();
        let api_err = |detail: String| QueryError::Api {
            url: url.clone(),
            query: query.clone(),
            detail,
        };
        let mut req = self.agent.get(&url);
        for (k, v) in params {
            req = req.query(*k, v);
        }
        // Thanos answers with what the stores it reached had unless told not to.
        req = req.query("partial_response", "false");
        for (k, v) in self.headers()? {
            req = req.header(k, v);
        }
        let mut resp = req.call().map_err(|e| QueryError::Http {
            url: url.clone(),
            detail: e.to_string(),
        })?;
        let status = resp.status();
        let body = resp
            .body_mut()
            .with_config()
            .limit(self.max_answer_bytes)
            .read_to_vec()
            .map_err(|e| match e {
                ureq::Error::BodyExceedsLimit(_) => api_err(format!(
                    "the answer is larger than {} MiB: ask for a shorter range or fewer series",
                    self.max_answer_bytes >> 20
                )),
                e => api_err(format!("reading the answer: {e}")),
            })?;
        let v: Value = match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => {
                let text = String::from_utf8_lossy(&body);
                let quoted: String = text.trim().chars().take(QUOTED_BODY).collect();
                return Err(api_err(if status.is_success() {
                    format!("not the query API's JSON ({e}): {quoted:?}")
                } else {
                    format!("HTTP {status}: {quoted:?}")
                }));
            }
        };
        if v["status"] != "success" {
            let what = match (v["errorType"].as_str(), v["error"].as_str()) {
                (Some(t), Some(e)) => format!("{t}: {e}"),
                (None, Some(e)) => e.to_string(),
                _ => format!("status {}", v["status"]),
            };
            return Err(api_err(format!("HTTP {status}: {what}")));
        }
        // A partial answer (a store or a vmstorage node not reached) would read as missing
        // history: refused.
        let warnings: Vec<&str> = v["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if !warnings.is_empty() {
            return Err(api_err(format!("partial answer: {}", warnings.join("; "))));
        }
        if v["isPartial"] == true {
            return Err(api_err(
                "partial answer (isPartial): some storage nodes did not answer".into(),
            ));
        }
        Ok(v["data"]["result"].clone())
    }

    /// An instant query: each series' labels and (time, value) samples (one for a vector,
    /// all in the range for a range selector).
    pub fn query(&self, q: &str, at: i64) -> Result<Answer, QueryError> {
        let r = self.call(
            "/api/v1/query",
            &[("query", q.to_string()), ("time", at.to_string())],
        )?;
        Ok(series(&r))
    }

    /// A range query at `step`.
    pub fn query_range(
        &self,
        q: &str,
        start: i64,
        end: i64,
        step: i64,
    ) -> Result<Answer, QueryError> {
        let r = self.call(
            "/api/v1/query_range",
            &[
                ("query", q.to_string()),
                ("start", start.to_string()),
                ("end", end.to_string()),
                ("step", step.to_string()),
                // VictoriaMetrics moves a long range's start onto a multiple of the step to
                // reuse its cache (`H + 3599` asked, `H + 3600` answered): the points would
                // no longer be at the times asked. `nocache` keeps them there; other servers
                // ignore the parameter.
                ("nocache", "1".to_string()),
            ],
        )?;
        Ok(series(&r))
    }
}

fn series(r: &Value) -> Answer {
    let sample = |s: &Value| -> Option<(i64, f64)> {
        Some((s[0].as_f64()? as i64, s[1].as_str()?.parse().ok()?))
    };
    r.as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let labels = s["metric"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect();
            let pts = match s["values"].as_array() {
                Some(v) => v.iter().filter_map(sample).collect(),
                None => sample(&s["value"]).into_iter().collect(),
            };
            (labels, pts)
        })
        .collect()
}

/// A PromQL label matcher's value, quoted.
pub(crate) fn quote(v: &str) -> String {
    format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A span of seconds as a PromQL range duration, in the largest unit that holds it whole
/// (`2d`, `36h`, `90m`, `45s`): a rule the daemon keeps in seconds, written in a query. A range
/// is never empty: under a second is `1s`.
pub(crate) fn range(seconds: i64) -> String {
    use crate::time::{DAY, HOUR, MINUTE};
    let s = seconds.max(1);
    for (unit, name) in [(DAY, "d"), (HOUR, "h"), (MINUTE, "m")] {
        if s % unit == 0 {
            return format!("{}{name}", s / unit);
        }
    }
    format!("{s}s")
}

#[cfg(test)]
mod range_tests {
    use super::range;
    use crate::time::{DAY, HOUR, MINUTE};

    #[test]
    fn a_span_is_written_in_the_largest_unit_that_holds_it_whole() {
        assert_eq!(range(2 * DAY), "2d");
        assert_eq!(range(36 * HOUR), "36h");
        assert_eq!(range(DAY + MINUTE), "1441m");
        assert_eq!(range(90), "90s");
        assert_eq!(range(0), "1s");
        assert_eq!(range(-5), "1s");
    }
}
