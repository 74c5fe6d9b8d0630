//! One build (steps 2, 3 and 5 of the module docs): run the login shell once with its
//! profile, read what it left behind, and check that the result loads. Here, apart from the
//! table, because a build owns nothing but its own files and reports a [`Built`] or why not:
//! 1. make sure the runtime directory is ours alone, stamp the profile files, then run
//!    `shell -l -c DUMP` in its own process group with a deadline, killing that group after;
//! 2. read the dump (capped at [`DUMP_MAX_BYTES`]), delete it, and split it into the
//!    exported variables and (bash) the shell state;
//! 3. for bash, write the state as a 0600 script and source it once in a plain `bash -c`:
//!    one that does not load silently and completely is removed and is no snapshot.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::options::ShellSnapshotOptions;
use super::script::{bash_script, dump_script, STATE_MARKER};
use super::shell::{profile_files, ShellKind};
use crate::env::Environment;

/// Deadline of the check that a new snapshot loads.
const SNAPSHOT_CHECK_TIMEOUT: Duration = Duration::from_secs(2);
/// Cap on a dump file (the environment, functions and aliases of a profile).
const DUMP_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// What a finished build gives a command.
pub(super) struct Built {
    /// The spawn's environment (shell-owned and new secret-looking variables left out).
    pub(super) env: Environment,
    /// bash only: the script `BASH_ENV` points at.
    pub(super) script: Option<PathBuf>,
    stamps: Vec<FileStamp>,
    pub(super) built_at: Instant,
}

impl Built {
    pub(super) fn is_fresh(&self, ttl: Duration) -> bool {
        self.built_at.elapsed() < ttl && self.stamps.iter().all(FileStamp::unchanged)
    }
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
pub(super) enum BuildError {
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
    /// The snapshot's files could not be written: the disk, not the profile, is why.
    #[error("runtime directory {} has no room for the snapshot ({error}); the profile is not at fault", path.display())]
    NoRoom {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// A failed build in `dir`, told apart from a profile's failure when `dir` has no room
/// left (a full disk or quota makes the dump fail, and the login shell exit 1).
fn blame(dir: &Path, name: &str, failed: BuildError) -> BuildError {
    if matches!(failed, BuildError::Timeout(_) | BuildError::Spawn(_)) {
        return failed;
    }
    let probe = dir.join(format!(".room-{name}"));
    let written =
        private_file(&probe).and_then(|mut f| f.write_all(&[0; 4096]).and_then(|()| f.sync_all()));
    let _ = std::fs::remove_file(&probe);
    match written {
        Err(error)
            if matches!(
                error.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
            ) =>
        {
            BuildError::NoRoom {
                path: dir.to_path_buf(),
                error,
            }
        }
        _ => failed,
    }
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

/// Builds the snapshot of a login `program` of this `kind` in `env` and `cwd`, in files of
/// the runtime directory named after `name` (unique per build).
pub(super) async fn build(
    kind: ShellKind,
    program: &Path,
    env: &Environment,
    cwd: &Path,
    options: &ShellSnapshotOptions,
    name: &str,
) -> Result<Built, BuildError> {
    let dir = runtime_dir(options.dir.as_deref())?;
    build_in(&dir, kind, program, env, cwd, options, name)
        .await
        .map_err(|e| blame(&dir, name, e))
}

async fn build_in(
    dir: &Path,
    kind: ShellKind,
    program: &Path,
    env: &Environment,
    cwd: &Path,
    options: &ShellSnapshotOptions,
    name: &str,
) -> Result<Built, BuildError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

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
}
