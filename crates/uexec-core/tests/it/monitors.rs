//! Policy monitors (SPEC §7): first failure wins, and End waits for a late verdict.

use std::time::Duration;

use futures::future::BoxFuture;
use uexec_core::{EndStatus, EventKind, ExecError, MonitorHandle, PolicyMonitor};

use crate::fake_backend::{fake_store, next_end, req};

/// Fails the session `delay_ms` after its exit (or at once when `on_start`).
struct Verdict {
    delay_ms: u64,
    messages: Vec<&'static str>,
    on_start: bool,
}

impl PolicyMonitor for Verdict {
    fn watch(self: Box<Self>, session: MonitorHandle) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            if !self.on_start {
                session.exited().await;
            }
            tokio::time::sleep(Duration::from_millis(self.delay_ms)).await;
            for m in self.messages {
                session.fail_and_terminate(m);
            }
        })
    }
}

#[tokio::test(start_paused = true)]
async fn end_waits_for_a_verdict_10ms_after_exit_and_reports_failed() {
    let (store, mut spawned) = fake_store(64);
    let mut events = store.subscribe();
    let monitor = Verdict {
        delay_ms: 10,
        messages: vec!["network access denied"],
        on_start: false,
    };
    let snap = store
        .exec_command_monitored(req(false), vec![Box::new(monitor)])
        .await
        .unwrap();
    let id = snap.session_id.unwrap();
    let control = spawned.recv().await.unwrap();
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
    assert!(
        aggregated_output.ends_with("network access denied"),
        "{aggregated_output:?}"
    );
    let err = store
        .write_stdin(crate::helpers::poll(id, 0))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ExecError::ProcessFailed { .. } | ExecError::UnknownProcess(_)
        ),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_verdict_later_than_the_grace_is_not_awaited() {
    let (store, mut spawned) = fake_store(64);
    let mut events = store.subscribe();
    let monitor = Verdict {
        delay_ms: 5_000,
        messages: vec!["too late"],
        on_start: false,
    };
    let snap = store
        .exec_command_monitored(req(false), vec![Box::new(monitor)])
        .await
        .unwrap();
    let id = snap.session_id.unwrap();
    let control = spawned.recv().await.unwrap();
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
    let (store, mut spawned) = fake_store(64);
    let mut events = store.subscribe();
    let monitor = Verdict {
        delay_ms: 1_000,
        messages: vec!["first", "second"],
        on_start: true,
    };
    let snap = store
        .exec_command_monitored(req(false), vec![Box::new(monitor)])
        .await
        .unwrap();
    let id = snap.session_id.unwrap();
    let _control = spawned.recv().await.unwrap();
    let err = store
        .write_stdin(crate::helpers::poll(id, 5000))
        .await
        .unwrap_err();
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
