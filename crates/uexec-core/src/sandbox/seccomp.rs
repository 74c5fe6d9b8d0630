//! The syscall layer: what Landlock cannot stop. `ptrace` (reading or steering another
//! process of the user), `ioctl(TIOCSTI)` (typing into the terminal uexec reads), and, with
//! the network off, IPv4/IPv6 sockets and io_uring (which can open sockets past this
//! filter). Each fails with EPERM: the command sees an error it can report, not a crash.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Installs the filter on this process (inherited by its children and kept across exec).
pub fn install(network_off: bool) -> Result<(), String> {
    let fail = |e: &dyn std::fmt::Display| e.to_string();
    let arg_is = |index: u8, value: u64| {
        SeccompCondition::new(index, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
            .and_then(|c| SeccompRule::new(vec![c]))
            .map_err(|e| fail(&e))
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_ptrace, Vec::new());
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
