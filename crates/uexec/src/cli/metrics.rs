//! `uexec metrics`: the daemon's figures as Prometheus text on stdout (sessions by state,
//! spawns, exits and failures by cause, bytes out, transcript bytes on disk, CPU and
//! memory, call latencies), for a person's tools: `uexec metrics > /var/lib/node_exporter/
//! textfile/uexec.prom` in a cron job. Starts no daemon: exit 3 when none runs.

use std::io::Write as _;
use std::process::ExitCode;

use super::common::{Failure, EXIT_NO_SESSION, EXIT_UEXEC};
use super::conn::Target;

/// `uexec metrics [--socket PATH]`.
pub async fn metrics(target: &Target) -> Result<ExitCode, Failure> {
    let socket = match &target.socket {
        Some(path) => path.clone(),
        None => uexec_mcp::daemon::default_socket().map_err(anyhow::Error::from)?,
    };
    let text = uexec_mcp::daemon::metrics::ask(&socket)
        .await
        .map_err(|e| Failure {
            code: EXIT_UEXEC,
            message: format!("{e:#}"),
        })?;
    let Some(text) = text else {
        return Err(Failure {
            code: EXIT_NO_SESSION,
            message: format!("no uexec daemon runs for {}", socket.display()),
        });
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Failure {
            code: EXIT_UEXEC,
            message: format!("cannot write to stdout: {e}"),
        })?;
    Ok(ExitCode::SUCCESS)
}
