//! Did the sandbox say no? A heuristic over the output, in the manner of Codex's: a line
//! with an EACCES/EPERM/EROFS message is evidence when the path it names lies outside the
//! writable roots (or it names none); with the network off or on an allowlist, so is a line
//! saying the network or a name cannot be reached, or that a connection was refused: in the
//! sandbox's own network namespace, a connection to loopback meets an empty one (the host's
//! servers are not there, and on an allowlist a request sent around the proxy ends there
//! too), which refuses it. The lines are kept, so the caller can judge too.

use std::path::{Path, PathBuf};

use uexec_core::policy::Network;

/// Evidence lines kept per snapshot.
const MAX_EVIDENCE_LINES: usize = 3;
/// Longest evidence line kept, in bytes.
const MAX_EVIDENCE_LINE_BYTES: usize = 300;

const FILE_DENIALS: &[&str] = &[
    "Permission denied",
    "Read-only file system",
    "Operation not permitted",
];
const NETWORK_DENIALS: &[&str] = &[
    "Network is unreachable",
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
    // A refused connection: curl (both wordings), Python, Node and most of libc's users.
    "Connection refused",
    "Couldn't connect to server",
    "ECONNREFUSED",
];
/// How the allowlist proxy says an allowed host did not answer (its 502): the host's doing,
/// not the sandbox's.
const PROXY_UPSTREAM_FAILURE: &str = "uexec: cannot reach ";

/// The lines of `output` that show a denial (at most [`MAX_EVIDENCE_LINES`]).
pub fn find(output: &str, writable: &[PathBuf], network: &Network) -> Vec<String> {
    output
        .lines()
        .filter(|line| {
            let file = FILE_DENIALS.iter().any(|m| line.contains(m))
                && paths_in(line).all(|p| !writable.iter().any(|w| p.starts_with(w)));
            let net = *network != Network::On
                && NETWORK_DENIALS.iter().any(|m| line.contains(m))
                && !line.contains(PROXY_UPSTREAM_FAILURE);
            file || net
        })
        .take(MAX_EVIDENCE_LINES)
        .map(|line| {
            let mut end = line.len().min(MAX_EVIDENCE_LINE_BYTES);
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            line[..end].trim().to_owned()
        })
        .collect()
}

/// Absolute paths a message names: words starting with `/`, without quotes and colons.
fn paths_in(line: &str) -> impl Iterator<Item = &Path> {
    line.split(|c: char| c.is_whitespace() || "'\"`‘’“”".contains(c))
        .map(|w| w.trim_end_matches([':', ',', ';', ')']))
        .filter(|w| w.starts_with('/') && w.len() > 1)
        .map(Path::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_outside_the_writable_roots_are_evidence() {
        let writable = [PathBuf::from("/work/repo")];
        let out = "ok\ntouch: cannot touch '/etc/x': Permission denied\nmore\n";
        assert_eq!(
            find(out, &writable, &Network::On),
            ["touch: cannot touch '/etc/x': Permission denied"]
        );
        let inside = "sh: 1: cannot create /work/repo/a: Permission denied\n";
        assert!(find(inside, &writable, &Network::On).is_empty());
        let no_path = "mkdir: Read-only file system\n";
        assert_eq!(find(no_path, &writable, &Network::On).len(), 1);
    }

    #[test]
    fn network_errors_count_only_with_the_network_off() {
        let out = "curl: (6) Could not resolve host: example.com\n";
        assert!(find(out, &[], &Network::On).is_empty());
        assert_eq!(find(out, &[], &Network::Off).len(), 1);
    }

    #[test]
    fn a_refused_connection_is_evidence_when_the_network_is_the_sandbox_s() {
        let allowlist = Network::Allow(vec![]);
        for line in [
            "curl: (7) Failed to connect to 127.0.0.1 port 8080 after 0 ms: Couldn't connect to server",
            "curl: (7) Failed to connect to localhost port 8080: Connection refused",
            "ConnectionRefusedError: [Errno 111] Connection refused",
            "Error: connect ECONNREFUSED 127.0.0.1:5432",
        ] {
            let out = format!("ok\n{line}\n");
            assert_eq!(find(&out, &[], &Network::Off), [line], "network off");
            assert_eq!(find(&out, &[], &allowlist), [line], "allowlist");
            assert!(find(&out, &[], &Network::On).is_empty(), "network on: {line}");
        }
        // An allowed host that refused the proxy's connection is no denial of the sandbox's.
        let upstream = "uexec: cannot reach 127.0.0.1:8080: Connection refused (os error 111)\n";
        assert!(find(upstream, &[], &allowlist).is_empty());
    }
}
