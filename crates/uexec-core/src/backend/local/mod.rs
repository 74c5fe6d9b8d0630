//! Local processes: on pipes (stdout and stderr read concurrently, stdin `/dev/null` or a
//! pipe) or on a PTY (one merged stream, 24x80, the PTY as controlling terminal).
//!
//! Per process, three tasks own the moving parts:
//! 1. the *reaper* owns the `Child`, waits for it and reports the exit (`reap`);
//! 2. one *reader* per stream (two for pipes, one for the PTY master) sends chunks in arrival
//!    order; the output channel closes when the last reader ends (`read`);
//! 3. the caller holds a [`LocalControl`] for writes and signals (`control`).
//!
//! Readers end on EOF (EIO on a PTY master once every slave fd is closed), or when told to
//! close: then they first read whatever the kernel already buffered, so a kill never loses
//! output that was written before it.
//!
//! This file is the spawn, the one place that knows all three: it resolves the program,
//! prepares the argv, environment and descriptors, starts the child (or has its launcher
//! start it), then hands each part to its owner. Everything that can fail without the child
//! is prepared before it exists; what is left after the spawn is guarded (`Unclaimed`), so
//! a failure never leaves a command running unreaped. The last-will hook ([`GroupWatch`],
//! in `group`) is a leaf that the spawn and the control both tell.

mod cgroup;
mod control;
mod group;
mod left;
mod limits;
mod read;
mod reap;
mod usage;

pub use cgroup::{
    entry_probe as cgroup_entry_probe, kill_tree as kill_cgroup_tree, probe as cgroup_probe,
    set_enabled as set_session_cgroups, status as cgroup_status, SpareCgroup,
};
pub use control::LocalControl;
pub use group::{install_group_watch, GroupWatch};
pub use limits::{
    check as check_limits, prepare as prepare_limits, probe as limits_probe, Controller,
    LimitsError,
};
pub use reap::exit_code_of;

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot, watch};

use super::{
    Backend, BackendError, BackendErrorKind, EnvMode, Launch, SpawnSpec, SpawnedProcess, Started,
    Stream,
};
use crate::limits::{PTY_COLS, PTY_ROWS};
use control::{Leader, Stdin};

/// Chunks in flight between the readers and the session before readers wait.
const OUTPUT_CHANNEL_CHUNKS: usize = 64;

/// Runs processes on this machine.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalBackend;

impl Backend for LocalBackend {
    fn spawn(&self, spec: SpawnSpec) -> BoxFuture<'_, Result<SpawnedProcess, BackendError>> {
        // Its own cgroup, where the machine allows, with its limits; a limit it cannot take
        // fails the spawn (it is never dropped).
        let cgroup = match cgroup::SessionCgroup::make(spec.limits) {
            Ok(cgroup) => cgroup,
            Err(e) => {
                let e = BackendError::new(format!("the session's limits cannot be applied: {e}"));
                return Box::pin(async move { Err(e) });
            }
        };
        // Spawn synchronously on the calling worker thread (see `sys` on PR_SET_PDEATHSIG).
        let result = spawn_local(&spec, cgroup).map_err(|e| {
            let kind = match e.kind() {
                io::ErrorKind::NotFound => BackendErrorKind::NotFound,
                io::ErrorKind::PermissionDenied => BackendErrorKind::PermissionDenied,
                _ => BackendErrorKind::Other,
            };
            BackendError::with_kind(kind, describe_spawn_error(&spec, &e))
        });
        Box::pin(async move { result })
    }
}

fn describe_spawn_error(spec: &SpawnSpec, e: &io::Error) -> String {
    let (argv, _) = spec.command();
    let program = argv.first().map(String::as_str).unwrap_or("");
    match e.kind() {
        io::ErrorKind::NotFound if !spec.cwd.is_dir() => {
            format!(
                "working directory {} does not exist: {e}",
                spec.cwd.display()
            )
        }
        io::ErrorKind::NotFound => format!("program {program:?} not found: {e}"),
        io::ErrorKind::PermissionDenied => format!("program {program:?} is not executable: {e}"),
        _ if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => format!(
            "uexec has run out of file descriptors ({e}); end sessions that are no longer \
             needed (terminate_session) or raise the open-files limit (ulimit -n)"
        ),
        _ => format!("{program:?}: {e}"),
    }
}

fn spawn_local(
    spec: &SpawnSpec,
    mut cgroup: Option<cgroup::SessionCgroup>,
) -> io::Result<SpawnedProcess> {
    uexec_sys::reset_ignored_sigchld();
    let env = match &spec.env_mode {
        EnvMode::Exact => spec.env.clone(),
        EnvMode::InheritFiltered { drop } => {
            let mut env = crate::env::EnvPolicy {
                drop: drop.clone(),
                ..Default::default()
            }
            .inherited(std::env::vars_os());
            env.extend(spec.env.clone());
            env
        }
    };
    let (command, arg0) = spec.command_to_exec();
    let program = command
        .first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty argv"))?;
    let path = env.get(OsStr::new("PATH")).map(OsString::as_os_str);
    let resolved = match find_program(program, path) {
        Some(path) => path,
        // A path is tried as is: exec says precisely what is wrong with it.
        None if program.contains('/') => PathBuf::from(program),
        None => return Err(io::Error::new(io::ErrorKind::NotFound, "not found in PATH")),
    };
    let mut argv: Vec<CString> = command
        .iter()
        .map(|a| c_string(a.as_bytes()))
        .collect::<io::Result<_>>()?;
    if let Some(arg0) = &arg0 {
        argv[0] = c_string(arg0.as_bytes())?;
    }
    let envp = env
        .iter()
        .map(|(k, v)| c_string(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
        .collect::<io::Result<Vec<_>>>()?;
    // Held until the child has its copies, then closed: the child holds the only ones.
    let passed = match &spec.passed_fd {
        Some(passed) => passed.take().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "the descriptors for this spawn were passed to an earlier one",
            )
        })?,
        None => Vec::new(),
    };
    // The child is born in its cgroup (or enters it before it execs).
    let child_spec = uexec_sys::ChildSpec {
        program: c_string(resolved.as_os_str().as_bytes())?,
        argv,
        envp,
        cwd: c_string(spec.cwd.as_os_str().as_bytes())?,
        stdio: [-1; 3],
        controlling_tty: spec.tty,
        passed_fds: passed.iter().map(|fd| fd.as_raw_fd()).collect(),
        program_fd: None,
        cgroup: cgroup.as_ref().map(cgroup::SessionCgroup::child_cgroup),
    };

    // Everything that can fail without the child is prepared before it exists; what is left
    // after the spawn is guarded, so a failure never leaves a command running unreaped.
    let (closing_tx, closing_rx) = watch::channel(false);
    let (out_tx, out_rx) = mpsc::channel(OUTPUT_CHANNEL_CHUNKS);
    let (child, stdin) = if spec.tty {
        let (master, slave) = uexec_sys::open_pty(PTY_ROWS, PTY_COLS)?;
        uexec_sys::set_nonblocking(master.as_raw_fd())?;
        let master = Arc::new(uexec_sys::async_fd(master)?);
        let fd = slave.as_raw_fd();
        let mut child = Unclaimed::spawn(
            &uexec_sys::ChildSpec {
                stdio: [fd, fd, fd],
                ..child_spec
            },
            spec.launcher.as_deref(),
        )?;
        cgroup = child.adopt(cgroup, &spec.limits)?;
        drop(slave); // EOF must come when the child's copies close
        tokio::spawn(read::read_pty(master.clone(), out_tx, closing_rx));
        (child, Stdin::Pty(master))
    } else {
        let (stdin_child, stdin_ours) = if spec.pipe_stdin {
            let (read, write) = uexec_sys::pipe_cloexec()?;
            (read, Some(write))
        } else {
            (uexec_sys::dev_null()?, None)
        };
        let (out_read, out_write) = uexec_sys::pipe_cloexec()?;
        // One stream: stderr is the stdout pipe, as both are one terminal on a PTY.
        let (err, err_write) = if spec.one_stream {
            (None, None)
        } else {
            let (read, write) = uexec_sys::pipe_cloexec()?;
            (Some(pipe::Receiver::from_owned_fd(read)?), Some(write))
        };
        let out = pipe::Receiver::from_owned_fd(out_read)?;
        let stdin = match stdin_ours {
            Some(write) => Stdin::Pipe(tokio::sync::Mutex::new(Some(pipe::Sender::from_owned_fd(
                write,
            )?))),
            None => Stdin::Closed,
        };
        let stdio = [
            stdin_child.as_raw_fd(),
            out_write.as_raw_fd(),
            err_write
                .as_ref()
                .map_or(out_write.as_raw_fd(), AsRawFd::as_raw_fd),
        ];
        let mut child = Unclaimed::spawn(
            &uexec_sys::ChildSpec {
                stdio,
                ..child_spec
            },
            spec.launcher.as_deref(),
        )?;
        cgroup = child.adopt(cgroup, &spec.limits)?;
        drop((stdin_child, out_write, err_write));
        tokio::spawn(read::read_pipe(
            out,
            Stream::Stdout,
            out_tx.clone(),
            closing_rx.clone(),
        ));
        if let Some(err) = err {
            tokio::spawn(read::read_pipe(err, Stream::Stderr, out_tx, closing_rx));
        }
        (child, stdin)
    };
    drop(passed);
    let (pid, pidfd, entered) = child.claim()?;
    let cgroup = cgroup.filter(|c| c.hold(pid, entered));
    group::started(pid);
    let leader = Arc::new(Mutex::new(Leader::Running));
    let (exit_tx, exit_rx) = oneshot::channel();
    tokio::spawn(reap::reap(pid, pidfd.clone(), leader.clone(), exit_tx));
    Ok(SpawnedProcess {
        pid: Some(pid),
        output: out_rx,
        exit: exit_rx,
        control: Arc::new(LocalControl {
            pid,
            pidfd,
            leader,
            closing: closing_tx,
            stdin,
            cgroup,
        }),
    })
}

/// A child that exists but is not yet handed to a reaper: dropped (the set-up after the
/// spawn failed), it is killed with its group and reaped, so the call that reports
/// "Failed to create process" leaves nothing running.
struct Unclaimed {
    child: Option<uexec_sys::SpawnedChild>,
    /// The cgroup a launcher started it ahead in, until the session adopts it.
    spare: Option<cgroup::SpareCgroup>,
}

impl Unclaimed {
    fn spawn(spec: &uexec_sys::ChildSpec, launcher: Option<&dyn Launch>) -> io::Result<Self> {
        // A launched command (a sandbox's) may be started by its launcher: one started
        // ahead, or a cold one from the file it holds.
        let started = match launcher {
            Some(launcher) => launcher.start(spec)?,
            None => None,
        };
        let (child, spare) = match started {
            Some(Started { child, cgroup }) => (child, cgroup),
            None => (uexec_sys::spawn_child(spec)?, None),
        };
        #[cfg(test)]
        tests::note_spawned(child.pid);
        Ok(Self {
            child: Some(child),
            spare,
        })
    }

    /// The session's cgroup: `made` for it, or, for a child started ahead in a spare one,
    /// that one with the session's limits (then `made`, never entered, is removed). An
    /// error (a limit the spare cannot take) drops the child with its spare: killed.
    fn adopt(
        &mut self,
        made: Option<cgroup::SessionCgroup>,
        limits: &crate::policy::Limits,
    ) -> io::Result<Option<cgroup::SessionCgroup>> {
        match self.spare.take() {
            None => Ok(made),
            Some(spare) => {
                if let Some(made) = made {
                    made.remove_unused();
                }
                cgroup::SessionCgroup::adopt(spare, *limits).map(Some)
            }
        }
    }

    /// Registers the pidfd with the reactor (the last step that can fail): its pid, pidfd
    /// and how it entered its cgroup.
    fn claim(mut self) -> io::Result<(u32, Arc<AsyncFd<OwnedFd>>, Option<uexec_sys::CgroupEntry>)> {
        #[cfg(test)]
        tests::fail_after_spawn()?;
        let child = self
            .child
            .take()
            .ok_or_else(|| io::Error::other("the child was already claimed"))?;
        let pid = child.pid;
        match uexec_sys::async_fd(child.pidfd) {
            Ok(pidfd) => Ok((pid, Arc::new(pidfd), child.cgroup_entry)),
            Err(e) => {
                uexec_sys::kill_and_reap(pid);
                Err(e)
            }
        }
    }
}

impl Drop for Unclaimed {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            uexec_sys::pidfd_kill(&child.pidfd, uexec_sys::SIGKILL);
            uexec_sys::kill_and_reap(child.pid);
        }
    }
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{:?} contains a NUL byte", String::from_utf8_lossy(bytes)),
        )
    })
}

/// Finds an executable program like `execvp` would: a path with a slash as is, else the
/// first of that name in `PATH`; `None` unless it is an executable file.
pub fn find_program(program: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        return executable(&p).then_some(p);
    }
    let path = path.unwrap_or(OsStr::new("/usr/local/bin:/usr/bin:/bin"));
    path.as_bytes()
        .split(|&b| b == b':')
        .map(|dir| match dir {
            b"" => Path::new(".").join(program),
            dir => Path::new(OsStr::from_bytes(dir)).join(program),
        })
        .find(|p| executable(p))
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::collections::BTreeMap;

    use crate::backend::Program;

    use super::*;

    thread_local! {
        static FAIL_AFTER_SPAWN: Cell<bool> = const { Cell::new(false) };
        static LAST_PID: Cell<u32> = const { Cell::new(0) };
    }

    pub(super) fn note_spawned(pid: u32) {
        LAST_PID.with(|p| p.set(pid));
    }

    /// Fault injection: the set-up after the spawn fails on this thread once.
    pub(super) fn fail_after_spawn() -> io::Result<()> {
        if FAIL_AFTER_SPAWN.with(|f| f.replace(false)) {
            return Err(io::Error::from_raw_os_error(libc::EMFILE));
        }
        Ok(())
    }

    fn spec(cmd: &str, tty: bool) -> SpawnSpec {
        SpawnSpec {
            program: Program::Shell {
                shell: "/bin/sh".into(),
                login: false,
                script: cmd.into(),
            },
            arg0: None,
            cwd: std::env::temp_dir(),
            env: BTreeMap::from([("PATH".into(), "/usr/bin:/bin".into())]),
            env_mode: EnvMode::Exact,
            tty,
            pipe_stdin: false,
            one_stream: false,
            passed_fd: None,
            launcher: None,
            limits: crate::policy::Limits::default(),
        }
    }

    /// Passed descriptors are the child's fds 3 and 4 (moved there from wherever they were,
    /// nothing else beside), the engine keeps no copy of them (each peer reads the end when
    /// the child exits), and a clone of the spec cannot pass them again.
    #[tokio::test]
    async fn passed_descriptors_are_the_child_s_fds_3_and_4_and_the_engine_keeps_no_copy() {
        use std::io::Read;
        let pair = |at| {
            let (ours, theirs) = std::os::unix::net::UnixStream::pair().expect("pair");
            ours.set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .expect("timeout");
            // Far from fds 3 and 4, so that the move shows.
            (
                ours,
                uexec_sys::dup_at_least(theirs.as_raw_fd(), at).expect("dup"),
            )
        };
        let said = |ours: &std::os::unix::net::UnixStream| {
            let mut got = String::new();
            let mut ours = ours;
            ours.read_to_string(&mut got)
                .expect("the end, once the child is gone");
            got
        };
        for tty in [false, true] {
            let (ours, moved) = pair(40);
            let (second, second_moved) = pair(41);
            let mut s = spec(
                "echo passed >&3; echo second >&4; \
                 for n in 5 40 41; do [ -e /proc/$$/fd/$n ] && echo fd$n >&3; done; exit 0",
                tty,
            );
            let passed = super::super::PassedFd::new(moved);
            assert_eq!(passed.push(second_moved), Ok(4));
            s.passed_fd = Some(passed);
            let process = LocalBackend.spawn(s.clone()).await.expect("spawn");
            let _ = process.exit.await;
            assert_eq!(said(&ours), "passed\n", "tty: {tty}");
            assert_eq!(said(&second), "second\n", "tty: {tty}");
            let e = LocalBackend.spawn(s).await.expect_err("passed once");
            assert!(
                e.message.contains("passed to an earlier one"),
                "{}",
                e.message
            );
        }
    }

    /// A limit goes into the session's real cgroup before the command exists, or the spawn
    /// fails and nothing runs. Without `prepare_limits` no controller is enabled for the
    /// sessions' cgroups (on this project's machines none can be), so the write fails:
    /// the limit is refused, never dropped.
    #[tokio::test]
    async fn a_limit_the_session_s_cgroup_cannot_take_fails_the_spawn_and_runs_nothing() {
        let ran = std::env::temp_dir().join(format!("uexec-limit-ran-{}", std::process::id()));
        let mut s = spec(&format!("touch {}", ran.display()), false);
        s.limits = crate::policy::Limits {
            memory_max: Some(64 << 20),
            ..crate::policy::Limits::default()
        };
        let e = LocalBackend
            .spawn(s)
            .await
            .expect_err("a limit it cannot set");
        assert!(
            e.message
                .starts_with("the session's limits cannot be applied: ")
                && (e.message.contains("limits need a cgroup")
                    || e.message.contains("cannot set the session's memory_max")),
            "{}",
            e.message
        );
        assert!(!ran.exists(), "the command ran without its limit");
    }

    /// Where sessions have cgroups (this project's machines), a command is in its own from
    /// its first instruction: born there, so its first read of `/proc/self/cgroup` names it.
    #[tokio::test]
    async fn a_command_is_born_in_its_session_s_cgroup() {
        let root = cgroup::status().expect("a cgroup v2 tree uexec may write");
        let mut process = LocalBackend
            .spawn(spec("exec cat /proc/self/cgroup", false))
            .await
            .expect("spawn");
        let mut out = Vec::new();
        while let Some(chunk) = process.output.recv().await {
            out.extend_from_slice(&chunk.bytes);
        }
        let _ = process.exit.await;
        let out = String::from_utf8_lossy(&out);
        let own = out
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .expect("a cgroup v2 line");
        let (parent, leaf) = own.rsplit_once('/').expect("a path");
        assert!(
            root.ends_with(parent.trim_start_matches('/')) && leaf.starts_with('s'),
            "{own} is not a session's cgroup of {}",
            root.display()
        );
        assert_eq!(
            cgroup::tree_entry(),
            Some(uexec_sys::CgroupEntry::AtBirth),
            "this kernel spawns into cgroups (`uexec doctor`), and the spawn fell back"
        );
    }

    #[tokio::test]
    async fn a_failure_after_the_spawn_kills_and_reaps_the_child() {
        for tty in [false, true] {
            FAIL_AFTER_SPAWN.with(|f| f.set(true));
            let err = LocalBackend
                .spawn(spec("exec sleep 600", tty))
                .await
                .expect_err("the injected failure");
            assert!(err.message.contains("file descriptors"), "{}", err.message);
            let pid = LAST_PID.with(Cell::get);
            assert_ne!(pid, 0);
            // Killed and reaped: no such process, not even a zombie.
            assert!(
                !std::path::Path::new(&format!("/proc/{pid}")).exists(),
                "pid {pid} still exists (tty: {tty})"
            );
        }
    }
}
