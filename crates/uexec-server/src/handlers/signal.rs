//! `process/signal`: `interrupt` is SIGINT to the process group, `terminate` (uexec's own)
//! SIGTERM. An unknown, starting or
//! exited process is `{}`, not an error (Codex); an unknown signal name is `-32602` (params).

use std::sync::Arc;

use uexec_core::backend::Signal;
use uexec_protocol::{RpcError, SignalName, SignalParams, SignalResult};

use crate::session::{Lookup, Session};

pub async fn handle(
    session: &Arc<Session>,
    params: SignalParams,
) -> Result<SignalResult, RpcError> {
    if let Lookup::Running(handle) = session.lookup(&params.process_id) {
        match params.signal {
            SignalName::Interrupt => handle.signal(Signal::Interrupt).await?,
            SignalName::Terminate => handle.signal(Signal::Terminate).await?,
        }
    }
    Ok(SignalResult {})
}
