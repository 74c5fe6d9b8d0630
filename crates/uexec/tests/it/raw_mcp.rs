//! A raw MCP client of the 2026-07-28 protocol on JSON lines (`uexec mcp --in-process`'s stdio,
//! or `uexec mcp --daemon`): what rmcp's typed client cannot send or would not show (a listen
//! filter's `taskIds`, a tool's `execution`) is read and written as JSON here.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::helpers::{scratch_dir, UEXEC};

/// The request `_meta` of a stateless client; `caps` its capabilities.
pub fn meta(caps: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}
    })
}

/// Capabilities that declare the tasks extension.
pub fn tasks_caps() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
}

/// The text blocks of a tool result (as JSON), joined by newlines.
pub fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

pub struct Raw {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: i64,
    /// Notifications read while waiting for a response.
    pub heard: Vec<Value>,
}

impl Raw {
    /// `uexec mcp --in-process ARGS` in a scratch directory with its own `HOME`.
    pub fn spawn(args: &[&str]) -> Self {
        let dir = scratch_dir("raw-mcp");
        std::fs::create_dir_all(dir.join("home")).unwrap();
        let mut cmd = Command::new(UEXEC);
        cmd.args(["mcp", "--in-process"])
            .args(args)
            .current_dir(&dir)
            .env("HOME", dir.join("home"));
        Self::of(cmd)
    }

    /// A client of `cmd` (an MCP server on its stdio).
    pub fn of(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            child,
            stdin,
            lines,
            next_id: 0,
            heard: Vec::new(),
        }
    }

    pub async fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
    }

    /// The next message, within 20 s.
    pub async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line())
            .await
            .expect("a message within 20 s")
            .unwrap()
            .expect("the server is still there");
        serde_json::from_str(&line).unwrap()
    }

    /// Sends a request; its id.
    pub async fn ask(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// The response to request `id` (notifications before it go to `heard`).
    pub async fn answer(&mut self, id: i64) -> Value {
        loop {
            let message = self.next().await;
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return message;
            }
            self.heard.push(message);
        }
    }

    /// A request and its response.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.ask(method, params).await;
        self.answer(id).await
    }

    /// The first notification `wanted` accepts, heard already or to come.
    pub async fn heard(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.heard.iter().position(&wanted) {
            return self.heard.remove(i);
        }
        loop {
            let message = self.next().await;
            if wanted(&message) {
                return message;
            }
            self.heard.push(message);
        }
    }

    /// `tasks/get` of `task`, from a client of capabilities `caps`: its result.
    pub async fn task(&mut self, caps: Value, task: &str) -> Value {
        self.request("tasks/get", json!({"_meta": meta(caps), "taskId": task}))
            .await["result"]
            .clone()
    }

    /// Polls `tasks/get` of `task` (every 50 ms, as the extension has clients poll) until
    /// `holds` accepts its result, within 10 s.
    pub async fn task_until(
        &mut self,
        caps: Value,
        task: &str,
        holds: impl Fn(&Value) -> bool,
    ) -> Value {
        for _ in 0..200 {
            let got = self.task(caps.clone(), task).await;
            if holds(&got) {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("task {task}: the state awaited never came");
    }

    /// Closes stdin and waits for the server to exit.
    pub async fn close(mut self) {
        drop(self.stdin);
        let _ = tokio::time::timeout(Duration::from_secs(20), self.child.wait()).await;
    }
}
