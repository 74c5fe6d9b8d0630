//! Session ids: random in `MIN_SESSION_ID..MAX_SESSION_ID_EXCLUSIVE` (sequential from 1000
//! with `UEXEC_DETERMINISTIC_IDS=1`), unique across the stores sharing an [`IdSpace`], and
//! reserved before a spawn so that a cancelled call releases its id and a started session
//! never loses it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use super::SessionStore;
use crate::error::ExecError;
use crate::events::lock;
use crate::limits::{MAX_SESSION_ID_EXCLUSIVE, MIN_SESSION_ID};

/// Session ids in use, shared by the stores that must not reuse each other's.
#[derive(Debug, Default)]
pub struct IdSpace(pub(super) Mutex<HashSet<i32>>);

impl SessionStore {
    pub(super) fn reserve_id(self: &Arc<Self>) -> Result<IdReservation, ExecError> {
        let mut inner = lock(&self.inner);
        if inner.shut_down {
            return Err(ExecError::ShutDown);
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

pub(super) fn new_call_id() -> String {
    format!("call_{:016x}", rand::random::<u64>())
}
