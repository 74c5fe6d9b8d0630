//! What the proxy tells a client it will not relay, or cannot: an HTTP answer that closes the
//! connection, or a SOCKS5 reply, as the client asked ([`Via`]). Here, apart, because both
//! the judge (a bad request, a host it cannot resolve) and the relay (a connect that fails)
//! answer this way.

use tokio::io::AsyncWriteExt;

use super::head::{Target, Via};
use super::socks5;

/// An HTTP answer that closes the connection, with a plain-text body.
pub(super) fn http_answer(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Tells the client its allowed target cannot be reached (`e`).
pub(super) async fn unreachable(
    mut client: tokio::net::TcpStream,
    target: &Target,
    e: &std::io::Error,
) {
    let answer = match target.via {
        Via::Socks5 => socks5::reply(socks5::failure_of(e)).to_vec(),
        Via::Connect | Via::Forward => http_answer(
            "502 Bad Gateway",
            &format!("uexec: cannot reach {}: {e}\r\n", target.display()),
        ),
    };
    let _ = client.write_all(&answer).await;
}
