//! The limit flags `uexec mcp`, `uexec daemon` and `uexec serve` share: the clap twin of
//! [`uexec_core::policy::Limits`], flattened into each face's arguments under one heading.

use uexec_core::policy::{parse_bytes, parse_cpus, parse_pids, CpuMax, Limits};

/// Limits of each session's processes together (its cgroup v2).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LimitArgs {
    /// Most memory a session's processes may use together, in bytes: a number, or one with
    /// a K, M, G or T suffix (powers of 1024: 512M, 2G); `max` for no ceiling. Beyond it
    /// the kernel's OOM killer kills one of them, and the result says so (limits_hit). A
    /// ceiling: a call's `limits.memory_max` (not with --codex-compat) may only lower it.
    /// Needs the memory controller of cgroup v2 for uexec's cgroup: where the machine has
    /// none (`uexec doctor` says), uexec refuses to start.
    #[arg(help_heading = "Limits", long, value_name = "BYTES", value_parser = parse_bytes)]
    pub memory_max: Option<u64>,
    /// Most processes and threads a session may have at once (a fork beyond fails); `max`
    /// for no ceiling. A ceiling: a call's `limits.pids_max` may only lower it. Needs the
    /// pids controller of cgroup v2, as --memory-max needs memory.
    #[arg(help_heading = "Limits", long, value_name = "N", value_parser = parse_pids)]
    pub pids_max: Option<u64>,
    /// Most CPU a session's processes may use together, in CPUs (0.5: half of one core's
    /// time, 2: two cores'), counted every 100 ms; `max` for none. The server's alone:
    /// calls cannot change it. Needs the cpu controller of cgroup v2.
    #[arg(help_heading = "Limits", long, value_name = "CPUS", value_parser = parse_cpus)]
    pub cpu_max: Option<CpuMax>,
}

impl From<LimitArgs> for Limits {
    fn from(args: LimitArgs) -> Self {
        Self {
            memory_max: args.memory_max,
            pids_max: args.pids_max,
            cpu_max: args.cpu_max,
        }
    }
}
