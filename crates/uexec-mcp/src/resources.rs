//! Each live session as an MCP resource, `uexec://sessions/{id}`: its state and recent
//! output. Subscribers hear `notifications/resources/updated` when a session changes state
//! (input written, exit) and `notifications/resources/list_changed` when one starts or ends.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    ReadResourceResult, Resource, ResourceContents, ResourceUpdatedNotificationParam,
};
use rmcp::service::{Peer, SubscriptionSink};
use rmcp::{ErrorData as McpError, RoleServer};
use uexec_core::{Event, EventKind, SessionStore};

/// Bytes of recent output a resource shows.
const RESOURCE_RECENT_OUTPUT_BYTES: usize = 4096;
const URI_PREFIX: &str = "uexec://sessions/";

pub fn uri_of(session_id: i32) -> String {
    format!("{URI_PREFIX}{session_id}")
}

pub fn session_of(uri: &str) -> Option<i32> {
    uri.strip_prefix(URI_PREFIX)?.parse().ok()
}

pub fn list(store: &SessionStore) -> Vec<Resource> {
    store
        .list_sessions()
        .into_iter()
        .map(|s| {
            Resource::new(uri_of(s.session_id), format!("session {}", s.session_id))
                .with_description(format!("{} (cwd {})", s.command, s.cwd.display()))
        })
        .collect()
}

pub fn read(store: &SessionStore, uri: &str) -> Result<ReadResourceResult, McpError> {
    let not_found = || McpError::resource_not_found(format!("no live session at {uri}"), None);
    let id = session_of(uri).ok_or_else(not_found)?;
    let info = store
        .list_sessions()
        .into_iter()
        .find(|s| s.session_id == id)
        .ok_or_else(not_found)?;
    let recent = store
        .recent_output(id, RESOURCE_RECENT_OUTPUT_BYTES)
        .unwrap_or_default();
    let text = format!(
        "session_id: {}\ncommand: {}\ncwd: {}\ntty: {}\nstate: {}\nrunning_seconds: {:.1}\n\nrecent output:\n{}",
        info.session_id,
        info.command,
        info.cwd.display(),
        info.tty,
        if info.exited { "exited (not yet reported)" } else { "running" },
        info.running_time.as_secs_f64(),
        recent
    );
    Ok(ReadResourceResult::new(vec![ResourceContents::text(
        text, uri,
    )]))
}

/// What an event means for subscribers.
pub enum Change {
    /// A session started or ended: the list changed, and so did that session.
    Listing(i32),
    /// The session's state changed.
    Session(i32),
}

pub fn change_of(event: &Event) -> Option<Change> {
    match &event.kind {
        EventKind::Begin { .. } | EventKind::End { .. } => Some(Change::Listing(event.session_id)),
        EventKind::TerminalInteraction { .. } => Some(Change::Session(event.session_id)),
        EventKind::OutputDelta { .. } => None,
    }
}

/// Legacy (`resources/subscribe`) subscriptions of one connection.
#[derive(Default, Clone)]
pub struct LegacySubscriptions {
    inner: Arc<Mutex<LegacyInner>>,
}

#[derive(Default)]
struct LegacyInner {
    uris: HashSet<String>,
    watching: bool,
}

impl LegacySubscriptions {
    pub fn subscribe(&self, store: &Arc<SessionStore>, uri: String, peer: Peer<RoleServer>) {
        let start = {
            let mut inner = self
                .inner
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            inner.uris.insert(uri);
            !std::mem::replace(&mut inner.watching, true)
        };
        if start {
            let events = store.subscribe();
            let subs = self.clone();
            tokio::spawn(async move { subs.watch(events, peer).await });
        }
    }

    pub fn unsubscribe(&self, uri: &str) {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .uris
            .remove(uri);
    }

    fn subscribed(&self, uri: &str) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .uris
            .contains(uri)
    }

    async fn watch(&self, mut events: uexec_core::EventStream, peer: Peer<RoleServer>) {
        while let Some(event) = events.recv().await {
            let id = match change_of(&event) {
                Some(Change::Listing(id) | Change::Session(id)) => id,
                None => continue,
            };
            let uri = uri_of(id);
            if self.subscribed(&uri)
                && peer
                    .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                    .await
                    .is_err()
            {
                return; // the client is gone
            }
        }
    }
}

/// Serves one `subscriptions/listen` stream until it is cancelled.
pub async fn listen(
    store: &SessionStore,
    sink: &SubscriptionSink,
    cancelled: impl std::future::Future<Output = ()>,
) {
    let mut events = store.subscribe();
    let accepted = sink.accepted().clone();
    let wants_list = accepted.resources_list_changed == Some(true);
    let uris: HashSet<String> = accepted
        .resource_subscriptions
        .unwrap_or_default()
        .into_iter()
        .collect();
    tokio::pin!(cancelled);
    loop {
        let event = tokio::select! {
            () = &mut cancelled => return,
            event = events.recv() => match event {
                Some(e) => e,
                None => return,
            },
        };
        let Some(change) = change_of(&event) else {
            continue;
        };
        let id = match change {
            Change::Listing(id) => {
                if wants_list && sink.notify_resource_list_changed().await.is_err() {
                    return;
                }
                id
            }
            Change::Session(id) => id,
        };
        let uri = uri_of(id);
        if uris.contains(&uri) && sink.notify_resource_updated(uri).await.is_err() {
            return;
        }
    }
}
