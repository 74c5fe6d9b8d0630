//! A backend whose process the test drives by hand, to force races deterministically
//! (tokio's paused clock makes every grace period exact).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use uexec_core::backend::{
    Backend, BackendError, ExitReport, OutputChunk, ProcessControl, Signal, SpawnSpec,
    SpawnedProcess, Stream, Usage, WriteOutcome,
};
use uexec_core::{
    EndStatus, EventKind, EventStream, ExecError, ExecRequest, SessionStore, StoreConfig,
};

use crate::helpers::{poll, write};

#[derive(Default)]
pub struct FakeControl {
    output: Mutex<Option<mpsc::Sender<OutputChunk>>>,
    exit: Mutex<Option<oneshot::Sender<ExitReport>>>,
    pub write_outcome: Mutex<Option<WriteOutcome>>,
    pub writes: Mutex<Vec<Vec<u8>>>,
    pub signals: Mutex<Vec<Signal>>,
    terminated: std::sync::atomic::AtomicBool,
    /// What it says its processes used.
    pub usage: Mutex<Option<Usage>>,
    /// Frozen by a pause.
    pub frozen: std::sync::atomic::AtomicBool,
}

impl FakeControl {
    pub async fn print(&self, text: &str) {
        let tx = self.output.lock().unwrap().clone();
        if let Some(tx) = tx {
            let chunk = OutputChunk {
                stream: Stream::Stdout,
                bytes: Bytes::copy_from_slice(text.as_bytes()),
            };
            tx.send(chunk).await.unwrap();
        }
    }

    pub fn exit(&self, code: i32) {
        if let Some(tx) = self.exit.lock().unwrap().take() {
            let _ = tx.send(ExitReport {
                exit_code: Some(code),
                failure: None,
            });
        }
    }

    pub fn close(&self) {
        self.output.lock().unwrap().take();
    }

    pub fn terminated(&self) -> bool {
        self.terminated.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl ProcessControl for FakeControl {
    fn write(&self, bytes: Vec<u8>) -> BoxFuture<'_, Result<WriteOutcome, BackendError>> {
        self.writes.lock().unwrap().push(bytes);
        let outcome = self
            .write_outcome
            .lock()
            .unwrap()
            .unwrap_or(WriteOutcome::Accepted);
        Box::pin(async move { Ok(outcome) })
    }

    fn signal(&self, signal: Signal) -> BoxFuture<'_, Result<(), BackendError>> {
        self.signals.lock().unwrap().push(signal);
        Box::pin(async { Ok(()) })
    }

    fn terminate(&self) {
        self.terminated
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.exit(137);
        self.close();
    }

    fn kill_leftovers(&self) {
        self.close();
    }

    fn usage(&self) -> Option<Usage> {
        *self.usage.lock().unwrap()
    }

    fn pause(&self, frozen: bool) -> BoxFuture<'_, Result<(), BackendError>> {
        self.frozen
            .store(frozen, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async { Ok(()) })
    }

    fn paused(&self) -> bool {
        self.frozen.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Hands every spawned process's control to the test.
pub struct FakeBackend {
    spawned: mpsc::UnboundedSender<Arc<FakeControl>>,
}

impl FakeBackend {
    /// A fake that hands each process it spawns to `spawned`.
    pub fn new(spawned: mpsc::UnboundedSender<Arc<FakeControl>>) -> Arc<Self> {
        Arc::new(Self { spawned })
    }
}

impl Backend for FakeBackend {
    fn spawn(&self, _spec: SpawnSpec) -> BoxFuture<'_, Result<SpawnedProcess, BackendError>> {
        let (out_tx, out_rx) = mpsc::channel(16);
        let (exit_tx, exit_rx) = oneshot::channel();
        let control = Arc::new(FakeControl {
            output: Mutex::new(Some(out_tx)),
            exit: Mutex::new(Some(exit_tx)),
            ..FakeControl::default()
        });
        let _ = self.spawned.send(control.clone());
        Box::pin(async move {
            Ok(SpawnedProcess {
                pid: None,
                output: out_rx,
                exit: exit_rx,
                control,
            })
        })
    }
}

pub fn fake_store(
    max_sessions: usize,
) -> (Arc<SessionStore>, mpsc::UnboundedReceiver<Arc<FakeControl>>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let config = StoreConfig {
        cwd: std::env::temp_dir(),
        default_shell: Some("/bin/sh".into()),
        deterministic_ids: true,
        max_sessions,
        // The fake runs no shell: nothing to snapshot.
        shell_snapshots: None,
        screens: None,
        ..StoreConfig::default()
    };
    (
        SessionStore::new(Arc::new(FakeBackend { spawned: tx }), config),
        rx,
    )
}

pub fn req(tty: bool) -> ExecRequest {
    ExecRequest {
        cmd: "fake".into(),
        tty: Some(tty),
        yield_time_ms: Some(250),
        ..ExecRequest::default()
    }
}

/// Starts a fake session that is still running after its first window.
pub async fn running(
    store: &Arc<SessionStore>,
    spawned: &mut mpsc::UnboundedReceiver<Arc<FakeControl>>,
    tty: bool,
) -> (i32, Arc<FakeControl>) {
    let snap = store.exec_command(req(tty)).await.unwrap();
    let control = spawned.recv().await.unwrap();
    (snap.session_id().expect("running"), control)
}

pub async fn next_end(events: &mut EventStream, session_id: i32) -> (Instant, EventKind) {
    loop {
        let e = events.recv().await.unwrap();
        if e.session_id == session_id && matches!(e.kind, EventKind::End { .. }) {
            return (Instant::now(), e.kind.clone());
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_write_reporting_unknown_process_marks_the_session_exited() {
    let (store, mut spawned) = fake_store(64);
    let (id, control) = running(&store, &mut spawned, true).await;
    *control.write_outcome.lock().unwrap() = Some(WriteOutcome::UnknownProcess);
    let snap = store.write_stdin(write(id, "ls\n", 1000)).await.unwrap();
    assert_eq!(snap.session_id(), None, "the session must be reported gone");
    assert!(store.list_sessions().is_empty());
    assert_eq!(
        store.write_stdin(poll(id, 0)).await.unwrap_err(),
        ExecError::UnknownProcess(id)
    );
}

#[tokio::test(start_paused = true)]
async fn drain_finishes_on_close_without_waiting_the_grace() {
    let (store, mut spawned) = fake_store(64);
    let mut events = store.subscribe();
    let (id, control) = running(&store, &mut spawned, false).await;
    let exited_at = Instant::now();
    control.exit(0);
    control.close();
    let (ended_at, _) = next_end(&mut events, id).await;
    assert!(
        ended_at - exited_at < Duration::from_millis(100),
        "{:?}",
        ended_at - exited_at
    );
}

#[tokio::test(start_paused = true)]
async fn the_trailing_grace_is_the_fallback_without_a_close() {
    let (store, mut spawned) = fake_store(64);
    let mut events = store.subscribe();
    let (id, control) = running(&store, &mut spawned, false).await;
    control.print("tail").await;
    let exited_at = Instant::now();
    control.exit(3);
    let (ended_at, end) = next_end(&mut events, id).await;
    assert!(
        ended_at - exited_at >= Duration::from_millis(100),
        "{:?}",
        ended_at - exited_at
    );
    let EventKind::End {
        exit_code,
        status,
        aggregated_output,
        ..
    } = end
    else {
        unreachable!()
    };
    assert_eq!((exit_code, status), (Some(3), EndStatus::Failed));
    assert_eq!(aggregated_output, "tail");
}

#[tokio::test(start_paused = true)]
async fn a_completed_session_id_is_unknown_afterwards_and_the_store_is_empty() {
    let (store, mut spawned) = fake_store(64);
    let (id, control) = running(&store, &mut spawned, false).await;
    control.print("bye").await;
    control.exit(0);
    control.close();
    let snap = store.write_stdin(poll(id, 5000)).await.unwrap();
    assert_eq!((snap.exit_code(), snap.session_id()), (Some(0), None));
    assert_eq!(snap.output, "bye");
    assert_eq!(
        store.write_stdin(poll(id, 0)).await.unwrap_err(),
        ExecError::UnknownProcess(id)
    );
    assert_eq!(
        store.write_stdin(write(id, "x", 0)).await.unwrap_err(),
        ExecError::UnknownProcess(id)
    );
    assert!(store.list_sessions().is_empty());
}

#[tokio::test(start_paused = true)]
async fn pruning_picks_the_lru_exited_session_outside_the_recent_eight() {
    let (store, mut spawned) = fake_store(10);
    let mut sessions = Vec::new();
    for _ in 0..10 {
        sessions.push(running(&store, &mut spawned, false).await);
    }
    // 1001 exits (its exit not yet reported), outside the 8 most recent uses.
    sessions[1].1.exit(0);
    sessions[1].1.close();
    let (new_id, _) = running(&store, &mut spawned, false).await;
    let ids: Vec<i32> = store.list_sessions().iter().map(|s| s.session_id).collect();
    assert!(
        !ids.contains(&1001),
        "the exited LRU session goes first: {ids:?}"
    );
    assert!(ids.contains(&1000) && ids.contains(&new_id));
    assert_eq!(
        store.write_stdin(poll(1001, 0)).await.unwrap_err(),
        ExecError::UnknownProcess(1001)
    );
    // Nothing exited now: the least recently used (1000) gives way, and it is killed.
    let _ = running(&store, &mut spawned, false).await;
    let ids: Vec<i32> = store.list_sessions().iter().map(|s| s.session_id).collect();
    assert!(!ids.contains(&1000), "{ids:?}");
    assert_eq!(ids.len(), 10);
}

#[tokio::test(start_paused = true)]
async fn recently_used_sessions_are_protected_even_when_exited() {
    let (store, mut spawned) = fake_store(10);
    let mut sessions = Vec::new();
    for _ in 0..10 {
        sessions.push(running(&store, &mut spawned, false).await);
    }
    // 1009 is the most recent and exited: still protected, so LRU 1000 goes.
    sessions[9].1.exit(0);
    let _ = running(&store, &mut spawned, false).await;
    let ids: Vec<i32> = store.list_sessions().iter().map(|s| s.session_id).collect();
    assert!(ids.contains(&1009) && !ids.contains(&1000), "{ids:?}");
}

#[tokio::test(start_paused = true)]
async fn a_pipe_session_gets_ctrl_c_as_a_signal_and_other_input_is_refused() {
    let (store, mut spawned) = fake_store(64);
    let (id, control) = running(&store, &mut spawned, false).await;
    let err = store.write_stdin(write(id, "abc", 250)).await.unwrap_err();
    assert_eq!(err, ExecError::StdinClosed { session_id: id });
    assert!(control.writes.lock().unwrap().is_empty());
    let snap = store.write_stdin(write(id, "\u{3}", 250)).await.unwrap();
    assert_eq!(
        snap.session_id(),
        Some(id),
        "a signal alone does not end a fake process"
    );
    assert_eq!(*control.signals.lock().unwrap(), vec![Signal::Interrupt]);
}

#[tokio::test(start_paused = true)]
async fn terminating_during_a_poll_returns_the_exited_snapshot() {
    let (store, mut spawned) = fake_store(64);
    let (id, control) = running(&store, &mut spawned, false).await;
    control.print("last words").await;
    let poller = {
        let store = store.clone();
        tokio::spawn(async move { store.write_stdin(poll(id, 60_000)).await })
    };
    // Every task is idle once the clock moves: the poll is in its window, holding the lock.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!poller.is_finished());
    store.terminate(id).unwrap(); // must not wait for the interaction lock
    let snap = poller
        .await
        .unwrap()
        .expect("the Unknown fallback returns the exited snapshot");
    assert_eq!(snap.session_id(), None);
    assert_eq!(snap.exit_code(), Some(137));
    assert_eq!(snap.output, "last words");
    assert_eq!(
        store.terminate(id).unwrap_err(),
        ExecError::UnknownProcess(id)
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_cancelled_in_the_early_exit_grace_still_stores_its_session() {
    let (store, mut spawned) = fake_store(64);
    let call = store.exec_command(req(false));
    // 100 ms is inside the 150 ms grace: the process is not stored yet when the call dies.
    assert!(tokio::time::timeout(Duration::from_millis(100), call)
        .await
        .is_err());
    let control = spawned.recv().await.unwrap();
    let listed = store.list_sessions();
    assert_eq!(
        listed.len(),
        1,
        "a running process is never lost by a cancelled call"
    );
    let id = listed[0].session_id;
    control.print("still here").await;
    control.exit(0);
    control.close();
    let snap = store.write_stdin(poll(id, 5000)).await.unwrap();
    assert_eq!(
        (snap.exit_code(), snap.output.as_str()),
        (Some(0), "still here")
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_cancelled_after_an_early_exit_still_ends_the_session() {
    let (store, mut spawned) = fake_store(64);
    let mut events = store.subscribe();
    let call = {
        let store = store.clone();
        tokio::spawn(async move { store.exec_command(req(false)).await })
    };
    let control = spawned.recv().await.unwrap();
    // Exit inside the grace but keep the output open: the call then waits for the close.
    control.exit(0);
    tokio::time::sleep(Duration::from_millis(20)).await;
    call.abort();
    let (_, end) = next_end(&mut events, 1000).await;
    assert!(matches!(
        end,
        EventKind::End {
            exit_code: Some(0),
            ..
        }
    ));
    // The id was released: the next session gets it again.
    let (id, _) = running(&store, &mut spawned, false).await;
    assert_eq!(id, 1000);
}
