//! Policy monitors (SPEC §7): first failure wins, and End waits for a late verdict.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use uexec_core::{
    EndStatus, EventKind, EventStream, ExecError, MonitorHandle, PolicyMonitor, SessionStore,
};

use crate::fake_backend::{fake_store, next_end, req, FakeControl};
use crate::helpers::poll;

/// Fails the session `delay_ms` after its exit (or at once when `on_start`); records the
/// verdicts without terminating when `record`.
struct Verdict {
    delay_ms: u64,
    messages: Vec<&'static str>,
    on_start: bool,
    record: bool,
}

impl PolicyMonitor for Verdict {
    fn watch(self: Box<Self>, session: MonitorHandle) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            if !self.on_start {
                session.exited().await;
            }
            tokio::time::sleep(Duration::from_millis(self.delay_ms)).await;
            for m in self.messages {
                if self.record {
                    session.record_verdict(m);
                } else {
                    session.fail_and_terminate(m);
                }
            }
        })
    }
}

/// A fake session with one monitor: the store, the session id, its process, its events.
async fn monitored(monitor: Verdict) -> (Arc<SessionStore>, i32, Arc<FakeControl>, EventStream) {
    let (store, mut spawned) = fake_store(64);
    let events = store.subscribe();
    let snap = store
        .exec_command_monitored(req(false), vec![Box::new(monitor)])
        .await
        .unwrap();
    let control = spawned.recv().await.unwrap();
    (store, snap.session_id().expect("running"), control, events)
}

fn verdict(delay_ms: u64, messages: Vec<&'static str>, on_start: bool) -> Verdict {
    Verdict {
        delay_ms,
        messages,
        on_start,
        record: false,
    }
}

fn recorded(delay_ms: u64, messages: Vec<&'static str>, on_start: bool) -> Verdict {
    Verdict {
        record: true,
        ..verdict(delay_ms, messages, on_start)
    }
}

#[tokio::test(start_paused = true)]
async fn end_waits_for_a_verdict_10ms_after_exit_and_reports_failed() {
    let (store, id, control, mut events) =
        monitored(verdict(10, vec!["network access denied"], false)).await;
    control.print("partial output").await;
    control.exit(0);
    control.close();
    let (_, end) = next_end(&mut events, id).await;
    let EventKind::End {
        exit_code,
        status,
        aggregated_output,
        failure,
        ..
    } = end
    else {
        unreachable!()
    };
    assert_eq!(
        status,
        EndStatus::Failed,
        "a denied process is never a success"
    );
    assert_eq!(exit_code, Some(-1));
    assert_eq!(failure.as_deref(), Some("network access denied"));
    assert_eq!(aggregated_output, "partial output\nnetwork access denied");
    let err = store.write_stdin(poll(id, 0)).await.unwrap_err();
    assert_eq!(
        err,
        ExecError::ProcessFailed {
            session_id: id,
            message: "network access denied".into()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_verdict_later_than_the_grace_is_not_awaited() {
    let (_store, id, control, mut events) =
        monitored(verdict(5_000, vec!["too late"], false)).await;
    control.exit(0);
    control.close();
    let (_, end) = next_end(&mut events, id).await;
    let EventKind::End { status, .. } = end else {
        unreachable!()
    };
    assert_eq!(status, EndStatus::Completed);
}

#[tokio::test(start_paused = true)]
async fn the_first_failure_message_is_preserved() {
    let (store, id, _control, mut events) =
        monitored(verdict(1_000, vec!["first", "second"], true)).await;
    let err = store.write_stdin(poll(id, 5000)).await.unwrap_err();
    assert_eq!(
        err,
        ExecError::ProcessFailed {
            session_id: id,
            message: "first".into()
        }
    );
    let (_, end) = next_end(&mut events, id).await;
    let EventKind::End {
        failure, exit_code, ..
    } = end
    else {
        unreachable!()
    };
    assert_eq!(failure.as_deref(), Some("first"));
    assert_eq!(exit_code, Some(-1));
}

#[tokio::test(start_paused = true)]
async fn a_recorded_verdict_lets_the_process_run_and_fails_the_end_with_its_own_code() {
    let (store, id, control, mut events) =
        monitored(recorded(100, vec!["denied: a", "denied: b"], true)).await;
    // Past the verdicts: the process is still there and its output still comes.
    let snap = store.write_stdin(poll(id, 5000)).await.unwrap();
    assert_eq!(snap.session_id(), Some(id));
    assert!(!control.terminated());
    control.print("later output").await;
    control.exit(3);
    control.close();
    let snap = store.write_stdin(poll(id, 5000)).await.unwrap();
    assert_eq!(
        (snap.exit_code(), snap.output.as_str()),
        (Some(3), "later output")
    );
    let (_, end) = next_end(&mut events, id).await;
    let EventKind::End {
        exit_code,
        status,
        aggregated_output,
        failure,
        ..
    } = end
    else {
        unreachable!()
    };
    assert_eq!(
        status,
        EndStatus::Failed,
        "a denied process is never a success"
    );
    assert_eq!(exit_code, Some(3));
    assert_eq!(failure.as_deref(), Some("denied: a\ndenied: b"));
    assert_eq!(aggregated_output, "later output\ndenied: a\ndenied: b");
}

#[tokio::test(start_paused = true)]
async fn a_verdict_recorded_10ms_after_exit_still_fails_the_end() {
    let (_store, id, control, mut events) = monitored(recorded(10, vec!["late"], false)).await;
    control.exit(0);
    control.close();
    let (_, end) = next_end(&mut events, id).await;
    let EventKind::End {
        status, exit_code, ..
    } = end
    else {
        unreachable!()
    };
    assert_eq!((status, exit_code), (EndStatus::Failed, Some(0)));
}
