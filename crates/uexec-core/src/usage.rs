//! What a session's processes used, and how they ended beside its command, as its backend
//! counts it (its cgroup): a leaf, so that the backend (which reads it) and the events
//! (whose End carries it) share it without a circle. It uses only `policy` (a leaf too).

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

/// A process a session's command left running when it exited (a descendant its cgroup
/// still held): killed with the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftProcess {
    /// Its pid, as uexec sees it.
    pub pid: u32,
    /// Its command line (arguments joined by spaces, cut to a line), else its name.
    pub command: String,
}

/// How a session's processes ended beside its command (the leader), where its backend
/// can tell (a cgroup holds every descendant).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeEnd {
    /// Nothing outlived the command: its cgroup was empty once it had exited (or a
    /// terminate killed the whole tree with it).
    Whole,
    /// The command exited and left `count` processes running (`cmd &`, a daemonising
    /// server), `named` the first of them: the session is over with its command, and they
    /// are killed with it (SPEC §6), not kept.
    LeftRunning {
        count: usize,
        named: Vec<LeftProcess>,
    },
}

impl TreeEnd {
    /// `2 processes (pid 4242: sleep 100; pid 4250: node server.js)`, or `None` when
    /// nothing was left.
    pub fn left_text(&self) -> Option<String> {
        let Self::LeftRunning { count, named } = self else {
            return None;
        };
        let mut list: Vec<String> = named
            .iter()
            .map(|p| format!("pid {}: {}", p.pid, p.command))
            .collect();
        if *count > named.len() {
            list.push(format!("{} more", count - named.len()));
        }
        let noun = if *count == 1 { "process" } else { "processes" };
        Some(format!("{count} {noun} ({})", list.join("; ")))
    }
}

/// A limit of the session's cgroup that its processes ran into, as the kernel counted it
/// (`memory.events`, `pids.events`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitHit {
    /// The OOM killer killed `kills` of its processes at its memory limit.
    Memory { kills: u64, max_bytes: u64 },
    /// `refused` forks failed at its process limit.
    Pids { refused: u64, max: u64 },
}

impl LimitHit {
    /// `Memory limit reached: the OOM killer killed 1 process of this session (memory_max
    /// 64 MiB)`.
    pub fn text(&self) -> String {
        let plural =
            |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        match *self {
            Self::Memory { kills, max_bytes } => format!(
                "Memory limit reached: the OOM killer killed {} of this session (memory_max {})",
                plural(kills, "process", "processes"),
                crate::policy::show_bytes(max_bytes)
            ),
            Self::Pids { refused, max } => format!(
                "Process limit reached: {} failed (pids_max {max})",
                plural(refused, "fork", "forks")
            ),
        }
    }
}

/// What a session's cgroup says of its end, beside the figures: how its tree ended and
/// the limits it ran into. Empty where the backend cannot tell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ending {
    pub tree: Option<TreeEnd>,
    pub limits_hit: Vec<LimitHit>,
}
