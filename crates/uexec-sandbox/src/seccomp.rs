//! The syscall layer: what Landlock cannot stop. `ptrace` and `process_vm_readv`/`writev`
//! (reading or steering another process of the user), `ioctl(TIOCSTI)` (typing into the
//! terminal uexec reads), and, with the network off, IPv4/IPv6 sockets and io_uring (which
//! can open sockets past this filter). Each fails with EPERM: the command sees an error it
//! can report, not a crash.
//!
//! Other ABIs: a 32-bit syscall (`int 0x80`) does not match the filter's architecture and
//! kills the process (seccompiler's check). On x86_64 the x32 ABI shares the architecture
//! and numbers its calls with bit 30 set, some with numbers of their own (`ptrace` 521,
//! `ioctl` 514): those are refused too, for kernels that run x32 binaries.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Installs the filter on this process (inherited by its children and kept across exec).
/// `no_mounts`: also refuse every call that makes, moves or changes a mount (a second lock,
/// beside Landlock's and the dropped capabilities, on the read-only mounts of a profile).
pub fn install(network_off: bool, no_mounts: bool) -> Result<(), String> {
    let fail = |e: &dyn std::fmt::Display| e.to_string();
    let rules = rules(network_off, no_mounts)?;
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| fail(&e))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| fail(&e))?;
    let program = BpfProgram::try_from(filter).map_err(|e| fail(&e))?;
    seccompiler::apply_filter(&program).map_err(|e| fail(&e))
}

/// Calls that make, move, or change the flags of a mount (the old API and the new one).
const MOUNT_CALLS: &[i64] = &[
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_mount_setattr,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
];

/// The refused calls, by number, with the arguments that make them refused (none: always).
fn rules(network_off: bool, no_mounts: bool) -> Result<BTreeMap<i64, Vec<SeccompRule>>, String> {
    let fail = |e: &dyn std::fmt::Display| e.to_string();
    let arg_is = |index: u8, value: u64| {
        SeccompCondition::new(index, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
            .and_then(|c| SeccompRule::new(vec![c]))
            .map_err(|e| fail(&e))
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_ptrace, Vec::new());
    // ptrace's memory half: reading and writing another process's memory.
    rules.insert(libc::SYS_process_vm_readv, Vec::new());
    rules.insert(libc::SYS_process_vm_writev, Vec::new());
    // The request's type differs between targets (u64 here, a C int elsewhere).
    #[allow(clippy::unnecessary_cast)]
    let tiocsti = libc::TIOCSTI as u64;
    rules.insert(libc::SYS_ioctl, vec![arg_is(1, tiocsti)?]);
    if network_off {
        rules.insert(
            libc::SYS_socket,
            vec![
                arg_is(0, libc::AF_INET as u64)?,
                arg_is(0, libc::AF_INET6 as u64)?,
            ],
        );
        rules.insert(libc::SYS_io_uring_setup, Vec::new());
    }
    if no_mounts {
        for nr in MOUNT_CALLS {
            rules.insert(*nr, Vec::new());
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        const X32: i64 = 0x4000_0000;
        let copies: Vec<(i64, Vec<SeccompRule>)> = rules
            .iter()
            .map(|(nr, r)| {
                let x32 = match *nr {
                    libc::SYS_ptrace => X32 + 521,
                    libc::SYS_ioctl => X32 + 514,
                    libc::SYS_process_vm_readv => X32 + 539,
                    libc::SYS_process_vm_writev => X32 + 540,
                    other => X32 + other,
                };
                (x32, r.clone())
            })
            .collect();
        rules.extend(copies);
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptrace_and_tiocsti_are_refused_always_and_sockets_with_the_network_off() {
        let on = rules(false, false).expect("rules");
        assert!(on.contains_key(&libc::SYS_ptrace) && on.contains_key(&libc::SYS_ioctl));
        assert!(!on.contains_key(&libc::SYS_socket));
        let off = rules(true, false).expect("rules");
        assert!(off.contains_key(&libc::SYS_socket) && off.contains_key(&libc::SYS_io_uring_setup));
        assert!(!off.contains_key(&libc::SYS_mount));
    }

    #[test]
    fn with_mounts_refused_the_old_and_the_new_mount_api_are_refused() {
        let rules = rules(false, true).expect("rules");
        for nr in [
            libc::SYS_mount,
            libc::SYS_open_tree,
            libc::SYS_mount_setattr,
            libc::SYS_fsmount,
        ] {
            assert!(rules.contains_key(&nr), "{nr}");
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_x32_numbers_of_refused_calls_are_refused_too() {
        let off = rules(true, false).expect("rules");
        for x32 in [
            0x4000_0000 + 521,
            0x4000_0000 + 514,
            0x4000_0000 + libc::SYS_socket,
        ] {
            assert!(off.contains_key(&x32), "{x32:#x}");
        }
        assert_eq!(
            off[&(0x4000_0000 + 514)].len(),
            1,
            "x32 ioctl: only TIOCSTI"
        );
    }
}
