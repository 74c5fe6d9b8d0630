//! A bridge, to be deleted when `uexec mcp`'s clap definitions move to the binary (issue 27):
//! `uexec_net` no longer derives clap, and `McpArgs` still flattens the listener flags. The
//! binary's `args/net.rs` holds the same definitions for `uexec serve`; once `McpArgs` lives
//! in the binary it flattens that one and this file goes.

use std::path::PathBuf;
use std::time::Duration;

use uexec_net::tls::TlsError;
use uexec_net::{ListenerConfig, ListenerOptions, HEADER_READ_TIMEOUT_MS, MAX_CONNECTIONS};

/// Listener flags shared by `uexec serve` and `uexec mcp --http`.
#[derive(Debug, Clone, clap::Args)]
pub struct ListenerArgs {
    /// Serve TLS with this PEM certificate chain (with --tls-key): wss:// for `serve`,
    /// https:// for `mcp --http`.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Allow a non-loopback listener without TLS (the token and every command and its
    /// output then cross the network in clear text).
    #[arg(long)]
    pub insecure_plaintext: bool,
    /// Most HTTP connections served at once; more are answered 503 and closed.
    #[arg(long, value_name = "N", default_value_t = MAX_CONNECTIONS as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Longest wait for a request's headers or a TLS handshake, in ms (for tests).
    #[arg(long, hide = true, value_name = "MS", default_value_t = HEADER_READ_TIMEOUT_MS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub header_read_timeout_ms: u64,
}

impl ListenerArgs {
    /// The options of a listener, reading the TLS files.
    pub fn options(&self) -> Result<ListenerOptions, TlsError> {
        ListenerConfig {
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
            insecure_plaintext: self.insecure_plaintext,
            max_connections: self.max_connections as usize,
            header_read_timeout: Duration::from_millis(self.header_read_timeout_ms),
        }
        .options()
    }
}
