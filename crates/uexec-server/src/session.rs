//! A session: the processes one client started, and the connection it is attached to.
//!
//! A session outlives its connection. Its attachment moves through
//! 1. `Attached` to one live connection (whose queue gets the session's notifications),
//! 2. `Detached` when that connection ends (events are then only retained, not pushed),
//!    numbered by a generation so a stale expiry timer cannot end a session that was resumed
//!    and detached again meanwhile,
//! 3. `Attached` again on `initialize {resumeSessionId}`, or `Ended` when the registry expires
//!    it or shuts down, which kills all its processes.
//!
//! Process ids are reserved before the spawn ([`Reservation`]): a concurrent duplicate start
//! is refused, and a failed spawn frees the id again (the guard's `Drop`).

use std::collections::HashMap;
use std::sync::Mutex;

use serde::Serialize;
use uexec_protocol::Method;

use crate::config::lock;
use crate::outbound::Outbound;
use crate::process::ProcessHandle;

/// Identifies one connection for the lifetime of the server.
pub type ConnectionId = u64;

/// Where a session's notifications go.
#[derive(Debug, Clone)]
pub enum Attachment {
    Attached {
        connection: ConnectionId,
        outbound: Outbound,
    },
    Detached {
        generation: u64,
    },
    Ended,
}

/// What a process id refers to in a session.
#[derive(Debug, Clone)]
pub enum Lookup {
    Unknown,
    /// Reserved, the spawn is under way.
    Starting,
    Running(ProcessHandle),
}

#[derive(Debug)]
enum Slot {
    Starting,
    Running(ProcessHandle),
}

/// One client's processes and attachment.
#[derive(Debug)]
pub struct Session {
    id: String,
    processes: Mutex<HashMap<String, Slot>>,
    attachment: Mutex<Attachment>,
}

impl Session {
    /// A session attached to `connection`.
    pub fn new(id: String, connection: ConnectionId, outbound: Outbound) -> Self {
        Self {
            id,
            processes: Mutex::new(HashMap::new()),
            attachment: Mutex::new(Attachment::Attached {
                connection,
                outbound,
            }),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn attachment(&self) -> Attachment {
        lock(&self.attachment).clone()
    }

    pub(crate) fn set_attachment(&self, attachment: Attachment) {
        *lock(&self.attachment) = attachment;
    }

    /// Pushes a notification to the attached connection, if any.
    pub async fn notify<T: Serialize>(&self, method: Method, params: &T) {
        let outbound = match &*lock(&self.attachment) {
            Attachment::Attached { outbound, .. } => outbound.clone(),
            Attachment::Detached { .. } | Attachment::Ended => return,
        };
        outbound.notify(method, params).await;
    }

    /// Pushes a message to the attached connection, if any; `encode` runs only when attached
    /// (a detached session's output costs no encoding).
    pub async fn push_with(&self, encode: impl FnOnce() -> String) {
        let outbound = match &*lock(&self.attachment) {
            Attachment::Attached { outbound, .. } => outbound.clone(),
            Attachment::Detached { .. } | Attachment::Ended => return,
        };
        outbound.send_text(encode()).await;
    }

    /// Reserves a process id for a spawn; `None` if it is taken.
    pub fn reserve(&self, process_id: &str) -> Option<Reservation<'_>> {
        let mut processes = lock(&self.processes);
        if processes.contains_key(process_id) {
            return None;
        }
        processes.insert(process_id.to_string(), Slot::Starting);
        Some(Reservation {
            session: self,
            process_id: process_id.to_string(),
            committed: false,
        })
    }

    pub fn lookup(&self, process_id: &str) -> Lookup {
        match lock(&self.processes).get(process_id) {
            None => Lookup::Unknown,
            Some(Slot::Starting) => Lookup::Starting,
            Some(Slot::Running(handle)) => Lookup::Running(handle.clone()),
        }
    }

    /// Removes a process entry if it is still `handle` (an id can be reused after removal).
    pub fn remove_process(&self, handle: &ProcessHandle) {
        let mut processes = lock(&self.processes);
        if matches!(processes.get(handle.id()), Some(Slot::Running(h)) if h.same_as(handle)) {
            processes.remove(handle.id());
        }
    }

    /// Kills every process of the session and forgets them.
    pub fn kill_all(&self) {
        let drained: Vec<Slot> = lock(&self.processes)
            .drain()
            .map(|(_, slot)| slot)
            .collect();
        for slot in drained {
            if let Slot::Running(handle) = slot {
                handle.kill();
            }
        }
    }

    /// Adds this session's processes to `now` (those still starting are not counted).
    pub fn count_into(&self, now: &mut uexec_core::metrics::Now) {
        for slot in lock(&self.processes).values() {
            let Slot::Running(handle) = slot else {
                continue;
            };
            if handle.has_exited() {
                now.exited += 1;
                continue;
            }
            now.running += 1;
            if let Some(usage) = handle.usage() {
                now.cpu_seconds += usage.cpu_seconds();
                if let Some(bytes) = usage.memory_bytes {
                    now.memory_bytes = Some(now.memory_bytes.unwrap_or(0) + bytes);
                }
            }
        }
    }

    /// Number of process entries (running, exited or starting).
    pub fn process_count(&self) -> usize {
        lock(&self.processes).len()
    }
}

/// A reserved process id; dropped without [`Reservation::commit`], it frees the id.
#[derive(Debug)]
pub struct Reservation<'a> {
    session: &'a Session,
    process_id: String,
    committed: bool,
}

impl Reservation<'_> {
    /// Puts the spawned process under the reserved id (or kills it, should the session have
    /// ended during the spawn).
    pub fn commit(mut self, handle: ProcessHandle) {
        self.committed = true;
        // Look at the attachment under the process lock: `Registry::end` marks the session
        // ended *before* draining the processes, so either it sees this entry or we see it.
        let mut processes = lock(&self.session.processes);
        if matches!(*lock(&self.session.attachment), Attachment::Ended) {
            processes.remove(&self.process_id);
            drop(processes);
            handle.kill();
            return;
        }
        processes.insert(self.process_id.clone(), Slot::Running(handle));
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        let mut processes = lock(&self.session.processes);
        if matches!(processes.get(&self.process_id), Some(Slot::Starting)) {
            processes.remove(&self.process_id);
        }
    }
}
