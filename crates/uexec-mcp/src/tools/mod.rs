//! The tools as MCP clients see them, one file per tool: its name, its schema and description
//! in our own words, its arguments (every error names its field), the engine call and the
//! result it renders. What several tools share is beside them: argument helpers and the
//! [`Dialect`](parse::Dialect) ([`parse`]), schema pieces and the [`Offer`] ([`schema`]),
//! results of one shape and exit notices ([`render`]).
//!
//! A call goes: the server routes it by name (`crate::server`), the tool parses its
//! arguments, calls the engine on the caller's store and renders the answer; the server
//! turns an error into `{name} failed: {why}` and adds exit notices.

pub mod await_exit;
pub mod exec_command;
pub mod list_sessions;
pub mod parse;
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

use rmcp::model::Tool;

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
    tools
}

/// The tools of a person at the daemon, besides the agents' own.
pub fn person_tools() -> Vec<Tool> {
    vec![
        send_input::tool(),
        await_exit::tool(),
        remove_session::tool(),
        prune_sessions::tool(),
        signal_session::tool(),
    ]
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
