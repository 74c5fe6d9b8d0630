//! [`EnvironmentBackend`]: a named exec server, as the engine's backend.
//!
//! Around the remote client ([`RemoteBackend`]), it adds three things an operator of pods needs:
//! 1. connecting on demand: a pod that is down when the list is read is dialled again at the
//!    next `exec_command` (`prepare`), so start-up and reloads never wait for a pod;
//! 2. the environment's name in every failure: a pod's death fails its sessions with
//!    `environment NAME: connection to URL lost: ...`, not with a bare URL;
//! 3. keeping itself alive while its sessions run: dropping the last handle on a remote client
//!    closes its connection, so a session holds the backend it started on, and an
//!    environment removed from the list (or pointed elsewhere) leaves its running sessions
//!    alone.
//!
//! Once connected, the remote client reconnects by itself: a lost connection is resumed if
//! the server still knows the session, and otherwise the next spawn dials afresh, which is
//! how a new pod behind the same URL takes the new sessions.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::oneshot;
use uexec_client::{ClientConfig, RemoteBackend};
use uexec_core::backend::{
    Backend, BackendError, BackendErrorKind, Placement, ProcessControl, Signal, SpawnSpec,
    SpawnedProcess, WriteOutcome,
};

/// Where and how to reach one environment's exec server.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    pub url: String,
    pub token: Option<String>,
    /// Longest wait for a connection (default: the client's request timeout).
    pub connect_timeout: Option<Duration>,
    pub client: ClientConfig,
}

/// A named exec server that connects on demand (see the module docs).
pub struct EnvironmentBackend {
    name: String,
    endpoint: Endpoint,
    /// The client once connected; the async lock makes concurrent first calls dial once.
    remote: tokio::sync::Mutex<Option<Arc<RemoteBackend>>>,
    placement: Mutex<Placement>,
    me: Weak<EnvironmentBackend>,
}

impl EnvironmentBackend {
    /// An environment not connected yet (the first command, or [`Self::warm_up`], dials).
    pub fn new(name: &str, endpoint: Endpoint) -> Arc<Self> {
        let placement = Placement::Remote {
            cwd: None,
            shell: None,
        };
        Arc::new_cyclic(|me| Self {
            name: name.to_owned(),
            endpoint,
            remote: tokio::sync::Mutex::new(None),
            placement: Mutex::new(placement),
            me: me.clone(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Dials in the background, so the first command finds the server connected. A failure
    /// is logged (it names the environment and the URL) and leaves the environment
    /// unconnected: its next command dials again.
    pub fn warm_up(self: &Arc<Self>) {
        let backend = self.clone();
        tokio::spawn(async move {
            if let Err(e) = backend.prepare().await {
                tracing::warn!("{e}; it is dialled again at its next command");
            }
        });
    }

    /// The connected client, dialling first if there is none yet.
    async fn remote(&self) -> Result<Arc<RemoteBackend>, BackendError> {
        let mut remote = self.remote.lock().await;
        if let Some(r) = remote.as_ref() {
            return Ok(r.clone());
        }
        let connect = RemoteBackend::connect_with(
            &self.endpoint.url,
            self.endpoint.token.clone(),
            self.endpoint.client.clone(),
        );
        let timeout = self
            .endpoint
            .connect_timeout
            .unwrap_or(self.endpoint.client.request_timeout);
        // Every failure names the URL already (`cannot reach URL: ...`, `initialize failed
        // on URL: ...`); the environment's name goes in front.
        let r = match tokio::time::timeout(timeout, connect).await {
            Ok(connected) => connected.map_err(|e| {
                let message = format!("environment {}: {e}", self.name);
                BackendError::with_kind(BackendErrorKind::Unavailable, message)
            })?,
            Err(_) => {
                return Err(BackendError::with_kind(
                    BackendErrorKind::Unavailable,
                    format!(
                        "environment {}: cannot reach {}: no answer within {} ms",
                        self.name,
                        self.endpoint.url,
                        timeout.as_millis()
                    ),
                ))
            }
        };
        tracing::info!(environment = %self.name, url = %self.endpoint.url, "connected");
        *self
            .placement
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = r.placement();
        *remote = Some(r.clone());
        Ok(r)
    }

    fn named(&self, e: BackendError) -> BackendError {
        BackendError::with_kind(e.kind, format!("environment {}: {}", self.name, e.message))
    }
}

impl Backend for EnvironmentBackend {
    fn prepare(&self) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move { self.remote().await.map(drop) })
    }

    fn placement(&self) -> Placement {
        self.placement
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn spawn(&self, spec: SpawnSpec) -> BoxFuture<'_, Result<SpawnedProcess, BackendError>> {
        Box::pin(async move {
            let remote = self.remote().await?;
            let process = remote.spawn(spec).await.map_err(|e| self.named(e))?;
            let Some(me) = self.me.upgrade() else {
                return Err(BackendError::new("the environment is shutting down"));
            };
            Ok(SpawnedProcess {
                pid: process.pid,
                output: process.output,
                exit: name_failures(&self.name, process.exit),
                control: Arc::new(NamedControl {
                    inner: process.control,
                    backend: me,
                }),
            })
        })
    }
}

/// The exit report, with the environment's name put before a failure.
fn name_failures(
    name: &str,
    exit: oneshot::Receiver<uexec_core::backend::ExitReport>,
) -> oneshot::Receiver<uexec_core::backend::ExitReport> {
    let (tx, rx) = oneshot::channel();
    let name = name.to_owned();
    tokio::spawn(async move {
        // A sender dropped without a report is passed on the same way (tx dropped).
        if let Ok(mut report) = exit.await {
            if let Some(f) = report.failure.take() {
                report.failure = Some(format!("environment {name}: {f}"));
            }
            let _ = tx.send(report);
        }
    });
    rx
}

/// A process's controls, holding its environment's backend (and so its connection) alive.
struct NamedControl {
    inner: Arc<dyn ProcessControl>,
    backend: Arc<EnvironmentBackend>,
}

impl ProcessControl for NamedControl {
    fn write(&self, bytes: Vec<u8>) -> BoxFuture<'_, Result<WriteOutcome, BackendError>> {
        Box::pin(async move {
            self.inner
                .write(bytes)
                .await
                .map_err(|e| self.backend.named(e))
        })
    }

    fn signal(&self, signal: Signal) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            self.inner
                .signal(signal)
                .await
                .map_err(|e| self.backend.named(e))
        })
    }

    fn terminate(&self) {
        self.inner.terminate();
    }

    fn kill_leftovers(&self) {
        self.inner.kill_leftovers();
    }
}
