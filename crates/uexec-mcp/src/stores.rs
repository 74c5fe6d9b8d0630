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

    /// The store of the request whose extensions these are.
    pub fn for_request(&self, extensions: &Extensions) -> Arc<SessionStore> {
        match self {
            Stores::Single(store) => store.clone(),
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
            Stores::Single(store) => store.shutdown(),
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
