//! Exit notices: a stored session that exits while no call watches it is announced, once,
//! in the next result its owner gets, whatever the tool (so an agent need not poll for it).

use std::time::Duration;

use tokio::time::Instant;

use crate::limits::TIMEOUT_EXIT_CODE;
use crate::usage::Ending;

/// Longest command shown in a notice, in characters.
const NOTICE_COMMAND_CHARS: usize = 60;

/// A session exited with no call watching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitNotice {
    pub session_id: i32,
    pub command: String,
    pub exit_code: Option<i32>,
    /// Set when a backend or a policy failed the process.
    pub failure: Option<String>,
    pub timed_out_ms: Option<u64>,
    /// Who ended it, when not its owner (`a person (uexec kill)`).
    pub stopped_by: Option<String>,
    pub exited_at: Instant,
    /// What its command left running (killed with it) and the limits it ran into.
    pub ending: Ending,
}

impl ExitNotice {
    /// How long ago it exited.
    pub fn age(&self) -> Duration {
        self.exited_at.elapsed()
    }

    /// `Session 48213 (npm test) exited with code 1, 2.1 s ago`, and what it left running
    /// or a limit it reached, when so.
    pub fn text(&self) -> String {
        let mut command: String = self.command.chars().take(NOTICE_COMMAND_CHARS).collect();
        if command.len() < self.command.len() {
            command.push('\u{2026}');
        }
        let how = match (&self.failure, self.timed_out_ms, self.exit_code) {
            _ if self.stopped_by.is_some() => {
                format!(
                    "was stopped by {}",
                    self.stopped_by.as_deref().unwrap_or("")
                )
            }
            (Some(message), _, _) => format!("failed: {message}"),
            (None, Some(ms), _) => {
                format!("timed out after {ms} ms (exit code {TIMEOUT_EXIT_CODE})")
            }
            (None, None, Some(code)) => format!("exited with code {code}"),
            (None, None, None) => "exited".to_owned(),
        };
        let mut text = format!(
            "Session {} ({command}) {how}, {:.1} s ago",
            self.session_id,
            self.age().as_secs_f64()
        );
        if let Some(left) = self.ending.tree.as_ref().and_then(|t| t.left_text()) {
            text.push_str(&format!("; it left {left} running, killed with it"));
        }
        for hit in &self.ending.limits_hit {
            text.push_str(&format!("; {}", hit.text()));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_names_session_command_and_code() {
        let n = ExitNotice {
            session_id: 48213,
            command: "npm test".into(),
            exit_code: Some(1),
            failure: None,
            timed_out_ms: None,
            stopped_by: None,
            exited_at: Instant::now(),
            ending: Ending::default(),
        };
        let text = n.text();
        assert!(
            text.starts_with("Session 48213 (npm test) exited with code 1, 0."),
            "{text}"
        );
        assert!(text.ends_with(" s ago"), "{text}");
        let long = ExitNotice {
            command: "x".repeat(100),
            ..n
        };
        assert!(long
            .text()
            .contains(&format!("({}\u{2026})", "x".repeat(60))));
        let stopped = ExitNotice {
            stopped_by: Some("a person (uexec kill)".into()),
            ..long
        };
        assert!(
            stopped
                .text()
                .contains(") was stopped by a person (uexec kill), 0."),
            "{}",
            stopped.text()
        );
    }

    #[test]
    fn the_text_names_what_the_command_left_running_and_a_limit_it_reached() {
        use crate::usage::{LeftProcess, LimitHit, TreeEnd};
        let n = ExitNotice {
            session_id: 7,
            command: "npm run dev &".into(),
            exit_code: Some(0),
            failure: None,
            timed_out_ms: None,
            stopped_by: None,
            exited_at: Instant::now(),
            ending: Ending {
                tree: Some(TreeEnd::LeftRunning {
                    count: 1,
                    named: vec![LeftProcess {
                        pid: 42,
                        command: "node server.js".into(),
                    }],
                }),
                limits_hit: vec![LimitHit::Pids { refused: 2, max: 8 }],
            },
        };
        let text = n.text();
        assert!(
            text.ends_with(" s ago; it left 1 process (pid 42: node server.js) running, killed with it; Process limit reached: 2 forks failed (pids_max 8)"),
            "{text}"
        );
    }
}
