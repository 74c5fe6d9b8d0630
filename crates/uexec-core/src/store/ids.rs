//! Session ids: random in `MIN_SESSION_ID..MAX_SESSION_ID_EXCLUSIVE` (sequential from 1000
//! with `UEXEC_DETERMINISTIC_IDS=1`), unique across the stores sharing an [`IdSpace`], and
//! reserved before a spawn so that a cancelled call releases its id and a started session
//! never loses it; a session's name is reserved with its id, and is unique among the
//! store's running sessions.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use super::{SessionStore, StoreInner};
use crate::error::ExecError;
use crate::events::lock;
use crate::limits::{MAX_SESSION_ID_EXCLUSIVE, MIN_SESSION_ID};
use crate::request::check_session_name;

/// Session ids in use, shared by the stores that must not reuse each other's.
#[derive(Debug, Default)]
pub struct IdSpace(pub(super) Mutex<HashSet<i32>>);

impl SessionStore {
    /// Reserves an id, and `name` with it: a name is refused while a running session of the
    /// store (or a call starting one) has it.
    pub(super) fn reserve_id(
        self: &Arc<Self>,
        name: Option<&str>,
    ) -> Result<IdReservation, ExecError> {
        let mut inner = lock(&self.inner);
        if inner.shut_down {
            return Err(ExecError::ShutDown);
        }
        let running = inner
            .reserved
            .iter()
            .filter(|id| {
                inner
                    .sessions
                    .get(id)
                    .is_none_or(|e| !e.session.lifecycle().exited())
            })
            .count();
        let (limit, when_full) = (self.config.max_sessions, self.config.when_full);
        if crate::prune::refuses_another(running, limit, when_full) {
            return Err(ExecError::Full { running, limit });
        }
        if let Some(name) = name {
            check_session_name(name).map_err(|why| ExecError::invalid("name", why))?;
            if let Some(other) = inner.running_named(name) {
                return Err(ExecError::invalid(
                    "name",
                    format!("{name:?} is the name of session {other}, still running: give another"),
                ));
            }
        }
        let id = {
            let taken = lock(&inner.ids.0);
            if self.config.deterministic_ids {
                taken.iter().max().map_or(MIN_SESSION_ID, |max| max + 1)
            } else {
                loop {
                    let id = rand::random_range(MIN_SESSION_ID..MAX_SESSION_ID_EXCLUSIVE);
                    if !taken.contains(&id) {
                        break id;
                    }
                }
            }
        };
        inner.hold(id);
        if let Some(name) = name {
            inner.names.insert(id, name.to_owned());
        }
        Ok(IdReservation {
            store: self.clone(),
            id,
            held: true,
        })
    }

    pub(super) fn release_id(&self, id: i32) {
        let mut inner = lock(&self.inner);
        if !inner.sessions.contains_key(&id) {
            inner.release(id);
        }
    }
}

/// An id reserved for a call whose process is not started yet: released when the call is
/// dropped (cancelled) before it hands the id over.
pub(super) struct IdReservation {
    store: Arc<SessionStore>,
    pub(super) id: i32,
    held: bool,
}

impl IdReservation {
    /// The id now belongs to a started session (and its first-call guard).
    pub(super) fn hand_over(mut self) {
        self.held = false;
    }
}

impl Drop for IdReservation {
    fn drop(&mut self) {
        if self.held {
            self.store.release_id(self.id);
        }
    }
}

impl StoreInner {
    /// The running session (or call starting one) named `name`.
    fn running_named(&self, name: &str) -> Option<i32> {
        self.names
            .iter()
            .filter(|(_, n)| n.as_str() == name)
            .map(|(id, _)| *id)
            .find(|id| {
                self.sessions
                    .get(id)
                    .is_none_or(|e| !e.session.lifecycle().exited())
            })
    }
}

pub(super) fn new_call_id() -> String {
    format!("call_{:016x}", rand::random::<u64>())
}
