//! Where processes actually run. The engine speaks to every backend through one trait, so a
//! session behaves the same whether it runs in a local PTY, on local pipes, or on a remote
//! exec server.
//!
//! A backend reports three things separately, because they happen at different times:
//! 1. output chunks, on a channel that closes when the output closes (EOF on every stream);
//! 2. the exit, once, on a oneshot;
//! 3. nothing else: writes, signals and termination go the other way through
//!    [`ProcessControl`].
//!
//! Exit and close are independent: a background job can hold the output open long after the
//! shell exited, and a remote server may report them in either order.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

pub mod local;

/// What to run, as intent: a shell command line, or a program and its arguments. It becomes
/// an argv in one place only ([`SpawnSpec::command`]), and nothing parses an argv back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// `shell -lc script` (a login shell) or `shell -c script`.
    Shell {
        shell: String,
        login: bool,
        script: String,
    },
    /// A program and its arguments, as given; `argv[0]` is looked up in `PATH` when it has
    /// no slash.
    Argv { argv: Vec<String> },
}

impl Program {
    /// The program's own argv.
    pub fn argv(&self) -> Vec<String> {
        match self {
            Self::Shell {
                shell,
                login,
                script,
            } => {
                let flag = if *login { "-lc" } else { "-c" };
                vec![shell.clone(), flag.to_owned(), script.clone()]
            }
            Self::Argv { argv } => argv.clone(),
        }
    }
}

/// How a prepared child starts when something must stand between the backend and the
/// program (a sandbox's launcher): it wraps the program's argv, and it may start the
/// rendered child itself (one started ahead). Core declares it; `uexec-sandbox` implements
/// it. Only the local backend runs one.
pub trait Launch: std::fmt::Debug + Send + Sync + 'static {
    /// The argv that runs `argv` (shown as `arg0`, when given) through this launcher, and
    /// the `argv[0]` the launcher's own process shows.
    fn render(&self, argv: Vec<String>, arg0: Option<String>) -> (Vec<String>, Option<String>);
    /// Starts the rendered child, when this launcher has a faster way than a spawn; `None`:
    /// the backend spawns it.
    fn start(&self, child: &uexec_sys::ChildSpec) -> std::io::Result<Option<Started>>;
}

/// A child a [`Launch`] started (or had started ahead).
#[derive(Debug)]
pub struct Started {
    pub child: uexec_sys::SpawnedChild,
    /// The cgroup it was started ahead in ([`local::SpareCgroup`]), which the session
    /// adopts in place of its own; `None`: it is in the one of [`uexec_sys::ChildSpec`].
    pub cgroup: Option<local::SpareCgroup>,
}

/// What to start.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    pub program: Program,
    /// `argv[0]` as the process sees it, when different from the program.
    pub arg0: Option<String>,
    /// Absolute working directory.
    pub cwd: PathBuf,
    /// The environment of the process, applied as `env_mode` says (byte strings: a
    /// variable that is not UTF-8 is passed on unchanged).
    pub env: crate::env::Environment,
    pub env_mode: EnvMode,
    /// A PTY (one merged stream) instead of pipes.
    pub tty: bool,
    /// Pipe mode only: keep stdin open as a pipe instead of `/dev/null`.
    pub pipe_stdin: bool,
    /// Pipe mode only: stdout and stderr are one pipe, as on a terminal (their order is the
    /// program's); the local backend only, a remote one keeps its two streams.
    pub one_stream: bool,
    /// Descriptors the process gets as fds 3, 4, ... in order (local backend only: the
    /// sandbox launcher's ends of its hand-overs, the allowlist proxy's and the exec
    /// listener's; [`PassedFd::push`] says where each lands).
    pub passed_fd: Option<PassedFd>,
    /// What starts the program (local backend only: a sandbox's launcher); `None`: the
    /// backend spawns the program itself.
    pub launcher: Option<Arc<dyn Launch>>,
    /// Limits of the process and its descendants together (local backend only: the
    /// session's cgroup); a backend that cannot apply them fails the spawn.
    pub limits: crate::policy::Limits,
}

impl SpawnSpec {
    /// The argv to exec and the `argv[0]` to show: the program's, wrapped by the launcher
    /// when there is one. The one place a spawn becomes an argv.
    pub fn command(&self) -> (Vec<String>, Option<String>) {
        self.render(self.program.argv())
    }

    /// [`Self::command`] as it is executed: a login shell whose environment carries the
    /// caller's PATH ([`crate::env::CALLER_PATH_VAR`]) takes it back after its profile
    /// ([`crate::env::after_login_profile`]); the command shown stays the caller's.
    pub fn command_to_exec(&self) -> (Vec<String>, Option<String>) {
        match &self.program {
            Program::Shell {
                shell,
                login: true,
                script,
            } if self
                .env
                .contains_key(OsStr::new(crate::env::CALLER_PATH_VAR)) =>
            {
                let script = crate::env::after_login_profile(script);
                self.render(vec![shell.clone(), "-lc".to_owned(), script])
            }
            program => self.render(program.argv()),
        }
    }

    /// Passes `fd` to the process after those passed already ([`Self::passed_fd`]): the
    /// descriptor number it gets there, for the argument that tells it which is which.
    pub fn pass_fd(&mut self, fd: std::os::fd::OwnedFd) -> Result<std::os::fd::RawFd, String> {
        match &self.passed_fd {
            Some(passed) => passed.push(fd),
            None => {
                self.passed_fd = Some(PassedFd::new(fd));
                Ok(uexec_sys::PASSED_FD)
            }
        }
    }

    fn render(&self, argv: Vec<String>) -> (Vec<String>, Option<String>) {
        match &self.launcher {
            Some(launcher) => launcher.render(argv, self.arg0.clone()),
            None => (argv, self.arg0.clone()),
        }
    }
}

/// Equal programs, places and descriptors, and the same launcher (not an equal one).
impl PartialEq for SpawnSpec {
    fn eq(&self, other: &Self) -> bool {
        let same_launcher = match (&self.launcher, &other.launcher) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        same_launcher
            && self.program == other.program
            && self.arg0 == other.arg0
            && self.cwd == other.cwd
            && self.env == other.env
            && self.env_mode == other.env_mode
            && self.tty == other.tty
            && self.pipe_stdin == other.pipe_stdin
            && self.one_stream == other.one_stream
            && self.passed_fd == other.passed_fd
            && self.limits == other.limits
    }
}

impl Eq for SpawnSpec {}

/// The descriptors for one process to inherit (at fds 3, 4, ... in order), taken together by
/// the spawn that passes them: once passed, the engine holds no copy (each peer sees the end
/// of its stream when that process closes it), and clones of the spec share them.
#[derive(Debug, Clone)]
pub struct PassedFd(Arc<std::sync::Mutex<Option<Vec<std::os::fd::OwnedFd>>>>);

impl PassedFd {
    /// One descriptor, for fd 3.
    pub fn new(fd: std::os::fd::OwnedFd) -> Self {
        Self(Arc::new(std::sync::Mutex::new(Some(vec![fd]))))
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Option<Vec<std::os::fd::OwnedFd>>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds `fd` after the others: the descriptor number the process gets it at. `Err` when
    /// a spawn took them already, or there would be more than one process may be passed
    /// ([`uexec_sys::MAX_PASSED_FDS`]).
    pub fn push(&self, fd: std::os::fd::OwnedFd) -> Result<std::os::fd::RawFd, String> {
        let mut held = self.held();
        let fds = held
            .as_mut()
            .ok_or("the descriptors for this spawn were passed to an earlier one")?;
        if fds.len() >= uexec_sys::MAX_PASSED_FDS {
            return Err(format!(
                "a process may be passed {} descriptors at most",
                uexec_sys::MAX_PASSED_FDS
            ));
        }
        fds.push(fd);
        Ok(uexec_sys::PASSED_FD + fds.len() as std::os::fd::RawFd - 1)
    }

    /// The descriptors, in order, unless a spawn took them already.
    pub fn take(&self) -> Option<Vec<std::os::fd::OwnedFd>> {
        self.held().take()
    }
}

/// The same descriptor (a clone of the spec), not an equal one.
impl PartialEq for PassedFd {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for PassedFd {}

/// How [`SpawnSpec::env`] becomes the process's environment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum EnvMode {
    /// `env` is the whole environment; nothing is inherited.
    #[default]
    Exact,
    /// The backend's own environment, minus names that look secret
    /// ([`crate::env::SECRET_RULE`]) and minus `drop`, with `env` on top. For backends on other machines, whose
    /// environment the caller cannot see.
    InheritFiltered { drop: Vec<String> },
}

/// Where a backend runs its processes: what the engine may check before a spawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// This machine: working directories and shells are checked here.
    Local,
    /// Another machine: nothing can be checked locally; relative working directories join
    /// the remote's cwd and the default shell is the remote's.
    Remote {
        cwd: Option<PathBuf>,
        shell: Option<String>,
    },
}

/// Which stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    Stdout,
    Stderr,
    Pty,
}

/// One read of output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputChunk {
    pub stream: Stream,
    pub bytes: Bytes,
}

/// How a process ended, as the backend saw it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExitReport {
    /// The status code, or `128 + N` when killed by signal N; `None` when unknown.
    pub exit_code: Option<i32>,
    /// Set when the backend itself failed the process (e.g. a lost connection).
    pub failure: Option<String>,
}

pub use crate::usage::{Ending, Usage};

/// Result of a write to stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    Accepted,
    /// The process has no open stdin (pipe mode without a stdin pipe, or stdin closed).
    StdinClosed,
    /// The backend does not know the process (any more).
    UnknownProcess,
}

/// Signals a caller may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT to the process group (Ctrl-C).
    Interrupt,
    /// SIGTERM to the process group (a polite stop, e.g. the hard timeout).
    Terminate,
    /// SIGHUP (the terminal hung up; many daemons reload on it).
    Hangup,
    /// SIGQUIT (stop and dump core).
    Quit,
    /// SIGKILL, sent as a signal: unlike a terminate, the session ends as any exit does.
    Kill,
    /// SIGUSR1.
    User1,
    /// SIGUSR2.
    User2,
}

impl Signal {
    /// Every signal, in the order people are told of them.
    pub const ALL: [Signal; 7] = [
        Signal::Hangup,
        Signal::Interrupt,
        Signal::Quit,
        Signal::Kill,
        Signal::User1,
        Signal::User2,
        Signal::Terminate,
    ];

    /// Its name without `SIG` (`TERM`).
    pub fn name(self) -> &'static str {
        match self {
            Signal::Hangup => "HUP",
            Signal::Interrupt => "INT",
            Signal::Quit => "QUIT",
            Signal::Kill => "KILL",
            Signal::User1 => "USR1",
            Signal::User2 => "USR2",
            Signal::Terminate => "TERM",
        }
    }

    /// Its number here (`kill -l`).
    pub fn number(self) -> i32 {
        match self {
            Signal::Hangup => libc::SIGHUP,
            Signal::Interrupt => libc::SIGINT,
            Signal::Quit => libc::SIGQUIT,
            Signal::Kill => libc::SIGKILL,
            Signal::User1 => libc::SIGUSR1,
            Signal::User2 => libc::SIGUSR2,
            Signal::Terminate => libc::SIGTERM,
        }
    }

    /// A signal as `kill` takes it: `TERM`, `SIGTERM`, `term` or `15`.
    pub fn parse(s: &str) -> Option<Signal> {
        let upper = s.to_ascii_uppercase();
        let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
        Self::ALL
            .into_iter()
            .find(|sig| sig.name() == bare || sig.number().to_string() == bare)
    }
}

pub use uexec_sys::InputWait;

/// How a PTY session's terminal is set to read input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputModes {
    /// Typed characters are echoed.
    pub echo: bool,
    /// Line-by-line (canonical) input.
    pub canonical: bool,
}

impl InputModes {
    /// A line is read with echo off: a password or passphrase prompt.
    pub fn secret(self) -> bool {
        self.canonical && !self.echo
    }
}

/// What kind of failure a [`BackendError`] is, for callers that map it to codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendErrorKind {
    /// The program or the working directory does not exist.
    NotFound,
    /// The program is not executable.
    PermissionDenied,
    /// The backend cannot be reached (a remote server went away).
    Unavailable,
    Other,
}

/// A backend's failure to do what it was asked, in words a caller can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct BackendError {
    pub kind: BackendErrorKind,
    pub message: String,
}

impl BackendError {
    pub fn new(message: impl Into<String>) -> Self {
        Self::with_kind(BackendErrorKind::Other, message)
    }

    pub fn with_kind(kind: BackendErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

/// The caller's side of a running process.
pub trait ProcessControl: Send + Sync + 'static {
    /// Writes bytes to stdin (the PTY in TTY mode).
    fn write(&self, bytes: Vec<u8>) -> BoxFuture<'_, Result<WriteOutcome, BackendError>>;
    /// Sends a signal to the process group.
    fn signal(&self, signal: Signal) -> BoxFuture<'_, Result<(), BackendError>>;
    /// Kills the process group and then the process itself (in case the group id is stale),
    /// and closes the output after reading what is already buffered. Never blocks, never fails.
    fn terminate(&self);
    /// Kills whatever is left of the process group after the process itself exited.
    fn kill_leftovers(&self);
    /// Closes a piped stdin (the process reads EOF). `StdinClosed` when there is none.
    fn close_stdin(&self) -> BoxFuture<'_, Result<WriteOutcome, BackendError>> {
        Box::pin(async {
            Err(BackendError::new(
                "this backend cannot close a process's stdin",
            ))
        })
    }
    /// The terminal's input modes, for PTY sessions whose terminal can be inspected.
    fn input_modes(&self) -> Option<InputModes> {
        None
    }
    /// Resizes the terminal of a PTY session (its programs get SIGWINCH).
    fn resize(&self, _rows: u16, _cols: u16) -> Result<(), BackendError> {
        Err(BackendError::new("this session has no terminal to resize"))
    }
    /// What the process (or one it started) sleeps in, as far as input goes; `None` when
    /// the backend cannot tell.
    fn input_wait(&self) -> Option<InputWait> {
        None
    }
    /// What the process and its descendants used so far; after the end, in all. `None`
    /// when the backend cannot count (no cgroup, a remote backend).
    fn usage(&self) -> Option<Usage> {
        None
    }
    /// How the process's descendants ended beside it (read once it has exited: what it left
    /// running, which the end then kills) and the limits they ran into. Empty when the
    /// backend cannot tell (no cgroup, a remote backend).
    fn ending(&self) -> Ending {
        Ending::default()
    }
    /// Freezes (`true`) or thaws the process and every descendant, returning once the
    /// kernel says it is done. Refused where the backend cannot.
    fn pause(&self, _frozen: bool) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async { Err(BackendError::new("this backend cannot pause a session")) })
    }
    /// Whether the process is frozen ([`Self::pause`]).
    fn paused(&self) -> bool {
        false
    }
}

/// A started process: its output, its exit and its controls.
pub struct SpawnedProcess {
    /// OS pid when local (for display and diagnostics only, never an id).
    pub pid: Option<u32>,
    /// Output in arrival order; the channel closes when the output closes.
    pub output: mpsc::Receiver<OutputChunk>,
    /// Fires once with the exit.
    pub exit: oneshot::Receiver<ExitReport>,
    pub control: Arc<dyn ProcessControl>,
}

impl std::fmt::Debug for SpawnedProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpawnedProcess")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// Something that can start processes.
pub trait Backend: Send + Sync + 'static {
    /// Starts a process. Errors name the cause ("No such file or directory" for a missing
    /// program, and so on).
    fn spawn(&self, spec: SpawnSpec) -> BoxFuture<'_, Result<SpawnedProcess, BackendError>>;

    /// Where the processes run (default: here).
    fn placement(&self) -> Placement {
        Placement::Local
    }

    /// Gets ready to start a process, before its placement is asked (default: nothing to
    /// do). A backend that connects on demand connects here, so the placement is known.
    fn prepare(&self) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async { Ok(()) })
    }
}

#[cfg(test)]
mod tests {
    use super::Signal;

    #[test]
    fn a_signal_is_read_as_kill_takes_it() {
        for word in ["TERM", "SIGTERM", "term", "SigTerm", "15"] {
            assert_eq!(Signal::parse(word), Some(Signal::Terminate), "{word}");
        }
        for signal in Signal::ALL {
            assert_eq!(Signal::parse(signal.name()), Some(signal));
            assert_eq!(Signal::parse(&signal.number().to_string()), Some(signal));
        }
        for word in ["", "SIG", "0", "STOP", "TERM ", "-15", "99"] {
            assert_eq!(Signal::parse(word), None, "{word:?}");
        }
    }
}
