//! Request handlers, one verb per file, and the dispatch that routes to them.
//!
//! [`dispatch`] applies Codex's order of checks: method name, then params, then the
//! handshake phase. Each handler returns a typed result; [`answer`] encodes it with the
//! request id into the text of a response, so a handler's result is never turned into an
//! intermediate `serde_json::Value`. Handlers see their connection as a [`Caller`].

mod environment_info;
mod initialize;
mod read;
pub mod reply;
mod signal;
mod start;
mod terminate;
mod write;

use std::sync::Arc;

use uexec_protocol::jsonrpc::{decode_params, RawJson};
use uexec_protocol::{Method, ReadParams, RequestId, RpcError};

use crate::caller::{Caller, Phase};
use crate::session::Session;
use reply::{answer, Reply};

/// Which family of methods the handshake guard is checking (Codex words them differently).
#[derive(Clone, Copy)]
enum Guarded {
    Exec,
    EnvironmentInfo,
}

/// The session of a connection that completed the handshake.
fn ready_session(conn: &Caller, family: Guarded) -> Result<Arc<Session>, RpcError> {
    let what = match family {
        Guarded::Exec => "exec methods",
        Guarded::EnvironmentInfo => "environment info methods",
    };
    match &conn.phase {
        Phase::Ready(session) => Ok(session.clone()),
        Phase::New => Err(RpcError::invalid_request(format!(
            "client must call initialize before using {what}"
        ))),
        Phase::Initializing(_) => Err(RpcError::invalid_request(format!(
            "client must send initialized before using {what}"
        ))),
    }
}

/// Routes one request to its handler.
pub async fn dispatch(
    conn: &mut Caller,
    id: &RequestId,
    method: &str,
    params: Option<RawJson>,
) -> Reply {
    let Some(method) = Method::from_name(method) else {
        return Reply::Now(answer::<()>(
            id,
            Err(RpcError::method_not_found(format!(
                "exec-server does not implement `{method}`"
            ))),
        ));
    };
    let started = std::time::Instant::now();
    let metrics = conn.server.metrics.clone();
    let reply = match route(conn, id, method, params).await {
        Ok(reply) => reply,
        Err(error) => Reply::Now(answer::<()>(id, Err(error))),
    };
    // Until the answer is known (a read that waits is answered later: its wait is not here).
    metrics.call(method.as_str(), started.elapsed());
    reply
}

async fn route(
    conn: &mut Caller,
    id: &RequestId,
    method: Method,
    params: Option<RawJson>,
) -> Result<Reply, RpcError> {
    Ok(match method {
        Method::Initialize => {
            let params = decode_params(params.as_ref())?;
            Reply::Now(answer(id, initialize::handle(conn, params)))
        }
        Method::EnvironmentInfo => {
            let _: EmptyParams = decode_params(params.as_ref())?;
            ready_session(conn, Guarded::EnvironmentInfo)?;
            Reply::Now(answer(id, Ok(environment_info::handle(conn))))
        }
        Method::ProcessStart => {
            let params = decode_params(params.as_ref())?;
            let session = ready_session(conn, Guarded::Exec)?;
            let (result, gate) = start::handle(conn, &session, params).await?;
            Reply::NowThenOpen(answer(id, Ok(result)), gate)
        }
        Method::ProcessRead => {
            let params: ReadParams = decode_params(params.as_ref())?;
            let session = ready_session(conn, Guarded::Exec)?;
            if params.wait_ms.unwrap_or(0) > 0 {
                conn.room_to_wait()?;
            }
            read::handle(id, &session, params).await?
        }
        Method::ProcessWrite => {
            let params = decode_params(params.as_ref())?;
            let session = ready_session(conn, Guarded::Exec)?;
            conn.room_to_wait()?;
            write::handle(id, &session, params)?
        }
        Method::ProcessSignal => {
            let params = decode_params(params.as_ref())?;
            let session = ready_session(conn, Guarded::Exec)?;
            Reply::Now(answer(id, signal::handle(&session, params).await))
        }
        Method::ProcessTerminate => {
            let params = decode_params(params.as_ref())?;
            let session = ready_session(conn, Guarded::Exec)?;
            Reply::Now(answer(id, Ok(terminate::handle(&session, params))))
        }
        Method::Initialized
        | Method::ProcessOutput
        | Method::ProcessExited
        | Method::ProcessClosed => {
            return Err(RpcError::method_not_found(format!(
                "`{method}` is a notification, not a request"
            )))
        }
    })
}

/// Params of methods that take none: `{}` or absent; unknown fields are ignored.
#[derive(serde::Deserialize)]
struct EmptyParams {}
