//! When a face stops: SIGTERM or SIGINT. Every face (`uexec serve`, `uexec mcp`, the daemon)
//! waits on [`shutdown_signal`] beside its work and, once it resolves, kills what it started.

use tokio::signal::unix::{signal, SignalKind};

/// Why the shutdown signals cannot be watched (tokio's signal driver could not register).
#[derive(Debug, thiserror::Error)]
#[error("cannot watch {signal}")]
pub struct SignalError {
    /// `SIGTERM` or `SIGINT`.
    pub signal: &'static str,
    #[source]
    pub source: std::io::Error,
}

/// Resolves on SIGTERM or SIGINT (an error if they cannot be watched). Every face stops on
/// it and kills what it started.
pub async fn shutdown_signal() -> Result<(), SignalError> {
    let watch = |kind: SignalKind, name: &'static str| {
        signal(kind).map_err(|source| SignalError {
            signal: name,
            source,
        })
    };
    let mut term = watch(SignalKind::terminate(), "SIGTERM")?;
    let mut int = watch(SignalKind::interrupt(), "SIGINT")?;
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
    }
    Ok(())
}
