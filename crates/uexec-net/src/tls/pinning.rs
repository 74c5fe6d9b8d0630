//! The client's certificate check with `--remote-ca`: a pinned certificate, else webpki.
//!
//! 1. The server's certificate is compared, byte for byte, with each certificate of the file.
//!    A match is trusted as it is, whatever it says about being a CA (the person put that
//!    very certificate in the file; a CA flag or a missing issuer tell nothing more). Two
//!    checks remain:
//!    - its subjectAltName must name the host the URL dials (a DNS name, or an IP address
//!      for an address), as webpki checks every certificate; the CN is not read, as
//!      browsers and webpki no longer do, so one certificate means the same here and to
//!      any other client;
//!    - the handshake must be signed by its key (the signature checks are webpki's, for
//!      every certificate), so a copy of the certificate without the key is worth nothing.
//!
//!    Its validity dates are not checked: a pinned certificate is trusted for as long as it
//!    is in the file, and taking it out is how it is revoked.
//! 2. Any other certificate is webpki's to judge, with the system's roots and the file's
//!    certificates as trust anchors (a private CA's certificate in the file).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_name, WebPkiServerVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

/// Pinned certificates first, webpki for the rest (see the module docs).
#[derive(Debug)]
pub(super) struct PinnedOrWebPki {
    pinned: Vec<CertificateDer<'static>>,
    webpki: Arc<WebPkiServerVerifier>,
}

impl PinnedOrWebPki {
    pub(super) fn new(
        pinned: Vec<CertificateDer<'static>>,
        roots: RootCertStore,
        provider: Arc<CryptoProvider>,
    ) -> Result<Self, rustls::client::VerifierBuilderError> {
        let webpki =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider).build()?;
        Ok(Self { pinned, webpki })
    }

    fn is_pinned(&self, cert: &CertificateDer<'_>) -> bool {
        self.pinned.iter().any(|p| p.as_ref() == cert.as_ref())
    }
}

impl ServerCertVerifier for PinnedOrWebPki {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self.is_pinned(end_entity) {
            verify_server_name(&ParsedCertificate::try_from(end_entity)?, server_name)?;
            tracing::debug!(server = ?server_name, "the server's certificate is pinned by --remote-ca");
            return Ok(ServerCertVerified::assertion());
        }
        self.webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}
