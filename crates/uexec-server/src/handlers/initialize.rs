//! `initialize`: open a session, or resume a detached one. Allowed once per connection; a
//! refused resume does not count, so the client may try again (or open a new session).

use uexec_protocol::{ErrorCode, InitializeParams, InitializeResult, RpcError};

use crate::caller::{Caller, Phase};
use crate::registry::ResumeError;

pub fn handle(conn: &mut Caller, params: InitializeParams) -> Result<InitializeResult, RpcError> {
    if !matches!(conn.phase, Phase::New) {
        return Err(RpcError::invalid_request(
            "initialize may only be sent once per connection",
        ));
    }
    let registry = &conn.server.registry;
    let session = match &params.resume_session_id {
        None => registry.open(conn.id, conn.outbound.clone()),
        Some(session_id) => registry
            .resume(session_id, conn.id, conn.outbound.clone())
            .map_err(|e| match e {
                ResumeError::Unknown(_) => RpcError::invalid_request(e.to_string()),
                ResumeError::Attached(_) => {
                    RpcError::new(ErrorCode::SessionAttached, e.to_string())
                }
            })?,
    };
    tracing::debug!(
        session = session.id(),
        client = params.client_name,
        resumed = params.resume_session_id.is_some(),
        "initialize"
    );
    let result = InitializeResult {
        session_id: session.id().to_string(),
        environment_info: Some(conn.server.environment.clone()),
    };
    conn.phase = Phase::Initializing(session);
    Ok(result)
}
