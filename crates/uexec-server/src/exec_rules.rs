//! `--rules-at exec` on the exec server (issue 40): every exec of every process a
//! `process/start` leads to is judged by the server's rules, as `uexec mcp --rules-at exec`
//! judges a session's.
//!
//! 1. Before the spawn, [`ExecJudge::hand_over`] gives the spec the launcher that installs
//!    the exec-notify filter (`Confinement::judge_execs`: `uexec-sandbox`'s launcher, alone,
//!    with no sandbox layer) and keeps uexec's end of the socket its listener comes on.
//! 2. After it, [`ExecJudge::watch`] runs the engine's judge of execs
//!    (`uexec_core::spawn::ExecWatch`) on that socket: `allow` goes on; `forbidden` fails the
//!    exec with `EACCES`, which the process itself reports; `prompt` is refused, as at the
//!    door, since no person can be asked on this wire. Each judged exec is written to the
//!    server's decision log (`uexec audit`).
//!
//! The wire has no place for what the judge says beside the process's own output (the
//! refusals, a process whose execs could not be handed over): it goes to the server's log.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use uexec_core::backend::{BackendError, BackendErrorKind, SpawnSpec};
use uexec_core::confine::Confinement;
use uexec_core::policy::rules::CommandRules;
use uexec_core::policy::{MonitorHandle, Monitored, PolicyMonitor};
use uexec_core::spawn::{DecisionLog, ExecWatch};

use crate::process::ProcessHandle;

/// The judge of every exec of the server's processes.
pub(crate) struct ExecJudge {
    launcher: Arc<dyn Confinement>,
    rules: Arc<dyn CommandRules>,
    decisions: Option<Arc<dyn DecisionLog>>,
    /// The number the next watched process's execs are recorded under (`at exec in
    /// session N`), counted from 1 for the server's life.
    next: AtomicI32,
}

impl ExecJudge {
    pub(crate) fn new(
        launcher: Arc<dyn Confinement>,
        rules: Arc<dyn CommandRules>,
        decisions: Option<Arc<dyn DecisionLog>>,
    ) -> Self {
        Self {
            launcher,
            rules,
            decisions,
            next: AtomicI32::new(1),
        }
    }

    /// Step 1: `spec` gets the launcher that hands its execs over; uexec's end of the
    /// socket, or why not (the start's text was judged all the same).
    pub(crate) fn hand_over(&self, spec: &mut SpawnSpec) -> Result<OwnedFd, String> {
        self.launcher.judge_execs(spec)
    }

    /// Step 2: judges the execs of `process` (of session `session`), spawned with the
    /// launcher `socket` came from, until none of its processes is left under the filter.
    pub(crate) fn watch(
        &self,
        socket: Result<OwnedFd, String>,
        process: ProcessHandle,
        session: &str,
    ) {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            session,
            process = process.id(),
            "its execs are judged, recorded as at exec in session {number}"
        );
        let watch = Box::new(ExecWatch::new(
            socket,
            self.rules.clone(),
            self.decisions.clone(),
            // No person can be asked on this wire: a held exec is refused, saying so.
            None,
            number,
        ));
        let watched: Arc<dyn Monitored> = Arc::new(Watched {
            process,
            session: session.to_owned(),
        });
        let handle = MonitorHandle::new(Arc::downgrade(&watched));
        // Asked here, not in the task: the judge starts at once (the process's first exec
        // waits for it).
        let watching = watch.watch(handle);
        tokio::spawn(async move {
            watching.await;
            drop(watched);
        });
    }
}

/// A process as the judge of its execs sees it: what the judge says goes to the log, with
/// the session and process it is about.
struct Watched {
    process: ProcessHandle,
    session: String,
}

impl Monitored for Watched {
    fn fail_and_terminate(&self, message: String) {
        tracing::warn!(
            session = self.session,
            process = self.process.id(),
            "{message}; the process is killed"
        );
        self.process.kill();
    }

    fn record_verdict(&self, message: String) {
        self.notice(message);
    }

    fn notice(&self, message: String) {
        tracing::warn!(
            session = self.session,
            process = self.process.id(),
            "{message}"
        );
    }

    fn exited(&self) -> BoxFuture<'static, ()> {
        Box::pin(self.process.exited())
    }
}

/// Whether `spec` can start, as the backend would find out itself were no launcher in
/// between (the launcher starts whatever the program, whose own exec would fail later, as an
/// exit of 127): its working directory, and its program in the spec's `PATH`, executable.
/// The errors are the backend's kinds: not found, not executable.
pub(crate) fn startable(spec: &SpawnSpec) -> Result<(), BackendError> {
    use std::os::unix::fs::PermissionsExt;
    use BackendErrorKind::{NotFound, PermissionDenied};
    if !spec.cwd.is_dir() {
        let cwd = spec.cwd.display();
        return Err(BackendError::with_kind(
            NotFound,
            format!("working directory {cwd} does not exist"),
        ));
    }
    let (argv, _) = spec.command();
    let program = argv.first().map(String::as_str).unwrap_or_default();
    let path = spec.env.get(std::ffi::OsStr::new("PATH"));
    if uexec_core::backend::local::find_program(program, path.map(|p| p.as_os_str())).is_some() {
        return Ok(());
    }
    if !program.contains('/') {
        return Err(BackendError::with_kind(
            NotFound,
            format!("program {program:?} not found: not found in PATH"),
        ));
    }
    match std::fs::metadata(program) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(BackendError::with_kind(
            NotFound,
            format!("program {program:?} not found: {e}"),
        )),
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(()),
        _ => Err(BackendError::with_kind(
            PermissionDenied,
            format!("program {program:?} is not executable"),
        )),
    }
}
