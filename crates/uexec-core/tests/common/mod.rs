//! What the test binaries that change process-wide state (and so run alone) share.

use std::sync::Arc;

use uexec_core::{ExecRequest, LocalBackend, SessionStore, StoreConfig};

/// A store on the local backend running `/bin/sh` in the temp dir.
pub fn sh_store() -> Arc<SessionStore> {
    SessionStore::new(
        Arc::new(LocalBackend),
        StoreConfig {
            cwd: std::env::temp_dir(),
            default_shell: Some("/bin/sh".into()),
            ..StoreConfig::default()
        },
    )
}

/// `exec_command` without a login shell.
pub fn exec(cmd: &str, tty: bool, yield_time_ms: i64) -> ExecRequest {
    ExecRequest {
        cmd: cmd.into(),
        tty: Some(tty),
        login: Some(false),
        yield_time_ms: Some(yield_time_ms),
        ..ExecRequest::default()
    }
}
