//! For the network-security tests: `uexec serve` / `uexec mcp --http` as child processes,
//! a raw HTTP client in Python that can run as another user (`runuser -u nobody`), and
//! certificates made at test time.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use crate::helpers::{rand_suffix, UEXEC};

/// The system Python (pyenv's shim lives under /root, out of nobody's reach).
pub fn python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// A server child, killed on drop; `addr` is `HOST:PORT`, `stderr` what it logged so far
/// is read by a thread into a shared buffer.
pub struct Served {
    pub child: Child,
    pub addr: String,
    pub stderr: Arc<Mutex<String>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh directory any user can read (for certificates and token files, made 0644/0600
/// by the tests themselves).
pub fn temp_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "uexec-net-{what}-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `uexec serve ARGS`; waits for the URL on stdout. Returns the server with `addr` taken
/// from the URL.
pub fn serve(args: &[&str]) -> Served {
    serve_with(Command::new(UEXEC), args)
}

/// Like [`serve`], through another launcher (`cmd` is the program with its own arguments;
/// `serve ARGS` are appended after the uexec path).
pub fn serve_with(mut cmd: Command, args: &[&str]) -> Served {
    if cmd.get_program() != UEXEC {
        cmd.arg(UEXEC);
    }
    let mut child = cmd
        .arg("serve")
        .args(args)
        .env_remove("UEXEC_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = drain_stderr(&mut child);
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .split("://")
        .nth(1)
        .unwrap_or_else(|| {
            panic!(
                "no URL announced: {line:?}, stderr: {}",
                stderr.lock().unwrap()
            )
        })
        .to_owned();
    Served {
        child,
        addr,
        stderr,
    }
}

/// `uexec mcp --http ADDR ARGS`; waits for the announced address.
pub fn mcp_http(args: &[&str]) -> Served {
    let mut child = Command::new(UEXEC)
        .args(["mcp", "--codex-compat"])
        .args(args)
        .env_remove("UEXEC_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the server announces its address")
            .unwrap();
        // The announcement only: a warning may name another URL first (an environment
        // that is down).
        if let Some(rest) = line
            .strip_prefix("uexec mcp: serving streamable HTTP at ")
            .and_then(|l| l.split("://").nth(1))
        {
            break rest.trim_end_matches("/mcp").to_owned();
        }
    };
    let stderr = Arc::new(Mutex::new(String::new()));
    let sink = stderr.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let mut text = sink.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
        }
    });
    Served {
        child,
        addr,
        stderr,
    }
}

fn drain_stderr(child: &mut Child) -> Arc<Mutex<String>> {
    let stderr = Arc::new(Mutex::new(String::new()));
    let sink = stderr.clone();
    let pipe = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let mut text = sink.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
        }
    });
    stderr
}

/// One raw request, in Python, optionally over TLS trusting `ca`; prints the status code, or
/// `closed` when the server closed the connection without an answer.
pub const CLIENT: &str = r#"
import socket, ssl, sys
host, port, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ca = sys.argv[4] if len(sys.argv) > 4 else None
try:
    s = socket.create_connection((host, port), timeout=10)
    if ca:
        s = ssl.create_default_context(cafile=ca).wrap_socket(s, server_hostname="localhost")
    if kind == "ws":
        req = ("GET / HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
               % (host, port))
    else:
        body = ('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
                '"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}')
        req = ("POST /mcp HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
               "Accept: application/json, text/event-stream\r\n"
               "Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (host, port, len(body), body))
    s.sendall(req.encode())
    data = b""
    while b"\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    words = data.split(b"\r\n")[0].split()
    print(words[1].decode() if len(words) > 1 and words[0].startswith(b"HTTP/") else "closed")
except (ConnectionResetError, BrokenPipeError):
    print("closed")
"#;

/// The status of one upgrade (`kind` = "ws") or MCP POST ("mcp") to `addr`, sent by `user`
/// (None: this test's own user).
pub fn request_as(user: Option<&str>, addr: &str, kind: &str, ca: Option<&Path>) -> String {
    let (host, port) = addr.rsplit_once(':').unwrap();
    let mut cmd = match user {
        Some(user) => {
            let mut c = Command::new("runuser");
            c.args(["-u", user, "--", python()]);
            c
        }
        None => Command::new(python()),
    };
    cmd.args(["-c", CLIENT, host, port, kind]);
    if let Some(ca) = ca {
        cmd.arg(ca);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A self-signed certificate for `localhost` and 127.0.0.1, written as `cert.pem` and
/// `key.pem` in `dir` (the certificate is its own CA).
pub fn make_cert(dir: &Path) -> (PathBuf, PathBuf) {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    (cert, key)
}

/// Runs `uexec ARGS` to completion (killed after 20 s: a server that should have refused to
/// start would otherwise run forever); returns (success, stderr).
pub fn run_uexec(args: &[&str]) -> (bool, String) {
    let mut child = Command::new(UEXEC)
        .args(args)
        .env_remove("UEXEC_TOKEN")
        .env_remove("UEXEC_REMOTE_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = drain_stderr(&mut child);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // The drain thread ends at EOF, which follows the exit; give it a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while Arc::strong_count(&stderr) > 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let text = stderr.lock().unwrap().clone();
    (status.is_some_and(|s| s.success()), text)
}
