//! `process/terminate`: SIGKILL to the process group at once (no SIGTERM grace, as Codex).
//! `running` says whether the process was still running; an exited, starting or unknown
//! process is `running: false`. For an exited one that is still retained, what is left of its
//! group is killed (the remote backend's `kill_leftovers`).

use std::sync::Arc;

use uexec_protocol::{TerminateParams, TerminateResult};

use crate::session::{Lookup, Session};

pub fn handle(session: &Arc<Session>, params: TerminateParams) -> TerminateResult {
    let running = match session.lookup(&params.process_id) {
        Lookup::Running(handle) => handle.terminate(),
        Lookup::Unknown | Lookup::Starting => false,
    };
    TerminateResult { running }
}
