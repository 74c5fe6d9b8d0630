//! `process/start`.
//!
//! 1. Check what the params cannot say by type: a non-empty `argv`, a local absolute `file://`
//!    `cwd` (`-32602`).
//! 2. Reserve the process id in the session (`-32600 process X already exists`, also while an
//!    exited process is retained).
//! 3. Build the environment (exact `env`, or `envPolicy` + `env`), let a shell snapshot stand
//!    in for a `-lc` login's profile (`uexec_core::shell_snapshot`), and spawn through the
//!    backend, on this runtime worker thread (the parent-death signal is tied to the thread
//!    that forks). A failure frees the id and is `-32603`, with `data.kind = "spawnNotFound"`
//!    when the program or the directory does not exist and `"spawnPermissionDenied"` when the
//!    program is not executable (as Codex).
//!    With `--rules-at exec`, the spawn gets the launcher that hands its execs over, and
//!    a judge of its execs starts beside it (`crate::exec_rules`).
//! 4. Start the process's pump (held at a gate until the answer is queued) and its stdin
//!    writer (TTY or `pipeStdin` only), and put the handle under the reserved id.

use std::sync::Arc;

use serde_json::json;
use tokio::sync::oneshot;
use uexec_core::backend::{BackendError, BackendErrorKind, EnvMode, Program, SpawnSpec};
use uexec_core::metrics::{Metrics, SpawnFailure};
use uexec_protocol::file_uri;
use uexec_protocol::{RpcError, StartParams, StartResult};

use crate::caller::Caller;
use crate::config::{STDIN_QUEUE_WRITES, WRITE_IDS_REMEMBERED};
use crate::env_policy::build_env;
use crate::process::stdin::StdinQueue;
use crate::process::ProcessHandle;
use crate::pump::{self, PumpConfig, PumpInputs};
use crate::session::Session;

pub async fn handle(
    conn: &Caller,
    session: &Arc<Session>,
    params: StartParams,
) -> Result<(StartResult, oneshot::Sender<()>), RpcError> {
    if params.argv.is_empty() {
        return Err(RpcError::invalid_params("argv must not be empty"));
    }
    let cwd = file_uri::parse(&params.cwd).map_err(|e| RpcError::invalid_params(e.to_string()))?;
    let reservation = session.reserve(&params.process_id).ok_or_else(|| {
        RpcError::invalid_request(format!("process {} already exists", params.process_id))
    })?;

    let spec = SpawnSpec {
        program: program_of(params.argv),
        arg0: params.arg0,
        cwd,
        env: build_env(&params.env, params.env_policy.as_ref(), std::env::vars_os()),
        env_mode: EnvMode::Exact,
        tty: params.tty,
        pipe_stdin: params.pipe_stdin,
        // The exec-server dialect has two streams.
        one_stream: false,
        passed_fd: None,
        launcher: None,
        limits: conn.server.config.limits,
    };
    let metrics = &conn.server.metrics;
    // The front door's rules (no one can be asked here: a prompt is refused); a refusal is
    // an error naming the rule, and the id is free again.
    let mut admitted = uexec_core::spawn::admit_spec(
        conn.server.rules.as_deref(),
        spec,
        None,
        Some(metrics),
        conn.server.decisions.as_deref(),
    )
    .await
    .map_err(|e| {
        metrics.spawn_failed(SpawnFailure::Refused);
        RpcError::invalid_request(e.to_string()).with_data(json!({"kind": "refused"}))
    })?;
    if let Some(snapshots) = &conn.server.shell_snapshots {
        snapshots.apply(&mut admitted.spec).await;
    }
    // With `--rules-at exec`: the launcher that hands every exec over (after the snapshot,
    // which a launched spawn would not get).
    let exec_socket = match &conn.server.at_exec {
        Some(judge) => {
            crate::exec_rules::startable(&admitted.spec).map_err(|e| spawn_failed(metrics, e))?;
            Some(judge.hand_over(&mut admitted.spec))
        }
        None => None,
    };
    let spawned = admitted
        .spawn(conn.server.backend.as_ref())
        .await
        .map_err(|e| spawn_failed(metrics, e))?;
    metrics.spawned();

    let config = &conn.server.config;
    let stdin = (params.tty || params.pipe_stdin).then(|| {
        StdinQueue::spawn(
            spawned.control.clone(),
            STDIN_QUEUE_WRITES,
            WRITE_IDS_REMEMBERED,
        )
    });
    let handle = ProcessHandle::new(
        params.process_id.clone(),
        spawned.control,
        config.retained_output_max_bytes,
        stdin,
    );
    let (gate_tx, gate) = oneshot::channel();
    let inputs = PumpInputs {
        output: spawned.output,
        exit: spawned.exit,
        gate,
    };
    let pump_config = PumpConfig {
        chunk_max_bytes: config.output_chunk_max_bytes,
        retention: config.exited_process_retention,
    };
    tokio::spawn(pump::run(
        handle.clone(),
        session.clone(),
        inputs,
        pump_config,
        metrics.clone(),
    ));
    if let (Some(judge), Some(socket)) = (&conn.server.at_exec, exec_socket) {
        judge.watch(socket, handle.clone(), session.id());
    }
    reservation.commit(handle);
    tracing::debug!(session = session.id(), process = params.process_id, pid = ?spawned.pid, "started");
    Ok((
        StartResult {
            process_id: params.process_id,
            sandbox_type: "none".to_string(),
        },
        gate_tx,
    ))
}

/// A spawn that failed, counted, as its error on the wire (as Codex: `-32603`, and the kind
/// of a program or directory missing, or not executable).
fn spawn_failed(metrics: &Metrics, e: BackendError) -> RpcError {
    metrics.spawn_failed(match e.kind {
        BackendErrorKind::NotFound => SpawnFailure::NotFound,
        BackendErrorKind::PermissionDenied => SpawnFailure::PermissionDenied,
        BackendErrorKind::Unavailable => SpawnFailure::Unavailable,
        BackendErrorKind::Other => SpawnFailure::Other,
    });
    let error = RpcError::internal(e.message);
    match e.kind {
        BackendErrorKind::NotFound => error.with_data(json!({"kind": "spawnNotFound"})),
        BackendErrorKind::PermissionDenied => {
            error.with_data(json!({"kind": "spawnPermissionDenied"}))
        }
        _ => error,
    }
}

/// What a client's argv asks for. The wire carries argvs, and a client's login shell comes
/// as `[shell, "-lc", script]`: read as such, it may run from a shell snapshot, as the
/// engine's own login shells do. Any other argv runs as given.
fn program_of(argv: Vec<String>) -> Program {
    match <[String; 3]>::try_from(argv) {
        Ok([shell, flag, script]) if flag == "-lc" => Program::Shell {
            shell,
            login: true,
            script,
        },
        Ok(three) => Program::Argv {
            argv: three.to_vec(),
        },
        Err(argv) => Program::Argv { argv },
    }
}
