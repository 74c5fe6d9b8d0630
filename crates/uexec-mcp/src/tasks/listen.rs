//! `notifications/tasks` on the `subscriptions/listen` stream (the 2026-07-28 protocol,
//! which has no connection to tell a client on): a client that lists task ids in its filter
//! (`notifications.taskIds`, as the extension's draft and the official suite name them)
//! hears each of its own tasks among them when it asks for input and when it ends, with the
//! task whole (its result, when it completed), as `tasks/get` would show it. A task that
//! asked or ended before the stream opened is told at once, so a client that listens after
//! the exit still wakes without polling.
//!
//! rmcp's subscription filter has no `taskIds`: the wire layers ([`crate::wire`]) copy them
//! into the request's `_meta` under [`TASK_IDS_META`], refuse them from a client that did
//! not declare the extension, and put them in the acknowledgment; the notifications go out
//! here, tagged with the subscription's id as rmcp tags the others.

use std::collections::HashSet;
use std::sync::Arc;

use rmcp::model::{GetMeta, RequestId, RequestMetaObject, TaskStatus};
use rmcp::service::{Peer, RoleServer};
use tokio::sync::broadcast::error::RecvError;

use super::{notification, Tasks};

/// The request `_meta` key the wire layers put a listen request's `notifications.taskIds`
/// under.
pub const TASK_IDS_META: &str = "uexec.dev/taskIds";

/// The task ids a listen request asked for (see [`TASK_IDS_META`]); `None` when it asked
/// for none.
pub fn requested(meta: &RequestMetaObject) -> Option<Vec<String>> {
    meta.0 .0.get(TASK_IDS_META).map(ids_in)
}

/// The strings of a JSON array.
pub fn ids_in(ids: &serde_json::Value) -> Vec<String> {
    ids.as_array()
        .into_iter()
        .flatten()
        .filter_map(|id| id.as_str().map(str::to_owned))
        .collect()
}

/// Tells `peer` (a `subscriptions/listen` stream, `subscription`) of `owner`'s tasks among
/// `ids`, until each ended or the stream closed; then waits forever (the stream may carry
/// other notifications).
pub async fn tell<Owner: Send + Sync + 'static>(
    tasks: &Tasks<Owner>,
    owner: &Arc<Owner>,
    ids: Vec<String>,
    peer: Peer<RoleServer>,
    subscription: RequestId,
) {
    let mut changes = tasks.changes();
    let mut open: HashSet<String> = ids.into_iter().collect();
    let told = |id: &str| {
        let task = tasks.detailed(owner, id).ok()?;
        let status = task.status();
        (status == TaskStatus::InputRequired || status.is_terminal()).then_some(task)
    };
    // What happened before the stream opened.
    let mut pending: Vec<String> = open.iter().cloned().collect();
    loop {
        for id in pending.drain(..) {
            let Some(task) = told(&id) else {
                continue;
            };
            if task.status().is_terminal() {
                open.remove(&id);
            }
            let mut message = notification(task);
            message
                .get_meta_mut()
                .set_subscription_id(subscription.clone());
            if peer.send_notification(message).await.is_err() {
                return;
            }
        }
        if open.is_empty() {
            break;
        }
        match changes.recv().await {
            Ok(id) if open.contains(&id) => pending.push(id),
            Ok(_) => {}
            // Behind: look at every task still open.
            Err(RecvError::Lagged(_)) => pending.extend(open.iter().cloned()),
            Err(RecvError::Closed) => break,
        }
    }
    std::future::pending::<()>().await;
}
