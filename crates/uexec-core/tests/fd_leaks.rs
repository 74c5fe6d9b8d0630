//! After 200 sessions the process's open fd count is back where it started. A test binary
//! of its own: other tests running in parallel would move the count.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use uexec_core::WriteRequest;
use uexec_sys::open_fd_count;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_sessions_leak_no_fd() {
    let store = common::sh_store();
    let req = |cmd: &str, tty: bool| common::exec(cmd, tty, 250);
    // Warm up lazily created runtime fds (signal pipe, reactor) before the baseline.
    store.exec_command(req("true", false)).await.unwrap();
    store.exec_command(req("true", true)).await.unwrap();
    let baseline = open_fd_count().unwrap();
    // Twenty rounds of ten concurrent sessions, every way a session can end.
    for round in 0..20 {
        let calls = (0..10).map(|k| {
            let store = store.clone();
            let i = round * 10 + k;
            let tty = i % 2 == 0;
            async move {
                match i % 4 {
                    // Exits inside the window.
                    0 | 1 => {
                        let s = store.exec_command(req("echo hi", tty)).await.unwrap();
                        assert!(s.exit_code().is_some());
                    }
                    // Stored, then terminated.
                    2 => {
                        let s = store.exec_command(req("sleep 30", tty)).await.unwrap();
                        store.terminate(s.session_id().unwrap()).unwrap();
                    }
                    // Stored, then polled to its exit.
                    _ => {
                        let s = store
                            .exec_command(req("sleep 0.3; echo done", tty))
                            .await
                            .unwrap();
                        let mut id = s.session_id();
                        while let Some(sid) = id {
                            let poll = WriteRequest {
                                session_id: sid,
                                yield_time_ms: Some(5000),
                                ..WriteRequest::default()
                            };
                            id = store.write_stdin(poll).await.unwrap().session_id();
                        }
                    }
                }
            }
        });
        futures::future::join_all(calls).await;
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = open_fd_count().unwrap();
        if now <= baseline {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "fd count {now} did not return to {baseline}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
