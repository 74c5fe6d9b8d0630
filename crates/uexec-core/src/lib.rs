//! uexec's engine: unified-exec sessions for AI agents and the people who supervise them.
//!
//! A call (`exec_command`, `write_stdin`) *observes* a session for a bounded window and
//! returns a [`Snapshot`]; the session lives in a [`SessionStore`] until a call reports its
//! exit; the OS process runs behind a [`Backend`]. Those three timelines meet at spawn and end
//! at different times, and the engine never confuses them.
//!
//! This crate knows nothing of MCP, JSON-RPC or terminals: faces translate.

#![forbid(unsafe_code)]

pub mod backend;
pub mod config;
pub mod confine;
pub mod env;
pub mod environments;
pub mod error;
pub mod events;
pub mod fs;
pub mod limits;
pub mod notice;
mod output;
pub mod plan;
pub mod policy;
pub mod prune;
pub mod request;
mod session;
pub mod shell_snapshot;
pub mod store;
pub mod transcript;

pub use backend::local::LocalBackend;
pub use backend::{Backend, SpawnSpec};
pub use config::StoreConfig;
pub use environments::Environments;
pub use error::ExecError;
pub use events::{EndStatus, Event, EventKind, EventStream};
pub use notice::ExitNotice;
pub use policy::{MonitorHandle, PolicyMonitor};
pub use request::{
    ExecRequest, OutputPage, ReadOutputRequest, SessionInfo, WaitRequest, WriteRequest,
};
pub use session::{Outcome, OutputWatch};

/// Terminal screens kept per PTY session for people who attach (the emulator comes from
/// the face).
pub mod screen {
    pub use crate::session::keeper::{
        KeeperHandle, Screen, ScreenFactory, ScreenView, REBUILD_SEED_BYTES,
    };
}
pub use output::snapshot::Snapshot;
pub use output::until::{Match, Reason, Until};
pub use output::{buffer, snapshot, text, until, utf8, Hygiene, HygieneRequest};
pub use store::SessionStore;
