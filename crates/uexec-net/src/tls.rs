//! rustls configurations (ring provider): the listeners' certificate and the client's trust.
//!
//! The client trusts the system's roots (`rustls-native-certs`) plus, optionally, the
//! certificates of one PEM file (`--remote-ca`), for servers with a private CA or a
//! self-signed certificate. Why a verifier of our own ([`pinning`]): the self-signed
//! certificate `openssl req -x509` makes says `CA:TRUE`, and webpki refuses a CA certificate
//! as a server's own (`CaUsedAsEndEntity`) even when it is a trusted root. So, per handshake:
//! 1. a server certificate that is byte for byte one of the file's certificates is trusted
//!    as it is (pinned): its subjectAltName must still name the host dialled, and the
//!    handshake must still be signed with its key;
//! 2. any other certificate goes through webpki's usual checks against the system's roots and
//!    the file's certificates (as CAs);
//! 3. a refusal is put in words by [`explain`] (`certificate not trusted: ...`), with what to
//!    give `--remote-ca` when the issuer is unknown or the certificate is self-signed.
//!
//! The client's configuration costs a read of every system root: it is built once and kept
//! until the `--remote-ca` file changes (its mtime, inode or length), so a rotated CA is
//! picked up at the next dial, and 20,000 environments do not read the roots 20,000 times.

mod explain;
mod pinning;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

pub use explain::rustls_error;

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

/// Whom the client trusts: the system's roots, plus the certificates of `extra_ca` when set
/// (as CAs, and each one pinned as a server's own certificate).
#[derive(Debug, Clone, Default)]
pub struct ClientTrust {
    pub extra_ca: Option<PathBuf>,
    /// The configuration last built and the CA file's fingerprint then; shared by clones.
    built: Arc<Mutex<Option<Built>>>,
}

#[derive(Debug)]
struct Built {
    fingerprint: Option<Fingerprint>,
    config: Arc<rustls::ClientConfig>,
}

/// What tells a changed CA file: its mtime, inode and length.
type Fingerprint = (Option<SystemTime>, u64, u64);

/// Two trusts are the same when they read the same file (whatever either has built).
impl PartialEq for ClientTrust {
    fn eq(&self, other: &Self) -> bool {
        self.extra_ca == other.extra_ca
    }
}

impl Eq for ClientTrust {}

impl ClientTrust {
    /// Trusts the system's roots and, when given, the certificates of `extra_ca`.
    pub fn new(extra_ca: Option<PathBuf>) -> Self {
        Self {
            extra_ca,
            built: Arc::default(),
        }
    }

    /// The rustls client configuration: built at the first call, and again when the CA file
    /// changed since (a file that went bad is an error then, naming `--remote-ca`).
    pub fn client_config(&self) -> Result<Arc<rustls::ClientConfig>, TlsError> {
        let fingerprint = self.extra_ca.as_deref().and_then(fingerprint);
        let mut built = self
            .built
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(b) = built.as_ref().filter(|b| b.fingerprint == fingerprint) {
            return Ok(b.config.clone());
        }
        let config = self.build()?;
        *built = Some(Built {
            fingerprint,
            config: config.clone(),
        });
        Ok(config)
    }

    /// A failed handshake in words: `certificate not trusted: REASON` and what to do, or
    /// `TLS handshake failed: ...` when the certificate was not the trouble.
    pub fn explain(&self, error: &rustls::Error) -> String {
        explain::explain(error, self.extra_ca.as_deref())
    }

    fn build(&self) -> Result<Arc<rustls::ClientConfig>, TlsError> {
        let mut roots = rustls::RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        for error in &native.errors {
            tracing::debug!("skipping a system root certificate: {error}");
        }
        let (added, ignored) = roots.add_parsable_certificates(native.certs);
        tracing::debug!(added, ignored, "system root certificates");
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?;
        let Some(path) = &self.extra_ca else {
            return Ok(Arc::new(
                builder.with_root_certificates(roots).with_no_client_auth(),
            ));
        };
        let file_error = |reason: String| TlsError::File {
            flag: "--remote-ca",
            path: path.clone(),
            reason,
        };
        let pinned = read_certs("--remote-ca", path)?;
        for cert in &pinned {
            roots
                .add(cert.clone())
                .map_err(|e| file_error(format!("unusable CA certificate: {e}")))?;
        }
        let verifier = pinning::PinnedOrWebPki::new(pinned, roots, provider())
            .map_err(|e| file_error(format!("cannot verify with these certificates: {e}")))?;
        let config = builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        Ok(Arc::new(config))
    }
}

fn fingerprint(path: &Path) -> Option<Fingerprint> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok(), meta.ino(), meta.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_cert(dir: &Path, name: &str) -> PathBuf {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, certified.cert.pem()).unwrap();
        path
    }

    #[test]
    fn the_configuration_is_built_once_and_again_when_the_ca_file_changes() {
        let dir = std::env::temp_dir().join(format!("uexec-trust-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = write_cert(&dir, "ca.pem");
        let trust = ClientTrust::new(Some(ca.clone()));
        let first = trust.client_config().unwrap();
        let clone = trust.clone();
        assert!(Arc::ptr_eq(&first, &clone.client_config().unwrap()));
        assert_eq!(trust, ClientTrust::new(Some(ca.clone())));

        // A rotated CA (another length: a new fingerprint even within one mtime tick).
        let other = write_cert(&dir, "other.pem");
        let mut text = std::fs::read_to_string(&other).unwrap();
        text.push('\n');
        std::fs::write(&ca, text).unwrap();
        assert!(!Arc::ptr_eq(&first, &trust.client_config().unwrap()));

        std::fs::write(&ca, "").unwrap();
        let e = trust.client_config().unwrap_err().to_string();
        assert!(e.starts_with("--remote-ca "), "{e}");
        assert!(e.ends_with("no PEM certificate in the file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
