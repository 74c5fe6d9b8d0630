//! `environment/info`: the description computed at startup (see `environment.rs`).

use uexec_protocol::EnvironmentInfo;

use crate::connection::Connection;

pub fn handle(conn: &Connection) -> EnvironmentInfo {
    conn.server.environment.clone()
}
