//! The MCP server handler: rmcp's wiring. It routes each tool call by name to its file in
//! [`crate::tools`] (which parses, calls the engine and renders), wraps a failure as
//! `{name} failed: {why}`, adds exit notices, forwards progress, and serves resources and
//! their subscriptions. It holds no process logic.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    GetTaskParams, GetTaskResult, Implementation, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
    UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use uexec_core::{Environments, SessionStore, StoreConfig};

use crate::progress::{CallTarget, ProgressForwarder};
use crate::resources::{self, LegacySubscriptions};
use crate::stores::Stores;
use crate::tasks::{listen as task_listen, Start, Tasks};
use crate::tools::parse::Dialect;
use crate::tools::schema::Offer;
use crate::tools::wait::Heartbeat;
use crate::tools::{
    self, await_exit, exec_command, keep_session, list_sessions, pause_session, prune_sessions,
    read_output, remove_session, send_input, signal_session, terminate_session, wait, write_stdin,
};

mod route;

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
    /// exec_command calls that became tasks (MCP Tasks), shared by every connection.
    tasks: Tasks,
    /// Cancelled when this handler is dropped (its connection or HTTP session ended): what
    /// it started for its client stops with it.
    gone: CancellationToken,
    /// Cancelled when its client is done, before rmcp's own cancellation of the calls that
    /// outlive it ([`crate::hangup`]): its calls end then, as if cancelled, losing nothing.
    client_gone: CancellationToken,
    /// Cancelled at the end of its client's input: its listen streams end then.
    input_ended: CancellationToken,
    /// The command prefixes this connection's person said "always" to.
    always: crate::approve::Always,
    /// The questions sent back to clients as input-required rounds, shared by every
    /// connection (over HTTP, each call of MCP 2026-07-28 is a connection of its own).
    rounds: crate::approve::rounds::Rounds,
    /// In the daemon: the commands held for a person who answers there (`uexec approve`),
    /// and the owner this connection's are held as.
    held: Option<(Arc<crate::approve::held::Held>, String)>,
}

impl Drop for UexecServer {
    fn drop(&mut self) {
        self.gone.cancel();
    }
}

/// How a server presents its tools.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Offer only Codex's two tools.
    pub codex_tools_only: bool,
    /// uexec's own arguments (`until`, `timeout_ms`, `stdin`, `eof`, hygiene), the extra
    /// result fields and exit notices. Off: exactly Codex's dialect.
    pub extended: bool,
    /// Results carry their facts as JSON (`structuredContent`) beside the text, and tools
    /// an outputSchema. Off, a result is its text alone: clients that show the JSON when
    /// there is some (Claude Code, Codex) then show the model the text.
    pub structured: bool,
    /// MCP Tasks offered to clients that declare them (off with `--no-tasks`): `wait`, and
    /// an `exec_command` that asks with `background: true`, may answer with a task.
    pub tasks: bool,
    /// How long a command the rules hold waits for a person's answer (`--approval-timeout`).
    pub approval_timeout: std::time::Duration,
    /// `--hooks`: PreToolUse and PostToolUse hooks around exec_command (`None`: none).
    pub hooks: Option<Arc<crate::hooks::Hooks>>,
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
            tasks: Tasks::default(),
            gone: CancellationToken::new(),
            client_gone: CancellationToken::new(),
            input_ended: CancellationToken::new(),
            always: crate::approve::Always::default(),
            rounds: crate::approve::rounds::Rounds::default(),
            held: None,
        }
    }

    /// A daemon connection's handler: a command its rules hold, when its client cannot ask
    /// the person, waits in `held` for `uexec approve` (as `owner`'s); a person's connection
    /// answers them.
    pub fn holding(mut self, held: Arc<crate::approve::held::Held>, owner: String) -> Self {
        self.held = Some((held, owner));
        self
    }

    /// This handler, whose calls end as cancelled once `client_gone` is, and whose listen
    /// streams end once `input_ended` is (or `client_gone`).
    pub fn cancelled_by(
        mut self,
        client_gone: CancellationToken,
        input_ended: CancellationToken,
    ) -> Self {
        (self.client_gone, self.input_ended) = (client_gone, input_ended);
        self
    }

    /// What this connection's calls accept and say; `wrapped`: the client writes its own
    /// `Wall time:` around each result (Codex, by the name it gave at initialize).
    fn dialect(&self, wrapped: bool) -> Dialect {
        Dialect {
            environments: self.accepts_environment,
            extended: self.options.extended,
            wrapped,
        }
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

    /// A handler for another connection on the same store (its own subscriptions).
    pub fn for_connection(&self) -> Self {
        let mut server = Self::new(
            self.stores.clone(),
            self.environments.clone(),
            self.accepts_environment,
            self.options.clone(),
        );
        server.tasks = self.tasks.clone();
        server.rounds = self.rounds.clone();
        server.held = self.held.clone();
        server
    }

    /// The tools this connection offers (`tools/list`).
    fn offered_tools(&self) -> Vec<rmcp::model::Tool> {
        let mut all = tools::all(
            self.options.codex_tools_only,
            Offer {
                environments: &self.environments.names(),
                extended: self.options.extended,
                config: &self.options.config,
            },
        );
        if self.stores.owners().is_some() {
            // A person lists every owner's sessions, ended ones too.
            for tool in &mut all {
                if tool.name == list_sessions::NAME {
                    *tool = tools::annotated(list_sessions::person_tool());
                }
            }
            all.extend(tools::person_tools());
        }
        if !self.options.structured {
            // A tool with an outputSchema must answer with structuredContent (MCP).
            for tool in &mut all {
                tool.output_schema = None;
            }
        }
        all
    }

    /// Whether this connection offers the tool `name` (as [`Self::offered_tools`] lists it,
    /// without building the schemas).
    fn offers(&self, name: &str) -> bool {
        let agent = !self.options.codex_tools_only;
        let person = self.stores.owners().is_some();
        match name {
            exec_command::NAME | write_stdin::NAME => true,
            list_sessions::NAME | terminate_session::NAME | wait::NAME => agent,
            read_output::NAME => agent && self.options.config.transcripts.is_some(),
            send_input::NAME
            | await_exit::NAME
            | remove_session::NAME
            | prune_sessions::NAME
            | signal_session::NAME
            | pause_session::PAUSE
            | pause_session::RESUME
            | keep_session::NAME => person,
            tools::approvals::LIST | tools::approvals::ANSWER => person && self.held.is_some(),
            _ => false,
        }
    }
}

impl ServerHandler for UexecServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed();
        // MCP Tasks: a call still running at the end of its window may become one (not in
        // Codex's exact surface).
        let mut capabilities = if self.options.extended && self.options.tasks {
            capabilities.enable_tasks().build()
        } else {
            capabilities.build()
        };
        if self.accepts_environment {
            // environment_id's list of names follows the environments file.
            if let Some(tools) = capabilities.tools.as_mut() {
                tools.list_changed = Some(true);
            }
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("uexec", env!("CARGO_PKG_VERSION")))
            .with_instructions(tools::instructions(&self.offered_tools()))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.offered_tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if !self.offers(&request.name) {
            // Not a result: no such tool was offered (JSON-RPC invalid params, as MCP says).
            return Err(McpError::invalid_params(
                format!("unknown tool {:?}", request.name.as_ref()),
                None,
            ));
        }
        let call_id = next_call_id();
        let own = self.stores.for_request(&context.extensions);
        let store = self.store_for_call(own.clone(), request.arguments.as_ref());
        let target = match request.name.as_ref() {
            exec_command::NAME => Some(CallTarget::Call(call_id.clone())),
            write_stdin::NAME => request
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
            (Some(token), wait::NAME) => Some(Heartbeat::start(context.peer.clone(), token)),
            _ => None,
        };
        let name = request.name.as_ref();
        // rmcp keeps running a handler whose request was cancelled (it only cancels `ct`) and
        // throws its answer away, so a call that went on would drain output nobody sees.
        // Dropping the engine call at its await point stops it at once and loses nothing:
        // the interaction lock is released, and the pending output and the exit stay for the
        // next call (SPEC §1, §6).
        // MCP Tasks: only uexec's dialect offers them (unless --no-tasks), to clients that
        // declared them, and only where the model loses nothing by it: a `wait` (the model
        // has its session ids already and is told of the end), and an exec_command that asked
        // with `background: true`. Any other call's result is the snapshot, with the session
        // id the model polls, types into and stops (a task would hide it: interactive Claude
        // Code backgrounds every task and tells the model no id).
        // Codex writes its own `Wall time:` and `Output:` around every MCP result.
        let wrapped = context
            .peer
            .peer_info()
            .is_some_and(|info| info.client_info.name.starts_with("codex"));
        let dialect = self.dialect(wrapped);
        // Whom a command the rules hold asks (`route`); a retry that answers no question
        // held here is refused at once.
        let (approver, rounding) = match self.approver(&context, &request) {
            Ok(chosen) => chosen,
            Err(refusal) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "{name} failed: {refusal}"
                ))])
                .into())
            }
        };
        let as_task = self.options.extended
            && self.options.tasks
            && context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks())
            && match name {
                wait::NAME => true,
                exec_command::NAME => {
                    exec_command::background(request.arguments.as_ref()).unwrap_or(false)
                }
                _ => false,
            };
        let (result, unfinished) = tokio::select! {
            biased;
            () = cancelled(&context.ct, &self.client_gone) => {
                drop(forwarder);
                return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "{name} failed: cancelled by the client"
                ))])
                .into());
            }
            result = self.call(&store, &own, name, request.arguments.as_ref(), call_id, route::Call { tasks: as_task, dialect, approver }) => result,
        };
        if let Some(f) = forwarder {
            f.finish().await;
        }
        // A held command whose question went back to the client: nothing ran.
        if let Some(question) = rounding.and_then(|r| r.question()) {
            return Ok(CallToolResponse::InputRequired(question));
        }
        match unfinished {
            None => Ok(result.into()),
            Some(unfinished) => Ok(CallToolResponse::Task(self.tasks.start(
                unfinished,
                Start {
                    store,
                    config: self.options.config.clone(),
                    dialect,
                    structured: self.options.structured,
                    context: &context,
                },
            ))),
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let store = self.stores.for_request(&context.extensions);
        self.tasks.get(&store, &request.task_id)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let store = self.stores.for_request(&context.extensions);
        self.tasks
            .update(&store, &request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let store = self.stores.for_request(&context.extensions);
        self.tasks.cancel(&store, &request.task_id)
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
        // The tasks it asked about (`notifications.taskIds`, which the wire layers put in
        // `_meta`: rmcp's filter has no such field).
        let request = context.request_context();
        let tasks = async {
            match task_listen::requested(&request.meta) {
                Some(ids) => {
                    task_listen::tell(
                        &self.tasks,
                        &store,
                        ids,
                        request.peer.clone(),
                        request.id.clone(),
                    )
                    .await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = resources::listen(&store, sink, context.cancelled()) => {}
            () = tools => {}
            () = tasks => {}
            () = self.client_gone.cancelled() => {}
            () = self.input_ended.cancelled() => {}
        }
        Ok(())
    }

    /// A client of the initialize handshake hears `notifications/resources/list_changed` when
    /// a session starts or ends, and `notifications/tools/list_changed` when the environments
    /// change, until its connection closes.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let store = self.stores.for_request(&context.extensions);
        let peer = context.peer.clone();
        let gone = self.gone.clone();
        tokio::spawn(async move {
            // Until this handler is dropped (its connection or HTTP session ended).
            resources::tell_list_changes(&store, peer, gone.cancelled_owned()).await;
        });
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

/// A call id unique in the process, hence in every store: the JSON-RPC id is not (HTTP
/// clients of one principal share a store and count their ids from the same start).
fn next_call_id() -> String {
    static NEXT_CALL: AtomicU64 = AtomicU64::new(1);
    format!("mcp-{}", NEXT_CALL.fetch_add(1, Ordering::Relaxed))
}

/// Either token cancelled: the request's, or the client's as a whole.
async fn cancelled(request: &CancellationToken, client: &CancellationToken) {
    tokio::select! {
        () = request.cancelled() => {}
        () = client.cancelled() => {}
    }
}
