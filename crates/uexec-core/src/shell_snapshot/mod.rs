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
//!    [`MAX_SHELL_SNAPSHOTS`] are kept, the oldest going first.
//! 5. **Failure.** A build that fails, exits early (`exit` in a profile) or passes its
//!    deadline (a profile waiting on a prompt) is killed with its process group, logged, and
//!    login commands run as real login shells; a new build is tried after
//!    [`ShellSnapshotOptions::retry_after`].
//!
//! Known differences from a real login: `shopt login_shell` is off; shell variables the
//! profile did not export (`PS1`, `HISTSIZE`) are not carried; secret-looking variables it
//! exported are dropped; a profile that depends on the working directory saw the first
//! command's.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::backend::local::find_program;
use crate::backend::{Program, SpawnSpec};
use crate::env::{looks_secret, Environment};
use crate::events::lock;

/// How long a profile may take before its snapshot is given up on.
pub const SHELL_SNAPSHOT_BUILD_TIMEOUT_MS: u64 = 5_000;
/// Age after which a snapshot is rebuilt even if no watched profile file changed.
pub const SHELL_SNAPSHOT_TTL_SECS: u64 = 30 * 60;
/// After a failed build, login commands run real login shells this long before a retry.
pub const SHELL_SNAPSHOT_RETRY_SECS: u64 = 5 * 60;
/// Snapshots kept per [`ShellSnapshots`]: one per distinct (shell, environment); an exec
/// server's clients may send a new environment with every command. Past the cap, the oldest
/// idle one goes (with its file).
pub const MAX_SHELL_SNAPSHOTS: usize = 16;
/// Deadline of the check that a new snapshot loads.
const SNAPSHOT_CHECK_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a replaced snapshot's script stays on disk.
const RETIRED_SCRIPT_GRACE_SECS: u64 = 60;
/// Cap on a dump file (the environment, functions and aliases of a profile).
const DUMP_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// Separates the environment from the shell state in a dump (NUL-framed: no variable or
/// function can contain a NUL).
const STATE_MARKER: &[u8] = b"\0UEXEC_SHELL_SNAPSHOT_STATE\0";

/// Variables the command's shell sets for itself: never taken from a snapshot.
const SHELL_OWNED_VARS: &[&str] = &["PWD", "OLDPWD", "SHLVL", "_"];

/// Tuning of [`ShellSnapshots`].
#[derive(Debug, Clone)]
pub struct ShellSnapshotOptions {
    pub build_timeout: Duration,
    pub ttl: Duration,
    pub retry_after: Duration,
    /// Where snapshots are kept; `None` = `$XDG_RUNTIME_DIR/uexec`, else a per-user
    /// directory under the temp dir.
    pub dir: Option<PathBuf>,
}

impl Default for ShellSnapshotOptions {
    fn default() -> Self {
        Self {
            build_timeout: Duration::from_millis(SHELL_SNAPSHOT_BUILD_TIMEOUT_MS),
            ttl: Duration::from_secs(SHELL_SNAPSHOT_TTL_SECS),
            retry_after: Duration::from_secs(SHELL_SNAPSHOT_RETRY_SECS),
            dir: None,
        }
    }
}

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
}

impl Default for Inner {
    fn default() -> Self {
        Self {
            options: ShellSnapshotOptions::default(),
            entries: Mutex::new(HashMap::new()),
            instance: rand::random(),
            builds: AtomicU64::new(0),
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

/// What a finished build gives a command.
struct Built {
    /// The spawn's environment (shell-owned and new secret-looking variables left out).
    env: Environment,
    /// bash only: the script `BASH_ENV` points at.
    script: Option<PathBuf>,
    stamps: Vec<FileStamp>,
    built_at: Instant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ShellKind {
    Bash,
    /// dash: the environment only.
    Dash,
}

/// A profile file as it was when a build started (`None`: it did not exist).
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    path: PathBuf,
    stamp: Option<(u64, u64, u64, i64, i64)>,
}

impl FileStamp {
    fn now(path: PathBuf) -> Self {
        let stamp = std::fs::metadata(&path)
            .ok()
            .map(|m| (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec()));
        Self { path, stamp }
    }

    fn unchanged(&self) -> bool {
        Self::now(self.path.clone()).stamp == self.stamp
    }
}

/// Why a build produced no snapshot.
#[derive(Debug, thiserror::Error)]
enum BuildError {
    #[error("runtime directory {}: {why}", path.display())]
    Dir { path: PathBuf, why: String },
    #[error("could not start the login shell: {0}")]
    Spawn(std::io::Error),
    #[error("the profile did not finish within {0:?}")]
    Timeout(Duration),
    #[error("the login shell ended before the snapshot was taken ({0})")]
    Incomplete(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl ShellSnapshots {
    pub fn new(options: ShellSnapshotOptions) -> Self {
        Self {
            inner: Arc::new(Inner {
                options,
                entries: Mutex::new(HashMap::new()),
                instance: rand::random(),
                builds: AtomicU64::new(0),
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

impl Built {
    fn is_fresh(&self, ttl: Duration) -> bool {
        self.built_at.elapsed() < ttl && self.stamps.iter().all(FileStamp::unchanged)
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
    if let Some(script) = &built.script {
        env.insert("BASH_ENV".into(), script.clone().into_os_string());
    }
    spec.env = env;
    if let Program::Shell { login, .. } = &mut spec.program {
        *login = false;
    }
}

/// The shell a spawn names, if it can have a snapshot, with the program it resolves to.
fn shell_kind(shell: &str, env: &Environment) -> Option<(ShellKind, PathBuf)> {
    let program = find_program(shell, env.get(OsStr::new("PATH")).map(OsString::as_os_str))?;
    let real = std::fs::canonicalize(&program).ok()?;
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    match (name(&program)?.as_str(), name(&real)?.as_str()) {
        ("bash", "bash") => Some((ShellKind::Bash, program)),
        ("sh" | "dash", "dash") => Some((ShellKind::Dash, program)),
        _ => None,
    }
}

fn snapshot_key(kind: ShellKind, program: &Path, env: &Environment) -> u64 {
    let mut h = DefaultHasher::new();
    (kind, program, env, uexec_sys::effective_uid()).hash(&mut h);
    h.finish()
}

/// The files a login shell of this kind reads, for invalidation.
fn profile_files(kind: ShellKind, home: Option<&OsStr>) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ["/etc/profile", "/etc/profile.d"]
        .iter()
        .map(PathBuf::from)
        .collect();
    let home_files: &[&str] = match kind {
        ShellKind::Bash => {
            files.push("/etc/bash.bashrc".into());
            &[".bash_profile", ".bash_login", ".profile", ".bashrc"]
        }
        ShellKind::Dash => &[".profile"],
    };
    if let Some(home) = home {
        files.extend(home_files.iter().map(|f| Path::new(home).join(f)));
    }
    files
}

/// The private directory snapshots live in: the configured one, else uexec's runtime
/// directory; made 0700 and refused unless it is ours alone ([`crate::fs::private_dir`]).
fn runtime_dir(configured: Option<&Path>) -> Result<PathBuf, BuildError> {
    let path = configured.map_or_else(crate::fs::runtime_dir_path, Path::to_path_buf);
    crate::fs::private_dir(&path).map_err(|e| BuildError::Dir {
        path: path.clone(),
        why: e.to_string(),
    })?;
    Ok(path)
}

/// Creates (or replaces) a file only we can read.
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    crate::fs::new_private_file(path)
}

/// `'…'`-quoted for a POSIX shell, any bytes.
fn shell_quote(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 2);
    out.push(b'\'');
    for &b in s {
        if b == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(b);
        }
    }
    out.push(b'\'');
    out
}

/// The `-c` script a build's login shell runs after its profile.
fn dump_script(kind: ShellKind, dump: &Path) -> Vec<u8> {
    let mut s = b"{ command -p env -0".to_vec();
    if kind == ShellKind::Bash {
        s.extend_from_slice(
            b"; printf '\\0UEXEC_SHELL_SNAPSHOT_STATE\\0'; builtin shopt -p; \
              builtin declare -f; builtin alias -p; builtin set +o",
        );
    }
    s.extend_from_slice(b"; } > ");
    s.extend_from_slice(&shell_quote(dump.as_os_str().as_bytes()));
    s.extend_from_slice(b" 2>/dev/null");
    s
}

async fn build(
    kind: ShellKind,
    program: &Path,
    env: &Environment,
    cwd: &Path,
    options: &ShellSnapshotOptions,
    name: &str,
) -> Result<Built, BuildError> {
    let dir = runtime_dir(options.dir.as_deref())?;
    let base = format!(
        "{}-{name}",
        match kind {
            ShellKind::Bash => "bash",
            ShellKind::Dash => "dash",
        }
    );
    let dump = dir.join(format!("{base}.dump"));
    private_file(&dump)?;
    let stamps = profile_files(kind, env.get(OsStr::new("HOME")).map(OsString::as_os_str))
        .into_iter()
        .map(FileStamp::now)
        .collect();
    let built_at = Instant::now();
    let result = run_login_shell(kind, program, env, cwd, &dump, options.build_timeout).await;
    let bytes = result.and_then(|()| read_dump(&dump));
    let _ = std::fs::remove_file(&dump);
    let (exported, state) = parse_dump(kind, &bytes?)?;
    let mut script = None;
    if let Some(state) = state {
        let path = dir.join(format!("{base}.sh"));
        let text = bash_script(&state, exported.get(OsStr::new("BASH_ENV")));
        let tmp = dir.join(format!("{base}.sh.new"));
        private_file(&tmp)?.write_all(&text)?;
        std::fs::rename(&tmp, &path)?;
        script = Some(path);
    }
    let mut env = exported;
    env.remove(OsStr::new("BASH_ENV"));
    if let Some(path) = &script {
        if let Err(e) = check_script(program, &env, cwd, path).await {
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
    }
    Ok(Built {
        env,
        script,
        stamps,
        built_at,
    })
}

async fn run_login_shell(
    kind: ShellKind,
    program: &Path,
    env: &Environment,
    cwd: &Path,
    dump: &Path,
    timeout: Duration,
) -> Result<(), BuildError> {
    let mut command = tokio::process::Command::new(program);
    command
        .arg("-l")
        .arg("-c")
        .arg(OsString::from_vec(dump_script(kind, dump)))
        .env_clear()
        .envs(env)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command.spawn().map_err(BuildError::Spawn)?;
    let pid = child.id();
    let status = tokio::time::timeout(timeout, child.wait()).await;
    // Whatever the profile started in its group goes with it (a prompt, a stray agent).
    if let Some(pid) = pid {
        uexec_sys::kill_group(pid, uexec_sys::SIGKILL);
    }
    match status {
        Err(_) => {
            let _ = child.kill().await;
            Err(BuildError::Timeout(timeout))
        }
        Ok(Err(e)) => Err(BuildError::Io(e)),
        Ok(Ok(status)) if !status.success() => Err(BuildError::Incomplete(status.to_string())),
        Ok(Ok(_)) => Ok(()),
    }
}

/// Sources the script in a plain `bash -c` once: a snapshot that does not load silently
/// and completely (a function bash cannot parse back, say) is no snapshot.
async fn check_script(
    program: &Path,
    env: &Environment,
    cwd: &Path,
    script: &Path,
) -> Result<(), BuildError> {
    const OK: &str = "uexec-shell-snapshot-ok";
    let mut command = tokio::process::Command::new(program);
    command
        .arg("-c")
        .arg(format!("printf %s {OK}"))
        .env_clear()
        .envs(env)
        .env("BASH_ENV", script)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(SNAPSHOT_CHECK_TIMEOUT, command.output())
        .await
        .map_err(|_| BuildError::Timeout(SNAPSHOT_CHECK_TIMEOUT))??;
    if out.stdout != OK.as_bytes() || !out.stderr.is_empty() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let first = stderr.lines().next().unwrap_or("no output");
        return Err(BuildError::Incomplete(format!(
            "the snapshot does not load cleanly: {first}"
        )));
    }
    Ok(())
}

fn read_dump(dump: &Path) -> Result<Vec<u8>, BuildError> {
    let len = std::fs::metadata(dump)?.len();
    if len > DUMP_MAX_BYTES {
        return Err(BuildError::Incomplete(format!("{len} bytes of state")));
    }
    Ok(std::fs::read(dump)?)
}

/// Splits a dump into the exported variables and (bash) the shell-state text.
fn parse_dump(kind: ShellKind, bytes: &[u8]) -> Result<(Environment, Option<Vec<u8>>), BuildError> {
    let (env_part, state) = match kind {
        ShellKind::Dash => (bytes, None),
        ShellKind::Bash => {
            let at = find(bytes, STATE_MARKER)
                .ok_or_else(|| BuildError::Incomplete("no shell state in the dump".into()))?;
            (
                &bytes[..at],
                Some(bytes[at + STATE_MARKER.len()..].to_vec()),
            )
        }
    };
    if env_part.is_empty() {
        return Err(BuildError::Incomplete("no environment in the dump".into()));
    }
    let mut env = Environment::new();
    for entry in env_part.split(|&b| b == 0).filter(|e| !e.is_empty()) {
        let Some(eq) = entry.iter().position(|&b| b == b'=') else {
            continue;
        };
        env.insert(
            OsStr::from_bytes(&entry[..eq]).to_owned(),
            OsStr::from_bytes(&entry[eq + 1..]).to_owned(),
        );
    }
    Ok((env, state))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The script `BASH_ENV` names: `BASH_ENV` as the profile left it, functions and aliases
/// (parsed with `extglob` on), then the options as the profile left them, `set -o` last (an
/// `errexit` or `xtrace` must not act on the snapshot itself).
fn bash_script(state: &[u8], profile_bash_env: Option<&OsString>) -> Vec<u8> {
    let mut shopt = Vec::new();
    let mut set = Vec::new();
    let mut rest = Vec::new();
    for line in state.split_inclusive(|&b| b == b'\n') {
        if line.starts_with(b"shopt ") {
            // Read-only facts of the login shell, not options one can set.
            if !(line.ends_with(b" login_shell\n") || line.ends_with(b" restricted_shell\n")) {
                shopt.extend_from_slice(line);
            }
        } else if line.starts_with(b"set -o ") || line.starts_with(b"set +o ") {
            set.extend_from_slice(line);
        } else {
            rest.extend_from_slice(line);
        }
    }
    let mut out = b"# uexec shell snapshot (bash): sourced through BASH_ENV\n".to_vec();
    // First, so that nothing below can leave it set for the command's children.
    match profile_bash_env {
        Some(v) => {
            out.extend_from_slice(b"export BASH_ENV=");
            out.extend_from_slice(&shell_quote(v.as_bytes()));
            out.push(b'\n');
        }
        None => out.extend_from_slice(b"unset BASH_ENV\n"),
    }
    // Functions were parsed with whatever options the profile had at the time: parse them
    // back with extglob on and aliases not expanded, then set the options as it left them.
    out.extend_from_slice(b"builtin shopt -s extglob\n");
    out.extend_from_slice(&rest);
    if !rest.ends_with(b"\n") {
        out.push(b'\n');
    }
    out.extend_from_slice(&shopt);
    out.extend_from_slice(&set);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn quoting_survives_quotes_and_odd_bytes() {
        assert_eq!(shell_quote(b"a'b"), b"'a'\\''b'");
        assert_eq!(shell_quote(b""), b"''");
        assert_eq!(shell_quote(b"\xff$x"), b"'\xff$x'");
    }

    #[test]
    fn a_dump_splits_into_variables_and_shell_state() {
        let dump = b"A=1\0B=x=y\0EMPTY=\0\0UEXEC_SHELL_SNAPSHOT_STATE\0shopt -s extglob\n";
        let (env, state) = parse_dump(ShellKind::Bash, dump).expect("parses");
        assert_eq!(env[OsStr::new("A")], "1");
        assert_eq!(env[OsStr::new("B")], "x=y");
        assert_eq!(env[OsStr::new("EMPTY")], "");
        assert_eq!(state.as_deref(), Some(&b"shopt -s extglob\n"[..]));
        assert!(parse_dump(ShellKind::Bash, b"A=1\0").is_err(), "no state");
        assert!(parse_dump(ShellKind::Dash, b"").is_err(), "no environment");
    }

    #[test]
    fn the_script_parses_functions_with_extglob_then_sets_the_profiles_options() {
        let state = b"shopt -s extglob\nshopt -s login_shell\nset -o errexit\nf () \n{ \n    echo\n}\nalias ll='ls'\n";
        let script = bash_script(state, None);
        let text = String::from_utf8_lossy(&script);
        let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s} in {text}"));
        assert!(!text.contains("login_shell"));
        assert!(at("shopt -s extglob") < at("f ()"));
        assert!(at("unset BASH_ENV") < at("builtin shopt -s extglob"));
        assert!(at("builtin shopt -s extglob") < at("f ()"));
        assert!(at("alias ll") < at("\nshopt -s extglob"));
        assert!(at("\nshopt -s extglob") < at("set -o errexit"));
        let kept = bash_script(b"", Some(&OsString::from("/etc/it's")));
        assert!(String::from_utf8_lossy(&kept).contains("export BASH_ENV='/etc/it'\\''s'"));
    }

    #[test]
    fn a_runtime_dir_others_can_enter_is_refused() {
        let base = std::env::temp_dir().join(format!("uexec-snapdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let ok = runtime_dir(Some(&base)).expect("created");
        let mode = std::fs::metadata(&ok).expect("exists").permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let err = runtime_dir(Some(&base)).expect_err("open to others");
        assert!(err.to_string().contains("mode 755"), "{err}");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn only_bash_and_dash_get_snapshots() {
        let env: Environment = [(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))].into();
        assert!(matches!(
            shell_kind("bash", &env),
            Some((ShellKind::Bash, _))
        ));
        if std::fs::canonicalize("/bin/sh").is_ok_and(|p| p.ends_with("dash")) {
            assert!(matches!(
                shell_kind("/bin/sh", &env),
                Some((ShellKind::Dash, _))
            ));
        }
        assert!(shell_kind("/no/such/shell", &env).is_none());
    }
}
