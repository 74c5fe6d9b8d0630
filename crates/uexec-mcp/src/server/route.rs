//! A call routed to its tool: the dialect's tools, a person's at the daemon, the task a call
//! may become, the exit notices a result carries, and the text-only result of a server
//! without `--structured`.

use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, ProtocolVersion};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::{Map, Value};
use uexec_core::SessionStore;

use super::UexecServer;
use crate::approve::rounds::Rounding;
use crate::tasks::Unfinished;
use crate::tools::parse::Dialect;
use crate::tools::render::{attach_exit_notices, snapshot_result, Answer};
use crate::tools::{
    self, await_exit, exec_command, keep_session, list_sessions, pause_session, prune_sessions,
    read_output, remove_session, send_input, signal_session, terminate_session, wait, write_stdin,
};

/// How a call is answered besides its arguments.
pub(super) struct Call {
    /// It may become a task (what it left running is returned as [`Unfinished`]).
    pub tasks: bool,
    pub dialect: Dialect,
    /// Whom a command the rules hold asks.
    pub approver: Option<Arc<dyn uexec_core::spawn::Approver>>,
}

/// Whom a call's held command asks.
type Approver = Option<Arc<dyn uexec_core::spawn::Approver>>;

impl UexecServer {
    /// Whom a command the rules hold asks: the person at this client, when it declared form
    /// elicitation; on MCP 2026-07-28 or later (no request to the client) by sending the
    /// question back as the call's answer, the retry bringing theirs (the [`Rounding`] the
    /// call reads it from after); before, on the connection the initialize handshake opened;
    /// else at the daemon, if this is one. `Err`: a retry that answers no question held
    /// here, or another call's.
    pub(super) fn approver(
        &self,
        context: &RequestContext<RoleServer>,
        request: &CallToolRequestParams,
    ) -> Result<(Approver, Option<Arc<Rounding>>), String> {
        let (timeout, always) = (self.options.approval_timeout, self.always.clone());
        let forms = context
            .client_capabilities()
            .and_then(|c| c.elicitation)
            .is_some_and(|e| e.form.is_some() || e.url.is_none());
        let rounds = context
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        if forms && rounds {
            let rounding = Arc::new(Rounding::for_call(&self.rounds, request, timeout, always)?);
            return Ok((Some(rounding.clone()), Some(rounding)));
        }
        let approver: Approver = if forms && context.peer.peer_info().is_some() {
            Some(Arc::new(crate::approve::Eliciting {
                peer: context.peer.clone(),
                timeout,
                always,
            }))
        } else {
            self.held.as_ref().map(|(held, owner)| {
                Arc::new(crate::approve::held::AtTheDaemon {
                    held: held.clone(),
                    owner: owner.clone(),
                    timeout,
                    always,
                }) as Arc<dyn uexec_core::spawn::Approver>
            })
        };
        Ok((approver, None))
    }

    /// Routes a call to its tool; an error becomes `{name} failed: {why}`, and exit notices
    /// are added (extended dialect, and `wait` always). With `tasks`, what a task would
    /// follow on: the session a snapshot names as running, or the sessions a `wait` left
    /// unsatisfied.
    pub(super) async fn call(
        &self,
        store: &Arc<SessionStore>,
        own: &Arc<SessionStore>,
        name: &str,
        arguments: Option<&Map<String, Value>>,
        call_id: String,
        call: Call,
    ) -> (CallToolResult, Option<Unfinished>) {
        let Call {
            tasks,
            dialect,
            approver,
        } = call;
        let mut unfinished = None;
        // A running session an exec_command asked to background, where no task can be had.
        let mut background_refused = None;
        let codex_tools_only = self.options.codex_tools_only;
        let config = &self.options.config;
        let owners = self.stores.owners().map(Arc::as_ref);
        let started = std::time::Instant::now();
        // What a call's hooks said (they failed, or spoke to the model), for its result.
        let mut hooks_said = Vec::new();
        let answer = match name {
            exec_command::NAME => {
                let hooks = self.options.hooks.as_ref().map(|hooks| {
                    let dir = &config.cwd;
                    crate::hooks::CallHooks::new(hooks, store, arguments, &call_id, dialect, dir)
                });
                let approver = match &hooks {
                    Some(hooks) => hooks.approver(approver),
                    None => approver,
                };
                let with = uexec_core::CallWith {
                    approver,
                    pre_spawn: hooks.as_ref().and_then(crate::hooks::CallHooks::pre_spawn),
                    ..uexec_core::CallWith::default()
                };
                let window =
                    exec_command::run(store, config, arguments, dialect, call_id, with).await;
                if let Some(hooks) = hooks {
                    let ran = match &window {
                        Ok(w) => Ok(w.session_id().is_some()),
                        Err(e) => Err(e.clone()),
                    };
                    hooks_said = hooks.finish(ran).await;
                }
                window.map(|window| match window.session_id() {
                    // What a task follows, when the call asked for one (`background`) and
                    // the client can have it: the task stands in for this result, never sent.
                    Some(id) if tasks => {
                        unfinished = Some(Unfinished::Session(id, Box::new(window)));
                        CallToolResult::success(Vec::new())
                    }
                    running => {
                        if exec_command::background(arguments).unwrap_or(false) {
                            background_refused = running;
                        }
                        snapshot_result(window, dialect)
                    }
                })
            }
            write_stdin::NAME => write_stdin::call(store, config, arguments, dialect).await,
            wait::NAME if !codex_tools_only && tasks => wait::observe(store, config, arguments)
                .await
                .map(|(request, waited)| {
                    let following = wait::unsatisfied(request.all, &waited);
                    if following.is_empty() {
                        wait::result(waited, dialect)
                    } else {
                        // The task stands in for this result: it is never sent.
                        unfinished = Some(Unfinished::Wait(request, following, waited));
                        CallToolResult::success(Vec::new())
                    }
                }),
            wait::NAME if !codex_tools_only => wait::call(store, config, arguments, dialect).await,
            read_output::NAME if !codex_tools_only => read_output::call(store, owners, arguments),
            list_sessions::NAME => match owners {
                Some(owners) => list_sessions::call_person(owners, arguments),
                None if !codex_tools_only => {
                    list_sessions::call(store, &self.environments.names(), arguments)
                }
                None => unknown(name),
            },
            send_input::NAME if owners.is_some() => send_input::call(store, arguments).await,
            await_exit::NAME if owners.is_some() => await_exit::call(store, arguments).await,
            remove_session::NAME if owners.is_some() => remove_session::call(store, arguments),
            signal_session::NAME if owners.is_some() => {
                signal_session::call(store, arguments).await
            }
            pause_session::PAUSE if owners.is_some() => {
                pause_session::call(store, arguments, true).await
            }
            pause_session::RESUME if owners.is_some() => {
                pause_session::call(store, arguments, false).await
            }
            keep_session::NAME if owners.is_some() => keep_session::call(store, arguments),
            tools::approvals::LIST if owners.is_some() => match &self.held {
                Some((held, _)) => tools::approvals::list(held),
                None => unknown(name),
            },
            tools::approvals::ANSWER if owners.is_some() => match &self.held {
                Some((held, _)) => tools::approvals::answer(held, arguments),
                None => unknown(name),
            },
            prune_sessions::NAME => match owners {
                Some(owners) => prune_sessions::call(owners, arguments),
                None => unknown(name),
            },
            terminate_session::NAME if !codex_tools_only => {
                // A person stopping someone else's session: its owner is told who did.
                let by = (!Arc::ptr_eq(store, own)).then_some("a person (uexec kill)");
                terminate_session::call(store, arguments, by)
            }
            other => unknown(other),
        };
        if let (Some(metrics), Some(tool)) = (&config.metrics, tools::known(name)) {
            metrics.call(tool, started.elapsed());
        }
        let mut result = answer.unwrap_or_else(|message| {
            CallToolResult::error(vec![ContentBlock::text(format!(
                "{name} failed: {message}"
            ))])
        });
        for said in hooks_said {
            result.content.push(ContentBlock::text(said));
        }
        if unfinished.is_some() {
            // A task's result is read later, if at all: exit notices wait for the next one.
            return (result, unfinished);
        }
        if self.options.extended || name == wait::NAME {
            // This connection's own notices: a person's call on an agent's session must not
            // take the agent's.
            attach_exit_notices(&mut result, own.take_exit_notices());
        }
        if let Some(id) = background_refused {
            // Asked for, not possible here: the session id is the model's, as always. Said
            // first: a client joins the blocks, and after `Output:` it would read as output.
            result.content.insert(0, ContentBlock::text(format!(
                "background: no task here (this client does not take MCP Tasks, or the server runs with --no-tasks): session {id} is yours to poll with write_stdin, or to wait on with wait"
            )));
        }
        if !self.options.structured {
            // Every fact is in the text too (`render`): stated once, never escaped twice.
            result.structured_content = None;
        }
        (result, unfinished)
    }
}

/// The answer to a tool this connection does not offer.
fn unknown(name: &str) -> Answer {
    Err(format!("unknown tool {name:?}"))
}
