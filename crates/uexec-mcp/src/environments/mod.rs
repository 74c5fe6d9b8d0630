//! The environments of `uexec mcp`: exec servers named on the command line
//! (`--environment NAME=URL`) and in an environments file (`--environments FILE`, Codex's
//! `environments.toml`), kept in one [`Environments`] table that every store reads.
//!
//! 1. Start-up: the file is read and checked (a bad file is an error naming the file, the
//!    line and the field); the servers of `--environment` and of the file are dialled in the
//!    background ([`EnvironmentBackend::warm_up`]): one that is down, or whose certificate is
//!    refused, is logged and dialled again at its next `exec_command`, whose error names it.
//! 2. Reload: every [`RELOAD_POLL_MS`] the file's mtime, inode and length are compared with the
//!    last ones (a poll on a timer: cheap, works on every filesystem and with the atomic
//!    renames editors and ConfigMap updates do). A change re-reads the file; a bad file is
//!    logged and the environments stay as they were.
//! 3. A new table keeps the backend of every environment whose endpoint did not change (its
//!    connection and sessions go on), makes new ones for new or changed entries, and makes
//!    every environment that left the file refuse new sessions with `was removed from FILE`;
//!    sessions already running there are left alone (they hold their backend).
//! 4. `program` entries (an exec server on a child's stdio) are listed as refused: uexec's
//!    client reaches exec servers by URL only.

pub mod backend;
pub mod file;
pub(crate) mod start;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

use uexec_client::ClientConfig;
use uexec_core::{Backend, Environments};

use backend::{Endpoint, EnvironmentBackend};
use file::{Entry, FileError, Target};

/// How often the environments file is checked for a change.
pub const RELOAD_POLL_MS: u64 = 1_000;

/// What every file environment shares: tokens and the client's settings.
#[derive(Debug, Clone, Default)]
pub struct Defaults {
    /// Tokens by environment name; `""` is the default one.
    pub tokens: HashMap<String, String>,
    pub client: ClientConfig,
}

/// The environments of a server, and the file they are reloaded from.
pub struct EnvironmentRegistry {
    table: Environments,
    /// From `--environment`: fixed for the life of the server.
    fixed: BTreeMap<String, Arc<dyn Backend>>,
    file: Option<PathBuf>,
    defaults: Defaults,
    state: Mutex<FileState>,
}

#[derive(Default)]
struct FileState {
    /// The file's environments now, by id.
    current: BTreeMap<String, Arc<EnvironmentBackend>>,
    /// Ids that left the file (they refuse new sessions). Grows only with names that were
    /// once in the file, which an operator wrote: bounded in practice.
    removed: BTreeMap<String, String>,
}

impl EnvironmentRegistry {
    /// The registry of the `--environment` servers and, when given, the file's (as
    /// [`file::load`] read it).
    pub fn new(
        fixed: BTreeMap<String, Arc<dyn Backend>>,
        file: Option<(PathBuf, Vec<Entry>)>,
        defaults: Defaults,
    ) -> Result<Arc<Self>, FileError> {
        let (path, entries) = file.unzip();
        let registry = Arc::new(Self {
            table: Environments::new(fixed.clone()),
            fixed,
            file: path,
            defaults,
            state: Mutex::new(FileState::default()),
        });
        if let (Some(path), Some(entries)) = (&registry.file, entries) {
            registry.apply(path, entries).map_err(|message| FileError {
                path: path.clone(),
                message,
            })?;
        }
        Ok(registry)
    }

    /// The table the stores read.
    pub fn environments(&self) -> Environments {
        self.table.clone()
    }

    /// Whether exec_command takes an `environment_id` (some environment may come later).
    pub fn any_configured(&self) -> bool {
        !self.fixed.is_empty() || self.file.is_some()
    }

    /// Checks the file every [`RELOAD_POLL_MS`] until the registry is dropped.
    pub fn watch(self: &Arc<Self>) {
        let Some(path) = self.file.clone() else {
            return;
        };
        let registry = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut last = fingerprint(&path);
            let mut tick = tokio::time::interval(Duration::from_millis(RELOAD_POLL_MS));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let now = fingerprint(&path);
                if now == last {
                    continue;
                }
                last = now;
                let Some(registry) = Weak::upgrade(&registry) else {
                    return;
                };
                registry.reload(&path);
            }
        });
    }

    fn reload(&self, path: &Path) {
        match file::load(path)
            .map_err(|e| e.to_string())
            .and_then(|entries| {
                self.apply(path, entries)
                    .map_err(|m| format!("environments file {}: {m}", path.display()))
            }) {
            Ok(()) => tracing::info!(
                file = %path.display(),
                environments = ?self.table.names(),
                "environments reloaded"
            ),
            Err(e) => tracing::error!("{e}; the environments stay as they were"),
        }
    }

    /// Makes `entries` the file's environments (see the module docs, step 3).
    fn apply(&self, path: &Path, entries: Vec<Entry>) -> Result<(), String> {
        let mut state = self.lock();
        let mut available = self.fixed.clone();
        let mut refused = BTreeMap::new();
        let mut current = BTreeMap::new();
        let mut fresh = Vec::new();
        for entry in &entries {
            if self.fixed.contains_key(&entry.id) {
                return Err(format!(
                    "environment `{}` is also given with --environment",
                    entry.id
                ));
            }
            match &entry.target {
                Target::Url {
                    url,
                    token,
                    connect_timeout,
                } => {
                    let tokens = &self.defaults.tokens;
                    let endpoint = Endpoint {
                        url: url.clone(),
                        token: tokens
                            .get(&entry.id)
                            .or(token.as_ref())
                            .or_else(|| tokens.get(""))
                            .cloned(),
                        connect_timeout: *connect_timeout,
                        client: self.defaults.client.clone(),
                    };
                    let backend = match state.current.get(&entry.id) {
                        Some(b) if *b.endpoint() == endpoint => b.clone(),
                        _ => {
                            let b = EnvironmentBackend::new(&entry.id, endpoint);
                            fresh.push(b.clone());
                            b
                        }
                    };
                    available.insert(entry.id.clone(), backend.clone() as Arc<dyn Backend>);
                    current.insert(entry.id.clone(), backend);
                }
                Target::Program { program, .. } => {
                    tracing::warn!(
                        environment = %entry.id,
                        "`program` environments are not supported by uexec; give it a url"
                    );
                    refused.insert(
                        entry.id.clone(),
                        format!(
                            "runs its exec server as a program ({program}) on stdio, which uexec does not support: give it a ws:// or wss:// url in {}",
                            path.display()
                        ),
                    );
                }
            }
        }
        let mut removed = std::mem::take(&mut state.removed);
        removed.extend(
            state
                .current
                .keys()
                .map(|id| (id.clone(), format!("was removed from {}", path.display()))),
        );
        // A set, not a scan of `entries` per id: a long file would make this quadratic.
        let listed: HashSet<&str> = entries.iter().map(|e| e.id.as_str()).collect();
        removed.retain(|id, _| !listed.contains(id.as_str()));
        for (id, reason) in &removed {
            refused.entry(id.clone()).or_insert_with(|| reason.clone());
        }
        state.removed = removed;
        state.current = current;
        self.table.replace(available, refused);
        drop(state);
        for backend in fresh {
            backend.warm_up();
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FileState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What tells a changed file: its mtime, inode and length (`None` when it cannot be read).
fn fingerprint(path: &Path) -> Option<(Option<SystemTime>, u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok(), meta.ino(), meta.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use uexec_core::environments::Lookup;

    fn entries(prefix: &str, count: usize) -> Vec<Entry> {
        (0..count)
            .map(|i| Entry {
                id: format!("{prefix}-{i}"),
                target: Target::Url {
                    url: "ws://127.0.0.1:1".to_owned(),
                    token: None,
                    connect_timeout: None,
                },
            })
            .collect()
    }

    /// Regression: which environments left the file was found by scanning the new entries
    /// once per old one (quadratic in the file's length).
    #[tokio::test]
    async fn a_reload_that_replaces_twenty_thousand_environments_refuses_every_old_one() {
        let path = PathBuf::from("envs.toml");
        let old = entries("old", 20_000);
        let registry = EnvironmentRegistry::new(
            BTreeMap::new(),
            Some((path.clone(), old)),
            Defaults::default(),
        )
        .unwrap();
        registry.apply(&path, entries("new", 20_000)).unwrap();
        let table = registry.environments();
        let names = table.names();
        assert_eq!(names.len(), 20_000);
        assert!(
            names.iter().all(|n| n.starts_with("new-")),
            "{:?}",
            &names[..3]
        );
        for i in [0, 19_999] {
            assert!(
                matches!(table.lookup(&format!("old-{i}")), Lookup::Refused(r) if r == "was removed from envs.toml"),
                "old-{i}"
            );
            assert!(matches!(
                table.lookup(&format!("new-{i}")),
                Lookup::Available(_)
            ));
        }
        // An id that comes back is available again, and no longer refused.
        let mut back = entries("new", 20_000);
        back.extend(entries("old", 1));
        registry.apply(&path, back).unwrap();
        assert!(matches!(table.lookup("old-0"), Lookup::Available(_)));
        assert!(matches!(table.lookup("old-1"), Lookup::Refused(_)));
    }
}
