//! The exec servers the remote backend is tested against: `uexec serve` in this process, and
//! the real `codex exec-server` (npm `@openai/codex@0.171.0`) as a child process.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The variable naming the codex binary.
pub const CODEX_BIN_VAR: &str = "UEXEC_CODEX_BIN";

/// How long codex may take to print its URL.
const CODEX_START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `codex exec-server --listen ws://127.0.0.1:0`.
pub struct CodexPeer {
    child: Child,
    pub addr: SocketAddr,
    home: PathBuf,
}

impl CodexPeer {
    /// Starts codex from `$UEXEC_CODEX_BIN`. Without the variable: `None` and a notice,
    /// unless `CI` is set, where a skipped interop test would hide a regression.
    pub async fn start() -> Option<Self> {
        let bin = match std::env::var_os(CODEX_BIN_VAR) {
            Some(bin) if !bin.is_empty() => PathBuf::from(bin),
            _ => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "{CODEX_BIN_VAR} is not set but CI is: install codex \
                     (npm install @openai/codex@0.171.0) and point {CODEX_BIN_VAR} at \
                     node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
                );
                eprintln!(
                    "notice: {CODEX_BIN_VAR} is not set; skipping this interop test with the \
                     real codex exec-server (see crates/uexec-server/interop/README.md)"
                );
                return None;
            }
        };
        static HOMES: AtomicU32 = AtomicU32::new(0);
        let home = std::env::temp_dir().join(format!(
            "uexec-codex-home-{}-{}",
            std::process::id(),
            HOMES.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&home).unwrap();
        let mut child = Command::new(&bin)
            .args(["exec-server", "--listen", "ws://127.0.0.1:0"])
            .env("HOME", &home)
            .current_dir(&home)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(CODEX_START_TIMEOUT, lines.next_line())
            .await
            .expect("codex printed no URL in time")
            .unwrap()
            .expect("codex exited before printing its URL");
        // Keep draining stdout, so codex never blocks on it.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let addr = first
            .trim()
            .strip_prefix("ws://")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("codex printed {first:?}, not ws://IP:PORT"));
        Some(Self { child, addr, home })
    }

    pub fn url(&self) -> String {
        format!("ws://{}", self.addr)
    }
}

impl Drop for CodexPeer {
    fn drop(&mut self) {
        // SIGTERM lets codex kill its process groups; kill_on_drop's SIGKILL is the fallback.
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
            let deadline = std::time::Instant::now() + Duration::from_secs(3);
            while matches!(self.child.try_wait(), Ok(None)) && std::time::Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = std::fs::remove_dir_all(&self.home);
    }
}
