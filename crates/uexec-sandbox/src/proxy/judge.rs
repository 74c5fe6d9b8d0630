//! The judge (step 3 of the module docs): one task per accepted connection that reads its
//! request head and decides. Here, apart from the accept loop and the relay, because the
//! verdict is the part the session hears of, and a judgement must be able to finish after
//! the exit while relays are cut:
//! 1. read one request, HTTP or SOCKS5 (told apart by the first byte), within
//!    [`HEAD_TIMEOUT_MS`];
//! 2. a host off the allowlist is a denial: the session's verdict first, then a 403 (SOCKS5:
//!    "not allowed by ruleset");
//! 3. an allowed host is resolved once and its addresses screened ([`super::address`]);
//!    when only non-public ones are left, that is a denial too, naming the address to allow;
//! 4. what is left comes back [`Admitted`], with what goes upstream first (a plain-HTTP
//!    request rewritten to origin form: [`forward`]).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use uexec_core::policy::{AllowEntry, OnDenial};
use uexec_core::MonitorHandle;

use super::answer::{http_answer, unreachable};
use super::head::{find_head_end, Head, Target, Via, MAX_HEAD_BYTES};
use super::relay::Admitted;
use super::{address, forward, socks5};

/// How long a client may take to send its request head.
const HEAD_TIMEOUT_MS: u64 = 10_000;

/// What judges a connection: the allowlist, and what a denial does to the session.
#[derive(Clone)]
pub(super) struct Judge {
    pub(super) allow: Arc<[AllowEntry]>,
    pub(super) on_denial: OnDenial,
    pub(super) session: MonitorHandle,
}

impl Judge {
    /// Reads the request head and judges its host and the addresses it resolves to: a
    /// denied one gets its verdict and a 403; an allowed one comes back to be relayed. A head
    /// cut short by the end of input (the client died, as the sandbox's processes do at the
    /// exit) is judged too when its request line got past the target: it tried to reach
    /// that host.
    pub(super) async fn judge(self, mut client: tokio::net::TcpStream) -> Option<Admitted> {
        let mut head = Vec::with_capacity(1024);
        let read = tokio::time::timeout(
            Duration::from_millis(HEAD_TIMEOUT_MS),
            read_request(&mut client, &mut head),
        )
        .await;
        let Ok(Some((target, read))) = read else {
            return None;
        };
        let Some(target) = target else {
            // (A SOCKS5 request this proxy does not take was refused as it was read.)
            let _ = client.write_all(&http_answer("400 Bad Request", "")).await;
            return None;
        };
        if !self
            .allow
            .iter()
            .any(|a| a.allows(&target.host, target.port))
        {
            let message = format!(
                "network access to {} denied by the allowlist",
                target.display()
            );
            self.deny(client, &target, message).await;
            return None;
        }
        let resolved = match address::resolve(&target.host, target.port).await {
            Ok(resolved) => resolved,
            Err(e) => {
                if matches!(read, Head::Complete(_)) {
                    unreachable(client, &target, &e).await;
                }
                return None;
            }
        };
        let screened = address::screen(resolved, |ip| {
            self.allow.iter().any(|a| a.names_address(ip, target.port))
        });
        if screened.permitted.is_empty() && !screened.refused.is_empty() {
            let message = non_public_message(&target, &screened.refused);
            self.deny(client, &target, message).await;
            return None;
        }
        let Head::Complete(end) = read else {
            // An allowed request that never ended: nothing to relay.
            return None;
        };
        let (first, more) = match target.via {
            Via::Connect | Via::Socks5 => (head[end..].to_vec(), None),
            Via::Forward => match forward::rewrite(&head[..end]) {
                Ok(origin) => {
                    let mut first = origin.head;
                    let came = &head[end..];
                    let more = match origin.body {
                        forward::Body::Length(n) => {
                            let now = came.len().min(usize::try_from(n).unwrap_or(usize::MAX));
                            first.extend_from_slice(&came[..now]);
                            forward::Body::Length(n - now as u64)
                        }
                        forward::Body::UntilEnd => {
                            first.extend_from_slice(came);
                            forward::Body::UntilEnd
                        }
                    };
                    (first, Some(more))
                }
                Err(why) => {
                    let body = format!("uexec: the proxy refuses this request: {why}\r\n");
                    let _ = client
                        .write_all(&http_answer("400 Bad Request", &body))
                        .await;
                    return None;
                }
            },
        };
        Some(Admitted {
            client,
            target,
            addrs: screened.permitted,
            first,
            more,
        })
    }

    /// A denial: the session's verdict first (by the time the client hears of it, the
    /// session knows), then the refusal.
    async fn deny(&self, mut client: tokio::net::TcpStream, target: &Target, message: String) {
        match self.on_denial {
            OnDenial::Terminate => self.session.fail_and_terminate(message.clone()),
            OnDenial::Record => self.session.record_verdict(message.clone()),
        }
        let refusal = match target.via {
            Via::Socks5 => socks5::reply(socks5::NOT_ALLOWED).to_vec(),
            Via::Connect | Via::Forward => {
                http_answer("403 Forbidden", &format!("uexec: {message}\r\n"))
            }
        };
        let _ = client.write_all(&refusal).await;
    }
}

/// The verdict on an allowed name whose every address is non-public (see [`address`]).
fn non_public_message(target: &Target, refused: &[(SocketAddr, &'static str)]) -> String {
    let list = refused
        .iter()
        .map(|(addr, kind)| format!("{}: {kind}", addr.ip()))
        .collect::<Vec<_>>()
        .join("; ");
    let first = refused
        .first()
        .map_or_else(String::new, |(a, _)| a.to_string());
    let host = target.host.trim_start_matches('[').trim_end_matches(']');
    let what = if host.parse::<IpAddr>().is_ok() {
        format!("{host} is a non-public address ({list})")
    } else {
        format!("{host} resolved to a non-public address ({list})")
    };
    format!(
        "network access to {} denied: {what}; to allow it, name that address in the \
         allowlist ({first})",
        target.display()
    )
}

/// Reads one request, HTTP or SOCKS5 (told apart by the first byte), into `head`: its
/// target (`None`: an HTTP request this proxy does not take) and how reading ended. `None`
/// when there is nothing to judge (an error, a head too long, input ended before any
/// target).
async fn read_request(
    client: &mut tokio::net::TcpStream,
    head: &mut Vec<u8>,
) -> Option<(Option<Target>, Head)> {
    let mut buf = [0u8; 4096];
    loop {
        if head.first() == Some(&socks5::VERSION) {
            return socks5::read_request(client, head).await;
        }
        if let Some(end) = find_head_end(head) {
            return Some((Target::parse(&head[..end]), Head::Complete(end)));
        }
        if head.len() > MAX_HEAD_BYTES {
            return None;
        }
        match client.read(&mut buf).await {
            Ok(0) => return Some((Target::parse_cut(head), Head::Cut)),
            Err(_) => return None,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_public_refusal_says_which_address_to_name() {
        let target = Target {
            host: "localhost".into(),
            port: 8080,
            via: Via::Connect,
        };
        let refused = [
            ("127.0.0.1:8080".parse().expect("v4"), "loopback"),
            ("[::1]:8080".parse().expect("v6"), "loopback"),
        ];
        assert_eq!(
            non_public_message(&target, &refused),
            "network access to localhost:8080 denied: localhost resolved to a non-public \
             address (127.0.0.1: loopback; ::1: loopback); to allow it, name that address in \
             the allowlist (127.0.0.1:8080)"
        );
        let literal = Target {
            host: "[fd00::1]".into(),
            port: 443,
            via: Via::Socks5,
        };
        let refused = [(
            "[fd00::1]:443".parse().expect("v6"),
            "private (unique local)",
        )];
        let message = non_public_message(&literal, &refused);
        assert!(
            message.contains("fd00::1 is a non-public address")
                && message.ends_with("([fd00::1]:443)"),
            "{message}"
        );
    }
}
