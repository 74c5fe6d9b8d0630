//! What can go wrong talking to an exec server, and how the engine sees it.

use uexec_core::backend::{BackendError, BackendErrorKind};
use uexec_protocol::RpcError;

/// The `data.kind` a server puts on a spawn failure whose program or directory is missing.
pub const SPAWN_NOT_FOUND_KIND: &str = "spawnNotFound";
/// The `data.kind` a server puts on a spawn failure whose program is not executable.
pub const SPAWN_PERMISSION_DENIED_KIND: &str = "spawnPermissionDenied";

/// Why a call to an exec server failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientError {
    /// The URL cannot be used (not `ws://`, or a token that is not a header value).
    #[error("invalid exec-server URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    /// The WebSocket could not be opened (a refused certificate says
    /// `certificate not trusted: ...`).
    #[error("cannot reach {url}: {reason}")]
    Connect { url: String, reason: String },
    /// The server answered with an error.
    #[error("{method} failed on {url}: {error}")]
    Rpc {
        url: String,
        method: &'static str,
        error: RpcError,
    },
    /// The server's answer is not what the dialect says.
    #[error("{method} on {url}: unexpected answer: {reason}")]
    BadResponse {
        url: String,
        method: &'static str,
        reason: String,
    },
    /// No answer in time.
    #[error("{method} on {url}: no answer within {timeout_ms} ms")]
    Timeout {
        url: String,
        method: &'static str,
        timeout_ms: u128,
    },
    /// The connection went away and could not be resumed.
    #[error("connection to {url} lost: {reason}")]
    ConnectionLost { url: String, reason: String },
    /// The backend was closed by its owner.
    #[error("the remote backend for {url} is closed")]
    Closed { url: String },
}

impl ClientError {
    /// The server's error, when it sent one.
    pub fn rpc_error(&self) -> Option<&RpcError> {
        match self {
            Self::Rpc { error, .. } => Some(error),
            _ => None,
        }
    }

    /// The `data.kind` of the server's error, when it sent one.
    pub fn error_kind(&self) -> Option<&str> {
        self.rpc_error()
            .and_then(|e| e.data.as_ref())
            .and_then(|d| d.get("kind"))
            .and_then(|k| k.as_str())
    }

    /// Whether the link failed (as opposed to the server refusing the request).
    pub fn is_transport(&self) -> bool {
        matches!(
            self,
            Self::Connect { .. }
                | Self::Timeout { .. }
                | Self::ConnectionLost { .. }
                | Self::Closed { .. }
        )
    }

    /// The engine's view: kind for callers that map codes, the server's own words as message
    /// (the engine prefixes spawn failures with "Failed to create process: ").
    pub fn to_backend_error(&self) -> BackendError {
        let kind = match self.error_kind() {
            Some(SPAWN_NOT_FOUND_KIND) => BackendErrorKind::NotFound,
            Some(SPAWN_PERMISSION_DENIED_KIND) => BackendErrorKind::PermissionDenied,
            _ if self.is_transport() => BackendErrorKind::Unavailable,
            _ => BackendErrorKind::Other,
        };
        let message = match self {
            Self::Rpc { error, .. } => error.message.clone(),
            other => other.to_string(),
        };
        BackendError::with_kind(kind, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spawn_not_found_maps_to_not_found_with_the_servers_words() {
        let e = ClientError::Rpc {
            url: "ws://x".into(),
            method: "process/start",
            error: RpcError::internal("No such file or directory (os error 2)")
                .with_data(json!({"kind": "spawnNotFound"})),
        };
        let b = e.to_backend_error();
        assert_eq!(b.kind, BackendErrorKind::NotFound);
        assert_eq!(b.message, "No such file or directory (os error 2)");
    }

    #[test]
    fn spawn_permission_denied_maps_to_permission_denied() {
        let e = ClientError::Rpc {
            url: "ws://x".into(),
            method: "process/start",
            error: RpcError::internal("Permission denied (os error 13)")
                .with_data(json!({"kind": "spawnPermissionDenied"})),
        };
        assert_eq!(
            e.to_backend_error().kind,
            BackendErrorKind::PermissionDenied
        );
    }

    #[test]
    fn transport_failures_are_unavailable() {
        let e = ClientError::ConnectionLost {
            url: "ws://127.0.0.1:1".into(),
            reason: "reset".into(),
        };
        let b = e.to_backend_error();
        assert_eq!(b.kind, BackendErrorKind::Unavailable);
        assert_eq!(b.message, "connection to ws://127.0.0.1:1 lost: reset");
    }
}
