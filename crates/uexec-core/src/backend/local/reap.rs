//! The reaper: one task per process that owns its exit. Here, apart, because it is the one
//! writer of the leader's move from running to reaped, and that move must be atomic with
//! the reap itself:
//! 1. wait until the pidfd is readable (the child has exited);
//! 2. under the leader's lock, reap it and mark the leader [`Leader::Reaped`]: the pid is
//!    free for the kernel to hand out again, so from then on the control sends the command
//!    no signal and sweeps its group once (see `control`);
//! 3. report the exit code (or why waiting failed) on the oneshot, once.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;

use super::control::Leader;
use crate::backend::ExitReport;
use crate::events::lock;

/// Waits for the pidfd to report the exit, then reaps the child. The reap and the change
/// to [`Leader::Reaped`] happen under the leader's lock, so a signal never reaches a pid that
/// was freed by the reap and given to someone else.
pub(super) async fn reap(
    pid: u32,
    pidfd: Arc<AsyncFd<OwnedFd>>,
    leader: Arc<Mutex<Leader>>,
    exit_tx: oneshot::Sender<ExitReport>,
) {
    let report = loop {
        let mut guard = match pidfd.readable().await {
            Ok(guard) => guard,
            Err(e) => break failed_wait(e),
        };
        let mut state = lock(&leader);
        match uexec_sys::try_reap(pid) {
            Ok(Some(status)) => {
                *state = Leader::Reaped;
                break ExitReport {
                    exit_code: exit_code_of(status),
                    failure: None,
                };
            }
            Ok(None) => {
                drop(state);
                guard.clear_ready();
            }
            Err(e) => {
                *state = Leader::Reaped;
                break failed_wait(e);
            }
        }
    };
    let _ = exit_tx.send(report);
}

fn failed_wait(e: io::Error) -> ExitReport {
    ExitReport {
        exit_code: None,
        failure: Some(format!("waiting for the process failed: {e}")),
    }
}

/// The status code, or `128 + N` for a process killed by signal N.
pub fn exit_code_of(status: std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.code().or_else(|| status.signal().map(|s| 128 + s))
}
