//! `process/signal` and `process/terminate`.

use serde_json::json;

use crate::helpers::{eventually, pid_alive, TestServer};

const TRAP: &str = "trap 'echo INT-TRAP; exit 42' INT; echo READY; while true; do sleep 0.05; done";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_reaches_a_trap_on_pipes_and_on_a_tty() {
    let server = TestServer::start().await;
    let client = server.session().await;
    for (id, tty, ready) in [
        ("pipe", false, &b"READY\n"[..]),
        ("tty", true, &b"READY\r\n"[..]),
    ] {
        client.sh(id, TRAP, json!({"tty": tty})).await;
        client.wait_output(id, ready).await;
        let result = client
            .call(
                "process/signal",
                json!({"processId": id, "signal": "interrupt"}),
            )
            .await;
        assert_eq!(result, json!({}));
        client.wait_closed(id).await;
        assert_eq!(client.inbox().exited(id).unwrap()["exitCode"], 42);
    }
    let err = client
        .call_error(
            "process/signal",
            json!({"processId": "pipe", "signal": "hup"}),
        )
        .await;
    assert_eq!(err["code"], -32602);
    let result = client
        .call(
            "process/signal",
            json!({"processId": "ghost", "signal": "interrupt"}),
        )
        .await;
    assert_eq!(result, json!({}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_kills_the_whole_group_and_reports_running() {
    let server = TestServer::start().await;
    let client = server.session().await;
    client
        .sh("g", "sleep 1000 & echo $!; wait", json!({}))
        .await;
    let out = client.wait_output("g", b"\n").await;
    let background: u32 = String::from_utf8(out).unwrap().trim().parse().unwrap();
    assert!(pid_alive(background));
    let result = client
        .call("process/terminate", json!({"processId": "g"}))
        .await;
    assert_eq!(result, json!({"running": true}));
    client.wait_closed("g").await;
    assert_eq!(client.inbox().exited("g").unwrap()["exitCode"], 137);
    eventually("the background child to die", || !pid_alive(background)).await;

    let again = client
        .call("process/terminate", json!({"processId": "g"}))
        .await;
    assert_eq!(again, json!({"running": false}));
    let unknown = client
        .call("process/terminate", json!({"processId": "ghost"}))
        .await;
    assert_eq!(unknown, json!({"running": false}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_job_dies_with_its_process_and_a_terminate_after_the_exit_finds_nothing() {
    let server = TestServer::start().await;
    let client = server.session().await;
    client
        .sh("bg", "sleep 1000 >/dev/null 2>&1 & echo $!", json!({}))
        .await;
    client.wait_closed("bg").await;
    let out = client.inbox().output_of("bg");
    let background: u32 = String::from_utf8(out).unwrap().trim().parse().unwrap();
    // What the process left is killed once it closed (SPEC §6), not at the end of the
    // retention: no terminate needed.
    eventually("the background job to die", || !pid_alive(background)).await;
    let result = client
        .call("process/terminate", json!({"processId": "bg"}))
        .await;
    assert_eq!(result, json!({"running": false}));
}
