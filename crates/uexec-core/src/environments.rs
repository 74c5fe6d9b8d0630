//! Named places to run commands besides a store's own backend (`environment_id`).
//!
//! Why a shared, changeable table rather than a map fixed at start-up: the set of environments
//! may come from a file that is edited while the server runs (pods come and go), and every
//! store of a server (one per HTTP principal) must see the same set at once. So:
//! 1. the face builds one [`Environments`] and hands a clone to every store;
//! 2. a reload calls [`Environments::replace`] with the new table; the stores look names up
//!    at each `exec_command`, so new sessions use the new set at once;
//! 3. sessions already running hold their own handles on their process: replacing the table
//!    leaves them alone;
//! 4. a name that is known but cannot take sessions (removed from the file, or configured in a
//!    way this build cannot serve) keeps a *refusal*: the reason new sessions there get;
//! 5. a change of the available names bumps a counter that faces watch ([`Environments::changes`])
//!    to tell their clients the tool list changed.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use tokio::sync::watch;

use crate::backend::Backend;

/// The environments of a server, shared by its stores (a cheap `Clone` handle).
#[derive(Clone)]
pub struct Environments {
    table: Arc<RwLock<Table>>,
    /// Bumped when the available names change.
    changes: Arc<watch::Sender<u64>>,
}

impl Default for Environments {
    fn default() -> Self {
        Self {
            table: Arc::default(),
            changes: Arc::new(watch::channel(0).0),
        }
    }
}

#[derive(Default)]
struct Table {
    available: BTreeMap<String, Arc<dyn Backend>>,
    /// Names that refuse new sessions, with the reason.
    refused: BTreeMap<String, String>,
}

/// What a name stands for.
pub enum Lookup {
    Available(Arc<dyn Backend>),
    /// Known but refusing new sessions (the reason).
    Refused(String),
    Unknown,
}

impl Environments {
    /// A table of available environments.
    pub fn new(available: impl IntoIterator<Item = (String, Arc<dyn Backend>)>) -> Self {
        let env = Self::default();
        env.replace(available.into_iter().collect(), BTreeMap::new());
        env
    }

    /// Replaces the whole table (available environments, and refused names with reasons).
    pub fn replace(
        &self,
        available: BTreeMap<String, Arc<dyn Backend>>,
        refused: BTreeMap<String, String>,
    ) {
        let mut table = self
            .table
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let changed = !table.available.keys().eq(available.keys());
        *table = Table { available, refused };
        drop(table);
        if changed {
            self.changes.send_modify(|n| *n += 1);
        }
    }

    /// Changes whenever the available names change.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Names of the available environments, sorted.
    pub fn names(&self) -> Vec<String> {
        self.read().available.keys().cloned().collect()
    }

    pub fn lookup(&self, name: &str) -> Lookup {
        let table = self.read();
        if let Some(backend) = table.available.get(name) {
            Lookup::Available(backend.clone())
        } else if let Some(reason) = table.refused.get(name) {
            Lookup::Refused(reason.clone())
        } else {
            Lookup::Unknown
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Table> {
        self.table
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl std::fmt::Debug for Environments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Environments")
            .field("available", &self.names())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LocalBackend;

    #[test]
    fn a_replaced_table_is_seen_by_every_clone() {
        let env = Environments::new([("a".to_owned(), Arc::new(LocalBackend) as Arc<dyn Backend>)]);
        let other = env.clone();
        let mut changes = other.changes();
        assert_eq!(other.names(), ["a"]);
        env.replace(
            BTreeMap::from([("b".to_owned(), Arc::new(LocalBackend) as Arc<dyn Backend>)]),
            BTreeMap::from([("a".to_owned(), "removed".to_owned())]),
        );
        assert_eq!(other.names(), ["b"]);
        assert!(matches!(other.lookup("a"), Lookup::Refused(r) if r == "removed"));
        assert!(matches!(other.lookup("b"), Lookup::Available(_)));
        assert!(matches!(other.lookup("c"), Lookup::Unknown));
        assert!(changes.has_changed().unwrap());
        changes.mark_unchanged();
        env.replace(
            BTreeMap::from([("b".to_owned(), Arc::new(LocalBackend) as Arc<dyn Backend>)]),
            BTreeMap::new(),
        );
        assert!(!changes.has_changed().unwrap(), "same names, no change");
    }
}
