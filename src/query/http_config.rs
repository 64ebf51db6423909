//! The HTTP client config file of `--http.config.file`: Prometheus' `http_config` schema, as
//! promtool reads it (the keys at the top level). Pure: parses and checks the YAML text; the
//! files it names (passwords, tokens, certificates) are read by `client` at each use.

use crate::validate::Invalid;
use crate::yaml_line::Place;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The whole file. Keys of Prometheus' schema that ssdwatch does not implement (`oauth2`,
/// `proxy_from_environment`, ...) are refused with their line, never ignored: a file that
/// asks for something the client would not do is wrong, not half right.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct HttpConfig {
    pub basic_auth: Option<BasicAuth>,
    pub authorization: Option<Authorization>,
    /// Prometheus' older spelling of `authorization: {credentials: ...}`.
    pub bearer_token: Option<String>,
    pub bearer_token_file: Option<PathBuf>,
    pub tls_config: Option<TlsConfig>,
    /// An HTTP proxy (CONNECT for https URLs): `http://proxy:3128`.
    pub proxy_url: Option<String>,
    /// Headers added to every request (`X-Scope-OrgID` for Mimir and Cortex).
    pub http_headers: Option<BTreeMap<String, Header>>,
    /// Accepted as Prometheus has it: redirects are followed (at most 3) unless false.
    pub follow_redirects: Option<bool>,
    /// Accepted for compatibility; the client speaks HTTP/1.1.
    pub enable_http2: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct BasicAuth {
    pub username: Option<String>,
    pub username_file: Option<PathBuf>,
    pub password: Option<String>,
    pub password_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Authorization {
    /// `Bearer` when absent.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub credentials: Option<String>,
    pub credentials_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct TlsConfig {
    /// Inline PEM, instead of `ca_file`.
    pub ca: Option<String>,
    pub ca_file: Option<PathBuf>,
    pub cert: Option<String>,
    pub cert_file: Option<PathBuf>,
    pub key: Option<String>,
    pub key_file: Option<PathBuf>,
    /// The name the server's certificate is checked against (and sent as SNI), instead of
    /// the URL's host.
    pub server_name: Option<String>,
    pub insecure_skip_verify: Option<bool>,
    pub min_version: Option<String>,
    pub max_version: Option<String>,
}

/// One header's values, as Prometheus' `http_headers` has them: plain values, secrets (the
/// same, kept out of logs) and files whose content is the value (read at each use).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Header {
    pub values: Vec<String>,
    pub secrets: Vec<String>,
    pub files: Vec<PathBuf>,
}

/// Headers the client sets itself: a file may not replace them (Prometheus refuses the same).
const RESERVED_HEADERS: [&str; 7] = [
    "authorization",
    "host",
    "content-length",
    "content-type",
    "connection",
    "transfer-encoding",
    "user-agent",
];

/// At most this many headers and values a header: a config, not a payload.
const MAX_HEADERS: usize = 32;
const MAX_VALUES: usize = 16;

impl HttpConfig {
    /// Parses the YAML text; `path` names the source in errors. An empty file is the empty
    /// config (no auth, the system's CAs).
    pub(crate) fn parse(text: &str, path: &Path) -> Result<HttpConfig, HttpConfigError> {
        let blank = text.lines().all(|l| {
            let t = l.trim();
            t.is_empty() || t.starts_with('#') || t == "---"
        });
        if blank {
            return Ok(HttpConfig::default());
        }
        crate::yaml_guard::check_depth(text)
            .map_err(|e| HttpConfigError::new(path, e.to_string()))?;
        let cfg: HttpConfig = serde_yaml_ng::from_str(text).map_err(|e| {
            let mut m = e.to_string();
            // A top-level key's error comes without its place: found by the key's name.
            if !m.contains("line ")
                && let Some(key) = m.split('`').nth(1)
                && let Place::Line(n) = crate::yaml_line::locate(text, key)
            {
                m.push_str(&format!(" at line {n}"));
            }
            HttpConfigError::new(path, m)
        })?;
        cfg.validate().map_err(|i| {
            // Where the key is written, as for the main config; a required key left out is
            // shown by its section's line.
            let at = crate::yaml_line::locate(text, &i.key).required_suffix();
            HttpConfigError::new(path, format!("{i}{at}"))
        })?;
        Ok(cfg)
    }

    /// What serde can't check: one source per secret, one kind of auth, header names, the
    /// proxy's scheme, TLS versions.
    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        let auths = [
            self.basic_auth.is_some(),
            self.authorization.is_some(),
            self.bearer_token.is_some() || self.bearer_token_file.is_some(),
        ];
        if auths.iter().filter(|a| **a).count() > 1 {
            let key = if self.authorization.is_some() {
                "authorization"
            } else {
                "bearer_token"
            };
            return Err(Invalid::new(
                key,
                "only one of basic_auth, authorization and bearer_token may be set",
            ));
        }
        one_source(&self.bearer_token, &self.bearer_token_file, "bearer_token")?;
        if let Some(b) = &self.basic_auth {
            b.validate()?;
        }
        if let Some(a) = &self.authorization {
            a.validate()?;
        }
        if let Some(t) = &self.tls_config {
            t.validate()?;
        }
        if let Some(p) = &self.proxy_url {
            proxy_url(p)?;
        }
        if let Some(h) = &self.http_headers {
            http_headers(h)?;
        }
        Ok(())
    }
}

/// A secret or PEM given inline (`key`) or from a file (`key_file`), not both.
fn one_source<A, B>(inline: &Option<A>, file: &Option<B>, key: &str) -> Result<(), Invalid> {
    if inline.is_some() && file.is_some() {
        return Err(Invalid::new(
            format!("{key}_file"),
            format!("set with {key}: give one"),
        ));
    }
    Ok(())
}

impl BasicAuth {
    /// One source of each secret, and a username.
    fn validate(&self) -> Result<(), Invalid> {
        one_source(&self.username, &self.username_file, "basic_auth.username")?;
        if self.username.is_none() && self.username_file.is_none() {
            return Err(Invalid::new(
                "basic_auth.username",
                "not set (or username_file)",
            ));
        }
        one_source(&self.password, &self.password_file, "basic_auth.password")?;
        Ok(())
    }
}

impl Authorization {
    /// One source of the credentials, and a scheme that is one (and not Basic).
    fn validate(&self) -> Result<(), Invalid> {
        one_source(
            &self.credentials,
            &self.credentials_file,
            "authorization.credentials",
        )?;
        if let Some(k) = &self.kind
            && (k.is_empty() || !k.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-'))
        {
            return Err(Invalid::new(
                "authorization.type",
                format!("{k:?} is not an HTTP auth scheme"),
            ));
        }
        if self
            .kind
            .as_deref()
            .is_some_and(|k| k.eq_ignore_ascii_case("basic"))
        {
            return Err(Invalid::new(
                "authorization.type",
                "Basic is set with basic_auth, not authorization",
            ));
        }
        Ok(())
    }
}

impl TlsConfig {
    /// One source of each PEM, a certificate with its key, known versions, a server name
    /// that is one.
    fn validate(&self) -> Result<(), Invalid> {
        for (inline, file, name) in [
            (&self.ca, &self.ca_file, "ca"),
            (&self.cert, &self.cert_file, "cert"),
            (&self.key, &self.key_file, "key"),
        ] {
            one_source(inline, file, &format!("tls_config.{name}"))?;
        }
        let cert = self.cert.is_some() || self.cert_file.is_some();
        let key = self.key.is_some() || self.key_file.is_some();
        if cert != key {
            return Err(Invalid::new(
                if cert {
                    "tls_config.cert_file"
                } else {
                    "tls_config.key_file"
                },
                "a client certificate needs both cert_file and key_file",
            ));
        }
        for (v, name) in [
            (&self.min_version, "min_version"),
            (&self.max_version, "max_version"),
        ] {
            if let Some(v) = v
                && !matches!(v.as_str(), "TLS10" | "TLS11" | "TLS12" | "TLS13")
            {
                return Err(Invalid::new(
                    format!("tls_config.{name}"),
                    format!("{v:?}: one of TLS10, TLS11, TLS12, TLS13"),
                ));
            }
        }
        if let Some(n) = &self.server_name
            && rustls::pki_types::ServerName::try_from(n.as_str()).is_err()
        {
            return Err(Invalid::new(
                "tls_config.server_name",
                format!("{n:?} is not a DNS name or IP address"),
            ));
        }
        Ok(())
    }
}

/// An http:// or https:// proxy URL the client takes.
fn proxy_url(p: &str) -> Result<(), Invalid> {
    let scheme_ok = p.starts_with("http://") || p.starts_with("https://");
    if !scheme_ok || ureq::Proxy::new(p).is_err() {
        return Err(Invalid::new(
            "proxy_url",
            format!("{p:?}: an http:// or https:// proxy URL"),
        ));
    }
    Ok(())
}

/// Headers by name: a bounded number, names HTTP allows and the client does not set itself,
/// values without control characters.
fn http_headers(h: &BTreeMap<String, Header>) -> Result<(), Invalid> {
    if h.len() > MAX_HEADERS {
        return Err(Invalid::new(
            "http_headers",
            format!("more than {MAX_HEADERS} headers"),
        ));
    }
    for (name, v) in h {
        let key = format!("http_headers.{name}");
        if name.is_empty()
            || !name
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c))
        {
            return Err(Invalid::new(key, "not an HTTP header name"));
        }
        if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            return Err(Invalid::new(
                key,
                "set by the client itself (authorization: basic_auth or authorization)",
            ));
        }
        if v.values.len() + v.secrets.len() + v.files.len() > MAX_VALUES {
            return Err(Invalid::new(key, format!("more than {MAX_VALUES} values")));
        }
        if let Some(bad) = v
            .values
            .iter()
            .chain(&v.secrets)
            .find(|x| !header_value_ok(x))
        {
            return Err(Invalid::new(
                key,
                format!("a value with a control character ({} bytes)", bad.len()),
            ));
        }
    }
    Ok(())
}

/// A header value as HTTP/1.1 carries it: visible characters, spaces and tabs.
pub(crate) fn header_value_ok(v: &str) -> bool {
    v.chars().all(|c| c == '\t' || !c.is_control())
}

/// An HTTP client config file that can't be used: the file and what is wrong (key and line).
#[derive(Debug, Clone, thiserror::Error)]
#[error("http config file {path}: {message}")]
pub(crate) struct HttpConfigError {
    pub path: PathBuf,
    pub message: String,
}

impl HttpConfigError {
    pub(crate) fn new(path: &Path, message: impl Into<String>) -> Self {
        HttpConfigError {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<HttpConfig, String> {
        HttpConfig::parse(s, Path::new("/etc/ssdwatch/http.yml")).map_err(|e| e.to_string())
    }

    #[test]
    fn prometheus_documented_client_config_parses() {
        let cfg = parse(
            "basic_auth:\n  username: ssdwatch\n  password_file: /etc/ssdwatch/prom.pass\n\
             tls_config:\n  ca_file: ca.pem\n  cert_file: client.pem\n  key_file: client.key\n  \
             server_name: prometheus.example\n  insecure_skip_verify: false\n\
             http_headers:\n  X-Scope-OrgID:\n    values: [dbfleet]\n\
             follow_redirects: true\nenable_http2: false\n",
        )
        .unwrap();
        assert_eq!(
            cfg.basic_auth.unwrap().username.as_deref(),
            Some("ssdwatch")
        );
        let t = cfg.tls_config.unwrap();
        assert_eq!(t.server_name.as_deref(), Some("prometheus.example"));
        assert_eq!(
            cfg.http_headers.unwrap()["X-Scope-OrgID"].values,
            vec!["dbfleet".to_string()]
        );
    }

    #[test]
    fn empty_file_is_no_auth() {
        assert_eq!(parse("# none\n").unwrap(), HttpConfig::default());
    }

    #[test]
    fn an_unknown_or_unsupported_key_is_refused_with_its_line() {
        let err = parse("basic_auth:\n  username: a\n  pasword: b\n").unwrap_err();
        assert!(err.contains("pasword") && err.contains("line 3"), "{err}");
        let err = parse("oauth2:\n  client_id: x\n").unwrap_err();
        assert!(err.contains("oauth2") && err.contains("line 1"), "{err}");
    }

    #[test]
    fn a_value_given_inline_and_from_a_file_is_refused_naming_the_file_key() {
        for (yaml, key) in [
            (
                "bearer_token: t\nbearer_token_file: /t\n",
                "bearer_token_file",
            ),
            (
                "basic_auth:\n  username: a\n  username_file: /u\n",
                "basic_auth.username_file",
            ),
            (
                "authorization:\n  credentials: t\n  credentials_file: /c\n",
                "authorization.credentials_file",
            ),
            (
                "tls_config:\n  ca: x\n  ca_file: /ca.pem\n",
                "tls_config.ca_file",
            ),
        ] {
            let err = parse(yaml).unwrap_err();
            assert!(
                err.contains(key) && err.contains("give one"),
                "{yaml}: {err}"
            );
        }
    }

    #[test]
    fn conflicting_settings_name_their_key_and_line() {
        let err =
            parse("basic_auth:\n  username: a\n  password: b\n  password_file: /p\n").unwrap_err();
        assert!(
            err.contains("basic_auth.password_file") && err.ends_with("at line 4"),
            "{err}"
        );
        let err =
            parse("basic_auth:\n  username: a\nauthorization:\n  credentials: t\n").unwrap_err();
        assert!(
            err.contains("authorization") && err.contains("line 3"),
            "{err}"
        );
        let err = parse("tls_config:\n  cert_file: c.pem\n").unwrap_err();
        assert!(err.contains("both cert_file and key_file"), "{err}");
        let err = parse("proxy_url: socks5://p:1080\n").unwrap_err();
        assert!(err.contains("proxy_url") && err.contains("line 1"), "{err}");
        let err = parse("http_headers:\n  Authorization:\n    values: [x]\n").unwrap_err();
        assert!(err.contains("http_headers.Authorization"), "{err}");
        let err = parse("tls_config:\n  min_version: TLS9\n").unwrap_err();
        assert!(
            err.contains("tls_config.min_version") && err.contains("line 2"),
            "{err}"
        );
    }
}
