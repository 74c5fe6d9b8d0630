//! What `uexec daemon` starts with, as plain values (the binary's flags converted), and why
//! it could not start or stop.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use uexec_net::SignalError;

use crate::{TranscriptOptions, TranscriptsDirError};

/// `uexec daemon --idle-timeout`'s default, in seconds.
pub const DEFAULT_IDLE_TIMEOUT_S: u64 = 600;

/// `uexec daemon --person-sessions`' default: the most sessions a person runs at once
/// (an agent's store keeps Codex's 64, and prunes).
pub const DEFAULT_PERSON_SESSIONS: usize = 256;

/// `uexec daemon`.
#[derive(Debug, Clone)]
pub struct DaemonOptions {
    /// What confines sandboxed commands (the binary builds it); `None`: none.
    pub confinement: Option<Arc<dyn uexec_core::confine::Confinement>>,
    /// `--socket`: where to listen (default: [`super::default_socket`]); its directory must be
    /// private.
    pub socket: Option<PathBuf>,
    /// `--idle-timeout`: seconds with no session and no client before it exits; 0 never.
    pub idle_timeout: u64,
    /// `--stop`: stop the running daemon instead.
    pub stop: bool,
    /// Where transcripts go.
    pub transcripts: TranscriptOptions,
    /// Where it logs (the engine's `--log-file`), for `--status`; `None`: stderr.
    pub log_file: Option<PathBuf>,
    /// `--memory-max`, `--pids-max`, `--cpu-max`: the limits of every session's cgroup, a
    /// ceiling under which each client's own may only go lower.
    pub limits: uexec_core::policy::Limits,
    /// `--rules`: command rules every client's commands are judged by (a client's own
    /// `--rules` add to them: the strictest decision wins).
    pub rules: Vec<PathBuf>,
    /// `--unmatched`: the decision for a command those rules do not match.
    pub unmatched: Option<uexec_core::policy::rules::Decision>,
    /// `--person-sessions`: the most running sessions of a person; past it a run is
    /// refused (none of theirs is ever pruned).
    pub person_sessions: usize,
}

impl Default for DaemonOptions {
    fn default() -> Self {
        Self {
            confinement: None,
            socket: None,
            idle_timeout: DEFAULT_IDLE_TIMEOUT_S,
            stop: false,
            transcripts: TranscriptOptions::default(),
            log_file: None,
            limits: uexec_core::policy::Limits::default(),
            rules: Vec::new(),
            unmatched: None,
            person_sessions: DEFAULT_PERSON_SESSIONS,
        }
    }
}

/// Why the daemon could not start, or `--stop` could not stop it.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    TranscriptsDir(#[from] TranscriptsDirError),
    #[error("--rules: {0}")]
    Rules(#[from] uexec_rules::LoadError),
    #[error("--socket needs a directory part")]
    SocketWithoutDirectory,
    #[error("cannot open {}", path.display())]
    OpenLock {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("a uexec daemon already runs for {} (it holds {})", socket.display(), lock.display())]
    AlreadyRuns { socket: PathBuf, lock: PathBuf },
    #[error("cannot listen on {}", socket.display())]
    Listen {
        socket: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write {}", path.display())]
    PidFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the daemon holds its lock but wrote no daemon.pid")]
    NoPidFile,
    #[error("the uexec daemon (pid {pid}) did not stop within 10 s")]
    StillRunning { pid: u32 },
    #[error(transparent)]
    Signal(#[from] SignalError),
    #[error(transparent)]
    Io(#[from] io::Error),
}
