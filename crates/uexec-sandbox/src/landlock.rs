//! The filesystem layer: Landlock rules for a profile. Reads (and execution) are allowed
//! everywhere; writes only beneath the given paths and to a few devices (/dev/null, the
//! terminal). Landlock only adds restrictions, so `.git` inside a writable root is kept
//! read-only by the mount namespace ([`super::namespaces`]), not here.
//!
//! The same ruleset scopes the command (Landlock ABI 6, Linux 6.12): it may connect to no
//! abstract Unix socket and signal no process made outside its sandbox. A pathname socket
//! is a file (the daemon's refuses a sandboxed peer itself), but an abstract one has no
//! path to keep read-only, and with the network on it is as reachable as on the host: a
//! session bus, an X server, or any other listener of the user there. Signals: the pid
//! namespace already hides the processes outside, but only where that layer applies.
//!
//! A kernel older than ABI 6 drops the scopes and keeps the rest (Landlock's best-effort
//! compatibility): abstract sockets are then left to the network namespace (network off),
//! and signals to the pid namespace.

use std::path::{Path, PathBuf};

use landlock::{
    path_beneath_rules, Access, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

/// Devices a command may write, whatever the profile.
const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// Restricts this process (and what it execs) to reading everywhere and writing beneath
/// `writable`, and scopes it (no abstract socket, no signal outside). Rights a kernel lacks
/// are dropped (Landlock's best-effort compatibility), but a ruleset that is not enforced
/// at all is an error.
pub fn restrict(writable: &[PathBuf]) -> Result<(), String> {
    let abi = ABI::V5;
    let all = AccessFs::from_all(abi);
    let fail = |e: &dyn std::fmt::Display| e.to_string();
    let mut ruleset = Ruleset::default()
        .handle_access(all)
        .map_err(|e| fail(&e))?
        .scope(Scope::from_all(ABI::V6))
        .map_err(|e| fail(&e))?
        .create()
        .map_err(|e| fail(&e))?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))
        .map_err(|e| fail(&e))?;
    let devices = WRITABLE_DEVICES.iter().map(Path::new);
    for path in devices.chain(writable.iter().map(PathBuf::as_path)) {
        let Ok(meta) = std::fs::metadata(path) else {
            continue; // a device this machine lacks
        };
        let access = if meta.is_dir() {
            all
        } else {
            AccessFs::from_file(abi)
        };
        let fd = PathFd::new(path).map_err(|e| format!("{}: {e}", path.display()))?;
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let status = ruleset.restrict_self().map_err(|e| fail(&e))?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("the kernel does not enforce Landlock".to_owned());
    }
    Ok(())
}
