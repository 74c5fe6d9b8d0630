//! Background jobs die with their session (SPEC §6).

use uexec_core::ExecRequest;

use crate::helpers::{exec, marker, store, wait_gone, wait_present};

#[tokio::test]
async fn background_jobs_die_with_a_terminated_session() {
    let store = store();
    for tty in [false, true] {
        let (bg, fg) = (marker(), marker());
        let cmd = format!("sleep {bg} & echo bg-started; exec sleep {fg}");
        let req = ExecRequest {
            tty: Some(tty),
            ..exec(&cmd, 500)
        };
        let id = store.exec_command(req).await.unwrap().session_id().unwrap();
        wait_present(&bg).await;
        store.terminate(id).unwrap();
        wait_gone(&fg).await;
        wait_gone(&bg).await;
    }
}

#[tokio::test]
async fn background_jobs_die_once_the_exit_is_reported() {
    let store = store();
    let bg = marker();
    let s = store
        .exec_command(exec(&format!("sleep {bg} & echo started"), 5000))
        .await
        .unwrap();
    assert_eq!(s.exit_code(), Some(0));
    wait_gone(&bg).await;
}

/// The cgroup tree this test process's sessions get, as a precondition: this project's
/// machines have one (`uexec doctor` says why not elsewhere).
fn require_cgroups() {
    if let Err(why) = uexec_core::backend::local::cgroup_status() {
        panic!("this test needs a cgroup per session: {why}");
    }
}

/// The next End of this store's sessions (`id`'s, when given).
async fn next_end(
    events: &mut uexec_core::EventStream,
    id: Option<i32>,
) -> uexec_core::usage::Ending {
    loop {
        let e = tokio::time::timeout(std::time::Duration::from_secs(10), events.recv())
            .await
            .expect("End must come")
            .expect("events");
        let ours = id.is_none_or(|id| id == e.session_id);
        if let (true, uexec_core::EventKind::End { ending, .. }) = (ours, &e.kind) {
            return ending.clone();
        }
    }
}

#[tokio::test]
async fn a_background_job_left_by_an_exited_command_is_reported_and_killed() {
    use uexec_core::usage::TreeEnd;
    require_cgroups();
    let store = store();
    let mut events = store.subscribe();
    // The command returns at once (SPEC §2 step 4: no wait for the pipe the job holds)...
    let bg = marker();
    let s = store
        .exec_command(exec(&format!("(sleep {bg} &); echo done"), 5000))
        .await
        .unwrap();
    assert_eq!(s.exit_code(), Some(0));
    assert_eq!(s.output, "done\n");
    // ... and its result and its End say what it left running, which is then killed.
    let TreeEnd::LeftRunning { count, named } = s.ending.tree.clone().expect("a cgroup") else {
        panic!("nothing left reported: {:?}", s.ending);
    };
    assert_eq!(count, 1);
    assert_eq!(named[0].command, format!("sleep {bg}"));
    assert_eq!(next_end(&mut events, None).await.tree, s.ending.tree);
    wait_gone(&bg).await;

    // A command that leaves nothing ended whole, and says so.
    let s = store.exec_command(exec("echo alone", 5000)).await.unwrap();
    assert_eq!(s.ending.tree, Some(TreeEnd::Whole));
    assert_eq!(next_end(&mut events, None).await.tree, Some(TreeEnd::Whole));
}

#[tokio::test]
async fn a_terminate_kills_the_whole_tree_and_leaves_nothing_to_report() {
    use uexec_core::usage::TreeEnd;
    require_cgroups();
    let store = store();
    let mut events = store.subscribe();
    let (bg, fg) = (marker(), marker());
    let id = store
        .exec_command(exec(&format!("sleep {bg} & exec sleep {fg}"), 300))
        .await
        .unwrap()
        .session_id()
        .expect("running");
    wait_present(&bg).await;
    store.terminate(id).unwrap();
    assert_eq!(
        next_end(&mut events, Some(id)).await.tree,
        Some(TreeEnd::Whole)
    );
    wait_gone(&bg).await;
    wait_gone(&fg).await;
}
