//! `uexec daemon --status`: whether a daemon runs, and what it says of itself, without
//! starting one (the asking is `uexec_mcp::daemon::status`).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use uexec_protocol::daemon::Status;

use super::common::{print_json, Failure, EXIT_NO_SESSION, EXIT_UEXEC};

/// `uexec daemon --status [--socket PATH] [--json]`: exit 0 when a daemon runs, 3 when none
/// does.
pub async fn daemon_status(socket: Option<PathBuf>, json: bool) -> Result<ExitCode, Failure> {
    let socket = match socket {
        Some(path) => path,
        None => uexec_mcp::daemon::default_socket().map_err(anyhow::Error::from)?,
    };
    let status = uexec_mcp::daemon::status::ask(&socket)
        .await
        .map_err(|e| Failure {
            code: EXIT_UEXEC,
            message: format!("{e:#}"),
        })?;
    let Some(status) = status else {
        let mut message = format!("no uexec daemon runs for {}", socket.display());
        if let Some(other) = super::conn::other_daemon(&socket) {
            message = format!("{message}; {}", other.sentence());
        }
        return Err(Failure {
            code: EXIT_NO_SESSION,
            message,
        });
    };
    if json {
        print_json(&serde_json::to_value(&status).map_err(anyhow::Error::from)?);
    } else {
        print!("{}", render(&status, &uexec_mcp::daemon::build_id()));
    }
    Ok(ExitCode::SUCCESS)
}

/// The status as lines of `name: value`, for a daemon asked by the engine build `ours`.
fn render(status: &Status, ours: &str) -> String {
    let whose = if status.build == ours && status.version == uexec_protocol::daemon::VERSION {
        "this uexec's"
    } else {
        "not this uexec's: `uexec daemon --stop`, and the next client starts a new one"
    };
    let log = status
        .log_file
        .as_ref()
        .map_or_else(|| "its stderr".to_owned(), |p| p.display().to_string());
    let mut out = String::new();
    let _ = writeln!(out, "pid: {}", status.pid);
    let _ = writeln!(out, "version: {}", status.version);
    let _ = writeln!(out, "build: {} ({whose})", status.build);
    let _ = writeln!(out, "uptime: {} s", status.uptime_seconds);
    let _ = writeln!(out, "socket: {}", status.socket.display());
    let _ = writeln!(out, "log: {log}");
    let total: usize = status.sessions.values().sum();
    let _ = writeln!(out, "sessions: {total}");
    for (owner, n) in &status.sessions {
        let _ = writeln!(out, "  {}: {n}", printable(owner));
    }
    let total: usize = status.clients.values().sum();
    let _ = writeln!(out, "agents connected: {total}");
    for (owner, n) in &status.clients {
        let _ = writeln!(out, "  {}: {n}", printable(owner));
    }
    out
}

/// An owner name, which is the client's to choose: no escape sequence reaches the terminal.
fn printable(owner: &str) -> String {
    owner
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(build: &str) -> Status {
        Status {
            pid: 42,
            version: uexec_protocol::daemon::VERSION.to_owned(),
            build: build.to_owned(),
            uptime_seconds: 7,
            socket: "/run/u/uexec/daemon.sock".into(),
            log_file: None,
            sessions: [("@person".to_owned(), 1), ("mcp:\x1b]0;x".to_owned(), 2)]
                .into_iter()
                .collect(),
            clients: [("mcp:\x1b]0;x".to_owned(), 1)].into_iter().collect(),
            transcripts_kept: Some(true),
            transcripts_dir: None,
        }
    }

    #[test]
    fn the_status_names_every_fact_and_counts_sessions_by_owner() {
        let text = render(&status("1:2:3:4"), "1:2:3:4");
        assert!(text.starts_with("pid: 42\n"), "{text}");
        assert!(text.contains("build: 1:2:3:4 (this uexec's)\n"), "{text}");
        assert!(text.contains("uptime: 7 s\nsocket: /run/u/uexec/daemon.sock\n"));
        assert!(text.contains("log: its stderr\nsessions: 3\n  @person: 1\n  mcp: ]0;x: 2\n"));
        assert!(
            text.ends_with("agents connected: 1\n  mcp: ]0;x: 1\n"),
            "{text}"
        );
        let other = render(&status("1:2:3:4"), "9:9:9:9");
        assert!(
            other.contains("(not this uexec's: `uexec daemon --stop`"),
            "{other}"
        );
    }
}
