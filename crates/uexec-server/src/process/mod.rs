//! One process of a session, as the wire sees it.
//!
//! Three timelines, three owners:
//! 1. the OS process and its output readers belong to the backend (`uexec_core`);
//! 2. the event stream (seq, retention, lifecycle) belongs to the process's *pump* task
//!    (`crate::pump`, beside this room), the only writer of its [`ProcessState`];
//! 3. requests hold a cheap [`ProcessHandle`]: they read the state, wait on it (long polls),
//!    queue stdin writes ([`stdin`]) and send signals, but never change the event stream.

pub mod retention;
pub mod state;
pub mod stdin;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;
use uexec_core::backend::{ProcessControl, Signal};
use uexec_protocol::{ReadResult, RpcError, WriteStatus};

use self::state::ProcessState;
use self::stdin::{PendingWrite, StdinQueue};

/// A shared handle on one process (cheap to clone).
#[derive(Clone)]
pub struct ProcessHandle(Arc<Shared>);

struct Shared {
    id: String,
    control: Arc<dyn ProcessControl>,
    state: watch::Sender<ProcessState>,
    /// `None` in pipe mode without `pipeStdin`: stdin is `/dev/null`.
    stdin: Option<StdinQueue>,
}

impl std::fmt::Debug for ProcessHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessHandle")
            .field("id", &self.0.id)
            .finish_non_exhaustive()
    }
}

impl ProcessHandle {
    /// A handle on a freshly spawned process.
    pub fn new(
        id: String,
        control: Arc<dyn ProcessControl>,
        retained_max_bytes: usize,
        stdin: Option<StdinQueue>,
    ) -> Self {
        let (state, _) = watch::channel(ProcessState::new(retained_max_bytes));
        Self(Arc::new(Shared {
            id,
            control,
            state,
            stdin,
        }))
    }

    pub fn id(&self) -> &str {
        &self.0.id
    }

    /// Whether two handles are the same process.
    pub fn same_as(&self, other: &ProcessHandle) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Changes the state and wakes every waiter (the pump's privilege).
    pub(crate) fn update(&self, change: impl FnOnce(&mut ProcessState)) {
        self.0.state.send_modify(change);
    }

    /// What its processes used, where its backend counts it (a cgroup).
    pub fn usage(&self) -> Option<uexec_core::backend::Usage> {
        self.0.control.usage()
    }

    pub fn has_exited(&self) -> bool {
        self.0.state.borrow().has_exited()
    }

    /// Resolves once the process has exited (at once when it has, or when its pump is gone).
    pub fn exited(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut changes = self.0.state.subscribe();
        async move {
            let _ = changes.wait_for(ProcessState::has_exited).await;
        }
    }

    /// Answers `process/read`: at once when there is news after `after_seq` (or no wait was
    /// asked), else when news arrives or `wait` has passed, whichever comes first.
    pub async fn read(&self, after_seq: u64, max_bytes: Option<u64>, wait: Duration) -> ReadResult {
        let deadline = tokio::time::Instant::now() + wait;
        // Subscribe before looking, so no change between the look and the wait is missed.
        let mut changes = self.0.state.subscribe();
        loop {
            let (result, ready) = {
                let state = changes.borrow_and_update();
                let result = state.read(after_seq, max_bytes);
                let ready = state.read_is_ready(after_seq, &result);
                (result, ready)
            };
            if ready {
                return result;
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => continue,
                // Deadline, or the pump is gone (nothing more will happen).
                Ok(Err(_)) | Err(_) => return result,
            }
        }
    }

    /// Queues a stdin write in call order, without waiting (see [`stdin`]).
    pub fn submit_write(&self, write_id: String, bytes: Bytes) -> PendingWrite {
        match &self.0.stdin {
            Some(stdin) => stdin.submit(&self.0.id, write_id, bytes),
            None => PendingWrite::Done(WriteStatus::StdinClosed),
        }
    }

    /// A signal to the process group, unless the process already exited (its pid may be
    /// reused).
    pub async fn signal(&self, signal: Signal) -> Result<(), RpcError> {
        if self.has_exited() {
            return Ok(());
        }
        self.0
            .control
            .signal(signal)
            .await
            .map_err(|e| RpcError::internal(e.message))
    }

    /// SIGKILL to the process group; returns whether the process was still running. Once the
    /// process exited, this kills what is left of its group (background jobs) and answers
    /// `false` (Codex leaves them running; a client that terminates a finished process wants
    /// nothing of it left).
    pub fn terminate(&self) -> bool {
        if self.has_exited() {
            self.0.control.kill_leftovers();
            return false;
        }
        self.0.control.terminate();
        true
    }

    /// Kills the group without asking whether the process itself still runs (shutdown).
    pub fn kill(&self) {
        self.0.control.terminate();
    }

    /// Kills whatever is left of the process group once the entry goes away.
    pub fn kill_leftovers(&self) {
        self.0.control.kill_leftovers();
    }
}
