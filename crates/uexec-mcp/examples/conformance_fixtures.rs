//! The fixture tools of the official MCP conformance suite's `tasks-*` scenarios (SEP-2663,
//! `io.modelcontextprotocol/tasks`), served through uexec's own task machinery
//! ([`uexec_mcp::tasks::Tasks`], on rmcp's `TaskManager`, as `exec_command`'s tasks are),
//! so that the suite can check that machinery without a shell in the way. Test-only: an
//! example, never in the release binary.
//!
//! ```sh
//! cargo run -p uexec-mcp --example conformance_fixtures -- --http 127.0.0.1:0
//! # conformance_fixtures: serving streamable HTTP at http://127.0.0.1:PORT/mcp
//! ```
//!
//! The tools, as the scenarios describe them:
//! - `greet` (never a task): `Hello, {name}!`.
//! - `slow_compute` (task optional): sleeps `seconds`, then says so; a task for a client
//!   that declared the extension (also for `seconds: 0`), settling `cancelled` on
//!   `tasks/cancel`; a plain result for one that did not.
//! - `failing_job` (task required): a tool error after about a second: the task is
//!   `completed` with `isError`.
//! - `protocol_error_job` (task required): the task is `failed`, its error inlined.
//! - `confirm_delete` (task required): one `elicitation/create` input request (the task is
//!   `input_required`) that `tasks/update` answers; then it completes.
//! - `multi_input` (task required): two input requests at once, answerable one by one.
//! - `test_tool_with_task` (task required): a multi round-trip round first (an
//!   `InputRequiredResult` asking for `user_name`), then, given the answer, a task whose
//!   result greets that name.
//!
//! A required-task tool called by a client that did not declare the extension is refused
//! with `-32021` (Missing Required Client Capability). Every client shares one owner of
//! tasks: the suite cancels from one connection a task made on another.
//!
//! Stops on SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ContentBlock, GetTaskParams, GetTaskResult, Implementation, InputRequest, InputRequests,
    InputRequiredResult, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskContext, TaskExit, TaskFuture, TaskOptions};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{json, Value};
use uexec_mcp::tasks::Tasks;

/// The longest `slow_compute` sleeps, whatever it is asked (the suite asks 60 s at most).
const MAX_COMPUTE_S: f64 = 600.0;
/// How long `failing_job` works before its error.
const FAILING_JOB_WORK: Duration = Duration::from_secs(1);
/// A fixture task's time to live, in ms (the suite checks it is not cut short).
const TTL_MS: u64 = 600_000;
/// The polling interval a fixture task suggests, in ms.
const POLL_INTERVAL_MS: u64 = 200;

/// Whether a tool's calls become tasks (the extension's `taskSupport`).
#[derive(Clone, Copy, PartialEq)]
enum Support {
    Never,
    Optional,
    Required,
}

/// The one owner of every task here: any client may look at any task.
struct Everyone;

#[derive(Clone)]
struct Fixtures {
    tasks: Tasks<Everyone>,
    owner: Arc<Everyone>,
}

/// `(name, task support, description, input schema properties)`.
type Fixture = (&'static str, Support, &'static str, fn() -> Value);

const FIXTURES: &[Fixture] = &[
    (
        "greet",
        Support::Never,
        "Says hello: `Hello, {name}!`",
        || json!({ "name": { "type": "string" } }),
    ),
    (
        "slow_compute",
        Support::Optional,
        "Sleeps `seconds`, then says so (a task for clients of the tasks extension)",
        || json!({ "seconds": { "type": "number" }, "label": { "type": "string" } }),
    ),
    (
        "failing_job",
        Support::Required,
        "A task whose tool fails after about a second (completed, isError)",
        || json!({}),
    ),
    (
        "protocol_error_job",
        Support::Required,
        "A task that fails with a protocol error (failed, error inlined)",
        || json!({}),
    ),
    (
        "confirm_delete",
        Support::Required,
        "A task that asks once whether to delete `filename` (input_required until tasks/update)",
        || json!({ "filename": { "type": "string" } }),
    ),
    (
        "multi_input",
        Support::Required,
        "A task that asks two questions at once",
        || json!({}),
    ),
    (
        "test_tool_with_task",
        Support::Required,
        "Asks for user_name (a multi round-trip round), then greets it from a task",
        || json!({}),
    ),
];

impl Fixtures {
    fn new() -> Self {
        Self {
            tasks: Tasks::default(),
            owner: Arc::new(Everyone),
        }
    }

    /// Runs `job` as a task of the tasks extension.
    fn task(
        &self,
        context: &RequestContext<RoleServer>,
        job: impl FnOnce(TaskContext) -> TaskFuture,
    ) -> CallToolResponse {
        let options = TaskOptions::new()
            .with_ttl_ms(TTL_MS)
            .with_poll_interval_ms(POLL_INTERVAL_MS);
        let peer = Some(context.peer.clone());
        CallToolResponse::Task(self.tasks.spawn_job(&self.owner, options, peer, job))
    }
}

impl ServerHandler for Fixtures {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tasks()
            .build();
        ServerConfig::new(capabilities).with_server_info(Implementation::new(
            "uexec-conformance-fixtures",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = FIXTURES.iter().map(|(name, _, description, properties)| {
            let schema = json!({ "type": "object", "properties": properties() });
            let schema: JsonObject = match schema {
                Value::Object(object) => object,
                _ => JsonObject::new(),
            };
            Tool::new(*name, *description, schema)
        });
        Ok(ListToolsResult::with_all_items(tools.collect()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.as_ref();
        let Some((_, support, _, _)) = FIXTURES.iter().find(|f| f.0 == name) else {
            return Err(McpError::invalid_params(
                format!("unknown tool {name:?}"),
                None,
            ));
        };
        let as_task = *support != Support::Never
            && context
                .client_capabilities()
                .is_some_and(|caps| caps.supports_tasks());
        if *support == Support::Required && !as_task {
            return Err(McpError::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        let arguments = request.arguments.clone().unwrap_or_default();
        let text = |key: &str, default: &str| {
            arguments
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or(default)
                .to_owned()
        };
        match name {
            "greet" => Ok(done(format!("Hello, {}!", text("name", "World"))).into()),
            "slow_compute" => {
                let seconds = arguments
                    .get("seconds")
                    .and_then(Value::as_f64)
                    .unwrap_or(0.0)
                    .clamp(0.0, MAX_COMPUTE_S);
                let label = text("label", "slow_compute");
                let work = Duration::from_secs_f64(seconds);
                if !as_task {
                    tokio::time::sleep(work).await;
                    return Ok(computed(&label, seconds).into());
                }
                Ok(self.task(&context, move |task| {
                    Box::pin(async move {
                        working(&task, work).await?;
                        Ok(computed(&label, seconds))
                    })
                }))
            }
            "failing_job" => Ok(self.task(&context, |task| {
                Box::pin(async move {
                    working(&task, FAILING_JOB_WORK).await?;
                    Ok(CallToolResult::error(vec![ContentBlock::text(
                        "failing_job failed, as it always does",
                    )]))
                })
            })),
            "protocol_error_job" => Ok(self.task(&context, |_| {
                Box::pin(async {
                    Err(TaskExit::Error(McpError::internal_error(
                        "protocol_error_job: an internal failure, on purpose",
                        Some(json!({ "fixture": "protocol_error_job" })),
                    )))
                })
            })),
            "confirm_delete" => {
                let filename = text("filename", "file.txt");
                let question = elicitation(&format!("Delete {filename}?"), "confirm", "boolean")?;
                Ok(self.task(&context, move |task| {
                    Box::pin(async move {
                        let answer = task.request_input("confirm", question).await?;
                        let yes = accepted(&answer)
                            .and_then(|content| content.get("confirm"))
                            .and_then(Value::as_bool)
                            .unwrap_or(false);
                        Ok(done(if yes {
                            format!("Deleted {filename}")
                        } else {
                            format!("Kept {filename}")
                        }))
                    })
                }))
            }
            "multi_input" => {
                let first = elicitation("Your name?", "name", "string")?;
                let second = elicitation("Go on?", "confirm", "boolean")?;
                Ok(self.task(&context, move |task| {
                    Box::pin(async move {
                        let (first, second) = tokio::join!(
                            task.request_input("first", first),
                            task.request_input("second", second)
                        );
                        Ok(done(format!("answers: {} and {}", first?, second?)))
                    })
                }))
            }
            "test_tool_with_task" => {
                let responses = request.input_responses.unwrap_or_default();
                let Some(answer) = responses.get("user_name") else {
                    // Round 1 (SEP-2322): ask first; no task yet.
                    let question = elicitation("Your name?", "name", "string")?;
                    let requests = InputRequests::from([("user_name".to_owned(), question)]);
                    return Ok(CallToolResponse::InputRequired(
                        InputRequiredResult::from_input_requests(requests),
                    ));
                };
                let user_name = accepted(answer)
                    .and_then(|content| {
                        content
                            .get("name")
                            .or_else(|| content.get("user_name"))
                            .or_else(|| content.values().next())
                    })
                    .and_then(Value::as_str)
                    .unwrap_or("stranger")
                    .to_owned();
                Ok(self.task(&context, move |_| {
                    Box::pin(async move { Ok(done(format!("Hello, {user_name}!"))) })
                }))
            }
            other => Err(McpError::invalid_params(
                format!("unknown tool {other:?}"),
                None,
            )),
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.tasks.get(&self.owner, &request.task_id)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks
            .update(&self.owner, &request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.cancel(&self.owner, &request.task_id)
    }
}

/// Works for `duration`, or stops at `tasks/cancel` (the task settles `cancelled`).
async fn working(task: &TaskContext, duration: Duration) -> Result<(), TaskExit> {
    tokio::select! {
        () = tokio::time::sleep(duration) => Ok(()),
        () = task.cancelled() => Err(TaskExit::Cancelled),
    }
}

fn done(text: String) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn computed(label: &str, seconds: f64) -> CallToolResult {
    done(format!("{label}: computed in {seconds} s"))
}

/// A form `elicitation/create` asking for one field `key` of JSON type `kind`.
fn elicitation(message: &str, key: &str, kind: &str) -> Result<InputRequest, McpError> {
    let request = json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": { key: { "type": kind } },
                "required": [key],
            },
        },
    });
    serde_json::from_value(request).map_err(|e| {
        McpError::internal_error(format!("fixture elicitation does not parse: {e}"), None)
    })
}

/// The content of an accepted elicitation answer.
fn accepted(answer: &Value) -> Option<&JsonObject> {
    (answer.get("action")?.as_str()? == "accept")
        .then(|| answer.get("content")?.as_object())
        .flatten()
}

/// `--http ADDR`, the only argument.
fn listen_address() -> Result<SocketAddr, String> {
    let usage = "usage: conformance_fixtures --http 127.0.0.1:PORT";
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [flag, addr] if flag == "--http" => {
            addr.parse().map_err(|e| format!("{addr}: {e}; {usage}"))
        }
        _ => Err(usage.to_owned()),
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match serve().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("conformance_fixtures: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn serve() -> Result<(), String> {
    let addr = listen_address()?;
    let fixtures = Fixtures::new();
    let hosts = ["localhost", "127.0.0.1", "[::1]", "::1"]
        .into_iter()
        .map(String::from)
        .chain([addr.ip().to_string()]);
    let config = StreamableHttpServerConfig::default().with_allowed_hosts(hosts);
    let service = StreamableHttpService::new(
        move || Ok(fixtures.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("no local address: {e}"))?;
    eprintln!("conformance_fixtures: serving streamable HTTP at http://{local}/mcp");
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            if let Err(e) = uexec_net::shutdown_signal().await {
                eprintln!("conformance_fixtures: {e}");
            }
        })
        .await
        .map_err(|e| format!("serving {local}: {e}"))
}
