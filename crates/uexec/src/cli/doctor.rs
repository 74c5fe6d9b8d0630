//! `uexec doctor`'s part on the daemon: whether one runs for this user, of this build or of
//! another, where it logs, and where transcripts go. The sandbox's part is
//! `uexec_sandbox::doctor`'s; this one is asked afterwards (it needs a runtime, the probes
//! need none), and starts no daemon.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};
use uexec_protocol::daemon::Status;

/// How long a daemon has to answer its status before doctor says it does not.
const ASK_FOR: Duration = Duration::from_secs(2);

/// What doctor found of the daemon.
#[derive(Debug)]
pub struct DaemonFacts {
    pub socket: Option<PathBuf>,
    /// `Ok(None)`: none runs; `Err`: the socket could not be asked (its directory is not
    /// this user's, another user listens there...).
    pub status: Result<Option<Status>, String>,
    /// The engine build this uexec runs (`uexec --version`'s).
    pub ours: String,
    /// Where a daemon started on demand logs.
    pub default_log: Option<PathBuf>,
    /// Where transcripts go unless `--transcripts-dir` says otherwise.
    pub transcripts: Option<PathBuf>,
}

/// Asks the daemon of `socket` (the default one when `None`) for its status; starts none.
pub fn daemon_facts(socket: Option<PathBuf>) -> DaemonFacts {
    let socket = socket.or_else(|| uexec_mcp::daemon::default_socket().ok());
    let status = match &socket {
        None => Err("no socket path: neither XDG_RUNTIME_DIR nor a temp dir is usable".to_owned()),
        Some(socket) => ask(socket),
    };
    let state = uexec_core::transcript::state_dir();
    DaemonFacts {
        socket,
        status,
        ours: uexec_mcp::daemon::build_id(),
        default_log: state.as_ref().map(|s| s.join("daemon.log")),
        transcripts: uexec_core::transcript::TranscriptConfig::default_root(),
    }
}

fn ask(socket: &std::path::Path) -> Result<Option<Status>, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("no runtime to ask it: {e}"))?;
    runtime.block_on(async {
        match tokio::time::timeout(ASK_FOR, uexec_mcp::daemon::status::ask(socket)).await {
            Ok(Ok(status)) => Ok(status),
            Ok(Err(e)) => Err(format!("{e:#}")),
            Err(_) => Err(format!("it did not answer within {} s", ASK_FOR.as_secs())),
        }
    })
}

impl DaemonFacts {
    /// Whether the running daemon is of this build (`None`: none runs, or unknown).
    fn same_build(&self) -> Option<bool> {
        match &self.status {
            Ok(Some(s)) => {
                Some(s.build == self.ours && s.version == uexec_protocol::daemon::VERSION)
            }
            _ => None,
        }
    }

    /// Where transcripts go: the running daemon's, as its status says (it may have been
    /// started with `--transcripts-dir` or `--no-transcripts`), else the default.
    fn transcripts_line(&self) -> String {
        match self.daemons_transcripts() {
            Some(Some(dir)) => format!("  transcripts: {} (the running daemon's)\n", dir.display()),
            Some(None) => {
                "  transcripts: none (the running daemon was started with --no-transcripts)\n"
                    .to_owned()
            }
            None => format!(
                "  transcripts: {} (unless --transcripts-dir says otherwise)\n",
                self.transcripts
                    .as_ref()
                    .map_or_else(|| "unknown".to_owned(), |p| p.display().to_string())
            ),
        }
    }

    /// The running daemon's transcripts, as its status says (`Some(None)`: it keeps none);
    /// `None` when no daemon runs or it predates saying so.
    fn daemons_transcripts(&self) -> Option<Option<&PathBuf>> {
        match &self.status {
            Ok(Some(s)) => match (s.transcripts_kept, &s.transcripts_dir) {
                (Some(true), Some(dir)) => Some(Some(dir)),
                (Some(false), _) => Some(None),
                _ => None,
            },
            _ => None,
        }
    }

    /// The lines `uexec doctor` prints after the sandbox's.
    pub fn text(&self) -> String {
        let path = |p: &Option<PathBuf>| {
            p.as_ref()
                .map_or_else(|| "unknown".to_owned(), |p| p.display().to_string())
        };
        let mut out = String::from("uexec daemon (this user's sessions, for people and agents):\n");
        out.push_str(&format!("  socket: {}\n", path(&self.socket)));
        match &self.status {
            Ok(Some(s)) => {
                out.push_str(&format!(
                    "  running: yes (pid {}, up {} s)\n",
                    s.pid, s.uptime_seconds
                ));
                if self.same_build() == Some(true) {
                    out.push_str(&format!("  same build as this uexec: yes ({})\n", s.build));
                } else {
                    out.push_str(&format!(
                        "  same build as this uexec: NO (it runs {} build {}, this uexec is {} build {}: \
                         `uexec daemon --stop`, and the next client starts a new one)\n",
                        s.version,
                        s.build,
                        uexec_protocol::daemon::VERSION,
                        self.ours
                    ));
                }
                let log = s
                    .log_file
                    .as_ref()
                    .map_or_else(|| "its stderr".to_owned(), |p| p.display().to_string());
                out.push_str(&format!("  log: {log}\n"));
            }
            Ok(None) => {
                out.push_str("  running: no (the next `uexec run` or `uexec mcp` starts one)\n");
                out.push_str(&format!(
                    "  log: {} (where a daemon started on demand writes)\n",
                    path(&self.default_log)
                ));
            }
            Err(why) => {
                out.push_str(&format!("  running: unknown ({why})\n"));
            }
        }
        out.push_str(&self.transcripts_line());
        out
    }

    /// The `daemon` member of `uexec doctor --json`.
    pub fn json(&self) -> Value {
        let (running, pid, build, log, error) = match &self.status {
            Ok(Some(s)) => (
                Some(true),
                Some(s.pid),
                Some(s.build.clone()),
                s.log_file.clone(),
                None,
            ),
            Ok(None) => (Some(false), None, None, self.default_log.clone(), None),
            Err(why) => (None, None, None, None, Some(why.clone())),
        };
        json!({
            "socket": self.socket,
            "running": running,
            "pid": pid,
            "build": build,
            "this_build": self.ours,
            "same_build": self.same_build(),
            "log_file": log,
            "transcripts_dir": self.daemons_transcripts().unwrap_or(self.transcripts.as_ref()),
            "error": error,
        })
    }
}

/// `uexec doctor`'s whole output: the sandbox's `rendered` part, then the daemon's, then
/// whether the rules can judge each exec (`--rules-at exec`).
pub fn doctor(rendered_sandbox: &str, json: bool, daemon: &DaemonFacts) -> String {
    let exec = uexec_core::policy::exec_rules::exec_support();
    if json {
        let object = rendered_sandbox.trim_end();
        let inner = object
            .strip_prefix('{')
            .and_then(|o| o.strip_suffix('}'))
            .unwrap_or(object);
        let comma = if inner.is_empty() { "" } else { "," };
        let exec = json!({"available": exec.is_ok(), "error": exec.err()});
        return format!(
            "{{{inner}{comma}\"daemon\":{},\"rules_at_exec\":{exec}}}\n",
            daemon.json()
        );
    }
    format!(
        "{rendered_sandbox}\n{}{}",
        daemon.text(),
        rules_at_exec_text(&exec)
    )
}

/// The lines on `--rules-at exec`: whether this machine hands every exec over.
fn rules_at_exec_text(support: &Result<(), String>) -> String {
    let mut out = String::from("rules at each exec (uexec mcp --rules-at exec):\n");
    match support {
        Ok(()) => out.push_str(
            "  available: yes (seccomp user notification); a policy that tells a model no, \
             not a wall: a multi-threaded program can change its arguments after they are \
             read, and the sandbox stays the wall\n",
        ),
        Err(why) => out.push_str(&format!(
            "  available: NO ({why}); with --rules-at exec the rules judge each script's text \
             only\n"
        )),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(status: Result<Option<Status>, String>) -> DaemonFacts {
        DaemonFacts {
            socket: Some("/run/user/1/uexec/daemon.sock".into()),
            status,
            ours: "1:2:3:4".into(),
            default_log: Some("/home/u/.local/state/uexec/daemon.log".into()),
            transcripts: Some("/home/u/.local/state/uexec/sessions".into()),
        }
    }

    fn status(build: &str) -> Status {
        Status {
            pid: 77,
            version: uexec_protocol::daemon::VERSION.to_owned(),
            build: build.to_owned(),
            uptime_seconds: 5,
            socket: "/run/user/1/uexec/daemon.sock".into(),
            log_file: Some("/var/log/d.log".into()),
            sessions: Default::default(),
            clients: Default::default(),
            transcripts_kept: None,
            transcripts_dir: None,
        }
    }

    #[test]
    fn the_transcripts_are_the_running_daemons_where_it_says_them() {
        // An older daemon says nothing: the default, with its caveat.
        let old = facts(Ok(Some(status("1:2:3:4")))).text();
        assert!(
            old.contains("transcripts: /home/u/.local/state/uexec/sessions (unless"),
            "{old}"
        );
        let mut own = status("1:2:3:4");
        own.transcripts_kept = Some(true);
        own.transcripts_dir = Some("/srv/t".into());
        let with_dir = facts(Ok(Some(own.clone())));
        assert!(
            with_dir
                .text()
                .contains("transcripts: /srv/t (the running daemon's)"),
            "{}",
            with_dir.text()
        );
        assert_eq!(with_dir.json()["transcripts_dir"], "/srv/t");
        own.transcripts_kept = Some(false);
        own.transcripts_dir = None;
        let none = facts(Ok(Some(own)));
        assert!(
            none.text().contains(
                "transcripts: none (the running daemon was started with --no-transcripts)"
            ),
            "{}",
            none.text()
        );
        assert_eq!(none.json()["transcripts_dir"], Value::Null);
    }

    #[test]
    fn the_json_stays_one_object_with_the_daemon_in_it() {
        let out = doctor(
            "{\"seccomp\":{\"available\":true}}\n",
            true,
            &facts(Ok(None)),
        );
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["seccomp"]["available"], true);
        assert_eq!(v["daemon"]["running"], false);
        assert_eq!(v["daemon"]["same_build"], Value::Null);
        let other = doctor("{}\n", true, &facts(Ok(Some(status("9:9:9:9")))));
        let v: Value = serde_json::from_str(&other).unwrap();
        assert_eq!(v["daemon"]["same_build"], false);
        assert_eq!(v["daemon"]["log_file"], "/var/log/d.log");
    }

    #[test]
    fn another_build_is_said_with_what_to_do() {
        let text = facts(Ok(Some(status("9:9:9:9")))).text();
        assert!(text.contains("running: yes (pid 77, up 5 s)"), "{text}");
        assert!(
            text.contains("same build as this uexec: NO (it runs"),
            "{text}"
        );
        assert!(text.contains("`uexec daemon --stop`"), "{text}");
        let same = facts(Ok(Some(status("1:2:3:4")))).text();
        assert!(
            same.contains("same build as this uexec: yes (1:2:3:4)"),
            "{same}"
        );
        let unknown = facts(Err("refused".into())).text();
        assert!(unknown.contains("running: unknown (refused)"), "{unknown}");
    }
}
