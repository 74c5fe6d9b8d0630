//! Login semantics at non-login cost: a *shell snapshot* of what a login shell's profile did.
//!
//! `login: true` means `shell -lc CMD` (SPEC §2), and real profiles (pyenv, nvm, conda) make
//! that cost 100–500 ms per command. A snapshot runs the login shell once, records what its
//! profile left behind, and later login commands start a plain `shell -c CMD` that gets the
//! same state without reading a profile. To the command it must look the same: the same
//! environment (PATH included), functions, aliases and shell options, the same `$0`, `$#`,
//! exit codes, and `CMD` reaching the shell byte for byte.
//!
//! 1. **Which shells.** bash (by name and by the binary it resolves to) gets a full snapshot;
//!    dash (`sh` here) has no way to list functions, so it gets the environment only. Any
//!    other shell (zsh, fish, `sh` that is bash in POSIX mode) keeps its real login shell.
//! 2. **Build.** The first login command of a (shell, environment) — the environment holds
//!    HOME and the user — starts `shell -l -c DUMP` in the background, stdin `/dev/null`, in
//!    its own process group, with a deadline ([`ShellSnapshotOptions::build_timeout`]). `DUMP`
//!    runs after the profile and writes, into a 0600 file of a private 0700 runtime
//!    directory, the exported variables (`env -0`) and for bash `shopt -p`, `declare -f`,
//!    `alias -p` and `set +o`. The first command waits for that build (bounded by the same
//!    deadline), so the profile runs once, not twice.
//! 3. **Check and use.** A new bash snapshot is sourced once by a plain `bash -c`; one that
//!    does not load silently and completely is not used (a failed build). The variables
//!    become the spawn's environment, kept in memory (secret-looking names the profile set
//!    are dropped, SPEC §9; the dump that carried them is deleted once read), minus those
//!    the shell sets itself (`PWD`, `OLDPWD`, `SHLVL`, `_`). bash's shell state goes to a
//!    0600 script that the command's shell reads through `BASH_ENV` before it parses `CMD`,
//!    which is the `-c` argument unchanged; so an alias the profile defined expands in `CMD`
//!    exactly when it would after a real login (`expand_aliases` as the profile left it).
//!    The script first puts `BASH_ENV` back as the profile left it, then defines functions
//!    (parsed with `extglob` on, as they may have been), then sets the profile's options.
//! 4. **Invalidation.** Each snapshot records device, inode, size and mtime of the profile
//!    files a login shell reads (and of `/etc/profile.d`); a change, or the TTL (which also
//!    covers files those source), makes it stale: the command runs as a real login shell
//!    and a rebuild starts in the background. A rebuild writes a new script; the old one is
//!    removed a minute later (a shell just started may still be about to read it). At most
//!    [`MAX_SHELL_SNAPSHOTS`] are kept, the oldest going first. An instance's files go
//!    when it is dropped; those of one killed before (SIGKILL) go at the next instance's
//!    first build in the same directory (`claim`).
//! 5. **Failure.** A build that fails, exits early (`exit` in a profile) or passes its
//!    deadline (a profile waiting on a prompt) is killed with its process group, logged, and
//!    login commands run as real login shells; a new build is tried after
//!    [`ShellSnapshotOptions::retry_after`].
//!
//! The caller's PATH survives a profile that resets it: a planned login carries it in
//! [`crate::env::CALLER_PATH_VAR`], and the replay's PATH is the caller's entries in their
//! order with what the profile added where it put it ([`crate::env::merge_path`]), as a real
//! login's first line makes it ([`crate::env::after_login_profile`]).
//!
//! Known differences from a real login: `shopt login_shell` is off; shell variables the
//! profile did not export (`PS1`, `HISTSIZE`) are not carried; secret-looking variables it
//! exported are dropped; a profile that depends on the working directory saw the first
//! command's.
//!
//! The room, by concern: this file is the table, one entry per (shell, environment), and
//! what it does with them (apply, start a build, evict, retire, use); `shell` says which
//! shells and which profile files (step 1); `build` runs one build and checks it (steps 2,
//! 3 and 5); `script` writes the shell text of steps 2 and 3 (pure); `options` is the public
//! tuning; `claim` holds an instance's lock file and sweeps those of instances gone (a
//! leaf). `build` uses the three leaves `shell`, `script` and `options`; no child uses
//! this file.

mod build;
mod claim;
mod options;
mod script;
mod shell;

pub use options::{
    ShellSnapshotOptions, MAX_SHELL_SNAPSHOTS, SHELL_SNAPSHOT_BUILD_TIMEOUT_MS,
    SHELL_SNAPSHOT_RETRY_SECS, SHELL_SNAPSHOT_TTL_SECS,
};

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::backend::{Program, SpawnSpec};
use crate::env::{looks_secret, merge_path, Environment, CALLER_PATH_VAR};
use crate::events::lock;
use build::{build, Built};
use shell::{shell_kind, ShellKind};

/// How long a replaced snapshot's script stays on disk.
const RETIRED_SCRIPT_GRACE_SECS: u64 = 60;

/// Variables the command's shell sets for itself: never taken from a snapshot.
const SHELL_OWNED_VARS: &[&str] = &["PWD", "OLDPWD", "SHLVL", "_"];

/// The snapshots of one process, shared by every store that holds a clone.
#[derive(Clone, Default)]
pub struct ShellSnapshots {
    inner: Arc<Inner>,
}

struct Inner {
    options: ShellSnapshotOptions,
    entries: Mutex<HashMap<u64, Entry>>,
    /// Part of every file name: instances in one runtime directory never share files.
    instance: u32,
    /// Numbers builds, so a rebuild never overwrites a script a starting shell may still
    /// be about to read.
    builds: AtomicU64,
    /// This instance's lock file in its directory, taken at its first build (`claim`).
    claim: OnceLock<Option<claim::Claim>>,
}

impl Default for Inner {
    fn default() -> Self {
        Self {
            options: ShellSnapshotOptions::default(),
            entries: Mutex::new(HashMap::new()),
            instance: rand::random(),
            builds: AtomicU64::new(0),
            claim: OnceLock::new(),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let entries = self.entries.get_mut().unwrap_or_else(|e| e.into_inner());
        for built in entries.values().filter_map(|e| e.current.as_ref()) {
            if let Some(script) = &built.script {
                let _ = std::fs::remove_file(script);
            }
        }
    }
}

impl fmt::Debug for ShellSnapshots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShellSnapshots")
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Entry {
    current: Option<Arc<Built>>,
    /// Present while a build runs; turns `true` when it ends.
    building: Option<watch::Receiver<bool>>,
    failed_at: Option<Instant>,
}

impl ShellSnapshots {
    pub fn new(options: ShellSnapshotOptions) -> Self {
        Self {
            inner: Arc::new(Inner {
                options,
                entries: Mutex::new(HashMap::new()),
                instance: rand::random(),
                builds: AtomicU64::new(0),
                claim: OnceLock::new(),
            }),
        }
    }

    /// The directory the snapshots are kept in: the configured one, else uexec's runtime
    /// directory (a sandbox keeps it read-only).
    pub fn dir(&self) -> PathBuf {
        self.inner
            .options
            .dir
            .clone()
            .unwrap_or_else(crate::fs::runtime_dir_path)
    }

    /// How many (shell, environment) snapshots are kept, built or not (at most
    /// [`MAX_SHELL_SNAPSHOTS`]).
    pub fn len(&self) -> usize {
        lock(&self.inner.entries).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Turns a planned local login shell (`Program::Shell { login: true }`, started by the
    /// backend itself, as itself) into a shell without a login that runs from its snapshot,
    /// when one is ready or can be built within the deadline; otherwise leaves the spawn as
    /// it is (a real login shell). True when changed. A launched spawn (a sandbox's) keeps
    /// its real login.
    pub async fn apply(&self, spec: &mut SpawnSpec) -> bool {
        let Program::Shell {
            shell, login: true, ..
        } = &spec.program
        else {
            return false;
        };
        if spec.launcher.is_some() || spec.arg0.is_some() {
            return false;
        }
        let Some((kind, program)) = shell_kind(shell, &spec.env) else {
            return false;
        };
        let key = snapshot_key(kind, &program, &spec.env);
        let waiting = {
            let mut entries = lock(&self.inner.entries);
            if !entries.contains_key(&key) && entries.len() >= MAX_SHELL_SNAPSHOTS {
                evict_oldest(&mut entries);
            }
            let entry = entries.entry(key).or_default();
            let options = &self.inner.options;
            if let Some(built) = &entry.current {
                if built.is_fresh(options.ttl) {
                    use_snapshot(built, spec);
                    return true;
                }
            }
            if entry
                .failed_at
                .is_some_and(|t| t.elapsed() < options.retry_after)
            {
                return false;
            }
            let stale = entry.current.is_some();
            let rx = match &entry.building {
                Some(rx) => rx.clone(),
                None => {
                    let rx = self.start_build(key, kind, program, spec);
                    entry.building = Some(rx.clone());
                    rx
                }
            };
            if stale {
                // Rebuilt in the background; this command logs in for real meanwhile.
                return false;
            }
            rx
        };
        let deadline = self.inner.options.build_timeout + Duration::from_secs(1);
        let mut waiting = waiting;
        let _ = tokio::time::timeout(deadline, waiting.wait_for(|done| *done)).await;
        let entries = lock(&self.inner.entries);
        match entries.get(&key).and_then(|e| e.current.as_ref()) {
            Some(built) if built.is_fresh(self.inner.options.ttl) => {
                use_snapshot(built, spec);
                true
            }
            _ => false,
        }
    }

    fn start_build(
        &self,
        key: u64,
        kind: ShellKind,
        program: PathBuf,
        spec: &SpawnSpec,
    ) -> watch::Receiver<bool> {
        let (tx, rx) = watch::channel(false);
        let this = self.clone();
        let env = spec.env.clone();
        let cwd = spec.cwd.clone();
        tokio::spawn(async move {
            let options = &this.inner.options;
            // What a uexec killed before its Drop left here goes first (`claim`).
            let dir = this.dir();
            this.inner
                .claim
                .get_or_init(|| claim::claim(&dir, this.inner.instance));
            let build_no = this.inner.builds.fetch_add(1, Ordering::Relaxed);
            let name = format!("{key:016x}-{:08x}-{build_no}", this.inner.instance);
            let result = build(kind, &program, &env, &cwd, options, &name).await;
            {
                let mut entries = lock(&this.inner.entries);
                let entry = entries.entry(key).or_default();
                entry.building = None;
                match result {
                    Ok(built) => {
                        tracing::debug!(shell = %program.display(), "shell snapshot built");
                        if let Some(old) = entry.current.take() {
                            retire(&old);
                        }
                        entry.current = Some(Arc::new(built));
                        entry.failed_at = None;
                    }
                    Err(e) => {
                        tracing::warn!(
                            shell = %program.display(),
                            "shell snapshot failed, login commands run a real login shell: {e}"
                        );
                        if let Some(old) = entry.current.take() {
                            retire(&old);
                        }
                        entry.failed_at = Some(Instant::now());
                    }
                }
            }
            let _ = tx.send(true);
        });
        rx
    }
}

/// Drops the idle entry built longest ago (a failed or never-built one first).
fn evict_oldest(entries: &mut HashMap<u64, Entry>) {
    let oldest = entries
        .iter()
        .filter(|(_, e)| e.building.is_none())
        .min_by_key(|(_, e)| e.current.as_ref().map(|b| b.built_at))
        .map(|(k, _)| *k);
    if let Some(old) = oldest
        .and_then(|k| entries.remove(&k))
        .and_then(|e| e.current)
    {
        retire(&old);
    }
}

/// Removes a replaced snapshot's script once no shell started before can still be about to
/// read it.
fn retire(old: &Built) {
    if let Some(script) = old.script.clone() {
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(RETIRED_SCRIPT_GRACE_SECS)).await;
            let _ = std::fs::remove_file(script);
        });
    }
}

fn use_snapshot(built: &Built, spec: &mut SpawnSpec) {
    let mut env = built.env.clone();
    for name in SHELL_OWNED_VARS {
        match spec.env.get(OsStr::new(name)) {
            Some(v) => env.insert((*name).into(), v.clone()),
            None => env.remove(OsStr::new(name)),
        };
    }
    // Secret-looking names are never taken from a snapshot: the planned value stands.
    env.retain(|k, _| !looks_secret(k));
    for (k, v) in &spec.env {
        if looks_secret(k) {
            env.insert(k.clone(), v.clone());
        }
    }
    // The caller's PATH with what the profile added (`crate::env::merge_path`), as a real
    // login's first line makes it; the marker goes, whatever the build's dump held.
    env.remove(OsStr::new(CALLER_PATH_VAR));
    if let Some(caller) = spec.env.get(OsStr::new(CALLER_PATH_VAR)) {
        let profile = env.get(OsStr::new("PATH")).cloned().unwrap_or_default();
        env.insert("PATH".into(), merge_path(caller, &profile));
    }
    if let Some(script) = &built.script {
        env.insert("BASH_ENV".into(), script.clone().into_os_string());
    }
    spec.env = env;
    if let Program::Shell { login, .. } = &mut spec.program {
        *login = false;
    }
}

fn snapshot_key(kind: ShellKind, program: &Path, env: &Environment) -> u64 {
    let mut h = DefaultHasher::new();
    (kind, program, env, uexec_sys::effective_uid()).hash(&mut h);
    h.finish()
}
