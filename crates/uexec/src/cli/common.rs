//! What every verb shares: the exit codes a failure means, one tool call that turns a tool
//! error into that failure, a session named by id or name, the wait conditions of `run`
//! and `poll`, and JSON output.
//!
//! A verb file uses this and [`conn`](super::conn), never another verb file.

use serde_json::{json, Value};

use super::conn::{Conn, ToolResult};
use uexec_core::until::{MAX_IDLE_MS, MIN_IDLE_MS};

/// The session does not exist (any more).
pub const EXIT_NO_SESSION: u8 = 3;
/// uexec itself failed.
pub const EXIT_UEXEC: u8 = 125;
/// `kill` of a session that had already exited: nothing was done to it.
pub const EXIT_ENDED: u8 = 5;
/// `uexec run` returned while its command still runs, as a session, and nobody asked for
/// that up front (Ctrl-\, a window without `--detach`, or one whose `--until-*` condition
/// was not met): not 0, so `uexec run --until-pattern ready -- serve && test` does not test
/// a server that never got ready. (`run -d` asked for it: 0, as `docker run -d`.) Also `rm`
/// of a session that still runs, without `--force` (nothing was done to it).
pub const EXIT_STILL_RUNNING: u8 = 4;

/// Wait conditions of `run` and `poll` (the window stays the cap).
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct UntilArgs {
    /// Return as soon as the output matches this regex.
    #[arg(long, value_name = "REGEX")]
    pub until_pattern: Option<String>,
    /// Return once the output has been quiet this long, after some output (10ms to 5m; a
    /// bare number is ms).
    #[arg(long, value_name = "DURATION", value_parser = until_idle)]
    pub until_idle: Option<i64>,
    /// Return when the command waits for input (a prompt).
    #[arg(long)]
    pub until_prompt: bool,
}

/// `--until-idle`, in ms.
pub fn until_idle(text: &str) -> Result<i64, String> {
    super::duration::ms_within(text, "ms", MIN_IDLE_MS..=MAX_IDLE_MS)
}

impl UntilArgs {
    pub(super) fn json(&self) -> Option<Value> {
        if self.until_pattern.is_none() && self.until_idle.is_none() && !self.until_prompt {
            return None;
        }
        let mut until = json!({});
        if let Some(p) = &self.until_pattern {
            until["pattern"] = json!(p);
        }
        if let Some(ms) = self.until_idle {
            until["idle_ms"] = json!(ms);
        }
        if self.until_prompt {
            until["prompt"] = json!(true);
        }
        Some(until)
    }
}

/// A failure, with the exit code it means.
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Self {
            code: EXIT_UEXEC,
            message: format!("{e:#}"),
        }
    }
}

/// The tools' argument names a verb fills from its flags, and those flags: a person is told
/// of the flag they typed, not of the field it became.
const FLAGS_OF_FIELDS: [(&str, &str); 7] = [
    ("workdir", "--cwd"),
    ("name", "--name"),
    ("timeout_ms", "--timeout"),
    ("yield_time_ms", "--yield"),
    ("until.pattern", "--until-pattern"),
    ("until.idle_ms", "--until-idle"),
    ("until.prompt", "--until-prompt"),
];

/// A tool error as a failure: an unknown session is [`EXIT_NO_SESSION`], one that still
/// runs where it should not [`EXIT_STILL_RUNNING`], a bad argument a usage error (2) that
/// names the verb's flag where the tool named its field.
pub(super) fn tool_failure(result: &ToolResult) -> Failure {
    text_failure(&result.text)
}

/// A tool's error in the CLI's words: without the tool's name (`write_stdin failed: `,
/// `exec_command: `), "session" where the tools say "process id", and what a person runs
/// where the tools tell a model what to call.
pub fn cli_words(text: &str) -> String {
    let mut rest = text;
    while let Some((head, after)) = rest.split_once(": ") {
        let tool = head.strip_suffix(" failed").unwrap_or(head);
        let is_tool =
            tool.contains('_') && tool.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
        if !is_tool {
            break;
        }
        rest = after;
    }
    rest.replace("Unknown process id", "Unknown session")
        .replace(
            "; rerun exec_command with tty=true to keep stdin open",
            " (it has neither a terminal nor a stdin pipe): `uexec run --tty` starts a command that takes input",
        )
        .replace(
            "poll it (empty chars) to see what happens, and write again once they detach",
            "send again once they detach",
        )
}

/// [`tool_failure`] of a tool error's text (as a daemon's refusal of a run says it).
pub(super) fn text_failure(text: &str) -> Failure {
    let code = if text.contains("Unknown process id") || text.contains("it has exited") {
        EXIT_NO_SESSION
    } else if text.contains("is still running") {
        EXIT_STILL_RUNNING
    } else if text.contains("invalid arguments: ") || text.contains("stdin is closed") {
        // A flag or value, or text sent to a session that takes none.
        2
    } else {
        EXIT_UEXEC
    };
    let mut message = cli_words(text);
    for (field, flag) in FLAGS_OF_FIELDS {
        message = message.replace(
            &format!("invalid arguments: {field}: "),
            &format!("invalid arguments: {flag}: "),
        );
    }
    Failure { code, message }
}

/// What a verb naming session `id` says when no daemon runs: there is no such session (and
/// none was started to find out).
pub(super) fn no_daemon_for(id: i32) -> Failure {
    Failure {
        code: EXIT_NO_SESSION,
        message: format!("Unknown session {id} (no uexec daemon is running)"),
    }
}

/// A session as a person names it on the command line: its id, or the name it was given
/// (`uexec run --name`, exec_command's `name`). Digits are an id; anything else must be a
/// valid name ([`uexec_core::check_session_name`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionRef {
    Id(i32),
    Name(String),
}

impl std::fmt::Display for SessionRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Id(id) => write!(f, "{id}"),
            Self::Name(name) => f.write_str(name),
        }
    }
}

/// clap's reading of a session argument.
pub fn parse_session_ref(s: &str) -> Result<SessionRef, String> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse()
            .map(SessionRef::Id)
            .map_err(|_| format!("{s} is not a session id"));
    }
    uexec_core::check_session_name(s)
        .map(|()| SessionRef::Name(s.to_owned()))
        .map_err(|why| format!("neither a session id nor a name: {why}"))
}

/// clap's reading of `--name` (`uexec run --name`).
pub fn parse_session_name(s: &str) -> Result<String, String> {
    uexec_core::check_session_name(s).map(|()| s.to_owned())
}

impl SessionRef {
    /// What a verb naming this session says when no daemon runs.
    pub(super) fn no_daemon(&self) -> Failure {
        match self {
            Self::Id(id) => no_daemon_for(*id),
            Self::Name(name) => Failure {
                code: EXIT_NO_SESSION,
                message: format!("Unknown session name {name} (no uexec daemon is running)"),
            },
        }
    }

    /// The session's id: a name is looked up among the person's own sessions first (ended
    /// ones too: the running one, else the one that started last), and among other owners'
    /// only when the person has none of that name, saying whose on stderr. Two running
    /// sessions of that name (two owners') are ambiguous: a usage error that lists their ids.
    pub async fn resolve(&self, conn: &mut Conn) -> Result<i32, Failure> {
        let name = match self {
            Self::Id(id) => return Ok(*id),
            Self::Name(name) => name,
        };
        if !conn.daemon_may_run() {
            return Err(self.no_daemon());
        }
        let listed = call(conn, "list_sessions", json!({"all": true})).await?;
        let named: Vec<&Value> = listed.structured["sessions"]
            .as_array()
            .map(|all| all.iter().filter(|s| s["name"] == name.as_str()).collect())
            .unwrap_or_default();
        let (own, others): (Vec<&Value>, Vec<&Value>) = named
            .into_iter()
            .partition(|s| s["owner"] == uexec_protocol::daemon::PERSON);
        if let Some(id) = pick_named(name, &own)? {
            return Ok(id);
        }
        let id = pick_named(name, &others)?.ok_or_else(|| Failure {
            code: EXIT_NO_SESSION,
            message: format!("Unknown session name {name}"),
        })?;
        if let Some(s) = others.iter().find(|s| s["session_id"] == id) {
            let owner: String = s["owner"]
                .as_str()
                .unwrap_or_default()
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            eprintln!("{name}: session {id} of {owner} (you have none of that name)");
        }
        Ok(id)
    }
}

/// The session named `name` among `named` (one owner's, or others'): the running one, else
/// the one that started last; two running are ambiguous.
fn pick_named(name: &str, named: &[&Value]) -> Result<Option<i32>, Failure> {
    let running: Vec<i64> = named
        .iter()
        .filter(|s| s["state"] != "exited")
        .filter_map(|s| s["session_id"].as_i64())
        .collect();
    let id = match running.as_slice() {
        [one] => Some(*one),
        [] => named
            .iter()
            .max_by_key(|s| s["started_at"].as_str().unwrap_or_default().to_owned())
            .and_then(|s| s["session_id"].as_i64()),
        many => {
            return Err(Failure {
                code: 2,
                message: format!(
                    "session name {name} is ambiguous: sessions {} run under it (give the id)",
                    many.iter()
                        .map(i64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
        }
    };
    Ok(id.and_then(|id| i32::try_from(id).ok()))
}

/// Calls a tool; its error is a [`Failure`].
pub(super) async fn call(conn: &mut Conn, tool: &str, args: Value) -> Result<ToolResult, Failure> {
    let result = conn.call(tool, args).await?;
    if result.is_error {
        return Err(tool_failure(&result));
    }
    Ok(result)
}

pub(super) fn print_json(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// A command's exit code as this process's, clamped to 0..=255 (1 when it has none).
pub(super) fn exit_code_of(code: Option<i64>) -> u8 {
    match code {
        Some(c) => u8::try_from(c.clamp(0, 255)).unwrap_or(1),
        None => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_errors_read_in_the_clis_words() {
        assert_eq!(
            cli_words("write_stdin failed: Unknown process id 5: session 5 exited (code 5)"),
            "Unknown session 5: session 5 exited (code 5)"
        );
        assert_eq!(
            cli_words("exec_command: invalid arguments: workdir: /x does not exist"),
            "invalid arguments: workdir: /x does not exist"
        );
        let closed = text_failure(
            "send_input failed: stdin is closed for this session; rerun exec_command with tty=true to keep stdin open",
        );
        assert_eq!(closed.code, 2);
        assert!(
            closed.message.contains("uexec run --tty"),
            "{}",
            closed.message
        );
        for words in ["exec_command", "send_input", "tty=true", "process id"] {
            assert!(!closed.message.contains(words), "{}", closed.message);
        }
        // Not a tool's name: left as it is.
        assert_eq!(
            cli_words("session 5 is still running"),
            "session 5 is still running"
        );
    }
}
