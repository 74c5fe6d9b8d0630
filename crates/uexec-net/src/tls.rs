//! rustls configurations (ring provider): the listeners' certificate and the client's trust.
//!
//! The client trusts the system's roots (`rustls-native-certs`) plus, optionally, the CA
//! certificates of one PEM file (`--remote-ca`), for servers with a private CA or a
//! self-signed certificate.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Why a TLS configuration cannot be built; names the flag whose file is at fault.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{flag} {}: {reason}", path.display())]
    File {
        flag: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("TLS configuration failed: {0}")]
    Config(#[from] rustls::Error),
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_certs(flag: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let file_error = |reason: String| TlsError::File {
        flag,
        path: path.to_path_buf(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(format!("cannot read PEM certificates: {e}")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(format!("bad PEM certificate: {e}")))?;
    if certs.is_empty() {
        return Err(file_error("no PEM certificate in the file".to_string()));
    }
    Ok(certs)
}

/// The server side: the certificate chain of `cert` and the private key of `key`.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let certs = read_certs("--tls-cert", cert)?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::File {
        flag: "--tls-key",
        path: key.to_path_buf(),
        reason: format!("cannot read a PEM private key: {e}"),
    })?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Whom the client trusts: the system's roots, plus the CAs of `extra_ca` when set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTrust {
    pub extra_ca: Option<PathBuf>,
}

impl ClientTrust {
    /// Builds the rustls client configuration (reads the system roots and the CA file).
    pub fn client_config(&self) -> Result<Arc<rustls::ClientConfig>, TlsError> {
        let mut roots = rustls::RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        for error in &native.errors {
            tracing::debug!("skipping a system root certificate: {error}");
        }
        let (added, ignored) = roots.add_parsable_certificates(native.certs);
        tracing::debug!(added, ignored, "system root certificates");
        if let Some(path) = &self.extra_ca {
            for cert in read_certs("--remote-ca", path)? {
                roots.add(cert).map_err(|e| TlsError::File {
                    flag: "--remote-ca",
                    path: path.clone(),
                    reason: format!("unusable CA certificate: {e}"),
                })?;
            }
        }
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Arc::new(config))
    }
}
