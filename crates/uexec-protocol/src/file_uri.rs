//! `file://` URIs for working directories and the paths `environment/info` reports.
//!
//! The dialect carries paths as URIs so that a client on one OS can address a server on
//! another. On the way in (`process/start`'s `cwd`):
//! 1. the scheme must be `file` (anything else, or no scheme at all, is refused);
//! 2. the authority must be empty or `localhost` (no remote hosts);
//! 3. the path must be absolute; percent escapes are decoded to raw bytes (paths need not be
//!    UTF-8).
//!
//! On the way out every byte outside the unreserved set and `/` is percent-encoded, so
//! `parse(to_uri(p)) == p` for every absolute path.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Why a string is not a usable `file://` URI.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileUriError {
    #[error("invalid URI: relative URL without a base: {0:?}")]
    Relative(String),
    #[error("invalid URI: unsupported scheme {scheme:?} in {uri:?}, expected file://")]
    Scheme { scheme: String, uri: String },
    #[error("invalid URI: remote host {host:?} in {uri:?}, expected file:///path")]
    RemoteHost { host: String, uri: String },
    #[error("invalid URI: path of {0:?} is not absolute")]
    NotAbsolute(String),
    #[error("invalid URI: bad percent escape in {0:?}")]
    BadEscape(String),
    #[error("invalid URI: {0:?} contains a NUL byte")]
    Nul(String),
}

/// Parses a `file://` URI into an absolute local path.
pub fn parse(uri: &str) -> Result<PathBuf, FileUriError> {
    let Some((scheme, rest)) = uri.split_once(':') else {
        return Err(FileUriError::Relative(uri.to_string()));
    };
    if !is_scheme(scheme) {
        return Err(FileUriError::Relative(uri.to_string()));
    }
    if !scheme.eq_ignore_ascii_case("file") {
        return Err(FileUriError::Scheme {
            scheme: scheme.to_string(),
            uri: uri.to_string(),
        });
    }
    let Some(after_slashes) = rest.strip_prefix("//") else {
        return Err(FileUriError::NotAbsolute(uri.to_string()));
    };
    let (host, path) = match after_slashes.find('/') {
        Some(i) => after_slashes.split_at(i),
        None => (after_slashes, ""),
    };
    if !host.is_empty() && !host.eq_ignore_ascii_case("localhost") {
        return Err(FileUriError::RemoteHost {
            host: host.to_string(),
            uri: uri.to_string(),
        });
    }
    // A query or fragment is not part of a path.
    let path = path.split(['?', '#']).next().unwrap_or_default();
    if !path.starts_with('/') {
        return Err(FileUriError::NotAbsolute(uri.to_string()));
    }
    let bytes = percent_decode(path).ok_or_else(|| FileUriError::BadEscape(uri.to_string()))?;
    if bytes.contains(&0) {
        return Err(FileUriError::Nul(uri.to_string()));
    }
    Ok(PathBuf::from(OsStr::from_bytes(&bytes)))
}

/// Formats an absolute path as a `file://` URI (relative paths are formatted as given).
pub fn to_uri(path: &Path) -> String {
    let mut out = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(hex_digit(b >> 4));
            out.push(hex_digit(b & 0xf));
        }
    }
    out
}

fn is_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hi = hex_value(*bytes.get(i + 1)?)?;
            let lo = hex_value(*bytes.get(i + 2)?)?;
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn hex_digit(v: u8) -> char {
    char::from(b"0123456789ABCDEF"[usize::from(v & 0xf)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_localhost_and_escaped_paths() {
        assert_eq!(parse("file:///tmp").unwrap(), PathBuf::from("/tmp"));
        assert_eq!(
            parse("file://localhost/tmp").unwrap(),
            PathBuf::from("/tmp")
        );
        assert_eq!(
            parse("file:///tmp/a%20b").unwrap(),
            PathBuf::from("/tmp/a b")
        );
        assert_eq!(parse("FILE:///").unwrap(), PathBuf::from("/"));
    }

    #[test]
    fn refuses_what_is_not_a_local_absolute_file_uri() {
        assert!(matches!(parse("tmp"), Err(FileUriError::Relative(_))));
        assert!(matches!(parse("/tmp"), Err(FileUriError::Relative(_))));
        assert!(matches!(
            parse("http://127.0.0.1/tmp"),
            Err(FileUriError::Scheme { .. })
        ));
        assert!(matches!(
            parse("file://evil/tmp"),
            Err(FileUriError::RemoteHost { .. })
        ));
        assert!(matches!(
            parse("file:tmp"),
            Err(FileUriError::NotAbsolute(_))
        ));
        assert!(matches!(
            parse("file:///a%2"),
            Err(FileUriError::BadEscape(_))
        ));
        assert!(matches!(parse("file:///a%00b"), Err(FileUriError::Nul(_))));
    }

    #[test]
    fn formats_with_escapes() {
        assert_eq!(to_uri(Path::new("/tmp/a b")), "file:///tmp/a%20b");
        assert_eq!(to_uri(Path::new("/")), "file:///");
    }
}
