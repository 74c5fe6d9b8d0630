//! The last-will watchdog (`uexec __last-will`) seen from outside: stopped, it must not stall
//! the server; killed, it must be reaped and replaced by one that knows the live groups.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::time::Duration;

use serde_json::json;

use crate::helpers::{
    call, children_of, eventually, proc_stat, send_signal, start_sleepers, stdio_client,
    wait_all_gone, zombie_children,
};

/// `O_NONBLOCK` on Linux (the tests need no libc).
const O_NONBLOCK: i32 = 0o4000;

/// The live watchdogs `uexec` (pid `parent`) started.
fn watchdogs(parent: u32) -> Vec<u32> {
    children_of(parent)
        .into_iter()
        .filter(|p| p.state != 'Z')
        .filter(|p| {
            std::fs::read(format!("/proc/{}/cmdline", p.pid))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("__last-will"))
        })
        .map(|p| p.pid)
        .collect()
}

async fn the_watchdog(parent: u32) -> u32 {
    eventually("uexec's watchdog", Duration::from_secs(10), || {
        watchdogs(parent).len() == 1
    })
    .await;
    watchdogs(parent)[0]
}

/// Fills the watchdog's stdin pipe to the brim (it is opened again through /proc), so that
/// the next byte `uexec` writes there would block.
fn fill_pipe(watchdog: u32) {
    let mut pipe = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(O_NONBLOCK)
        .open(format!("/proc/{watchdog}/fd/0"))
        .unwrap();
    let page = [b'\n'; 4096];
    for chunk in [&page[..], &page[..1]] {
        loop {
            match pipe.write(chunk) {
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("filling the watchdog's pipe: {e}"),
            }
        }
    }
}

#[tokio::test]
async fn a_stopped_watchdog_does_not_stall_the_server() {
    let (client, _, pid) = stdio_client(&["--codex-compat"]).await;
    let watchdog = the_watchdog(pid).await;
    send_signal(watchdog, "STOP");
    fill_pipe(watchdog);
    let mut stalled = None;
    for i in 0..16 {
        let session = call(
            &client,
            "exec_command",
            json!({"cmd": "echo ok", "login": false, "yield_time_ms": 2000}),
        );
        if tokio::time::timeout(Duration::from_secs(10), session)
            .await
            .is_err()
        {
            stalled = Some(i);
            break;
        }
    }
    send_signal(watchdog, "CONT");
    assert_eq!(
        stalled, None,
        "the server stalled behind a stopped watchdog"
    );
    // Once it runs again, the watchdog still does its job.
    let markers = start_sleepers(&client, &[("sleep {0} & sleep {0}; true", false)]).await;
    send_signal(pid, "KILL");
    wait_all_gone(&markers, "the background job to die with its killed server").await;
}

#[tokio::test]
async fn a_killed_watchdog_is_reaped() {
    let (client, _, pid) = stdio_client(&["--codex-compat"]).await;
    let watchdog = the_watchdog(pid).await;
    send_signal(watchdog, "KILL");
    eventually(
        "the killed watchdog to be reaped",
        Duration::from_secs(10),
        || proc_stat(watchdog).is_none_or(|p| p.ppid != pid),
    )
    .await;
    assert_eq!(zombie_children(pid), Vec::<u32>::new());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_killed_watchdog_is_replaced_and_still_kills_background_jobs() {
    let (client, _, pid) = stdio_client(&["--codex-compat"]).await;
    // The job starts before the watchdog dies: its replacement must be told of it.
    let markers = start_sleepers(&client, &[("sleep {0} & sleep {0}; true", false)]).await;
    let first = the_watchdog(pid).await;
    send_signal(first, "KILL");
    eventually("a new watchdog", Duration::from_secs(10), || {
        watchdogs(pid).iter().any(|&w| w != first)
    })
    .await;
    send_signal(pid, "KILL");
    wait_all_gone(&markers, "the background job to die with its killed server").await;
}
