//! The MCP server handler: translates tool calls into engine calls and snapshots into tool
//! results. It holds no process logic.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, SubscribeRequestParams,
    SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{json, Map, Value};
use uexec_core::{Environments, ExecError, ExitNotice, SessionStore, Snapshot, StoreConfig};

use crate::args::{self, Dialect};
use crate::progress::{CallTarget, ProgressForwarder};
use crate::resources::{self, LegacySubscriptions};
use crate::stores::Stores;
use crate::tools;

/// How often a connection waiting to hear of environment changes checks it is still open.
const PEER_CHECK_MS: u64 = 30_000;

/// One MCP connection's view of its stores.
#[derive(Clone)]
pub struct UexecServer {
    stores: Stores,
    /// The environments (one table for every store; it changes when the file is reloaded).
    environments: Environments,
    /// Whether exec_command takes `environment_id` (environments are configured, maybe none
    /// available yet).
    accepts_environment: bool,
    options: Options,
    subscriptions: LegacySubscriptions,
}

/// How a server presents its tools.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Offer only Codex's two tools.
    pub codex_tools_only: bool,
    /// uexec's own arguments (`until`, `timeout_ms`, `stdin`, `eof`, hygiene), the extra
    /// result fields and exit notices. Off: exactly Codex's dialect.
    pub extended: bool,
    /// This connection's configuration: the defaults its commands run with (and the tools
    /// state).
    pub config: StoreConfig,
}

impl UexecServer {
    pub fn new(
        stores: Stores,
        environments: Environments,
        accepts_environment: bool,
        options: Options,
    ) -> Self {
        Self {
            stores,
            environments,
            accepts_environment,
            options,
            subscriptions: LegacySubscriptions::default(),
        }
    }

    fn dialect(&self) -> Dialect {
        Dialect {
            environments: self.accepts_environment,
            extended: self.options.extended,
        }
    }

    fn snapshot(&self, s: Snapshot) -> CallToolResult {
        snapshot_result(s, self.options.extended)
    }

    /// The store a call goes to: its client's, or for a person at the daemon, the one that
    /// holds the session the call names (`session_id`, or the first of `session_ids`).
    fn store_for_call(
        &self,
        own: Arc<SessionStore>,
        arguments: Option<&Map<String, Value>>,
    ) -> Arc<SessionStore> {
        let id = arguments.and_then(|a| {
            a.get("session_id")
                .or_else(|| a.get("session_ids").and_then(|ids| ids.get(0)))
                .and_then(Value::as_i64)
                .and_then(|id| i32::try_from(id).ok())
        });
        id.and_then(|id| self.stores.for_session(id)).unwrap_or(own)
    }

    /// `read_output` from `store`, the caller's: by path, only its own sessions' transcripts;
    /// a person at the daemon reads any owner's, or any session directory under the root.
    fn read_output(
        &self,
        store: &Arc<SessionStore>,
        req: uexec_core::ReadOutputRequest,
    ) -> Result<uexec_core::OutputPage, ExecError> {
        match (self.stores.owners(), &req.transcript) {
            (Some(owners), Some(path)) => {
                let owner = owners
                    .all()
                    .into_iter()
                    .map(|(_, s)| s)
                    .find(|s| s.owns_transcript(path));
                match owner {
                    Some(owner) => owner.read_output(req),
                    None => store.read_any_output(req),
                }
            }
            _ => store.read_output(req),
        }
    }

    /// A handler for another connection on the same store (its own subscriptions).
    pub fn for_connection(&self) -> Self {
        Self::new(
            self.stores.clone(),
            self.environments.clone(),
            self.accepts_environment,
            self.options.clone(),
        )
    }

    async fn call(
        &self,
        store: &Arc<SessionStore>,
        name: &str,
        arguments: Option<&Map<String, Value>>,
        call_id: String,
    ) -> CallToolResult {
        let codex_tools_only = self.options.codex_tools_only;
        let outcome = match name {
            tools::EXEC_COMMAND => match args::exec_request(arguments, self.dialect()) {
                Ok(mut req) => {
                    req.call_id = Some(call_id);
                    // This connection's defaults (a daemon's owner store outlives the
                    // connection that made it).
                    store
                        .exec_command_for(&self.options.config, req, Vec::new())
                        .await
                        .map(|s| self.snapshot(s))
                        .map_err(|e| exec_error_text(&e))
                }
                Err(e) => Err(e.to_string()),
            },
            tools::WRITE_STDIN => match args::write_request(arguments, self.dialect()) {
                Ok(req) => store
                    .write_stdin_for(&self.options.config, req)
                    .await
                    .map(|s| self.snapshot(s))
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            },
            tools::WAIT if !codex_tools_only => match args::wait_request(arguments) {
                Ok(req) => store
                    .wait_for(&self.options.config, req)
                    .await
                    .map(wait_result)
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            },
            tools::READ_OUTPUT if !codex_tools_only => match args::read_output_request(arguments) {
                Ok(req) => self
                    .read_output(store, req)
                    .map(read_output_result)
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            },
            tools::LIST_SESSIONS if self.stores.owners().is_some() => args::list_request(arguments)
                .map(|()| list_all_sessions(self.stores.owners()))
                .map_err(|e| e.to_string()),
            tools::LIST_SESSIONS if !codex_tools_only => args::list_request(arguments)
                .map(|()| list_sessions(store, &self.environments.names()))
                .map_err(|e| e.to_string()),
            tools::SEND_INPUT if self.stores.owners().is_some() => {
                match args::send_input_request(arguments) {
                    Ok((id, chars, eof)) => store
                        .send_input(id, &chars, eof)
                        .await
                        .map(|()| {
                            let mut r = CallToolResult::success(vec![ContentBlock::text(format!(
                                "Sent {} bytes to session {id}{}",
                                chars.len(),
                                if eof { " and closed its stdin" } else { "" }
                            ))]);
                            r.structured_content =
                                Some(json!({"session_id": id, "bytes": chars.len(), "eof": eof}));
                            r
                        })
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                }
            }
            tools::AWAIT_EXIT if self.stores.owners().is_some() => {
                match args::await_exit_request(arguments) {
                    Ok((id, ms)) => store
                        .await_exit(id, std::time::Duration::from_millis(ms))
                        .await
                        .map(|outcome| await_exit_result(id, outcome))
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                }
            }
            tools::TERMINATE_SESSION if !codex_tools_only => {
                match args::terminate_request(arguments) {
                    Ok(id) => store
                        .terminate(id)
                        .map(|()| {
                            CallToolResult::success(vec![ContentBlock::text(format!(
                                "Session {id} terminated"
                            ))])
                        })
                        .map_err(|e: ExecError| e.to_string()),
                    Err(e) => Err(e.to_string()),
                }
            }
            other => Err(format!("unknown tool {other:?}")),
        };
        let mut result = outcome.unwrap_or_else(|message| {
            CallToolResult::error(vec![ContentBlock::text(format!(
                "{name} failed: {message}"
            ))])
        });
        if self.options.extended || name == tools::WAIT {
            attach_exit_notices(&mut result, store.take_exit_notices());
        }
        result
    }
}

/// Adds exit notices to a result: one line each after the text, and `exit_notices` in the
/// structured content (an error result gets the lines only).
fn attach_exit_notices(result: &mut CallToolResult, notices: Vec<ExitNotice>) {
    if notices.is_empty() {
        return;
    }
    let mut lines = String::from("\n\nExit notices (sessions that ended while nobody watched):");
    let mut items = Vec::with_capacity(notices.len());
    for n in &notices {
        let text = n.text();
        lines.push_str(&format!("\n- {text}"));
        let mut item = json!({
            "session_id": n.session_id,
            "command": n.command,
            "seconds_ago": (n.age().as_secs_f64() * 10.0).round() / 10.0,
            "text": text,
        });
        if let Some(code) = n.exit_code {
            item["exit_code"] = json!(code);
        }
        if let Some(failure) = &n.failure {
            item["failure"] = json!(failure);
        }
        if let Some(ms) = n.timed_out_ms {
            item["timed_out_ms"] = json!(ms);
        }
        items.push(item);
    }
    match result.content.last_mut() {
        Some(ContentBlock::Text(text)) => text.text.push_str(&lines),
        _ => result
            .content
            .push(ContentBlock::text(lines.trim_start().to_owned())),
    }
    if result.is_error != Some(true) {
        let structured = result.structured_content.get_or_insert_with(|| json!({}));
        if let Some(obj) = structured.as_object_mut() {
            obj.insert("exit_notices".into(), Value::Array(items));
        }
    }
}

/// Every owner's sessions, for a person at the daemon.
fn list_all_sessions(owners: Option<&Arc<crate::stores::OwnerTable>>) -> CallToolResult {
    let mut items = Vec::new();
    let mut text = String::new();
    for (owner, store) in owners.map(|o| o.all()).unwrap_or_default() {
        for s in store.list_sessions() {
            let secs = (s.running_time.as_secs_f64() * 10.0).round() / 10.0;
            text.push_str(&format!(
                "\n- session {} [{owner}] ({}, {}, {secs:.1}s, cwd {}): {} | {}",
                s.session_id,
                if s.tty { "tty" } else { "pipes" },
                if s.exited { "exited" } else { "running" },
                s.cwd.display(),
                s.command,
                s.last_line
            ));
            let mut item = json!({
                "session_id": s.session_id,
                "owner": owner,
                "command": s.command,
                "cwd": s.cwd.display().to_string(),
                "tty": s.tty,
                "state": if s.exited { "exited" } else { "running" },
                "running_seconds": secs,
                "last_line": s.last_line,
            });
            if let Some(pid) = s.pid {
                item["pid"] = json!(pid);
            }
            if let Some(t) = &s.transcript {
                item["transcript"] = json!(t.display().to_string());
            }
            items.push(item);
        }
    }
    let head = if items.is_empty() {
        "No sessions.".to_owned()
    } else {
        format!("{} session(s):", items.len())
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(head + &text)]);
    result.structured_content = Some(json!({ "sessions": items }));
    result
}

fn await_exit_result(id: i32, outcome: Option<uexec_core::Outcome>) -> CallToolResult {
    let (text, structured) = match outcome {
        None => (
            format!("Session {id} is still running"),
            json!({"session_id": id, "exited": false}),
        ),
        Some(o) => {
            let mut v = json!({"session_id": id, "exited": true});
            if let Some(code) = o.exit_code {
                v["exit_code"] = json!(code);
            }
            if let Some(f) = &o.failure {
                v["failure"] = json!(f);
            }
            let how = match (&o.failure, o.exit_code) {
                (Some(f), _) => format!("failed: {f}"),
                (None, Some(code)) => format!("exited with code {code}"),
                (None, None) => "exited".to_owned(),
            };
            (format!("Session {id} {how}"), v)
        }
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    result
}

/// A transcript page: a header line, then the text.
fn read_output_result(page: uexec_core::OutputPage) -> CallToolResult {
    let whose = page
        .session_id
        .map(|id| format!("Session {id} transcript"))
        .unwrap_or_else(|| "Transcript".to_owned());
    let mut header = format!(
        "{whose} {}: bytes {}..{} of {}",
        page.transcript.display(),
        page.offset,
        page.next_offset,
        page.total
    );
    if page.first_kept > 0 {
        header.push_str(&format!(" (bytes 0..{} rotated away)", page.first_kept));
    }
    if let Some(stop) = &page.stop {
        header.push_str(&format!(
            "; {} (bytes from {} on are lost)",
            stop.text(),
            stop.at
        ));
    }
    if let Some(n) = page.matches {
        header.push_str(&format!("; {n} matching lines"));
    }
    let mut structured = json!({
        "transcript": page.transcript.display().to_string(),
        "offset": page.offset,
        "next_offset": page.next_offset,
        "total": page.total,
        "first_kept": page.first_kept,
        "text": page.text,
    });
    if let Some(stop) = &page.stop {
        structured["transcript_stopped"] = stop_fields(stop);
    }
    if let Some(n) = page.matches {
        structured["matches"] = json!(n);
    }
    if let Some(id) = page.session_id {
        structured["session_id"] = json!(id);
    }
    let mut result =
        CallToolResult::success(vec![ContentBlock::text(format!("{header}\n{}", page.text))]);
    result.structured_content = Some(structured);
    result
}

/// Where and why a transcript stopped, as data.
fn stop_fields(stop: &uexec_core::transcript::TranscriptStop) -> Value {
    json!({"at": stop.at, "error": stop.error})
}

/// The `wait` result: each session's snapshot (or error) in the order asked.
fn wait_result(results: Vec<(i32, Result<Snapshot, ExecError>)>) -> CallToolResult {
    let mut text = String::new();
    let mut items = Vec::with_capacity(results.len());
    for (id, result) in results {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&format!("=== Session {id} ===\n"));
        match result {
            Ok(s) => {
                text.push_str(&s.to_text_annotated());
                let mut item = snapshot_fields(&s, true);
                item.entry("session_id").or_insert(json!(id));
                items.push(Value::Object(item));
            }
            Err(e) => {
                text.push_str(&format!("wait failed for session {id}: {e}"));
                items.push(json!({"session_id": id, "error": e.to_string()}));
            }
        }
    }
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(json!({ "sessions": items }));
    result
}

fn list_sessions(store: &SessionStore, environments: &[String]) -> CallToolResult {
    let sessions = store.list_sessions();
    let mut text = if sessions.is_empty() {
        "No running sessions.".to_owned()
    } else {
        format!("{} running session(s):", sessions.len())
    };
    let mut items = Vec::new();
    for s in &sessions {
        let secs = (s.running_time.as_secs_f64() * 10.0).round() / 10.0;
        text.push_str(&format!(
            "\n- session {} ({}, {:.1}s, cwd {}): {}",
            s.session_id,
            if s.tty { "tty" } else { "pipes" },
            secs,
            s.cwd.display(),
            s.command
        ));
        items.push(json!({
            "session_id": s.session_id,
            "command": s.command,
            "cwd": s.cwd.display().to_string(),
            "tty": s.tty,
            "running_seconds": secs,
        }));
    }
    let mut structured = json!({ "sessions": items });
    if !environments.is_empty() {
        text.push_str(&format!(
            "\nEnvironments (exec_command's environment_id; default: local): {}",
            environments.join(", ")
        ));
        structured["environments"] = json!(environments);
    }
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    result
}

/// An `exec_command` error as the model reads it: the engine's words, plus, for a sandbox
/// or network wider than the server's policy, the flag a person would change (the engine
/// knows no flags).
fn exec_error_text(e: &ExecError) -> String {
    use uexec_core::policy::Widening;
    let hint = match e {
        ExecError::Widening(Widening::Profile { asked, .. }) => {
            format!("--sandbox {}", asked.as_str())
        }
        ExecError::Widening(Widening::Network { field, .. }) if *field == "network" => {
            "--network on".to_owned()
        }
        ExecError::Widening(Widening::Network { .. }) => "--network-allow HOST".to_owned(),
        ExecError::Widening(Widening::AllowEntry { entry, .. }) => {
            format!("--network-allow {entry}")
        }
        _ => return e.to_string(),
    };
    format!(
        "{e}. Only a person can widen it, by restarting uexec mcp with {hint}; ask the user if the command needs it."
    )
}

/// A snapshot as a tool result: the text for the model, the same facts as data. `extended`
/// adds uexec's lines and fields (why it returned, a match, a timeout, a secret prompt).
pub fn snapshot_result(s: Snapshot, extended: bool) -> CallToolResult {
    let structured = snapshot_fields(&s, extended);
    let text = if extended {
        s.to_text_annotated()
    } else {
        s.to_text()
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(Value::Object(structured));
    result
}

fn snapshot_fields(s: &Snapshot, extended: bool) -> Map<String, Value> {
    let mut structured = Map::new();
    structured.insert("chunk_id".into(), json!(s.chunk_id));
    let wall: f64 = s.wall_time_text().parse().unwrap_or(0.0);
    structured.insert("wall_time_seconds".into(), json!(wall));
    if let Some(code) = s.exit_code() {
        structured.insert("exit_code".into(), json!(code));
    }
    if let Some(id) = s.session_id() {
        structured.insert("session_id".into(), json!(id));
    }
    structured.insert("original_token_count".into(), json!(s.original_token_count));
    structured.insert("output".into(), json!(s.output));
    if extended {
        structured.insert("reason".into(), json!(s.reason.as_str()));
        if let Some(m) = &s.matched {
            structured.insert("match".into(), json!({"text": m.text, "offset": m.offset}));
        }
        if let Some(ms) = s.timed_out_ms {
            structured.insert("timed_out_ms".into(), json!(ms));
        }
        if s.awaiting_secret {
            structured.insert("awaiting_secret".into(), json!(true));
        }
        if let Some(dir) = &s.transcript {
            structured.insert("transcript".into(), json!(dir.display().to_string()));
        }
        if let Some(r) = &s.omitted_range {
            structured.insert(
                "omitted_range".into(),
                json!({"start": r.start, "end": r.end}),
            );
        }
        if let Some(r) = s
            .omitted_coverage
            .as_ref()
            .and_then(|c| c.readable.as_ref())
        {
            structured.insert(
                "omitted_readable".into(),
                json!({"start": r.start, "end": r.end}),
            );
        }
        if let Some(stop) = &s.transcript_stop {
            structured.insert("transcript_stopped".into(), stop_fields(stop));
        }
        if let Some(sandbox) = &s.sandbox {
            let denied = match sandbox.denied {
                uexec_core::policy::Denied::No => json!(false),
                uexec_core::policy::Denied::Yes => json!(true),
                uexec_core::policy::Denied::Likely => json!("likely"),
            };
            let names = |layers: &[uexec_core::policy::Layer]| {
                layers.iter().map(|l| l.as_str()).collect::<Vec<_>>()
            };
            structured.insert(
                "sandbox".into(),
                json!({
                    "profile": sandbox.profile.as_str(),
                    "network": sandbox.network.as_str(),
                    "layers": names(&sandbox.layers),
                    "missing_layers": names(&sandbox.missing),
                    "denied": denied,
                    "evidence": sandbox.evidence,
                }),
            );
        }
    }
    structured
}

impl ServerHandler for UexecServer {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .build();
        if self.accepts_environment {
            // environment_id's list of names follows the environments file.
            if let Some(tools) = capabilities.tools.as_mut() {
                tools.list_changed = Some(true);
            }
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("uexec", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Run shell commands with exec_command. Commands that outlive yield_time_ms keep running in a session: poll, type into or interrupt them with write_stdin, list them with list_sessions, stop them with terminate_session.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut all = tools::all(
            self.options.codex_tools_only,
            tools::Offer {
                environments: &self.environments.names(),
                extended: self.options.extended,
                config: &self.options.config,
            },
        );
        if self.stores.owners().is_some() {
            all.extend(tools::person_tools());
        }
        Ok(ListToolsResult::with_all_items(all))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let call_id = next_call_id();
        let store = self.store_for_call(
            self.stores.for_request(&context.extensions),
            request.arguments.as_ref(),
        );
        let target = match request.name.as_ref() {
            tools::EXEC_COMMAND => Some(CallTarget::Call(call_id.clone())),
            tools::WRITE_STDIN => request
                .arguments
                .as_ref()
                .and_then(|a| a.get("session_id"))
                .and_then(Value::as_i64)
                .and_then(|id| i32::try_from(id).ok())
                .map(CallTarget::Session),
            _ => None,
        };
        let token = context.meta.get_progress_token();
        let forwarder = match (token.clone(), target) {
            (Some(token), Some(target)) => Some(ProgressForwarder::start(
                store.subscribe(),
                target,
                token,
                context.peer.clone(),
            )),
            _ => None,
        };
        // `wait` may wait minutes on quiet sessions: a heartbeat keeps the client's request
        // timeout at bay. Dropped with the call.
        let _heartbeat = match (token, request.name.as_ref()) {
            (Some(token), tools::WAIT) => Some(AbortOnDrop(tokio::spawn(heartbeat(
                context.peer.clone(),
                token,
            )))),
            _ => None,
        };
        let name = request.name.as_ref();
        // rmcp keeps running a handler whose request was cancelled (it only cancels `ct`) and
        // throws its answer away, so a call that went on would drain output nobody sees.
        // Dropping the engine call at its await point stops it at once and loses nothing:
        // the interaction lock is released, and the pending output and the exit stay for the
        // next call (SPEC §1, §6).
        let result = tokio::select! {
            biased;
            () = context.ct.cancelled() => {
                drop(forwarder);
                return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "{name} failed: cancelled by the client"
                ))])
                .into());
            }
            result = self.call(&store, name, request.arguments.as_ref(), call_id) => result,
        };
        if let Some(f) = forwarder {
            f.finish().await;
        }
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let store = self.stores.for_request(&context.extensions);
        Ok(ListResourcesResult::with_all_items(resources::list(&store)))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let store = self.stores.for_request(&context.extensions);
        resources::read(&store, &request.uri).map(Into::into)
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let store = self.stores.for_request(&context.extensions);
        self.subscriptions
            .subscribe(&store, request.uri, context.peer.clone());
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscriptions.unsubscribe(&request.uri);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.resources_list_changed = requested.resources_list_changed;
        accepted.tools_list_changed = requested
            .tools_list_changed
            .filter(|_| self.accepts_environment);
        accepted.resource_subscriptions = requested.resource_subscriptions.as_ref().map(|uris| {
            uris.iter()
                .filter(|u| resources::session_of(u).is_some())
                .cloned()
                .collect()
        });
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let store = self
            .stores
            .for_request(&context.request_context().extensions);
        let sink = context.sink();
        let tools = async {
            if sink.accepted().tools_list_changed == Some(true) {
                let mut changes = self.environments.changes();
                while changes.changed().await.is_ok() {
                    if sink.notify_tool_list_changed().await.is_err() {
                        break;
                    }
                }
            }
            std::future::pending::<()>().await;
        };
        tokio::select! {
            () = resources::listen(&store, sink, context.cancelled()) => {}
            () = tools => {}
        }
        Ok(())
    }

    /// A client of the initialize handshake hears `notifications/tools/list_changed` when
    /// the environments change, until its connection closes.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if !self.accepts_environment {
            return;
        }
        let mut changes = self.environments.changes();
        let peer = context.peer;
        tokio::spawn(async move {
            let mut check = tokio::time::interval(Duration::from_millis(PEER_CHECK_MS));
            loop {
                tokio::select! {
                    changed = changes.changed() => {
                        if changed.is_err() || peer.notify_tool_list_changed().await.is_err() {
                            return;
                        }
                    }
                    _ = check.tick() => {
                        if peer.is_transport_closed() {
                            return;
                        }
                    }
                }
            }
        });
    }
}

/// How often `wait` says it is still waiting.
const WAIT_HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(2);

/// Progress notifications every [`WAIT_HEARTBEAT`]: `progress` is the milliseconds waited
/// so far (it only grows), the message says so.
async fn heartbeat(peer: rmcp::service::Peer<RoleServer>, token: rmcp::model::ProgressToken) {
    let start = tokio::time::Instant::now();
    let mut ticks = tokio::time::interval_at(start + WAIT_HEARTBEAT, WAIT_HEARTBEAT);
    loop {
        ticks.tick().await;
        let waited = start.elapsed();
        let param =
            rmcp::model::ProgressNotificationParam::new(token.clone(), waited.as_millis() as f64)
                .with_message(format!("still waiting ({:.0} s)", waited.as_secs_f64()));
        if peer.notify_progress(param).await.is_err() {
            return;
        }
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A call id unique in the process, hence in every store: the JSON-RPC id is not (HTTP
/// clients of one principal share a store and count their ids from the same start).
fn next_call_id() -> String {
    static NEXT_CALL: AtomicU64 = AtomicU64::new(1);
    format!("mcp-{}", NEXT_CALL.fetch_add(1, Ordering::Relaxed))
}
