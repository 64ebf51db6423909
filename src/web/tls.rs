//! Turns a `tls_server_config` into a rustls server config: reads the certificate, key and
//! client CA (PEM), picks versions, suites, groups and the client-certificate policy.
//! Never accepts a connection itself; never OpenSSL (rustls on ring).

use crate::config::{MAX_CONFIG_BYTES, read_config_file};
use crate::validate::Invalid;
use crate::web::config::{
    CipherChoice, ClientAuthType, TlsServerConfig, TlsVersion, cipher_suite, curve,
};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn key(k: &str) -> String {
    format!("tls_server_config.{k}")
}

/// The files a config reads (resolved against the web config's directory, as exporter-toolkit
/// does), so a watcher can reload when one of them changes.
pub(crate) fn files(t: &TlsServerConfig, dir: &Path) -> Vec<PathBuf> {
    [&t.cert_file, &t.key_file, &t.client_ca_file]
        .into_iter()
        .flatten()
        .map(|p| dir.join(p))
        .collect()
}

/// Why a PEM value could not be had: the file that could not be read, or what is wrong with
/// the text (the caller names the config key it came from).
#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsError {
    #[error("{}: {cause}", path.display())]
    Read {
        path: PathBuf,
        cause: crate::config::ReadError,
    },
    #[error("bad PEM: {0}")]
    BadPem(rustls::pki_types::pem::Error),
    #[error("no PEM certificate found")]
    NoCertificate,
}

/// An inline PEM value, or the file it names (relative to `dir`), read as config files are;
/// None when neither is set. Shared by the server's TLS and the query client's.
pub(crate) fn pem_or_file(
    inline: &Option<String>,
    file: &Option<PathBuf>,
    dir: &Path,
) -> Result<Option<Vec<u8>>, TlsError> {
    match (inline, file) {
        (Some(text), _) => Ok(Some(text.as_bytes().to_vec())),
        (None, Some(p)) => {
            let path = dir.join(p);
            match read_config_file(&path, MAX_CONFIG_BYTES) {
                Ok(pem) => Ok(Some(pem)),
                Err(cause) => Err(TlsError::Read { path, cause }),
            }
        }
        (None, None) => Ok(None),
    }
}

/// The certificates of a PEM text: an error when it is not PEM or holds none.
pub(crate) fn pem_certs(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(TlsError::BadPem)?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    Ok(certs)
}

/// Reads an inline PEM value or the file behind `file_key`.
fn pem_source(
    inline: &Option<String>,
    file: &Option<PathBuf>,
    file_key: &str,
    dir: &Path,
) -> Result<Vec<u8>, Invalid> {
    pem_or_file(inline, file, dir)
        .map_err(|e| Invalid::new(key(file_key), e.to_string()))?
        .ok_or_else(|| Invalid::new(key(file_key), "not set"))
}

fn certs(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, Invalid> {
    pem_certs(pem).map_err(|e| Invalid::new(key(what), e.to_string()))
}

/// Builds the rustls config. `min_version` TLS10/TLS11 means "TLS 1.2 is the floor": rustls
/// implements nothing older, and refusing the file would only keep a node_exporter user from
/// switching; the caller logs it.
pub(crate) fn build(t: &TlsServerConfig, dir: &Path) -> Result<Arc<ServerConfig>, Invalid> {
    let cert_pem = pem_source(&t.cert, &t.cert_file, "cert_file", dir)?;
    let key_pem = pem_source(&t.key, &t.key_file, "key_file", dir)?;
    let chain = certs(&cert_pem, "cert_file")?;
    let private = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| Invalid::new(key("key_file"), format!("no usable PEM private key: {e}")))?;

    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(names) = &t.cipher_suites {
        let mut wanted = Vec::new();
        for n in names {
            if let CipherChoice::Tls12(s) =
                cipher_suite(n).map_err(|e| Invalid::new(key("cipher_suites"), e.to_string()))?
            {
                wanted.push(s);
            }
        }
        if !wanted.is_empty() {
            // TLS 1.3 suites stay (Go does the same); TLS 1.2 ones in the order given.
            let all = provider.cipher_suites.clone();
            let mut suites: Vec<_> = all
                .iter()
                .filter(|s| s.tls13().is_some())
                .copied()
                .collect();
            for w in wanted {
                suites.extend(all.iter().filter(|s| s.suite() == w).copied());
            }
            provider.cipher_suites = suites;
        }
    }
    if let Some(names) = &t.curve_preferences
        && !names.is_empty()
    {
        let all = provider.kx_groups.clone();
        let mut groups = Vec::new();
        for n in names {
            let g = curve(n).map_err(|e| Invalid::new(key("curve_preferences"), e.to_string()))?;
            groups.extend(all.iter().filter(|k| k.name() == g).copied());
        }
        provider.kx_groups = groups;
    }
    let provider = Arc::new(provider);

    let min = t
        .min_version
        .unwrap_or(TlsVersion::TLS12)
        .max(TlsVersion::TLS12);
    let max = t.max_version.unwrap_or(TlsVersion::TLS13);
    let mut versions = Vec::new();
    if min <= TlsVersion::TLS12 && max >= TlsVersion::TLS12 {
        versions.push(&rustls::version::TLS12);
    }
    if max >= TlsVersion::TLS13 {
        versions.push(&rustls::version::TLS13);
    }

    let verifier = client_verifier(t, dir, &provider)?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| Invalid::new(key("min_version"), e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, private)
        .map_err(|e| Invalid::new(key("key_file"), format!("does not go with cert_file: {e}")))?;
    config.ignore_client_order = t.prefer_server_cipher_suites.unwrap_or(true);
    // HTTP/1.1 only: a scrape is one request.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn client_verifier(
    t: &TlsServerConfig,
    dir: &Path,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, Invalid> {
    let auth = t.client_auth_type.unwrap_or_default();
    if auth == ClientAuthType::NoClientCert {
        return Ok(WebPkiClientVerifier::no_client_auth());
    }
    let ca = if auth.verifies() {
        let pem = pem_source(&t.client_ca, &t.client_ca_file, "client_ca_file", dir)?;
        let mut roots = RootCertStore::empty();
        for c in certs(&pem, "client_ca_file")? {
            roots.add(c).map_err(|e| {
                Invalid::new(key("client_ca_file"), format!("not a CA certificate: {e}"))
            })?;
        }
        // allow_unauthenticated only matters for VerifyClientCertIfGiven: whether a
        // certificate is required is `ClientPolicy::mandatory`'s answer.
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .allow_unauthenticated()
                .build()
                .map_err(|e| Invalid::new(key("client_ca_file"), e.to_string()))?;
        Some(verifier)
    } else {
        None
    };
    Ok(Arc::new(ClientPolicy {
        mandatory: auth.requires_cert(),
        ca,
        sans: t.client_allowed_sans.clone(),
        algs: provider.signature_verification_algorithms,
    }))
}

/// A client-certificate policy of Go's: a certificate asked for, or required (`mandatory`);
/// checked against the client CA when there is one (`ca`: the Verify* types; the others take
/// any certificate, as in Go); then, with `client_allowed_sans`, it must carry one of those
/// DNS or URI SANs, compared exactly. The handshake signature is always verified.
#[derive(Debug)]
struct ClientPolicy {
    mandatory: bool,
    ca: Option<Arc<dyn ClientCertVerifier>>,
    sans: Option<Vec<String>>,
    algs: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for ClientPolicy {
    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.ca.as_ref().map_or(&[], |ca| ca.root_hint_subjects())
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if let Some(ca) = &self.ca {
            ca.verify_client_cert(end_entity, intermediates, now)?;
        }
        if let Some(sans) = &self.sans {
            let cert = webpki::EndEntityCert::try_from(end_entity).map_err(|_| {
                rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding)
            })?;
            let found = cert
                .valid_dns_names()
                .chain(cert.valid_uri_names())
                .any(|n| sans.iter().any(|s| s == n));
            if !found {
                return Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName,
                ));
            }
        }
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}
