//! A uexec started with SIGCHLD ignored (some supervisors do that) still reads every exit
//! status: with SIGCHLD ignored the kernel would reap children itself. A test binary of its
//! own: it changes a process-wide signal disposition.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use uexec_core::{ExecRequest, LocalBackend, SessionStore, StoreConfig};

#[tokio::test]
async fn exit_codes_survive_an_inherited_ignored_sigchld() {
    // SAFETY: setting a disposition before any child of this process exists.
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_IGN);
    }
    let store = SessionStore::new(
        Arc::new(LocalBackend),
        StoreConfig {
            cwd: std::env::temp_dir(),
            default_shell: Some("/bin/sh".into()),
            ..StoreConfig::default()
        },
    );
    for (cmd, code) in [("exit 0", 0), ("exit 7", 7), ("sleep 0.3; exit 3", 3)] {
        let s = store
            .exec_command(ExecRequest {
                cmd: cmd.into(),
                login: Some(false),
                yield_time_ms: Some(5000),
                ..ExecRequest::default()
            })
            .await
            .unwrap();
        assert_eq!(s.exit_code, Some(code), "{cmd}: {s:?}");
    }
}
