//! The tools as MCP clients see them, one file per tool: its name, its schema and description
//! in our own words, its arguments (every error names its field), the engine call and the
//! result it renders. What several tools share is beside them: argument helpers and the
//! [`Dialect`](parse::Dialect) ([`parse`]), schema pieces and the [`Offer`] ([`schema`]),
//! results of one shape and exit notices ([`render`]).
//!
//! A call goes: the server routes it by name (`crate::server`), the tool parses its
//! arguments, calls the engine on the caller's store and renders the answer; the server
//! turns an error into `{name} failed: {why}` and adds exit notices.

pub mod approvals;
pub mod await_exit;
pub mod exec_command;
pub mod keep_session;
pub mod list_sessions;
pub mod parse;
pub mod pause_session;
pub mod prune_sessions;
pub mod read_output;
pub mod remove_session;
pub mod render;
pub mod schema;
pub mod send_input;
pub mod signal_session;
pub mod terminate_session;
pub mod wait;
pub mod write_stdin;

use rmcp::model::{Tool, ToolAnnotations};

use schema::Offer;

/// The tools this server offers.
pub fn all(codex_tools_only: bool, offer: Offer<'_>) -> Vec<Tool> {
    let mut tools = vec![exec_command::tool(offer), write_stdin::tool(offer)];
    if !codex_tools_only {
        tools.push(list_sessions::tool());
        tools.push(terminate_session::tool());
        tools.push(wait::tool());
        if offer.config.transcripts.is_some() {
            tools.push(read_output::tool());
        }
    }
    tools.into_iter().map(annotated).collect()
}

/// The name of a tool uexec has (offered here or not), as a constant: what the figures
/// label a call with (never a name a client made up).
pub fn known(name: &str) -> Option<&'static str> {
    [
        exec_command::NAME,
        write_stdin::NAME,
        list_sessions::NAME,
        terminate_session::NAME,
        wait::NAME,
        read_output::NAME,
        send_input::NAME,
        await_exit::NAME,
        remove_session::NAME,
        prune_sessions::NAME,
        signal_session::NAME,
        pause_session::PAUSE,
        pause_session::RESUME,
        keep_session::NAME,
        approvals::LIST,
        approvals::ANSWER,
    ]
    .into_iter()
    .find(|known| *known == name)
}

/// The tools of a person at the daemon, besides the agents' own.
pub fn person_tools() -> Vec<Tool> {
    [
        send_input::tool(),
        await_exit::tool(),
        remove_session::tool(),
        prune_sessions::tool(),
        signal_session::tool(),
        pause_session::pause_tool(),
        pause_session::resume_tool(),
        keep_session::tool(),
        approvals::list_tool(),
        approvals::answer_tool(),
    ]
    .into_iter()
    .map(annotated)
    .collect()
}

/// A tool with its title and what a client may assume of it: the reading tools only read,
/// the ones that end or forget sessions destroy (hints, as MCP says: the client decides).
pub(crate) fn annotated(mut tool: Tool) -> Tool {
    let (title, read_only, destructive) = match tool.name.as_ref() {
        exec_command::NAME => ("Run a shell command", false, None),
        write_stdin::NAME => ("Poll, type into or interrupt a session", false, None),
        list_sessions::NAME => ("List sessions", true, None),
        terminate_session::NAME => ("Stop a session", false, Some(true)),
        wait::NAME => ("Wait for sessions", false, Some(false)),
        read_output::NAME => ("Read a session's transcript", true, None),
        send_input::NAME => ("Type into a session", false, None),
        await_exit::NAME => ("Wait for a session's exit", true, None),
        remove_session::NAME => ("Forget an ended session", false, Some(true)),
        prune_sessions::NAME => ("Forget every ended session", false, Some(true)),
        signal_session::NAME => ("Signal a session", false, Some(true)),
        pause_session::PAUSE => ("Pause a session", false, Some(false)),
        pause_session::RESUME => ("Resume a paused session", false, Some(false)),
        keep_session::NAME => ("Keep a session after its owner leaves", false, Some(false)),
        approvals::LIST => ("Commands waiting for approval", true, None),
        approvals::ANSWER => ("Approve or refuse a held command", false, Some(false)),
        _ => return tool,
    };
    let mut annotations = ToolAnnotations::new().read_only(read_only);
    if let Some(destructive) = destructive {
        annotations = annotations.destructive(destructive);
    }
    tool.title = Some(title.to_owned());
    tool.annotations = Some(annotations);
    tool
}

/// The `instructions` of a server offering `tools`: what they are for, naming only those.
pub fn instructions(tools: &[Tool]) -> String {
    let offered = |name: &str| tools.iter().any(|t| t.name == name);
    let mut then = vec!["poll, type into or interrupt them with write_stdin"];
    for (name, what) in [
        (wait::NAME, "wait for one or several to exit with wait"),
        (list_sessions::NAME, "list them with list_sessions"),
        (
            read_output::NAME,
            "read a long output back with read_output",
        ),
        (terminate_session::NAME, "stop them with terminate_session"),
    ] {
        if offered(name) {
            then.push(what);
        }
    }
    format!(
        "Run shell commands with exec_command. Commands that outlive yield_time_ms keep running in a session: {}.",
        then.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::parse::{args, Dialect};
    use super::*;
    use serde_json::json;

    #[test]
    fn extended_fields_exist_only_in_the_extended_dialect() {
        let a = args(json!({"cmd": "x", "until": {"pattern": "ready"}}));
        let e = exec_command::request(Some(&a), Dialect::default()).expect_err("codex dialect");
        assert_eq!(e.field, "until");
        let named = args(json!({"cmd": "x", "name": "devserver"}));
        let e = exec_command::request(Some(&named), Dialect::default()).expect_err("codex");
        assert_eq!(e.field, "name");
        let extended = Dialect {
            extended: true,
            ..Dialect::default()
        };
        let r = exec_command::request(Some(&a), extended).expect("extended");
        assert_eq!(r.until.and_then(|u| u.pattern).as_deref(), Some("ready"));
        let w = args(json!({"session_id": 1000, "eof": true}));
        assert_eq!(
            write_stdin::request(Some(&w), Dialect::default())
                .expect_err("codex dialect")
                .field,
            "eof"
        );
        assert!(
            write_stdin::request(Some(&w), extended)
                .expect("extended")
                .eof
        );
    }
}
