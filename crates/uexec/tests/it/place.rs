//! A private place for one daemon: a runtime directory (0700), a working directory with an
//! empty HOME, and the commands and clients that use them.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;

use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;

use crate::helpers::{rand_suffix, Client, Recorder, UEXEC};

/// A private runtime directory (0700) and a working directory for one test.
pub struct DaemonPlace {
    pub runtime: PathBuf,
    pub cwd: PathBuf,
}

impl DaemonPlace {
    pub fn new(kind: &str) -> Self {
        let root = std::env::temp_dir().join(format!("uexec-it-{kind}-{}", rand_suffix()));
        let runtime = root.join("run");
        let cwd = root.join("work");
        std::fs::create_dir_all(&runtime).unwrap();
        std::fs::create_dir_all(cwd.join("home")).unwrap();
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
        Self { runtime, cwd }
    }

    pub fn socket(&self) -> PathBuf {
        self.runtime.join("uexec").join("daemon.sock")
    }

    pub fn command(&self, args: &[&str]) -> Command {
        self.command_of(std::path::Path::new(UEXEC), args)
    }

    /// `command` with another executable (a copy of `uexec`, or `uexec-engine`).
    pub fn command_of(&self, exe: &std::path::Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .current_dir(&self.cwd)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("HOME", self.cwd.join("home"))
            .env_remove("UEXEC_DAEMON");
        cmd
    }

    /// `uexec mcp --daemon` as an MCP client sees it.
    pub async fn client(&self, extra: &[&str]) -> Client {
        self.client_with_env(extra, &[]).await
    }

    /// `uexec mcp ARGS` (the daemon by default, as an agent's configuration says it) as an
    /// MCP client sees it, and what it says on stderr.
    pub async fn plain_client(&self, extra: &[&str]) -> (Client, std::path::PathBuf) {
        let stderr = self.cwd.join(format!("mcp-{}.stderr", rand_suffix()));
        let mut cmd = tokio::process::Command::new(UEXEC);
        cmd.arg("mcp")
            .args(extra)
            .current_dir(&self.cwd)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("HOME", self.cwd.join("home"))
            .env_remove("UEXEC_DAEMON");
        let (transport, _) = TokioChildProcess::builder(cmd)
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let client = Recorder::default().serve(transport).await.unwrap();
        (client, stderr)
    }

    /// `uexec daemon --status --json`; `None` when no daemon runs.
    pub fn status(&self) -> Option<serde_json::Value> {
        let out = self
            .command(&["daemon", "--status", "--json"])
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).unwrap())
    }

    /// `client`, with these variables set too (for it and the daemon it may start).
    pub async fn client_with_env(
        &self,
        extra: &[&str],
        vars: &[(&str, &std::ffi::OsStr)],
    ) -> Client {
        let mut cmd = tokio::process::Command::new(UEXEC);
        cmd.args(["mcp", "--daemon"])
            .args(extra)
            .current_dir(&self.cwd)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("HOME", self.cwd.join("home"))
            .envs(vars.iter().copied());
        Recorder::default()
            .serve(TokioChildProcess::new(cmd).unwrap())
            .await
            .unwrap()
    }

    /// An MCP client at the running daemon as the person (owner `@person`, the hello the
    /// CLI's verbs send), as no `uexec mcp` config line can be: its owner is an agent's.
    pub async fn person_client(&self) -> Client {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let engine = std::path::Path::new(UEXEC).with_file_name("uexec-engine");
        let build = uexec_mcp::daemon::build_id_of(&engine);
        let hello = uexec_cli::cli::conn::person_hello(build, Vec::new()).unwrap();
        let stream = tokio::net::UnixStream::connect(self.socket())
            .await
            .unwrap();
        let (read, mut write) = stream.into_split();
        let mut line = serde_json::to_vec(&hello).unwrap();
        line.push(b'\n');
        write.write_all(&line).await.unwrap();
        let mut read = tokio::io::BufReader::new(read);
        let mut reply = String::new();
        read.read_line(&mut reply).await.unwrap();
        assert!(
            reply.contains("\"ok\":true"),
            "the daemon refused the person: {reply}"
        );
        Recorder::default().serve((read, write)).await.unwrap()
    }

    pub fn daemon_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.runtime.join("uexec").join("daemon.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    pub fn stop(&self) {
        let out = self.command(&["daemon", "--stop"]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for DaemonPlace {
    fn drop(&mut self) {
        // Whatever the test did, no daemon outlives it; nor do its files (transcripts and
        // copies of the binaries: hundreds of MB a run), unless the test failed.
        let _ = self.command(&["daemon", "--stop"]).output();
        if !std::thread::panicking() {
            if let Some(root) = self.runtime.parent() {
                let _ = std::fs::remove_dir_all(root);
            }
        }
    }
}
