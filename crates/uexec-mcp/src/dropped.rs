//! An HTTP request whose client went away before its answer is cancelled, as an explicit
//! `notifications/cancelled` would cancel it.
//!
//! Why: over streamable HTTP a call's answer goes down the response stream of its POST.
//! A client that drops that connection (killed, a timeout of its own) never reads it, but
//! rmcp's handler runs on: a poll drains the session's output and its exit into an answer
//! that is thrown away, and the next call finds the lines gone and the session reported.
//! A cancelled call loses nothing (uexec drops it at an await, before it drains), so:
//!
//! 1. every session manager call is passed on as it is ([`CancelDropped`] wraps one);
//! 2. the stream of a POST that carries a request is watched ([`Guarded`]): it notes the
//!    answer to its request when it goes by;
//! 3. dropped before that answer (axum drops it when the client's connection closes), it
//!    sends the session `notifications/cancelled` for the request, in a task of its own;
//! 4. a session closed (`DELETE`) while requests of its are unanswered cancels them first:
//!    closed, it could no longer be told (its handler would run on, as in step 3).

use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures::Stream;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientJsonRpcMessage, ClientNotification,
    JsonRpcMessage, RequestId,
};
use rmcp::transport::streamable_http_server::session::{RestoreOutcome, ServerSseMessage};
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};

/// Why a dropped request was cancelled, as the notification says.
const REASON: &str = "the HTTP client went away before the answer";

/// `M`, whose requests are cancelled when their client goes away (see the module docs).
pub struct CancelDropped<M> {
    inner: Arc<M>,
    /// The requests of each session whose answer has not gone by yet.
    pending: Arc<Pending>,
}

/// Unanswered requests by session.
type Pending = Mutex<HashMap<SessionId, HashSet<RequestId>>>;

impl<M> CancelDropped<M> {
    pub fn new(inner: Arc<M>) -> Self {
        Self {
            inner,
            pending: Arc::default(),
        }
    }
}

/// `notifications/cancelled` for `request`.
fn cancellation(request: RequestId) -> ClientJsonRpcMessage {
    ClientJsonRpcMessage::notification(ClientNotification::CancelledNotification(
        CancelledNotification::new(CancelledNotificationParam::new(
            Some(request),
            Some(REASON.to_owned()),
        )),
    ))
}

impl<M: SessionManager> SessionManager for CancelDropped<M> {
    type Error = M::Error;
    type Transport = M::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.inner.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<rmcp::model::ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let unanswered = lock(&self.pending).remove(id).unwrap_or_default();
        for request in unanswered {
            // A session that ended meanwhile has nothing left to cancel.
            let _ = self.inner.accept_message(id, cancellation(request)).await;
        }
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let request = match &message {
            JsonRpcMessage::Request(r) => Some(r.id.clone()),
            _ => None,
        };
        let stream = self.inner.create_stream(id, message).await?;
        if let Some(request) = &request {
            lock(&self.pending)
                .entry(id.clone())
                .or_default()
                .insert(request.clone());
        }
        Ok(Guarded {
            stream: Box::pin(stream),
            pending: request.map(|request| Unanswered {
                request,
                session: id.clone(),
                manager: self.inner.clone(),
                table: self.pending.clone(),
            }),
        })
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.resume(id, last_event_id).await
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.inner.restore_session(id).await
    }

    fn event_store(
        &self,
    ) -> Option<Arc<dyn rmcp::transport::streamable_http_server::session::EventStore>> {
        self.inner.event_store()
    }
}

/// A request not answered yet, and where to cancel it.
struct Unanswered<M: SessionManager> {
    request: RequestId,
    session: SessionId,
    manager: Arc<M>,
    table: Arc<Pending>,
}

impl<M: SessionManager> Unanswered<M> {
    /// Off the table of unanswered requests; whether it was still there (not cancelled by
    /// a close of its session meanwhile).
    fn settle(&self) -> bool {
        let mut table = lock(&self.table);
        let Some(requests) = table.get_mut(&self.session) else {
            return false;
        };
        let was = requests.remove(&self.request);
        if requests.is_empty() {
            table.remove(&self.session);
        }
        was
    }
}

fn lock(pending: &Pending) -> std::sync::MutexGuard<'_, HashMap<SessionId, HashSet<RequestId>>> {
    pending.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A POST's response stream (step 2 of the module docs).
struct Guarded<S, M: SessionManager> {
    stream: Pin<Box<S>>,
    /// `None` once the answer went by (or for a stream that carries no request's answer).
    pending: Option<Unanswered<M>>,
}

impl<S, M> Stream for Guarded<S, M>
where
    S: Stream<Item = ServerSseMessage>,
    M: SessionManager,
{
    type Item = ServerSseMessage;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let next = self.stream.as_mut().poll_next(cx);
        if let Poll::Ready(Some(event)) = &next {
            let answered = match event.message.as_deref() {
                Some(JsonRpcMessage::Response(r)) => Some(&r.id),
                Some(JsonRpcMessage::Error(e)) => e.id.as_ref(),
                _ => None,
            };
            if answered.is_some() && answered == self.pending.as_ref().map(|p| &p.request) {
                if let Some(p) = self.pending.take() {
                    p.settle();
                }
            }
        }
        next
    }
}

impl<S, M: SessionManager> Drop for Guarded<S, M> {
    fn drop(&mut self) {
        let Some(unanswered) = self.pending.take() else {
            return;
        };
        // Cancelled already, by the close of its session.
        if !unanswered.settle() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let Unanswered {
            request,
            session,
            manager,
            ..
        } = unanswered;
        let cancel = cancellation(request.clone());
        runtime.spawn(async move {
            // A session that ended meanwhile has nothing left to cancel.
            if let Err(e) = manager.accept_message(&session, cancel).await {
                tracing::debug!(%request, "cancelling a dropped request: {e}");
            }
        });
    }
}
