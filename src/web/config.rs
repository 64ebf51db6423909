//! The web configuration file of the Prometheus exporter-toolkit (`--web.config.file`) as typed
//! structs, and the checks serde can't make. Pure: no file besides the YAML text is read here.

use crate::validate::Invalid;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The whole file. Every key of exporter-toolkit's documented format is known; unknown keys are
/// refused with their line, like the main config.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct WebConfigFile {
    pub tls_server_config: Option<TlsServerConfig>,
    pub http_server_config: Option<HttpServerConfig>,
    /// user name → bcrypt hash.
    pub basic_auth_users: Option<BTreeMap<String, String>>,
    pub rate_limit: Option<RateLimit>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct TlsServerConfig {
    /// Inline PEM, instead of `cert_file`.
    pub cert: Option<String>,
    /// Inline PEM, instead of `key_file`.
    pub key: Option<String>,
    /// Inline PEM, instead of `client_ca_file`.
    pub client_ca: Option<String>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub client_auth_type: Option<ClientAuthType>,
    pub client_ca_file: Option<PathBuf>,
    pub client_allowed_sans: Option<Vec<String>>,
    pub min_version: Option<TlsVersion>,
    pub max_version: Option<TlsVersion>,
    pub cipher_suites: Option<Vec<String>>,
    pub prefer_server_cipher_suites: Option<bool>,
    pub curve_preferences: Option<Vec<String>>,
}

/// Go's `tls.ClientAuthType` names, as exporter-toolkit spells them.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
pub(crate) enum ClientAuthType {
    #[default]
    NoClientCert,
    RequestClientCert,
    /// `RequireClientCert` is exporter-toolkit's old spelling, still accepted there.
    #[serde(alias = "RequireClientCert")]
    RequireAnyClientCert,
    VerifyClientCertIfGiven,
    RequireAndVerifyClientCert,
}

impl ClientAuthType {
    /// Whether a client must present a certificate to connect.
    pub(crate) fn requires_cert(self) -> bool {
        matches!(
            self,
            ClientAuthType::RequireAnyClientCert | ClientAuthType::RequireAndVerifyClientCert
        )
    }

    /// Whether a presented certificate is checked against the client CA.
    pub(crate) fn verifies(self) -> bool {
        matches!(
            self,
            ClientAuthType::VerifyClientCertIfGiven | ClientAuthType::RequireAndVerifyClientCert
        )
    }
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TlsVersion {
    TLS10,
    TLS11,
    TLS12,
    TLS13,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct HttpServerConfig {
    /// Accepted for compatibility; ssdwatch serves HTTP/1.1 only (a scrape is one request).
    pub http2: Option<bool>,
    /// Extra response headers: only the five exporter-toolkit allows, checked in `validate`.
    pub headers: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RateLimit {
    /// Time between two requests; 0 (the default) disables the limiter.
    #[serde(with = "humantime_serde")]
    pub interval: Option<Duration>,
    pub burst: Option<u32>,
}

/// The response headers exporter-toolkit lets a web config set, with the values it accepts
/// (an empty list: any value). Kept to the same list so one file means the same everywhere.
pub(crate) const ALLOWED_HEADERS: [(&str, &[&str]); 5] = [
    ("Content-Security-Policy", &[]),
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
];

/// bcrypt costs above this take seconds per check (cost 16: ~5 s): a scrape would time out
/// before its first password check, and each wrong password would burn seconds of CPU.
pub(crate) const MAX_BCRYPT_COST: u32 = 16;

/// The longest rate-limit interval: one request a day is already a locked door.
const MAX_RATE_INTERVAL: Duration = Duration::from_secs(24 * 3600);

impl WebConfigFile {
    /// Parses the YAML text; `path` only names the source in errors. An empty file (or one of
    /// comments only) is the empty config: plain HTTP, no auth.
    pub(crate) fn parse(text: &str, path: &Path) -> Result<WebConfigFile, WebConfigError> {
        let blank = text.lines().all(|l| {
            let t = l.trim();
            t.is_empty() || t.starts_with('#') || t == "---"
        });
        let cfg: WebConfigFile = if blank {
            WebConfigFile::default()
        } else {
            crate::yaml_guard::check_depth(text)
                .map_err(|e| WebConfigError::new(path, e.to_string()))?;
            serde_yaml_ng::from_str(text).map_err(|e| WebConfigError::new(path, e.to_string()))?
        };
        cfg.validate().map_err(|i| {
            // Where the key is written, as for the main config; a required key left out is
            // shown by its section's line.
            let at = crate::yaml_line::locate(text, &i.key).required_suffix();
            WebConfigError::new(path, format!("{i}{at}"))
        })?;
        Ok(cfg)
    }

    /// Checks what serde can't: combinations, header names and values, hash syntax, ranges.
    /// Certificates and keys are checked when they are loaded (`tls::build`).
    pub(crate) fn validate(&self) -> Result<(), Invalid> {
        if let Some(tls) = &self.tls_server_config {
            tls.validate()?;
        }
        if let Some(headers) = self
            .http_server_config
            .as_ref()
            .and_then(|h| h.headers.as_ref())
        {
            for (name, value) in headers {
                check_header(name, value)?;
            }
        }
        for (user, hash) in self.basic_auth_users.iter().flatten() {
            check_bcrypt_hash(hash)
                .map_err(|m| Invalid::new(format!("basic_auth_users.{user}"), m))?;
        }
        if let Some(r) = &self.rate_limit {
            let interval = r.interval.unwrap_or_default();
            if interval > MAX_RATE_INTERVAL {
                return Err(Invalid::new("rate_limit.interval", "longer than 24h"));
            }
            if !interval.is_zero() && r.burst.unwrap_or(0) == 0 {
                return Err(Invalid::new(
                    "rate_limit.burst",
                    "must be at least 1 when rate_limit.interval is set (a burst of 0 refuses every request)",
                ));
            }
        }
        Ok(())
    }

    /// Whether any TLS key is set: exporter-toolkit's test for serving HTTPS.
    pub(crate) fn tls_enabled(&self) -> bool {
        self.tls_server_config.as_ref().is_some_and(|t| {
            t.cert.is_some()
                || t.key.is_some()
                || t.cert_file.is_some()
                || t.key_file.is_some()
                || t.client_ca.is_some()
                || t.client_ca_file.is_some()
                || t.client_auth_type.is_some()
        })
    }
}

impl TlsServerConfig {
    fn validate(&self) -> Result<(), Invalid> {
        let key = |k: &str| format!("tls_server_config.{k}");
        if self.cert.is_some() && self.cert_file.is_some() {
            return Err(Invalid::new(
                key("cert"),
                "set either cert or cert_file, not both",
            ));
        }
        if self.key.is_some() && self.key_file.is_some() {
            return Err(Invalid::new(
                key("key"),
                "set either key or key_file, not both",
            ));
        }
        if self.client_ca.is_some() && self.client_ca_file.is_some() {
            return Err(Invalid::new(
                key("client_ca"),
                "set either client_ca or client_ca_file, not both",
            ));
        }
        if self.cert.is_none() && self.cert_file.is_none() {
            return Err(Invalid::new(
                key("cert_file"),
                "missing one of cert or cert_file",
            ));
        }
        if self.key.is_none() && self.key_file.is_none() {
            return Err(Invalid::new(
                key("key_file"),
                "missing one of key or key_file",
            ));
        }
        let auth = self.client_auth_type.unwrap_or_default();
        let has_ca = self.client_ca.is_some() || self.client_ca_file.is_some();
        if has_ca && auth == ClientAuthType::NoClientCert {
            return Err(Invalid::new(
                key("client_auth_type"),
                "a client CA is configured but client_auth_type is NoClientCert; use RequireAndVerifyClientCert",
            ));
        }
        if auth.verifies() && !has_ca {
            return Err(Invalid::new(
                key("client_ca_file"),
                format!(
                    "{auth:?} needs client_ca_file (or client_ca) to verify client certificates against"
                ),
            ));
        }
        if let Some(sans) = &self.client_allowed_sans {
            if !auth.requires_cert() {
                return Err(Invalid::new(
                    key("client_allowed_sans"),
                    "requires client_auth_type RequireAnyClientCert or RequireAndVerifyClientCert",
                ));
            }
            for san in sans {
                if san.parse::<std::net::IpAddr>().is_ok() || san.contains('@') {
                    return Err(Invalid::new(
                        key("client_allowed_sans"),
                        format!(
                            "{san:?}: only DNS-name and URI SANs can be matched here (not IP addresses or e-mail addresses)"
                        ),
                    ));
                }
            }
        }
        if let Some(max) = self.max_version
            && max < TlsVersion::TLS12
        {
            return Err(Invalid::new(
                key("max_version"),
                format!(
                    "{max:?}: TLS 1.0 and 1.1 are not offered (rustls implements TLS12 and TLS13 only)"
                ),
            ));
        }
        if let (Some(min), Some(max)) = (self.min_version, self.max_version)
            && min > max
        {
            return Err(Invalid::new(
                key("min_version"),
                format!("{min:?} is above max_version {max:?}"),
            ));
        }
        for name in self.cipher_suites.iter().flatten() {
            cipher_suite(name).map_err(|e| Invalid::new(key("cipher_suites"), e.to_string()))?;
        }
        for name in self.curve_preferences.iter().flatten() {
            curve(name).map_err(|e| Invalid::new(key("curve_preferences"), e.to_string()))?;
        }
        Ok(())
    }
}

/// What a Go cipher-suite name means here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CipherChoice {
    /// A TLS 1.2 suite rustls offers, by its IANA name.
    Tls12(rustls::CipherSuite),
    /// A TLS 1.3 suite: Go ignores these in `cipher_suites` (TLS 1.3 suites are not
    /// configurable there) and so do we; all three stay on.
    Tls13,
}

/// A cipher suite or curve name of Go's that the server can't take, and why.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsNameError {
    #[error(
        "{0}: not offered by rustls, which implements only ECDHE suites with AES-GCM or ChaCha20-Poly1305 \
         (use e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)"
    )]
    SuiteNotInRustls(String),
    #[error("{0}: unknown cipher suite")]
    UnknownSuite(String),
    #[error(
        "CurveP521: not offered by rustls's ring provider (use X25519, CurveP256 or CurveP384)"
    )]
    P521,
    #[error("{0}: unknown curve (X25519, CurveP256, CurveP384)")]
    UnknownCurve(String),
}

/// Maps a name of Go's `tls.CipherSuites()` to rustls. Suites Go knows but rustls does not
/// implement (CBC modes, RSA key exchange) are refused by name rather than skipped.
pub(crate) fn cipher_suite(name: &str) -> Result<CipherChoice, TlsNameError> {
    use rustls::CipherSuite as C;
    let suite = match name {
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" => C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384" => C::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" => C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384" => C::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
        | "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305" => {
            C::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
        }
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256" | "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" => {
            C::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
        }
        "TLS_AES_128_GCM_SHA256" | "TLS_AES_256_GCM_SHA384" | "TLS_CHACHA20_POLY1305_SHA256" => {
            return Ok(CipherChoice::Tls13);
        }
        other
            if other.starts_with("TLS_")
                && (other.contains("_CBC_") || other.starts_with("TLS_RSA_")) =>
        {
            return Err(TlsNameError::SuiteNotInRustls(other.to_string()));
        }
        other => return Err(TlsNameError::UnknownSuite(other.to_string())),
    };
    Ok(CipherChoice::Tls12(suite))
}

/// Maps a Go curve name to rustls's key-exchange group.
pub(crate) fn curve(name: &str) -> Result<rustls::NamedGroup, TlsNameError> {
    use rustls::NamedGroup as G;
    match name {
        "X25519" => Ok(G::X25519),
        "CurveP256" => Ok(G::secp256r1),
        "CurveP384" => Ok(G::secp384r1),
        "CurveP521" => Err(TlsNameError::P521),
        other => Err(TlsNameError::UnknownCurve(other.to_string())),
    }
}

/// A header exporter-toolkit allows, with a value it allows.
fn check_header(name: &str, value: &str) -> Result<(), Invalid> {
    let key = format!("http_server_config.headers.{name}");
    let Some((_, allowed)) = ALLOWED_HEADERS.iter().find(|(n, _)| *n == name) else {
        let names: Vec<&str> = ALLOWED_HEADERS.iter().map(|(n, _)| *n).collect();
        return Err(Invalid::new(
            key,
            format!(
                "this header can not be configured; allowed: {}",
                names.join(", ")
            ),
        ));
    };
    if !allowed.is_empty() && !allowed.contains(&value) {
        return Err(Invalid::new(
            key,
            format!("{value:?} is not one of {allowed:?}"),
        ));
    }
    if axum::http::HeaderValue::from_str(value).is_err() {
        return Err(Invalid::new(key, "not a valid header value"));
    }
    Ok(())
}

/// A bcrypt hash as htpasswd and Go's bcrypt write it, with a cost this daemon can afford.
fn check_bcrypt_hash(hash: &str) -> Result<(), String> {
    let parts: bcrypt::HashParts = hash.parse().map_err(|e| {
        format!("not a bcrypt hash ({e}); make one with: htpasswd -nBC 10 \"\" | tr -d ':\\n'")
    })?;
    let cost = parts.get_cost();
    if cost > MAX_BCRYPT_COST {
        return Err(format!(
            "bcrypt cost {cost} is above {MAX_BCRYPT_COST}: every uncached check would take seconds of CPU"
        ));
    }
    Ok(())
}

/// A web config file that can't be used: the file, and what is wrong (key and line in the
/// message).
#[derive(Debug, Clone, thiserror::Error)]
#[error("web config file {path}: {message}")]
pub(crate) struct WebConfigError {
    pub path: PathBuf,
    pub message: String,
}

impl WebConfigError {
    pub(crate) fn new(path: &Path, message: impl Into<String>) -> Self {
        WebConfigError {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<WebConfigFile, String> {
        WebConfigFile::parse(s, Path::new("/etc/ssdwatch/web.yml")).map_err(|e| e.to_string())
    }

    const HASH: &str = "$2y$10$mDwo.lAisC94iLAyP81MCesa29IzH37oigHC/42V2pdJlUprsJPze";

    #[test]
    fn exporter_toolkits_sample_file_parses() {
        // docs/web-config.yml of exporter-toolkit, as a node_exporter user would have it.
        let text = format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n\
             basic_auth_users:\n  alice: {HASH}\n  bob: $2y$10$hLqFl9jSjoAAy95Z/zw8Ye8wkdMBM8c5Bn1ptYqP/AXyV0.oy0S8m\n\
             rate_limit:\n  interval: \"1s\"\n  burst: 20\n"
        );
        let cfg = parse(&text).unwrap();
        assert!(cfg.tls_enabled());
        assert_eq!(cfg.basic_auth_users.unwrap().len(), 2);
        assert_eq!(cfg.rate_limit.unwrap().burst, Some(20));
    }

    #[test]
    fn empty_and_null_sections_mean_plain_http_without_auth() {
        assert_eq!(parse("# nothing\n").unwrap(), WebConfigFile::default());
        let cfg = parse("basic_auth_users:\ntls_server_config:\n").unwrap();
        assert!(!cfg.tls_enabled());
    }

    #[test]
    fn unknown_key_is_refused_with_its_path_and_line() {
        let err =
            parse("tls_server_config:\n  cert_file: a\n  key_file: b\n  bogus: 1\n").unwrap_err();
        assert!(err.contains("/etc/ssdwatch/web.yml"), "{err}");
        assert!(err.contains("bogus") && err.contains("line 4"), "{err}");
    }

    #[test]
    fn bad_values_name_their_key() {
        let cases = [
            (
                "basic_auth_users:\n  alice: hunter2\n",
                "basic_auth_users.alice",
            ),
            (
                "basic_auth_users:\n  alice: $2y$17$mDwo.lAisC94iLAyP81MCesa29IzH37oigHC/42V2pdJlUprsJPze\n",
                "cost 17",
            ),
            (
                "http_server_config:\n  headers:\n    Server: x\n",
                "headers.Server",
            ),
            (
                "http_server_config:\n  headers:\n    X-Frame-Options: allow\n",
                "X-Frame-Options",
            ),
            (
                "tls_server_config:\n  key_file: k\n",
                "missing one of cert or cert_file",
            ),
            (
                "tls_server_config:\n  cert_file: c\n  key_file: k\n  max_version: TLS11\n",
                "max_version",
            ),
            (
                "tls_server_config:\n  cert_file: c\n  key_file: k\n  min_version: TLS13\n  max_version: TLS12\n",
                "min_version",
            ),
            (
                "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_auth_type: Sometimes\n",
                "unknown variant `Sometimes`",
            ),
            (
                "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_ca_file: ca\n",
                "NoClientCert",
            ),
            (
                "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_auth_type: RequireAndVerifyClientCert\n",
                "client_ca_file",
            ),
            (
                "tls_server_config:\n  cert_file: c\n  key_file: k\n  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA]\n",
                "not offered by rustls",
            ),
            (
                "tls_server_config:\n  cert_file: c\n  key_file: k\n  curve_preferences: [CurveP521]\n",
                "CurveP521",
            ),
            (
                "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_allowed_sans: [a]\n",
                "client_allowed_sans",
            ),
            ("rate_limit:\n  interval: 1s\n", "rate_limit.burst"),
        ];
        for (text, want) in cases {
            let err = parse(text).unwrap_err();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }

    #[test]
    fn a_refused_value_names_the_line_of_its_key_or_of_its_section() {
        let err = parse("# web\nhttp_server_config:\n  headers:\n    Server: x\n").unwrap_err();
        assert!(
            err.contains("http_server_config.headers.Server") && err.ends_with(" at line 4"),
            "{err}"
        );
        let err = parse("\nrate_limit:\n  interval: 1s\n").unwrap_err();
        assert!(
            err.contains("rate_limit.burst")
                && err.ends_with(" (not in the file; rate_limit is at line 2)"),
            "{err}"
        );
    }

    #[test]
    fn tls10_and_tls11_as_minimum_are_accepted() {
        for v in ["TLS10", "TLS11"] {
            let text =
                format!("tls_server_config:\n  cert_file: c\n  key_file: k\n  min_version: {v}\n");
            assert!(parse(&text).is_ok(), "{v}");
        }
    }

    #[test]
    fn go_cipher_names_map_to_rustls_or_are_refused_by_name() {
        assert!(matches!(
            cipher_suite("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305"),
            Ok(CipherChoice::Tls12(_))
        ));
        assert!(matches!(
            cipher_suite("TLS_AES_128_GCM_SHA256"),
            Ok(CipherChoice::Tls13)
        ));
        assert!(matches!(
            cipher_suite("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"),
            Err(TlsNameError::SuiteNotInRustls(_))
        ));
        assert_eq!(
            cipher_suite("TLS_NOPE").unwrap_err().to_string(),
            "TLS_NOPE: unknown cipher suite"
        );
    }
}
