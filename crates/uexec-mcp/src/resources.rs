//! Each live session as an MCP resource, `uexec://sessions/{id}`: its state and recent
//! output. Subscribers hear `notifications/resources/updated` when a session changes state
//! (input written, exit) and `notifications/resources/list_changed` when one starts or ends.
//!
//! A subscriber is a task reading the store's event stream, which is unbounded and carries
//! every output delta. So a subscriber must neither stall nor outlive its client:
//!
//! 1. It drains the stream at once, whatever the client's pace, and keeps only *which* changes
//!    are untold ([`Untold`]: a flag and a set of subscribed URIs, bounded by the
//!    subscription); at most one notification is in flight.
//! 2. A `resources/subscribe` watcher ends when the last URI is unsubscribed or the
//!    connection's handler is dropped (the client went away); a `subscriptions/listen`
//!    stream ends when it is cancelled. Either way its event subscriber goes with it.

use std::collections::{BTreeSet, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    ReadResourceResult, Resource, ResourceContents, ResourceUpdatedNotificationParam,
};
use rmcp::service::{Peer, SubscriptionSink};
use rmcp::{ErrorData as McpError, RoleServer};
use tokio::sync::watch;
use uexec_core::{Event, EventKind, EventStream, SessionStore};

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
    // The URI in `data` too, as MCP asks (SEP-2164).
    let not_found = || {
        McpError::resource_not_found(
            format!("no live session at {uri}"),
            Some(serde_json::json!({ "uri": uri })),
        )
    };
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
        match (info.exited, info.paused) {
            (true, _) => "exited (not yet reported)",
            (false, true) => "paused",
            (false, false) => "running",
        },
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
        EventKind::OutputDelta { .. } | EventKind::OutputSkipped { .. } => None,
    }
}

/// Changes a subscriber has not been told yet. Repeated changes merge, so its size is bounded
/// by what it subscribed to, however slowly the client reads.
#[derive(Debug, Default)]
pub struct Untold {
    list_changed: bool,
    updated: BTreeSet<String>,
}

/// One notification for a subscriber.
#[derive(Debug, PartialEq, Eq)]
pub enum Notice {
    ListChanged,
    Updated(String),
}

impl Untold {
    /// Records what `event` means for a subscriber to the list (`wants_list`) and to the URIs
    /// `subscribed` accepts.
    pub fn record(&mut self, event: &Event, wants_list: bool, subscribed: impl Fn(&str) -> bool) {
        let id = match change_of(event) {
            Some(Change::Listing(id)) => {
                self.list_changed |= wants_list;
                id
            }
            Some(Change::Session(id)) => id,
            None => return,
        };
        let uri = uri_of(id);
        if subscribed(&uri) {
            self.updated.insert(uri);
        }
    }

    /// The next notification to send, list changes first.
    pub fn take_next(&mut self) -> Option<Notice> {
        if std::mem::take(&mut self.list_changed) {
            return Some(Notice::ListChanged);
        }
        self.updated.pop_first().map(Notice::Updated)
    }
}

/// A notification on its way; `Err` when the client is gone.
type Sending = Pin<Box<dyn Future<Output = Result<(), ()>> + Send>>;

/// Tells a subscriber about changes until `stop` resolves, the stream ends or the client is
/// gone (steps 1–2 of the module doc).
async fn tell_changes(
    mut events: EventStream,
    mut record: impl FnMut(&mut Untold, &Event),
    send: impl Fn(Notice) -> Sending,
    stop: impl Future<Output = ()>,
) {
    tokio::pin!(stop);
    let mut untold = Untold::default();
    let mut in_flight: Option<Sending> = None;
    loop {
        if in_flight.is_none() {
            in_flight = untold.take_next().map(&send);
        }
        // Events last: under an output flood they are always ready and must not starve the
        // others.
        tokio::select! {
            biased;
            () = &mut stop => return,
            sent = async {
                match in_flight.as_mut() {
                    Some(sending) => sending.await,
                    None => std::future::pending().await,
                }
            } => {
                in_flight = None;
                if sent.is_err() {
                    return; // the client is gone
                }
            }
            event = events.recv() => match event {
                Some(e) => record(&mut untold, &e),
                None => return,
            },
        }
    }
}

/// Legacy (`resources/subscribe`) subscriptions of one connection. While a URI is subscribed,
/// one watcher task tells the client about it; it holds only the receiving side of
/// [`LegacyInner::uris`], so it ends when the last URI is unsubscribed or when the handler
/// (every clone of it) is dropped with its connection.
#[derive(Default, Clone)]
pub struct LegacySubscriptions {
    inner: Arc<Mutex<LegacyInner>>,
}

#[derive(Default)]
struct LegacyInner {
    /// The subscribed URIs, shared with the watcher; `None` when there is no watcher.
    uris: Option<watch::Sender<HashSet<String>>>,
}

impl LegacySubscriptions {
    pub fn subscribe(&self, store: &Arc<SessionStore>, uri: String, peer: Peer<RoleServer>) {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(uris) = &inner.uris {
            uris.send_modify(|set| {
                set.insert(uri);
            });
            return;
        }
        let (uris, watched) = watch::channel(HashSet::from([uri]));
        inner.uris = Some(uris);
        tokio::spawn(watch_legacy(store.subscribe_changes(), watched, peer));
    }

    pub fn unsubscribe(&self, uri: &str) {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let last = inner.uris.as_ref().is_some_and(|uris| {
            uris.send_modify(|set| {
                set.remove(uri);
            });
            uris.borrow().is_empty()
        });
        if last {
            inner.uris = None; // ends the watcher
        }
    }
}

async fn watch_legacy(
    events: EventStream,
    watched: watch::Receiver<HashSet<String>>,
    peer: Peer<RoleServer>,
) {
    let mut closed = watched.clone();
    let stop = async move { while closed.changed().await.is_ok() {} };
    let record = |untold: &mut Untold, event: &Event| {
        untold.record(event, false, |uri| watched.borrow().contains(uri));
    };
    let send = |notice: Notice| -> Sending {
        let peer = peer.clone();
        Box::pin(async move {
            match notice {
                Notice::Updated(uri) => peer
                    .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                    .await
                    .map_err(drop),
                Notice::ListChanged => Ok(()),
            }
        })
    };
    tell_changes(events, record, send, stop).await;
}

/// Tells a client of the initialize handshake (which has no `subscriptions/listen`) of
/// `notifications/resources/list_changed` when a session starts or ends, as the capability
/// it was shown says, until `stop` resolves or the client is gone.
pub async fn tell_list_changes(
    store: &SessionStore,
    peer: Peer<RoleServer>,
    stop: impl Future<Output = ()>,
) {
    let record = |untold: &mut Untold, event: &Event| {
        untold.record(event, true, |_| false);
    };
    let send = |notice: Notice| -> Sending {
        let peer = peer.clone();
        Box::pin(async move {
            match notice {
                Notice::ListChanged => peer.notify_resource_list_changed().await.map_err(drop),
                Notice::Updated(_) => Ok(()),
            }
        })
    };
    tell_changes(store.subscribe_changes(), record, send, stop).await;
}

/// Serves one `subscriptions/listen` stream until it is cancelled.
pub async fn listen(
    store: &SessionStore,
    sink: &SubscriptionSink,
    cancelled: impl Future<Output = ()>,
) {
    let accepted = sink.accepted().clone();
    let wants_list = accepted.resources_list_changed == Some(true);
    let uris: HashSet<String> = accepted
        .resource_subscriptions
        .unwrap_or_default()
        .into_iter()
        .collect();
    let record = |untold: &mut Untold, event: &Event| {
        untold.record(event, wants_list, |uri| uris.contains(uri));
    };
    let send = |notice: Notice| -> Sending {
        let sink = sink.clone();
        Box::pin(async move {
            match notice {
                Notice::ListChanged => sink.notify_resource_list_changed().await.map_err(drop),
                Notice::Updated(uri) => sink.notify_resource_updated(uri).await.map_err(drop),
            }
        })
    };
    tell_changes(store.subscribe_changes(), record, send, cancelled).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(session_id: i32, kind: EventKind) -> Event {
        Event {
            seq: 0,
            call_id: "c".into(),
            session_id,
            kind,
        }
    }

    #[test]
    fn repeated_changes_merge_and_output_is_no_change() {
        let begin = EventKind::Begin {
            command: Vec::new(),
            cwd: "/".into(),
        };
        let typed = EventKind::TerminalInteraction {
            stdin: String::new(),
        };
        let output = EventKind::OutputDelta { chunk: "x".into() };
        let mut untold = Untold::default();
        let subscribed = |uri: &str| uri != uri_of(3);
        for _ in 0..1000 {
            untold.record(&event(1, begin.clone()), true, subscribed);
            untold.record(&event(2, typed.clone()), true, subscribed);
            untold.record(&event(3, typed.clone()), true, subscribed);
            untold.record(&event(4, output.clone()), true, subscribed);
        }
        assert_eq!(untold.take_next(), Some(Notice::ListChanged));
        assert_eq!(untold.take_next(), Some(Notice::Updated(uri_of(1))));
        assert_eq!(untold.take_next(), Some(Notice::Updated(uri_of(2))));
        assert_eq!(untold.take_next(), None);
    }
}
