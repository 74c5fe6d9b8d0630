//! A uexec started with SIGCHLD ignored (some supervisors do that) still reads every exit
//! status: with SIGCHLD ignored the kernel would reap children itself. A test binary of its
//! own: it changes a process-wide signal disposition.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

#[tokio::test]
async fn exit_codes_survive_an_inherited_ignored_sigchld() {
    // SAFETY: setting a disposition before any child of this process exists.
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_IGN);
    }
    let store = common::sh_store();
    for (cmd, code) in [("exit 0", 0), ("exit 7", 7), ("sleep 0.3; exit 3", 3)] {
        let s = store
            .exec_command(common::exec(cmd, false, 5000))
            .await
            .unwrap();
        assert_eq!(s.exit_code(), Some(code), "{cmd}: {s:?}");
    }
}
