//! uexec's engine: unified-exec sessions for AI agents and the people who supervise them.
//!
//! A call (`exec_command`, `write_stdin`) *observes* a session for a bounded window and
//! returns a [`Snapshot`]; the session lives in a [`SessionStore`] until a call reports its
//! exit; the OS process runs behind a [`Backend`]. Those three timelines meet at spawn and end
//! at different times, and the engine never confuses them.
//!
//! The rooms, from the request to the process and back:
//! - `store/`: the calls, a file per verb over one table of sessions, and one write path;
//! - [`spawn`]: the front door every spawn passes: the request checked and turned into a
//!   typed [`SpawnSpec`], then the command rules, a person's yes, the confinement and the
//!   shell snapshot, in that order, in one function; only it calls `Backend::spawn`;
//! - `session/`: one session: its pump, a call's window, its taps and screen, its end, and
//!   what is known of its process as a value with pure transitions (`session/lifecycle.rs`);
//! - [`backend`]: where processes run (local PTYs and pipes; remote ones behind the same trait);
//! - `output/`: bytes to the text a result carries (buffers, UTF-8, hygiene, wait conditions,
//!   the snapshot), pure and unit-tested;
//! - [`transcript`]: every byte on disk, paged back, exported as a recording;
//! - [`policy`] and [`confine`]: the sandbox's vocabulary and the seams a confinement
//!   (`uexec-sandbox`) plugs into; [`fs`]: the one private-directory check.
//!
//! # Architecture invariants
//!
//! - No `unsafe` here: every syscall is in `uexec-sys`.
//! - No face's knowledge: no MCP, JSON-RPC, wire format or terminal; faces translate. Errors
//!   are typed variants in the engine's words (which name a request's own fields), and a
//!   face adds its tools' and flags' (a closed stdin, a person at the session, a sandbox
//!   wider than the ceiling).
//! - No confinement mechanism: core names its policy vocabulary and declares the seams
//!   ([`confine::Confinement`], [`backend::Launch`]); it never names a launcher, a namespace
//!   or a proxy.
//! - A spawn is intent ([`backend::Program`]) until one place renders it into an argv
//!   ([`SpawnSpec::command`]); nothing parses an argv back.
//! - No process-wide state but the last will's hook (`backend::local::set_group_watch`: a
//!   process has one group watcher) and a transcript pruning clock; everything else is a
//!   value its owner holds.
//! - No import circle between modules. The leaves come first: `utf8`, `rfc3339` and `policy`
//!   use no other module; `transcript` uses only `fs` and `utf8`; `output` only those, `limits`
//!   and `error`; the store, the sessions and the plan sit above them.

#![forbid(unsafe_code)]

pub mod backend;
mod config;
pub mod confine;
pub mod env;
pub mod environments;
mod error;
mod events;
pub mod fs;
pub mod limits;
pub mod metrics;
mod notice;
mod output;
pub mod policy;
mod prune;
mod request;
pub mod rfc3339;
mod session;
pub mod shell_snapshot;
pub mod spawn;
pub mod store;
pub mod transcript;
pub mod usage;
pub mod utf8;

pub use backend::local::LocalBackend;
pub use backend::{Backend, SpawnSpec};
pub use config::{StoreConfig, WhenFull};
pub use environments::Environments;
pub use error::ExecError;
pub use events::{EndStatus, Event, EventKind, EventStream};
pub use notice::ExitNotice;
pub use policy::{MonitorHandle, PolicyMonitor};
pub use request::{
    check_session_name, ExecRequest, OutputPage, ReadOutputRequest, SessionEnd, SessionInfo,
    Stopped, WaitRequest, Waiting, WriteRequest, MAX_SESSION_NAME_CHARS,
};
pub use session::{Outcome, OutputWatch, Prompt};

/// Terminal screens kept per PTY session for people who attach (the emulator comes from
/// the face).
pub mod screen {
    pub use crate::session::keeper::{
        KeeperHandle, Screen, ScreenFactory, ScreenView, REBUILD_SEED_BYTES,
    };
}
pub use output::snapshot::{Snapshot, Status};
pub use output::until::{Match, Reason, Until};
pub use output::{buffer, snapshot, until, Hygiene, HygieneRequest};
pub use store::{CallWith, SessionStore};
