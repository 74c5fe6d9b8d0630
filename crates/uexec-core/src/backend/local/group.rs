//! The last-will hook: who hears of every process group the local backend starts and sweeps.
//! Here, apart, because the spawn tells it of a new group and the control of a swept one:
//! a leaf both use, so neither has to reach into the other for it.

use std::sync::{Arc, OnceLock};

/// Hears of every process group the local backend starts and, once it is gone, sweeps: the
/// hook for a *last will*, something outside this process that kills what is left if this
/// process dies without cleaning up (SIGKILL, OOM killer). The parent-death signal reaches
/// only direct children; a background job of a session is a grandchild.
pub trait GroupWatch: Send + Sync + 'static {
    fn started(&self, pgid: u32);
    fn swept(&self, pgid: u32);
}

static GROUP_WATCH: OnceLock<Arc<dyn GroupWatch>> = OnceLock::new();

/// Installs the process-wide [`GroupWatch`] (one per process, as the process has one death);
/// false when one was already installed.
pub fn install_group_watch(watch: Arc<dyn GroupWatch>) -> bool {
    GROUP_WATCH.set(watch).is_ok()
}

/// Tells the installed watch, if any, of a group just started.
pub(super) fn started(pgid: u32) {
    if let Some(watch) = GROUP_WATCH.get() {
        watch.started(pgid);
    }
}

/// Tells the installed watch, if any, of a group swept after its leader's reap.
pub(super) fn swept(pgid: u32) {
    if let Some(watch) = GROUP_WATCH.get() {
        watch.swept(pgid);
    }
}
