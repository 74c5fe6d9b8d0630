//! Which store a request's sessions live in.
//!
//! Over stdio there is one client and one store. Over HTTP the 2026-07 protocol is stateless:
//! there is no transport session to hang a store on, so a store belongs to a *principal*, the
//! bearer token the request was authenticated with (`--token` may be given several times, one
//! per client). Sessions are then addressed by uexec's own ids inside that principal's store:
//! one client can neither list nor poll nor kill another's sessions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::request::Parts;
use rmcp::model::Extensions;
use uexec_core::SessionStore;

/// The principal an HTTP request was authenticated as (set by the bearer check).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal(pub String);

impl Principal {
    /// The principal of bearer token `token`: `token-` and a fingerprint of it (48 bits of a
    /// SHA-256), never the token itself. The same token is the same principal whatever its
    /// place among the `--token` flags, and after a restart (the daemon's owners outlive
    /// this process).
    pub fn of_token(token: &str) -> Self {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(format!("uexec principal\0{token}"));
        let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
        Self(format!("token-{hex}"))
    }
}

/// Principal of requests that carry no token (loopback without `--token`).
const ANONYMOUS: &str = "anonymous";

type StoreFactory = dyn Fn() -> Arc<SessionStore> + Send + Sync;

/// The stores of a server.
#[derive(Clone)]
pub enum Stores {
    /// One store for everything (stdio).
    Single(Arc<SessionStore>),
    /// One store per principal, made on first use (HTTP).
    PerPrincipal(Arc<PrincipalStores>),
    /// A person at the daemon: commands run in `own`, and every owner's sessions are theirs
    /// to see, poll, type into and kill, found by id.
    Person {
        own: Arc<SessionStore>,
        owners: Arc<OwnerTable>,
    },
}

/// The daemon's stores, one per owner, by owner name.
#[derive(Default)]
pub struct OwnerTable {
    stores: Mutex<std::collections::BTreeMap<String, Arc<SessionStore>>>,
}

impl OwnerTable {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<String, Arc<SessionStore>>> {
        self.stores
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The store of `owner`, made by `make` on first use.
    pub fn get_or_make(
        &self,
        owner: &str,
        make: impl FnOnce() -> Result<Arc<SessionStore>, String>,
    ) -> Result<Arc<SessionStore>, String> {
        let mut stores = self.lock();
        if let Some(store) = stores.get(owner) {
            return Ok(store.clone());
        }
        let store = make()?;
        stores.insert(owner.to_owned(), store.clone());
        Ok(store)
    }

    /// Every owner and its store, by name.
    pub fn all(&self) -> Vec<(String, Arc<SessionStore>)> {
        self.lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The owner and store holding session `id`.
    pub fn find(&self, id: i32) -> Option<(String, Arc<SessionStore>)> {
        let stores = self.lock();
        stores
            .iter()
            .find(|(_, store)| store.contains(id))
            .or_else(|| stores.iter().find(|(_, store)| store.knows(id)))
            .map(|(k, v)| (k.clone(), v.clone()))
    }
}

pub struct PrincipalStores {
    make: Box<StoreFactory>,
    stores: Mutex<HashMap<String, Arc<SessionStore>>>,
}

impl Stores {
    pub fn per_principal(make: impl Fn() -> Arc<SessionStore> + Send + Sync + 'static) -> Self {
        Self::PerPrincipal(Arc::new(PrincipalStores {
            make: Box::new(make),
            stores: Mutex::new(HashMap::new()),
        }))
    }

    /// The store that holds session `id` for this server's client, when the client may
    /// reach other stores than its own (a person at the daemon).
    pub fn for_session(&self, id: i32) -> Option<Arc<SessionStore>> {
        match self {
            Stores::Person { owners, .. } => owners.find(id).map(|(_, store)| store),
            _ => None,
        }
    }

    /// The daemon's owners, when this client is a person.
    pub fn owners(&self) -> Option<&Arc<OwnerTable>> {
        match self {
            Stores::Person { owners, .. } => Some(owners),
            _ => None,
        }
    }

    /// The store of the request whose extensions these are.
    pub fn for_request(&self, extensions: &Extensions) -> Arc<SessionStore> {
        match self {
            Stores::Single(store) => store.clone(),
            Stores::Person { own, .. } => own.clone(),
            Stores::PerPrincipal(p) => {
                let principal = extensions
                    .get::<Parts>()
                    .and_then(|parts| parts.extensions.get::<Principal>())
                    .map_or(ANONYMOUS, |p| p.0.as_str());
                let mut stores = p
                    .stores
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                stores
                    .entry(principal.to_owned())
                    .or_insert_with(|| (p.make)())
                    .clone()
            }
        }
    }

    /// Shuts every store down (kills every session).
    pub fn shutdown(&self) {
        match self {
            Stores::Single(store) | Stores::Person { own: store, .. } => store.shutdown(),
            Stores::PerPrincipal(p) => {
                let stores = p
                    .stores
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                for store in stores.values() {
                    store.shutdown();
                }
            }
        }
    }
}
