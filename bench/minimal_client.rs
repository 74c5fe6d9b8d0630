//! The floor of a small `uexec run` client, for bench/people.py (built there with rustc; not
//! part of uexec). It sends the request bytes of its first argument's file (the hello, the
//! MCP handshake and one tools/call with id 2, prepared by the bench) to the daemon's socket,
//! reads until the answer to id 2, and exits with the command's exit code: no argument
//! parsing, no JSON, no runtime. What it costs is what any client must pay.
use std::io::{Read, Write};

fn main() {
    let mut args = std::env::args().skip(1);
    let (request, socket) = match (args.next(), args.next()) {
        (Some(request), Some(socket)) => (request, socket),
        _ => {
            eprintln!("usage: minimal_client REQUEST_FILE SOCKET");
            std::process::exit(2);
        }
    };
    let request = std::fs::read(request).expect("the request file");
    let mut daemon = std::os::unix::net::UnixStream::connect(socket).expect("the daemon");
    daemon.write_all(&request).expect("sending the request");
    let mut got = Vec::with_capacity(8192);
    let mut buf = [0u8; 8192];
    loop {
        let n = daemon.read(&mut buf).expect("reading the answer");
        if n == 0 {
            eprintln!("the daemon closed the connection: {}", String::from_utf8_lossy(&got));
            std::process::exit(125);
        }
        got.extend_from_slice(&buf[..n]);
        if let Some(at) = find(&got, b"{\"jsonrpc\":\"2.0\",\"id\":2,") {
            if let Some(end) = got[at..].iter().position(|b| *b == b'\n') {
                let answer = &got[at..at + end];
                let code = find(answer, b"\"exit_code\":")
                    .map(|i| answer[i + 12..].iter().take_while(|b| b.is_ascii_digit()).fold(0, |n, d| n * 10 + i32::from(d - b'0')))
                    .unwrap_or(1);
                std::process::exit(code);
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
