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
pub mod buffer;
pub mod config;
pub mod env;
pub mod environments;
pub mod error;
pub mod events;
pub mod fs;
pub mod limits;
pub mod notice;
pub mod plan;
pub mod prune;
pub mod request;
pub mod sandbox;
mod session;
pub mod shell_snapshot;
pub mod snapshot;
pub mod store;
pub mod text;
pub mod transcript;
pub mod until;
pub mod utf8;

pub use backend::local::LocalBackend;
pub use backend::{Backend, SpawnSpec};
pub use config::StoreConfig;
pub use environments::Environments;
pub use error::ExecError;
pub use events::{EndStatus, Event, EventKind, EventStream};
pub use notice::ExitNotice;
pub use request::{
    ExecRequest, HygieneRequest, OutputPage, ReadOutputRequest, SessionInfo, WaitRequest,
    WriteRequest,
};
pub use session::{MonitorHandle, Outcome, OutputWatch, PolicyMonitor};

/// Terminal screens kept per PTY session for people who attach (the emulator comes from
/// the face).
pub mod screen {
    pub use crate::session::keeper::{
        KeeperHandle, Screen, ScreenFactory, ScreenView, REBUILD_SEED_BYTES,
    };
}
pub use snapshot::Snapshot;
pub use store::SessionStore;
pub use until::{Match, Reason, Until};
