//! The TLS step of the query client's connections: a rustls client config built from
//! `tls_config` (CA, client certificate, server name, verification off), and a ureq connector
//! that uses it. ureq's own rustls connector can't check a certificate against a name other
//! than the URL's host (`server_name`), so this one replaces it.

use super::http_config::TlsConfig;
use crate::config::{MAX_CONFIG_BYTES, read_config_file};
use crate::web::tls::{TlsError, pem_certs, pem_or_file};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, StreamOwned};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, Transport,
    TransportAdapter,
};

/// Where Debian, Fedora/RHEL, openSUSE and Alpine keep the system's CA bundle (Go's list,
/// which promtool uses); `SSL_CERT_FILE` first, as Go reads it.
const SYSTEM_BUNDLES: [&str; 5] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// Why the query client's TLS config can't be built, naming the `tls_config` key at fault.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientTlsError {
    #[error("tls_config.{key}_file {source}")]
    File { key: &'static str, source: TlsError },
    #[error("{what}: {source}")]
    Certificates { what: String, source: TlsError },
    #[error("no tls_config.ca_file and no system CA bundle ({})", SYSTEM_BUNDLES.join(", "))]
    NoSystemBundle,
    #[error("tls_config.ca_file: no usable CA certificate")]
    NoUsableCa,
    #[error("tls_config.min_version: {0}")]
    Versions(rustls::Error),
    #[error("tls_config.key_file: no usable PEM private key: {0}")]
    Key(rustls::pki_types::pem::Error),
    #[error("tls_config.key_file: does not go with cert_file: {0}")]
    KeyMismatch(rustls::Error),
    #[error("an http:// server redirected to https")]
    RedirectedToHttps,
}

fn pem(
    inline: &Option<String>,
    file: &Option<PathBuf>,
    key: &'static str,
    dir: &Path,
) -> Result<Option<Vec<u8>>, ClientTlsError> {
    pem_or_file(inline, file, dir).map_err(|source| ClientTlsError::File { key, source })
}

fn certs(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, ClientTlsError> {
    pem_certs(pem).map_err(|source| ClientTlsError::Certificates {
        what: what.to_string(),
        source,
    })
}

/// The system's CA certificates, from the first bundle found.
fn system_roots() -> Result<Vec<CertificateDer<'static>>, ClientTlsError> {
    let env = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
    for p in env
        .into_iter()
        .chain(SYSTEM_BUNDLES.iter().map(PathBuf::from))
    {
        if let Ok(bytes) = read_config_file(&p, 16 * MAX_CONFIG_BYTES) {
            return certs(&bytes, &p.display().to_string());
        }
    }
    Err(ClientTlsError::NoSystemBundle)
}

/// The rustls client config of `t` (files resolved against `dir`, the config file's).
pub(crate) fn client_config(
    t: &TlsConfig,
    dir: &Path,
) -> Result<Arc<ClientConfig>, ClientTlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // TLS 1.2 is rustls' floor: TLS10/TLS11 mean "the oldest there is", as for the server.
    let max13 = t.max_version.as_deref().is_none_or(|v| v == "TLS13");
    let min13 = t.min_version.as_deref() == Some("TLS13");
    let mut versions = Vec::new();
    if !min13 {
        versions.push(&rustls::version::TLS12);
    }
    if max13 {
        versions.push(&rustls::version::TLS13);
    }
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(ClientTlsError::Versions)?;
    let builder = if t.insecure_skip_verify == Some(true) {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
    } else {
        let roots = match pem(&t.ca, &t.ca_file, "ca", dir)? {
            Some(p) => certs(&p, "tls_config.ca_file")?,
            None => system_roots()?,
        };
        let mut store = RootCertStore::empty();
        let (added, _) = store.add_parsable_certificates(roots);
        if added == 0 {
            return Err(ClientTlsError::NoUsableCa);
        }
        builder.with_root_certificates(store)
    };
    let mut config = match (
        pem(&t.cert, &t.cert_file, "cert", dir)?,
        pem(&t.key, &t.key_file, "key", dir)?,
    ) {
        (Some(c), Some(k)) => {
            let chain = certs(&c, "tls_config.cert_file")?;
            let key = PrivateKeyDer::from_pem_slice(&k).map_err(ClientTlsError::Key)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(ClientTlsError::KeyMismatch)?
        }
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Wraps an https connection in TLS with the config's rustls client config.
#[derive(Debug)]
pub(crate) struct TlsConnector {
    /// The config, or why it could not be built (said when an https connection needs it).
    pub config: Result<Arc<ClientConfig>, Arc<ClientTlsError>>,
    pub server_name: Option<ServerName<'static>>,
}

fn io_error(e: impl std::fmt::Display) -> ureq::Error {
    ureq::Error::Io(std::io::Error::other(e.to_string()))
}

impl<In: Transport> Connector<In> for TlsConnector {
    type Out = Either<In, TlsTransport>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let Some(transport) = chained else {
            return Ok(None);
        };
        if !details.needs_tls() || transport.is_tls() {
            return Ok(Some(Either::A(transport)));
        }
        let name = match &self.server_name {
            Some(n) => n.clone(),
            None => {
                let host = details.uri.host().unwrap_or("");
                let bare = host.trim_start_matches('[').trim_end_matches(']');
                ServerName::try_from(bare.to_string())
                    .map_err(|_| io_error(format!("{host:?} is not a DNS name or IP address")))?
            }
        };
        let config = self.config.clone().map_err(io_error)?;
        let mut conn = ClientConnection::new(config, name).map_err(io_error)?;
        let mut sock = TransportAdapter::new(transport.boxed(), details.current_time.clone());
        sock.set_timeout(details.timeout);
        conn.complete_io(&mut sock)
            .map_err(|e| io_error(format!("TLS handshake: {e}")))?;
        let buffers = LazyBuffers::new(
            details.config.input_buffer_size(),
            details.config.output_buffer_size(),
        );
        Ok(Some(Either::B(TlsTransport {
            buffers,
            stream: StreamOwned { conn, sock },
        })))
    }
}

pub(crate) struct TlsTransport {
    buffers: LazyBuffers,
    stream: StreamOwned<ClientConnection, TransportAdapter>,
}

impl std::fmt::Debug for TlsTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsTransport")
    }
}

impl Transport for TlsTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let output = &self.buffers.output()[..amount];
        self.stream.write_all(output)?;
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let input = self.buffers.input_append_buf();
        let amount = self.stream.read(input)?;
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        self.stream.get_mut().get_mut().is_open()
    }

    fn is_tls(&self) -> bool {
        true
    }
}

/// `insecure_skip_verify: true`: any certificate is taken; signatures are still checked, so
/// the handshake itself is sound.
#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
