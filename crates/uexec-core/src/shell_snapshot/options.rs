//! The public tuning of [`ShellSnapshots`](super::ShellSnapshots): its deadlines, its TTL,
//! its cap and where it keeps its files. Here, apart, because both the table (`mod.rs`) and
//! the build read it, and it names nothing of either.

use std::path::PathBuf;
use std::time::Duration;

/// How long a profile may take before its snapshot is given up on.
pub const SHELL_SNAPSHOT_BUILD_TIMEOUT_MS: u64 = 5_000;
/// Age after which a snapshot is rebuilt even if no watched profile file changed.
pub const SHELL_SNAPSHOT_TTL_SECS: u64 = 30 * 60;
/// After a failed build, login commands run real login shells this long before a retry.
pub const SHELL_SNAPSHOT_RETRY_SECS: u64 = 5 * 60;
/// Snapshots kept per [`ShellSnapshots`](super::ShellSnapshots): one per distinct (shell, environment); an exec
/// server's clients may send a new environment with every command. Past the cap, the oldest
/// idle one goes (with its file).
pub const MAX_SHELL_SNAPSHOTS: usize = 16;

/// Tuning of [`ShellSnapshots`](super::ShellSnapshots).
#[derive(Debug, Clone)]
pub struct ShellSnapshotOptions {
    pub build_timeout: Duration,
    pub ttl: Duration,
    pub retry_after: Duration,
    /// Where snapshots are kept; `None` = this user's runtime directory
    /// ([`crate::fs::runtime_dir_path`]).
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
