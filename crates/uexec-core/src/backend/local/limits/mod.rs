//! The limits of sessions' cgroups (`memory.max`, `pids.max`, `cpu.max`): enabling the
//! controllers they need, writing them, and reading whether a session ran into them. Here,
//! apart from the cgroup's making and killing, because the kernel's rules for controllers
//! are a concern of their own, and every step works on directories it is given (a test
//! gives it a directory shaped like a cgroup).
//!
//! 1. **Controllers**: the kernel applies `memory.max` only where the memory controller is
//!    enabled for the cgroup, i.e. listed in its parent's `cgroup.subtree_control`, and a
//!    parent may enable only what its own `cgroup.controllers` offers (a controller bound to
//!    a cgroup v1 hierarchy is offered nowhere in v2). uexec enables what its server's
//!    limits need, once, at start-up ([`enable`]): in its own cgroup, then in its
//!    `uexec.<pid>`. A call's limit needs its controller enabled already ([`enabled`]).
//! 2. **No internal processes**: the kernel passes a controller down only through a cgroup
//!    with no process of its own (the root excepted), and uexec's own cgroup holds uexec.
//!    When the kernel says so (EBUSY) and uexec is alone there, it moves itself into a leaf
//!    beside its sessions' subtree (`uexec.<pid>.server`), as systemd asks of a service it
//!    delegates a cgroup to; not alone, the start-up fails and says who is in the way.
//! 3. **Each session**: its limits are written into its cgroup before the command enters
//!    it ([`apply`]); a write that fails fails the spawn, so a limit is never dropped.
//! 4. **The end**: `memory.events` `oom_kill` and `pids.events` `max` say whether the
//!    session ran into its limits ([`hits`]).

use std::fs;
use std::io;
use std::path::Path;

use crate::policy::{show_count, Limits, NO_LIMIT};
use crate::usage::LimitHit;

/// A cgroup controller that a limit needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    Memory,
    Pids,
    Cpu,
}

impl Controller {
    pub const ALL: [Self; 3] = [Self::Memory, Self::Pids, Self::Cpu];

    /// The kernel's name (`memory`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Pids => "pids",
            Self::Cpu => "cpu",
        }
    }

    /// The limit it applies, as a call's `limits` names it (`memory_max`).
    pub fn limit(self) -> &'static str {
        match self {
            Self::Memory => "memory_max",
            Self::Pids => "pids_max",
            Self::Cpu => "cpu_max",
        }
    }

    /// The limit's file in a cgroup (`memory.max`).
    fn file(self) -> &'static str {
        match self {
            Self::Memory => "memory.max",
            Self::Pids => "pids.max",
            Self::Cpu => "cpu.max",
        }
    }

    /// What it limits, for people.
    fn what(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Pids => "number of processes",
            Self::Cpu => "CPU time",
        }
    }
}

/// The controllers `limits` need, in [`Controller::ALL`]'s order.
pub fn needed(limits: &Limits) -> Vec<Controller> {
    let set = [
        limits.memory_max.is_some(),
        limits.pids_max.is_some(),
        limits.cpu_max.is_some(),
    ];
    Controller::ALL
        .into_iter()
        .zip(set)
        .filter_map(|(c, on)| on.then_some(c))
        .collect()
}

/// Why a limit cannot be applied here: the controller it needs, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{why}")]
pub struct LimitsError {
    pub controller: Controller,
    pub why: String,
    /// This machine cannot (not this server's choice: a restart with the flag would not
    /// help; `uexec doctor` says why).
    pub machine: bool,
}

impl LimitsError {
    /// The machine cannot apply it.
    fn new(controller: Controller, why: impl Into<String>) -> Self {
        Self {
            controller,
            why: why.into(),
            machine: true,
        }
    }
}

/// Makes sessions' cgroups ready for `limits` (a server's, at its start-up, before its last
/// will's watchdog exists): the controllers they need enabled, or why they cannot be.
pub fn prepare(limits: &Limits) -> Result<(), LimitsError> {
    let wanted = needed(limits);
    let Some(&first) = wanted.first() else {
        return Ok(());
    };
    let (own, root) = super::cgroup::tree_dirs().map_err(|why| no_cgroup(first, why))?;
    enable(own, root, &wanted, std::process::id())
}

/// Whether a call's `limits` can be applied to its session: the controllers they need
/// enabled (by the server, at its start), or why not.
pub fn check(limits: &Limits) -> Result<(), LimitsError> {
    let Some(&first) = needed(limits).first() else {
        return Ok(());
    };
    let (own, root) = super::cgroup::tree_dirs().map_err(|why| no_cgroup(first, why))?;
    enabled(own, root, limits)
}

/// Each controller a limit needs, and whether the kernel offers it to this process's
/// cgroup (`uexec doctor`): what for, or why not.
pub fn probe() -> Vec<(Controller, Result<String, String>)> {
    let own = super::cgroup::own_dir();
    let proc_cgroup = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    Controller::ALL
        .into_iter()
        .map(|c| {
            let verdict = match &own {
                Err(why) => Err(no_cgroup(c, why).why),
                Ok(own) => {
                    let offered = listed(&own.join("cgroup.controllers"));
                    if has(&offered, c) {
                        Ok(format!(
                            "the {} controller is offered to {}",
                            c.name(),
                            own.display()
                        ))
                    } else {
                        Err(
                            not_offered(c, own, &offered, v1_binding(c, &proc_cgroup).as_deref())
                                .why,
                        )
                    }
                }
            };
            (c, verdict)
        })
        .collect()
}

fn no_cgroup(c: Controller, why: &str) -> LimitsError {
    LimitsError::new(
        c,
        format!(
            "this machine cannot limit a session's {}: limits need a cgroup per session, and there is none here ({why})",
            c.what()
        ),
    )
}

/// The words of a controller list file (`cgroup.controllers`, `cgroup.subtree_control`).
fn listed(file: &Path) -> Vec<String> {
    fs::read_to_string(file)
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

fn has(list: &[String], c: Controller) -> bool {
    list.iter().any(|w| w == c.name())
}

/// Why the kernel offers `c` nowhere in uexec's cgroup `own`: where it is bound instead.
fn not_offered(c: Controller, own: &Path, offered: &[String], v1: Option<&str>) -> LimitsError {
    let offered = if offered.is_empty() {
        "none".to_owned()
    } else {
        offered.join(" ")
    };
    let bound = match v1 {
        Some(line) => format!(
            "; it is bound to a cgroup v1 hierarchy (/proc/self/cgroup: {line}), and a controller lives in one hierarchy only"
        ),
        None => "; it is not delegated to uexec's cgroup".to_owned(),
    };
    LimitsError::new(
        c,
        format!(
            "this machine cannot limit a session's {}: the {} controller is not offered to uexec's cgroup {} in cgroup v2 (its cgroup.controllers: {offered}){bound}",
            c.what(),
            c.name(),
            own.display()
        ),
    )
}

/// The `/proc/self/cgroup` line of the v1 hierarchy that holds `c`, if any.
fn v1_binding(c: Controller, proc_cgroup: &str) -> Option<String> {
    proc_cgroup
        .lines()
        .find(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, names) = (parts.next(), parts.next().unwrap_or(""));
            names.split(',').any(|n| n == c.name())
        })
        .map(str::to_owned)
}

/// Enables `wanted` for the sessions' cgroups under `root` (`own/uexec.<me>`), as the module
/// doc says (steps 1 and 2): at start-up, before the last will's watchdog exists (it would
/// be one more process in `own`).
pub(super) fn enable(
    own: &Path,
    root: &Path,
    wanted: &[Controller],
    me: u32,
) -> Result<(), LimitsError> {
    let on_root = listed(&root.join("cgroup.subtree_control"));
    let missing: Vec<Controller> = wanted
        .iter()
        .copied()
        .filter(|c| !has(&on_root, *c))
        .collect();
    let Some(&first) = missing.first() else {
        return Ok(());
    };
    let offered = listed(&own.join("cgroup.controllers"));
    let proc_cgroup = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    if let Some(&c) = missing.iter().find(|c| !has(&offered, **c)) {
        let v1 = v1_binding(c, &proc_cgroup);
        return Err(not_offered(c, own, &offered, v1.as_deref()));
    }
    let words = |cs: &[Controller]| {
        cs.iter()
            .map(|c| format!("+{}", c.name()))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let in_own = listed(&own.join("cgroup.subtree_control"));
    let for_own: Vec<Controller> = missing
        .iter()
        .copied()
        .filter(|c| !has(&in_own, *c))
        .collect();
    if !for_own.is_empty() {
        let control = own.join("cgroup.subtree_control");
        let write = || fs::write(&control, words(&for_own));
        match write() {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                leave_for_leaf(own, me).map_err(|why| LimitsError::new(first, why))?;
                write().map_err(|e| {
                    LimitsError::new(first, format!("cannot write {}: {e}", control.display()))
                })?;
            }
            Err(e) => {
                return Err(LimitsError::new(
                    first,
                    format!("cannot write {}: {e}", control.display()),
                ))
            }
        }
        tracing::info!(
            "enabled {} in {} for the limits of uexec's sessions",
            words(&for_own),
            control.display()
        );
    }
    let control = root.join("cgroup.subtree_control");
    let enabled = fs::write(&control, words(&missing))
        .map_err(|e| LimitsError::new(first, format!("cannot write {}: {e}", control.display())));
    // Sessions' cgroups may have figures they had not.
    super::usage::controllers_changed();
    enabled
}

/// Moves this process (`me`, alone in `own`) into a leaf of its own, `own/uexec.<me>.server`,
/// so that `own` holds no process and may pass controllers down; why not, when others are
/// there too.
fn leave_for_leaf(own: &Path, me: u32) -> Result<(), String> {
    let procs = fs::read_to_string(own.join("cgroup.procs")).unwrap_or_default();
    let others: Vec<&str> = procs
        .lines()
        .map(str::trim)
        .filter(|p| !p.is_empty() && p.parse() != Ok(me))
        .collect();
    if !others.is_empty() {
        let shown: Vec<&str> = others.iter().take(5).copied().collect();
        return Err(format!(
            "the kernel passes controllers down only through a cgroup with no process of its own, and uexec's cgroup {} holds {} besides uexec (pids {}{}): run uexec alone in a cgroup delegated to it, e.g. `systemd-run --user --scope -p Delegate=yes uexec ...`",
            own.display(),
            others.len(),
            shown.join(", "),
            if others.len() > shown.len() { ", ..." } else { "" }
        ));
    }
    let leaf = own.join(format!("uexec.{me}.server"));
    let made = match fs::create_dir(&leaf) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
        _ => fs::write(leaf.join("cgroup.procs"), me.to_string()),
    };
    made.map_err(|e| format!("cannot move uexec into {}: {e}", leaf.display()))?;
    tracing::info!(
        "moved uexec into {} so that {} may pass controllers to its sessions",
        leaf.display(),
        own.display()
    );
    Ok(())
}

/// Whether the controllers `limits` need are enabled for the sessions' cgroups under
/// `root` (a call's limits: the server enabled them at start-up, or not); why not.
pub(super) fn enabled(own: &Path, root: &Path, limits: &Limits) -> Result<(), LimitsError> {
    let on_root = listed(&root.join("cgroup.subtree_control"));
    let Some(c) = needed(limits).into_iter().find(|c| !has(&on_root, *c)) else {
        return Ok(());
    };
    let offered = listed(&own.join("cgroup.controllers"));
    if !has(&offered, c) {
        let proc_cgroup = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        return Err(not_offered(
            c,
            own,
            &offered,
            v1_binding(c, &proc_cgroup).as_deref(),
        ));
    }
    Err(LimitsError {
        machine: false,
        ..LimitsError::new(
            c,
            format!(
                "this server did not enable the {} controller for its sessions' cgroups (it enables those its own limits need, at its start)",
                c.name()
            ),
        )
    })
}

/// Writes `limits` into the session's cgroup `dir`, before any process is in it.
pub(super) fn apply(dir: &Path, limits: &Limits) -> io::Result<()> {
    let values = [
        (Controller::Memory, limits.memory_max.map(show_count)),
        (Controller::Pids, limits.pids_max.map(show_count)),
        (Controller::Cpu, limits.cpu_max.map(|c| c.as_cgroup())),
    ];
    for (c, value) in values {
        let Some(value) = value else { continue };
        let path = dir.join(c.file());
        fs::write(&path, &value).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot set the session's {} ({}): {e}",
                    c.limit(),
                    path.display()
                ),
            )
        })?;
    }
    Ok(())
}

/// The limits the session in `dir` ran into, by the kernel's counts.
pub(super) fn hits(dir: &Path, limits: &Limits) -> Vec<LimitHit> {
    let count = |file: &str, key: &str| {
        fs::read_to_string(dir.join(file))
            .ok()
            .and_then(|t| event_count(&t, key))
            .filter(|n| *n > 0)
    };
    let mut hits = Vec::new();
    if let Some(max_bytes) = limits.memory_max.filter(|m| *m != NO_LIMIT) {
        if let Some(kills) = count("memory.events", "oom_kill") {
            hits.push(LimitHit::Memory { kills, max_bytes });
        }
    }
    if let Some(max) = limits.pids_max.filter(|m| *m != NO_LIMIT) {
        if let Some(refused) = count("pids.events", "max") {
            hits.push(LimitHit::Pids { refused, max });
        }
    }
    hits
}

/// The count of `key` in an events file (`key value` lines).
fn event_count(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests;
