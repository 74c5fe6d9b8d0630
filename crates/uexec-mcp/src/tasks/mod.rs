//! MCP Tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663): a call that outlives
//! its window, from a client that declared the extension, answers with a task instead of a
//! snapshot, and the client is told when it ends instead of polling for it.
//!
//! - [`exec`]: `exec_command`'s tasks, which follow a session to its exit.
//! - [`wait`]: `wait`'s tasks, which wait on until `wait` would have returned.
//! - [`listen`]: `notifications/tasks` on the `subscriptions/listen` stream.
//! - [`page`]: the one-time loopback page a password prompt is answered on.
//!
//! This file is the table of tasks: each task runs on a [`TaskManager`] of its own (rmcp's:
//! statuses, input requests, cooperative cancel), so that this table decides how long it is
//! kept, and what `ttlMs` and `pollIntervalMs` say, which rmcp fixes at spawn:
//! - a task that follows a session (or waits on sessions) is kept while it works and
//!   [`RETENTION`] after it ended; its `ttlMs` (from its creation) says so at every
//!   `tasks/get`: the run so far, plus [`RETENTION`]. Its `pollIntervalMs` follows the output
//!   ([`poll_interval`]): 1 s while the sessions print, up to 10 s when they are quiet;
//! - any other job ([`Tasks::spawn_job`], the conformance fixtures) keeps the time to live
//!   it was given, as rmcp's manager enforces it.
//!
//! Each task belongs to its owner (for uexec, the store of the client that made it); another
//! owner's task is unknown. Memory stays bounded: an owner keeps at most [`ENDED_KEPT`]
//! ended tasks (as a store keeps at most that many sessions, the exited ones pruned first),
//! the oldest ended forgotten first, even before its [`RETENTION`] is over (500 ended tasks
//! of 40 KB each took a daemon from 15 to 61 MiB); those still working follow a live
//! session or a live `wait`. A task goes with its owner: the table goes with the server
//! that holds it (in the daemon, the client's connection, so a client's tasks go when it
//! does), and a task whose owner's store is gone is forgotten at the next spawn.

mod ask;
pub mod exec;
mod kept;
pub mod listen;
pub mod page;
pub mod wait;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use rmcp::model::{
    CreateTaskResult, DetailedTask, GetTaskResult, ServerNotification, TaskStatus,
    TaskStatusNotification, TaskStatusNotificationParams,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::task_manager::{TaskContext, TaskFuture, TaskManager, TaskOptions};
use rmcp::ErrorData as McpError;
use serde_json::json;
use tokio::sync::broadcast;

pub use exec::Follow;
pub use wait::Waiting;

/// How long a task that followed sessions is kept after it ended (its `ttlMs` counts it).
pub const RETENTION: Duration = Duration::from_secs(3600);
/// Ended tasks an owner keeps at most, whatever their [`RETENTION`]: as many as a store
/// keeps sessions ([`uexec_core::limits::MAX_SESSIONS`]).
pub const ENDED_KEPT: usize = uexec_core::limits::MAX_SESSIONS;
/// How often a working task's status message is brought up to date.
pub const STATUS_EVERY: Duration = Duration::from_secs(2);
/// The polling interval a task suggests while its sessions print, in ms.
pub const POLL_MIN_MS: u64 = 1_000;
/// The polling interval a task suggests once its sessions are quiet, in ms.
pub const POLL_MAX_MS: u64 = 10_000;
/// Scheduler turns a waiter gives the manager to record a change it makes in the same turn
/// (a task's end, its `input_required`) before it waits between looks: a few are enough,
/// unless the thread that records it is not running (a loaded machine).
const SETTLE_TURNS: usize = 100;
/// How long a waiter looks for that change at most (waiting a little longer each time).
const SETTLE_LIMIT: Duration = Duration::from_secs(10);
/// Task changes a listener may lag behind before it looks at all its tasks again.
const CHANGES: usize = 256;

/// `pollIntervalMs` for sessions that last printed `quiet` ago: half of it, between
/// [`POLL_MIN_MS`] and [`POLL_MAX_MS`] (a printing session is polled every second, a quiet
/// one less often; a client that listens hears the end without polling at all).
pub fn poll_interval(quiet: Duration) -> u64 {
    let half = u64::try_from(quiet.as_millis() / 2).unwrap_or(u64::MAX);
    half.clamp(POLL_MIN_MS, POLL_MAX_MS)
}

/// The tasks of one server, shared by its connections.
pub struct Tasks<Owner = uexec_core::SessionStore> {
    table: Arc<Mutex<HashMap<String, Entry<Owner>>>>,
    /// The id of each task that changed status in a way clients are told of (it asks for
    /// input, it ended).
    changes: broadcast::Sender<String>,
}

impl<Owner> Clone for Tasks<Owner> {
    fn clone(&self) -> Self {
        Self {
            table: self.table.clone(),
            changes: self.changes.clone(),
        }
    }
}

impl<Owner> Default for Tasks<Owner> {
    fn default() -> Self {
        Self {
            table: Arc::default(),
            changes: broadcast::channel(CHANGES).0,
        }
    }
}

struct Entry<Owner> {
    manager: TaskManager,
    owner: Weak<Owner>,
    track: Arc<Track>,
}

/// What this table knows of a task besides rmcp's state.
struct Track {
    created: Instant,
    ended: Mutex<Option<Instant>>,
    /// Kept [`RETENTION`] after its end (a followed task), or as long as its manager keeps it.
    followed: bool,
    poll_ms: AtomicU64,
}

impl Track {
    fn ended(&self) -> Option<Instant> {
        *self.ended.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Kept: a followed task until [`RETENTION`] after its end.
    fn kept(&self) -> bool {
        !self.followed || self.ended().is_none_or(|at| at.elapsed() < RETENTION)
    }

    /// The wire fields rmcp fixed at spawn, as they stand now.
    fn dress(&self, task: &mut rmcp::model::Task) {
        if !self.followed {
            return;
        }
        let lived = self.ended().unwrap_or_else(Instant::now) - self.created;
        task.ttl_ms = u64::try_from((lived + RETENTION).as_millis()).ok();
        task.poll_interval_ms = Some(self.poll_ms.load(Ordering::Relaxed));
    }
}

/// A handle a followed task's work keeps: its `pollIntervalMs`, and the announcement of a
/// change clients are told of.
#[derive(Clone)]
pub struct Pulse {
    track: Arc<Track>,
    manager: TaskManager,
    id: String,
    changes: broadcast::Sender<String>,
    peer: Option<Peer<RoleServer>>,
}

impl Pulse {
    /// The sessions last printed `quiet` ago.
    pub fn quiet_for(&self, quiet: Duration) {
        self.track
            .poll_ms
            .store(poll_interval(quiet), Ordering::Relaxed);
    }

    /// Tells listeners (and the client of the initialize handshake) once the task's status
    /// is one `reached` accepts (the manager records it in the same turn as the work that
    /// causes it, which awaits after this).
    pub fn announce(&self, reached: fn(TaskStatus) -> bool) {
        tokio::spawn(settle(
            self.manager.clone(),
            self.id.clone(),
            reached,
            self.changes.clone(),
            self.peer.clone(),
            self.track.clone(),
        ));
    }
}

impl<Owner: Send + Sync + 'static> Tasks<Owner> {
    /// Runs `job` as a task of `owner`'s, the answer to its call: it is in the table (a
    /// `tasks/get` at once finds it) before this returns, and `peer`, when given, hears
    /// `notifications/tasks` when it asks for input and when it ends. The task keeps the
    /// time to live of `options`. The conformance fixtures
    /// (`examples/conformance_fixtures.rs`) come here.
    pub fn spawn_job(
        &self,
        owner: &Arc<Owner>,
        options: TaskOptions,
        peer: Option<Peer<RoleServer>>,
        job: impl FnOnce(TaskContext) -> TaskFuture,
    ) -> CreateTaskResult {
        self.spawn(owner, options, false, peer, |context, _| job(context))
    }

    /// Runs `job` as a task that follows sessions: kept while it works and [`RETENTION`]
    /// after; its work gets a [`Pulse`] to say how quiet the sessions are.
    pub fn spawn_followed(
        &self,
        owner: &Arc<Owner>,
        status: String,
        peer: Option<Peer<RoleServer>>,
        job: impl FnOnce(TaskContext, Pulse) -> TaskFuture,
    ) -> CreateTaskResult {
        let options = TaskOptions::new()
            .with_ttl_ms(None)
            .with_poll_interval_ms(POLL_MIN_MS)
            .with_status_message(status);
        self.spawn(owner, options, true, peer, job)
    }

    fn spawn(
        &self,
        owner: &Arc<Owner>,
        options: TaskOptions,
        followed: bool,
        peer: Option<Peer<RoleServer>>,
        job: impl FnOnce(TaskContext, Pulse) -> TaskFuture,
    ) -> CreateTaskResult {
        let manager = TaskManager::new();
        let track = Arc::new(Track {
            created: Instant::now(),
            ended: Mutex::new(None),
            followed,
            poll_ms: AtomicU64::new(options.poll_interval_ms.unwrap_or(POLL_MIN_MS)),
        });
        let mut table = self.lock();
        // The table forgets what is past its time: it stays as small as the tasks of the
        // last hour (and those still working).
        table.retain(|id, e| {
            e.owner.strong_count() > 0 && e.track.kept() && e.manager.get_task(id).is_ok()
        });
        // And no owner keeps more than its newest ended ones.
        let ended = table
            .iter()
            .filter_map(|(id, e)| Some((e.owner.as_ptr(), id.clone(), e.track.ended()?)));
        for id in past_the_bound(ended, ENDED_KEPT) {
            table.remove(&id);
        }
        let changes = self.changes.clone();
        let (outer_manager, outer_track) = (manager.clone(), track.clone());
        let mut task = manager.spawn(options, move |context| {
            let pulse = Pulse {
                track: outer_track,
                manager: outer_manager,
                id: context.task_id().to_owned(),
                changes,
                peer,
            };
            let work = job(context, pulse.clone());
            Box::pin(async move {
                let settled = work.await;
                let mut ended = pulse
                    .track
                    .ended
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                ended.get_or_insert_with(Instant::now);
                drop(ended);
                pulse.announce(|status| status.is_terminal());
                settled
            })
        });
        track.dress(&mut task);
        table.insert(
            task.task_id.clone(),
            Entry {
                manager,
                owner: Arc::downgrade(owner),
                track,
            },
        );
        CreateTaskResult::new(task)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry<Owner>>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The manager and track of `owner`'s task `task_id`; another owner's is unknown, as
    /// is one forgotten.
    fn find(
        &self,
        owner: &Arc<Owner>,
        task_id: &str,
    ) -> Result<(TaskManager, Arc<Track>), McpError> {
        let table = self.lock();
        match table.get(task_id) {
            Some(e) if e.owner.upgrade().is_some_and(|o| Arc::ptr_eq(&o, owner)) => {
                Ok((e.manager.clone(), e.track.clone()))
            }
            _ => Err(unknown(task_id)),
        }
    }

    /// `owner`'s task `task_id` as `tasks/get` shows it now.
    pub fn detailed(&self, owner: &Arc<Owner>, task_id: &str) -> Result<DetailedTask, McpError> {
        let (manager, track) = self.find(owner, task_id)?;
        let mut detailed = manager.get_task(task_id)?;
        track.dress(&mut detailed.task);
        Ok(detailed)
    }

    /// `tasks/get` for `owner`.
    pub fn get(&self, owner: &Arc<Owner>, task_id: &str) -> Result<GetTaskResult, McpError> {
        self.detailed(owner, task_id).map(GetTaskResult::new)
    }

    /// `tasks/cancel`: acknowledged at once; the task settles `cancelled` once its work
    /// stopped (for exec_command, once the session is gone).
    pub fn cancel(&self, owner: &Arc<Owner>, task_id: &str) -> Result<(), McpError> {
        let (manager, _) = self.find(owner, task_id)?;
        manager.cancel_task(task_id)
    }

    /// `tasks/update`: the answers go to the task's outstanding input requests; an answer
    /// to none is ignored, as the extension says of answers to requests not outstanding.
    pub fn update(
        &self,
        owner: &Arc<Owner>,
        task_id: &str,
        responses: impl IntoIterator<Item = (String, serde_json::Value)>,
    ) -> Result<(), McpError> {
        let (manager, _) = self.find(owner, task_id)?;
        manager.update_task(task_id, responses)
    }

    /// The ids of tasks that changed in a way clients are told of, from now on.
    pub fn changes(&self) -> broadcast::Receiver<String> {
        self.changes.subscribe()
    }
}

/// The ids among `ended` (each task's owner, id and end) past each owner's `keep` most
/// recently ended.
fn past_the_bound<K: std::hash::Hash + Eq>(
    ended: impl Iterator<Item = (K, String, Instant)>,
    keep: usize,
) -> Vec<String> {
    let mut by_owner: HashMap<K, Vec<(Instant, String)>> = HashMap::new();
    for (owner, id, at) in ended {
        by_owner.entry(owner).or_default().push((at, id));
    }
    by_owner
        .into_values()
        .flat_map(|mut ended| {
            // Newest first: what follows the first `keep` goes.
            ended.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
            ended.into_iter().skip(keep).map(|(_, id)| id)
        })
        .collect()
}

/// What a call left running that a task would follow, with what the call's window saw (the
/// task stands in for its result: the model has read none of it).
pub enum Unfinished {
    /// exec_command's running session, and its window.
    Session(i32, Box<uexec_core::Snapshot>),
    /// wait's request, the sessions its window left unsatisfied, and what it saw of each.
    Wait(
        uexec_core::WaitRequest,
        Vec<i32>,
        crate::tools::wait::Waited,
    ),
}

/// What a task starts from, besides what the call left running.
pub struct Start<'a> {
    pub store: Arc<uexec_core::SessionStore>,
    pub config: uexec_core::StoreConfig,
    pub dialect: crate::tools::parse::Dialect,
    /// Results carry `structuredContent` (`--structured`); otherwise the text alone.
    pub structured: bool,
    pub context: &'a RequestContext<RoleServer>,
}

impl Tasks<uexec_core::SessionStore> {
    /// The task that follows what the call left running; the answer to the call.
    pub fn start(&self, unfinished: Unfinished, start: Start<'_>) -> CreateTaskResult {
        let Start {
            store,
            config,
            dialect,
            structured,
            context,
        } = start;
        // Told without asking: a client of the initialize handshake (a stateless one has no
        // connection to be told on: it listens, `subscriptions/listen`).
        let handshake =
            context.peer.peer_info().is_some() && context.meta.protocol_version().is_none();
        let peer = handshake.then(|| context.peer.clone());
        match unfinished {
            Unfinished::Session(session_id, window) => {
                let (elicits, opens_pages, pages_by_form) = asks(context);
                self.create(Follow {
                    store,
                    session_id,
                    window: *window,
                    config,
                    dialect,
                    structured,
                    peer,
                    elicits,
                    opens_pages,
                    pages_by_form,
                })
            }
            Unfinished::Wait(request, following, seen) => self.wait(Waiting {
                asks: asks(context),
                store,
                config,
                request,
                following,
                seen,
                structured,
                dialect,
                peer,
            }),
        }
    }
}

/// What a task may ask the person at this request's client ([`ask`]): form questions (it
/// declared form elicitation), a password page by URL (URL mode, on this machine), a
/// password page by a form's link (form mode only, on this machine).
fn asks(context: &RequestContext<RoleServer>) -> (bool, bool, bool) {
    let elicitation = context.client_capabilities().and_then(|c| c.elicitation);
    let here = on_this_machine(context);
    (
        elicitation
            .as_ref()
            .is_some_and(|e| e.form.is_some() || e.url.is_none()),
        elicitation.as_ref().is_some_and(|e| e.url.is_some()) && here,
        // Any elicitation without URL mode is form elicitation.
        elicitation.as_ref().is_some_and(|e| e.url.is_none()) && here,
    )
}

/// Whether the client of this request is on this machine (stdio and the daemon's socket
/// are; an HTTP client is when it came over loopback): a loopback page is of use to it.
fn on_this_machine(context: &RequestContext<RoleServer>) -> bool {
    match context.extensions.get::<axum::http::request::Parts>() {
        None => true,
        Some(parts) => parts
            .extensions
            .get::<uexec_net::Peer>()
            .is_some_and(|peer| peer.remote.ip().is_loopback()),
    }
}

/// The error for a task this owner does not have.
fn unknown(task_id: &str) -> McpError {
    McpError::invalid_params(
        format!("unknown task: {task_id}"),
        Some(json!({ "taskId": task_id })),
    )
}

/// `notifications/tasks` with `task`.
pub fn notification(task: DetailedTask) -> ServerNotification {
    ServerNotification::TaskStatusNotification(TaskStatusNotification::new(
        TaskStatusNotificationParams::from(task),
    ))
}

/// Waits for the manager to record a status `reached` accepts, then announces it: to the
/// listeners, and to `peer` (a client of the initialize handshake).
async fn settle(
    manager: TaskManager,
    id: String,
    reached: fn(TaskStatus) -> bool,
    changes: broadcast::Sender<String>,
    peer: Option<Peer<RoleServer>>,
    track: Arc<Track>,
) {
    let deadline = tokio::time::Instant::now() + SETTLE_LIMIT;
    let mut pause = Duration::from_micros(100);
    for turn in 0.. {
        match manager.get_task(&id) {
            Ok(mut task) if reached(task.status()) => {
                track.dress(&mut task.task);
                let _ = changes.send(id);
                if let Some(peer) = peer {
                    let _ = peer.send_notification(notification(task)).await;
                }
                return;
            }
            Ok(_) if turn < SETTLE_TURNS => tokio::task::yield_now().await,
            Ok(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Ok(_) | Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::CallToolResult;

    #[tokio::test]
    async fn the_table_forgets_the_tasks_past_their_time() {
        let tasks: Tasks<()> = Tasks::default();
        let owner = Arc::new(());
        let short = || TaskOptions::new().with_ttl_ms(1u64);
        let done = |_context: TaskContext| -> TaskFuture {
            Box::pin(async { Ok(CallToolResult::success(Vec::new())) })
        };
        for _ in 0..300 {
            tasks.spawn_job(&owner, short(), None, done);
            // Past the 1 ms time to live of those before (and their retention after it).
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        let kept = tasks.lock().len();
        assert!(kept <= 10, "{kept} entries kept");
    }

    #[tokio::test]
    async fn another_owners_task_is_unknown() {
        let tasks: Tasks<u8> = Tasks::default();
        let (mine, theirs) = (Arc::new(1), Arc::new(2));
        let pending = |_context: TaskContext| -> TaskFuture { Box::pin(std::future::pending()) };
        let id = tasks
            .spawn_job(&mine, TaskOptions::new(), None, pending)
            .task
            .task_id;
        assert!(tasks.get(&mine, &id).is_ok());
        let error = tasks.get(&theirs, &id).expect_err("not theirs");
        assert!(error.message.contains(&id), "{error:?}");
        assert!(tasks.cancel(&theirs, &id).is_err());
    }

    #[tokio::test]
    async fn an_owner_keeps_only_its_newest_ended_tasks() {
        let tasks: Tasks<u8> = Tasks::default();
        let (mine, theirs) = (Arc::new(1), Arc::new(2));
        // A task of `owner`'s that ends at once, once it ended.
        let ended = |owner: &Arc<u8>| {
            let done = |_context: TaskContext, _pulse: Pulse| -> TaskFuture {
                Box::pin(async { Ok(CallToolResult::success(Vec::new())) })
            };
            let id = tasks
                .spawn_followed(owner, "working".into(), None, done)
                .task
                .task_id;
            let (tasks, owner) = (tasks.clone(), owner.clone());
            async move {
                while !tasks
                    .detailed(&owner, &id)
                    .expect("known")
                    .status()
                    .is_terminal()
                {
                    tokio::task::yield_now().await;
                }
                id
            }
        };
        let their_id = ended(&theirs).await;
        let mut mine_ids = Vec::new();
        for _ in 0..ENDED_KEPT + 10 {
            mine_ids.push(ended(&mine).await);
        }
        // One more spawn forgets what is past the bound (its own task not ended yet).
        ended(&mine).await;
        let known = |id: &String| tasks.get(&mine, id).is_ok();
        let kept = mine_ids.iter().filter(|id| known(id)).count();
        assert_eq!(kept, ENDED_KEPT, "{kept} of mine kept");
        assert!(mine_ids[..10].iter().all(|id| !known(id)), "the oldest go");
        assert!(mine_ids[10..].iter().all(known), "the newest stay");
        assert!(
            tasks.get(&theirs, &their_id).is_ok(),
            "another owner's own bound"
        );
        assert!(tasks.lock().len() <= ENDED_KEPT + 2);
    }

    #[test]
    fn the_oldest_ended_go_past_each_owners_bound() {
        let now = Instant::now();
        let at = |s: u64| now + Duration::from_secs(s);
        let ended = [
            ('a', "a1".to_owned(), at(1)),
            ('a', "a3".to_owned(), at(3)),
            ('b', "b1".to_owned(), at(1)),
            ('a', "a2".to_owned(), at(2)),
        ];
        let mut gone = past_the_bound(ended.clone().into_iter(), 2);
        gone.sort();
        assert_eq!(gone, ["a1"]);
        assert!(past_the_bound(ended.into_iter(), 3).is_empty());
    }

    #[test]
    fn the_poll_interval_grows_with_the_quiet() {
        assert_eq!(poll_interval(Duration::ZERO), POLL_MIN_MS);
        assert_eq!(poll_interval(Duration::from_secs(8)), 4_000);
        assert_eq!(poll_interval(Duration::from_secs(600)), POLL_MAX_MS);
    }
}
