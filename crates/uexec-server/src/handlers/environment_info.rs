//! `environment/info`: the description computed at startup (see `environment.rs`).

use uexec_protocol::EnvironmentInfo;

use crate::caller::Caller;

pub fn handle(conn: &Caller) -> EnvironmentInfo {
    conn.server.environment.clone()
}
