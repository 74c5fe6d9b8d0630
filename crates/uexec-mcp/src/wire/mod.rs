//! What uexec says on the wire beyond rmcp 3.11's typed model, whose `Tool` has no
//! `execution` and whose subscription filter has no `taskIds` (both SEP-2663, the tasks
//! extension): every face translates between the two at its edge, as JSON.
//!
//! - **`tools/list`**: `exec_command` and `wait` carry `execution.taskSupport: "optional"`
//!   where tasks are offered (not in `--codex-compat`).
//! - **`subscriptions/listen`**: a request's `notifications.taskIds` is copied into its
//!   `_meta` (under [`TASK_IDS_META`]), where the handler reads it
//!   ([`crate::tasks::listen`]); from a client that did not declare the extension it is
//!   refused, `-32021` (Missing Required Client Capability) naming it; and the
//!   acknowledgment lists the ids asked for (`notifications.taskIds`).
//!
//! The faces: [`lines`] (stdio, and the daemon's socket, which `uexec mcp --daemon` relays
//! byte for byte) and [`http`] (`--http`, in-process or relaying to the daemon).

pub mod http;
pub mod lines;

use rmcp::model::{ClientCapabilities, ErrorData};
use serde_json::{json, Map, Value};

pub use crate::tasks::listen::TASK_IDS_META;
use crate::tools::{exec_command, wait};

/// The extension's identifier.
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// What one face adds to the wire.
#[derive(Debug, Clone, Default)]
pub struct Wire {
    /// The tools whose calls may become tasks.
    task_tools: &'static [&'static str],
}

impl Wire {
    /// A face that offers tasks (uexec's dialect) or not (Codex's).
    pub fn new(offers_tasks: bool) -> Self {
        Self {
            task_tools: if offers_tasks {
                &[exec_command::NAME, wait::NAME]
            } else {
                &[]
            },
        }
    }

    /// A `tools/list` result: `execution.taskSupport: "optional"` on the task tools.
    pub fn tools(&self, result: &mut Value) {
        let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else {
            return;
        };
        for tool in tools {
            let named = tool.get("name").and_then(Value::as_str);
            if named.is_some_and(|n| self.task_tools.contains(&n)) {
                if let Some(tool) = tool.as_object_mut() {
                    tool.insert("execution".into(), json!({"taskSupport": "optional"}));
                }
            }
        }
    }
}

/// What a `subscriptions/listen` request asks of tasks.
#[derive(Debug, PartialEq)]
pub enum Listen {
    /// No task ids: nothing to do.
    Nothing,
    /// These task ids, now in the request's `_meta`.
    Tasks(Vec<String>),
    /// Refused: this error.
    Refused(ErrorData),
}

/// A client's request (`method`, `params`): a listen request's task ids, copied into its
/// `_meta`; refused from a client that did not declare the extension, or when not a list
/// of strings.
pub fn listen(method: &str, params: Option<&mut Value>) -> Listen {
    if method != "subscriptions/listen" {
        return Listen::Nothing;
    }
    let Some(params) = params.and_then(Value::as_object_mut) else {
        return Listen::Nothing;
    };
    let Some(asked) = params.get("notifications").and_then(|n| n.get("taskIds")) else {
        return Listen::Nothing;
    };
    let ids: Option<Vec<String>> = asked.as_array().and_then(|ids| {
        ids.iter()
            .map(|id| id.as_str().map(str::to_owned))
            .collect()
    });
    let Some(ids) = ids else {
        return Listen::Refused(ErrorData::invalid_params(
            "notifications.taskIds: expected an array of task ids (strings)",
            None,
        ));
    };
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    let declared = meta
        .get("io.modelcontextprotocol/clientCapabilities")
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(TASKS))
        .is_some_and(Value::is_object);
    if !declared {
        return Listen::Refused(ErrorData::missing_required_client_capability(
            ClientCapabilities::builder().enable_tasks().build(),
        ));
    }
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(TASK_IDS_META.into(), json!(ids));
    }
    Listen::Tasks(ids)
}

/// The params of `notifications/subscriptions/acknowledged`: the task ids agreed to.
pub fn acknowledge(params: &mut Value, ids: &[String]) {
    let Some(params) = params.as_object_mut() else {
        return;
    };
    let notifications = params
        .entry("notifications")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(notifications) = notifications.as_object_mut() {
        notifications.insert("taskIds".into(), json!(ids));
    }
}

/// The JSON-RPC error response to request `id`.
pub fn error_response(id: Value, error: &ErrorData) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listen_params(meta: Value) -> Value {
        json!({"_meta": meta, "notifications": {"taskIds": ["t1", "t2"], "toolsListChanged": true}})
    }

    #[test]
    fn task_ids_go_to_meta_from_a_client_that_declared_tasks() {
        let caps =
            json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}});
        let mut params = listen_params(caps);
        let ids = vec!["t1".to_owned(), "t2".to_owned()];
        assert_eq!(
            listen("subscriptions/listen", Some(&mut params)),
            Listen::Tasks(ids.clone())
        );
        assert_eq!(params["_meta"][TASK_IDS_META], json!(ids));
        // Other methods and listen requests without task ids are left alone.
        assert_eq!(listen("tools/list", Some(&mut params)), Listen::Nothing);
        let mut plain = json!({"notifications": {"toolsListChanged": true}});
        assert_eq!(
            listen("subscriptions/listen", Some(&mut plain)),
            Listen::Nothing
        );
    }

    #[test]
    fn task_ids_are_refused_without_the_extension_or_as_no_list() {
        let mut params = listen_params(json!({}));
        let Listen::Refused(error) = listen("subscriptions/listen", Some(&mut params)) else {
            panic!("refused");
        };
        assert_eq!(error.code.0, -32021);
        let data = error.data.expect("data");
        assert!(
            data["requiredCapabilities"]["extensions"][TASKS].is_object(),
            "{data}"
        );
        let mut params = json!({"notifications": {"taskIds": "t1"}});
        let Listen::Refused(error) = listen("subscriptions/listen", Some(&mut params)) else {
            panic!("refused");
        };
        assert!(error.message.contains("notifications.taskIds"), "{error:?}");
    }

    #[test]
    fn the_task_tools_carry_their_task_support() {
        let mut result =
            json!({"tools": [{"name": "exec_command"}, {"name": "write_stdin"}, {"name": "wait"}]});
        Wire::new(true).tools(&mut result);
        assert_eq!(result["tools"][0]["execution"]["taskSupport"], "optional");
        assert!(result["tools"][1].get("execution").is_none());
        assert_eq!(result["tools"][2]["execution"]["taskSupport"], "optional");
        let mut codex = json!({"tools": [{"name": "exec_command"}]});
        Wire::new(false).tools(&mut codex);
        assert!(codex["tools"][0].get("execution").is_none());
    }
}
