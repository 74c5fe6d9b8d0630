//! How long an agent's sessions outlive it. In its own process, an agent's store is shut
//! down when its client goes away (SPEC §6); in the daemon the owner's store stays, for the
//! next connection of the same owner and for people, but its running sessions do not
//! outlive every client of the owner by more than the owner's *linger*:
//!
//! 1. each MCP connection of an owner holds a [`Lease`] on it while it lasts;
//! 2. when the last one is dropped, the owner's running sessions are ended
//!    ([`SessionStore::end_unkept`]) after the linger that connection brought
//!    (`uexec mcp --linger`; 0, the default, at once), unless a new connection of the
//!    owner came meanwhile; `forever`, never;
//! 3. a session a person kept (`uexec keep`) is passed over, and so is every session of a
//!    person: `@person`'s connections take no lease.
//!
//! The owner's next result says what happened to each (an exit notice, "stopped by uexec,
//! as its client went away").

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use uexec_core::SessionStore;
use uexec_protocol::daemon::Linger;

/// Who ends an owner's sessions when its clients are gone, as its exit notices say it.
pub const ENDED_BY: &str = "uexec, as its client went away";

/// The owners' connections, counted.
#[derive(Default)]
pub struct Leases {
    owners: Mutex<HashMap<String, Count>>,
}

#[derive(Default)]
struct Count {
    connections: usize,
    /// Bumped whenever the count falls to 0: a linger that began at another fall is stale.
    falls: u64,
}

/// One connection's hold on its owner's sessions, released when dropped.
pub struct Lease {
    leases: Arc<Leases>,
    owner: String,
    linger: Linger,
    store: Arc<SessionStore>,
}

impl Leases {
    /// A lease of a new connection of `owner`, whose sessions are in `store`; `linger` is
    /// the connection's, applied if it is the last to go.
    pub fn hold(self: &Arc<Self>, owner: &str, linger: Linger, store: Arc<SessionStore>) -> Lease {
        self.lock().entry(owner.to_owned()).or_default().connections += 1;
        Lease {
            leases: self.clone(),
            owner: owner.to_owned(),
            linger,
            store,
        }
    }

    /// The connections of each owner that has any, by owner name.
    pub fn connections(&self) -> std::collections::BTreeMap<String, usize> {
        self.lock()
            .iter()
            .filter(|(_, c)| c.connections > 0)
            .map(|(owner, c)| (owner.clone(), c.connections))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Count>> {
        self.owners.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `owner` has had no connection since its count fell to 0 for the `fall`th
    /// time.
    fn still_gone(&self, owner: &str, fall: u64) -> bool {
        self.lock()
            .get(owner)
            .is_some_and(|c| c.connections == 0 && c.falls == fall)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let fall = {
            let mut owners = self.leases.lock();
            let Some(count) = owners.get_mut(&self.owner) else {
                return;
            };
            count.connections = count.connections.saturating_sub(1);
            if count.connections > 0 {
                return;
            }
            count.falls += 1;
            count.falls
        };
        let wait = match self.linger {
            Linger::Forever => return,
            Linger::Seconds(seconds) => Duration::from_secs(seconds),
        };
        let (leases, owner, store) = (self.leases.clone(), self.owner.clone(), self.store.clone());
        let end = move || {
            if leases.still_gone(&owner, fall) {
                let ended = store.end_unkept(ENDED_BY);
                if !ended.is_empty() {
                    tracing::info!(%owner, ?ended, linger_s = wait.as_secs(), "the owner's last client went away: ended its sessions");
                }
            }
        };
        if wait.is_zero() {
            end();
        } else if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                tokio::time::sleep(wait).await;
                end();
            });
        }
    }
}
