//! What a session's processes used, as its backend counts it: a leaf, so that the backend
//! (which reads it) and the events (whose End carries it) share it without a circle.

/// What a session's processes used so far (or in all, once it ended), as its cgroup
/// counts them: CPU always; memory and processes only where those controllers are enabled
/// (absent otherwise, never guessed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// CPU time, user and system (`cpu.stat` `usage_usec`).
    pub cpu_usec: u64,
    pub user_usec: u64,
    pub system_usec: u64,
    /// Memory in use now (`memory.current`).
    pub memory_bytes: Option<u64>,
    /// The most memory used at once (`memory.peak`).
    pub memory_peak_bytes: Option<u64>,
    /// Processes alive now (`pids.current`).
    pub pids: Option<u64>,
}

impl Usage {
    /// The CPU time in seconds (user and system).
    pub fn cpu_seconds(&self) -> f64 {
        self.cpu_usec as f64 / 1e6
    }
}
