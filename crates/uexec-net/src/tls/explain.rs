//! A refused handshake in words. rustls prints many certificate errors as a debug dump
//! (`invalid peer certificate: Other(OtherError(CaUsedAsEndEntity))`, or a signature
//! algorithm's OID as a list of bytes); a person needs what is wrong and what to do:
//! `certificate not trusted: REASON`, with `--remote-ca FILE` named when the issuer is
//! unknown or the certificate is self-signed.

use std::path::Path;

use rustls::pki_types::ServerName;
use rustls::CertificateError;

/// The rustls error somewhere in `error`'s chain (a WebSocket error wraps it in an I/O error,
/// whose `source` skips it: `get_ref` is looked at too).
pub fn rustls_error<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        next = match e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    None
}

/// See [`super::ClientTrust::explain`]; `extra_ca` is the `--remote-ca` file, if any.
pub(super) fn explain(error: &rustls::Error, extra_ca: Option<&Path>) -> String {
    match error {
        rustls::Error::InvalidCertificate(e) => {
            format!("certificate not trusted: {}", certificate(e, extra_ca))
        }
        rustls::Error::InvalidMessage(_) => format!(
            "TLS handshake failed: {error} (does the server speak TLS? dial a server without \
             --tls-cert with ws://)"
        ),
        other => format!("TLS handshake failed: {other}"),
    }
}

fn certificate(error: &CertificateError, extra_ca: Option<&Path>) -> String {
    let give = |what: &str| match extra_ca {
        None => format!("give {what} with --remote-ca FILE"),
        Some(path) => format!("put {what} in --remote-ca {}", path.display()),
    };
    match error {
        CertificateError::UnknownIssuer => {
            let known = match extra_ca {
                None => "the system's root CAs".to_string(),
                Some(path) => format!(
                    "the system's root CAs nor in --remote-ca {}",
                    path.display()
                ),
            };
            let among = if extra_ca.is_some() {
                "neither among"
            } else {
                "not among"
            };
            format!(
                "its issuer is {among} {known}: {}",
                give("the CA's certificate (or, for a self-signed certificate, the server's own)")
            )
        }
        CertificateError::NotValidForNameContext {
            expected,
            presented,
        } => names(expected, presented),
        CertificateError::NotValidForName => {
            "it does not name the host dialled in its subjectAltName".to_string()
        }
        CertificateError::ExpiredContext { not_after, .. } => {
            format!("it expired on {}", utc(not_after.as_secs()))
        }
        CertificateError::Expired => "it has expired".to_string(),
        CertificateError::NotValidYetContext { not_before, .. } => format!(
            "it is not valid before {} (is this machine's clock right?)",
            utc(not_before.as_secs())
        ),
        CertificateError::NotValidYet => {
            "it is not valid yet (is this machine's clock right?)".to_string()
        }
        CertificateError::Revoked => "it was revoked".to_string(),
        CertificateError::BadEncoding => "it is not a well-formed X.509 certificate".to_string(),
        CertificateError::BadSignature => {
            "its signature does not verify with its issuer's key".to_string()
        }
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            "it is not for TLS servers (its extendedKeyUsage lacks serverAuth)".to_string()
        }
        CertificateError::UnhandledCriticalExtension => {
            "it has a critical extension this client does not know".to_string()
        }
        #[allow(deprecated)]
        CertificateError::UnsupportedSignatureAlgorithm
        | CertificateError::UnsupportedSignatureAlgorithmContext { .. }
        | CertificateError::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => {
            "it is signed with an algorithm this client does not support (use ECDSA P-256 or \
             P-384, Ed25519, or RSA of 2048 bits or more)"
                .to_string()
        }
        CertificateError::Other(other) => match other.0.downcast_ref::<webpki::Error>() {
            Some(webpki::Error::CaUsedAsEndEntity) => format!(
                "it is a CA certificate (CA:TRUE, as the self-signed certificates `openssl \
                 req -x509` makes are), trusted only as a pinned certificate: {}",
                give("this very certificate")
            ),
            Some(webpki::Error::EndEntityUsedAsCa) => {
                "one of the certificates it is issued by is not a CA certificate".to_string()
            }
            Some(webpki::Error::UnsupportedCertVersion) => {
                "it is an X.509 v1 certificate; make a v3 one".to_string()
            }
            Some(webpki::Error::NameConstraintViolation) => {
                "its name is outside what its CA may certify (name constraints)".to_string()
            }
            Some(
                webpki::Error::PathLenConstraintViolated | webpki::Error::MaximumPathDepthExceeded,
            ) => "its chain of CAs is longer than they allow".to_string(),
            Some(webpki::Error::UnknownIssuer) => {
                certificate(&CertificateError::UnknownIssuer, extra_ca)
            }
            _ => format!("{other}"),
        },
        other => other.to_string(),
    }
}

/// The names a certificate gives against the one dialled, and how to make one that fits.
fn names(expected: &ServerName<'_>, presented: &[String]) -> String {
    let host = expected.to_str();
    let kind = match expected {
        ServerName::IpAddress(_) => "IP",
        _ => "DNS",
    };
    let make = format!("make the certificate with subjectAltName={kind}:{host}");
    match presented {
        [] => format!("it names no host in its subjectAltName (its CN is not read): {make}"),
        names => {
            let names: Vec<String> = names.iter().map(|n| general_name(n)).collect();
            format!(
                "it names {}, not {host}: dial one of those, or {make}",
                names.join(", ")
            )
        }
    }
}

/// One name as webpki presents it (its debug form: `DnsName("localhost")`,
/// `IpAddress(127.0.0.1)`), the way openssl's subjectAltName writes it (`DNS:localhost`).
fn general_name(presented: &str) -> String {
    let inner = |prefix: &str| {
        presented
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix(')'))
            .map(|rest| rest.trim_matches('"').to_string())
    };
    if let Some(dns) = inner("DnsName(") {
        format!("DNS:{dns}")
    } else if let Some(ip) = inner("IpAddress(") {
        format!("IP:{ip}")
    } else if let Some(uri) = inner("UniformResourceIdentifier(") {
        format!("URI:{uri}")
    } else {
        presented.to_string()
    }
}

/// `secs` since the epoch as `YYYY-MM-DD HH:MM:SS UTC` (the proleptic Gregorian calendar).
fn utc(secs: u64) -> String {
    const SECS_PER_DAY: u64 = 86_400;
    let (days, time) = (secs / SECS_PER_DAY, secs % SECS_PER_DAY);
    // Howard Hinnant's `civil_from_days`, for days since 1970-01-01 (never negative here).
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        time / 3_600,
        time % 3_600 / 60,
        time % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::UnixTime;
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::Duration;

    fn other(e: webpki::Error) -> rustls::Error {
        rustls::Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(Arc::new(e))))
    }

    #[test]
    fn a_self_signed_ca_certificate_is_explained_with_what_to_give_remote_ca() {
        let e = other(webpki::Error::CaUsedAsEndEntity);
        assert_eq!(
            explain(&e, None),
            "certificate not trusted: it is a CA certificate (CA:TRUE, as the self-signed \
             certificates `openssl req -x509` makes are), trusted only as a pinned \
             certificate: give this very certificate with --remote-ca FILE"
        );
        let ca = PathBuf::from("/etc/uexec/ca.pem");
        assert!(explain(&e, Some(&ca))
            .ends_with("put this very certificate in --remote-ca /etc/uexec/ca.pem"));
    }

    #[test]
    fn an_unknown_issuer_names_the_roots_and_the_file() {
        let e = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        assert_eq!(
            explain(&e, None),
            "certificate not trusted: its issuer is not among the system's root CAs: give the \
             CA's certificate (or, for a self-signed certificate, the server's own) with \
             --remote-ca FILE"
        );
        let ca = PathBuf::from("ca.pem");
        assert_eq!(
            explain(&e, Some(&ca)),
            "certificate not trusted: its issuer is neither among the system's root CAs nor in \
             --remote-ca ca.pem: put the CA's certificate (or, for a self-signed certificate, \
             the server's own) in --remote-ca ca.pem"
        );
    }

    #[test]
    fn a_name_mismatch_lists_the_names_and_the_subject_alt_name_to_make() {
        let e = |host: &str, presented: &[&str]| {
            rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
                expected: ServerName::try_from(host.to_string()).unwrap(),
                presented: presented.iter().map(|s| s.to_string()).collect(),
            })
        };
        assert_eq!(
            explain(
                &e(
                    "10.0.0.7",
                    &["DnsName(\"localhost\")", "IpAddress(127.0.0.1)"]
                ),
                None
            ),
            "certificate not trusted: it names DNS:localhost, IP:127.0.0.1, not 10.0.0.7: dial \
             one of those, or make the certificate with subjectAltName=IP:10.0.0.7"
        );
        assert_eq!(
            explain(&e("box.example", &[]), None),
            "certificate not trusted: it names no host in its subjectAltName (its CN is not \
             read): make the certificate with subjectAltName=DNS:box.example"
        );
    }

    #[test]
    fn dates_signatures_and_other_handshake_failures_read_as_words() {
        let at = |secs| UnixTime::since_unix_epoch(Duration::from_secs(secs));
        let expired = rustls::Error::InvalidCertificate(CertificateError::ExpiredContext {
            time: at(1_800_000_000),
            not_after: at(1_735_689_599),
        });
        assert_eq!(
            explain(&expired, None),
            "certificate not trusted: it expired on 2024-12-31 23:59:59 UTC"
        );
        let algorithm = rustls::Error::InvalidCertificate(
            CertificateError::UnsupportedSignatureAlgorithmForPublicKeyContext {
                signature_algorithm_id: vec![6, 8, 42, 134],
                public_key_algorithm_id: vec![6, 7, 42],
            },
        );
        let text = explain(&algorithm, None);
        assert!(!text.contains('['), "{text}");
        assert!(
            text.contains("algorithm this client does not support"),
            "{text}"
        );
        let corrupt = rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType);
        assert!(explain(&corrupt, None).starts_with("TLS handshake failed: "));
        assert!(explain(&corrupt, None).contains("with ws://"));
    }

    #[test]
    fn utc_dates_follow_the_calendar() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(4_107_542_400), "2100-03-01 00:00:00 UTC");
    }

    #[test]
    fn the_rustls_error_is_found_inside_an_io_error() {
        let tls = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, tls.clone());
        assert_eq!(rustls_error(&io), Some(&tls));
        let plain = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(rustls_error(&plain), None);
    }
}
