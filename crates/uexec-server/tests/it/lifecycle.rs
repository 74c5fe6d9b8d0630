//! `process/start` and the output / exited / closed event stream.

use serde_json::json;

use crate::helpers::TestServer;

fn kinds(events: &[(u64, String)]) -> Vec<(u64, &str)> {
    events.iter().map(|(s, m)| (*s, m.as_str())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn true_exits_then_closes_on_its_own_counter() {
    let server = TestServer::start().await;
    let client = server.session().await;
    let result = client.start("t", &["true"], json!({})).await;
    assert_eq!(result, json!({"processId": "t", "sandboxType": "none"}));
    let events = client.wait_closed("t").await;
    assert_eq!(
        kinds(&events),
        vec![(1, "process/exited"), (2, "process/closed")]
    );
    assert_eq!(client.inbox().exited("t").unwrap()["exitCode"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_exited_closed_share_one_seq_in_order() {
    let server = TestServer::start().await;
    let client = server.session().await;
    client
        .sh(
            "o",
            "echo hi; read line; exit 4",
            json!({"pipeStdin": true}),
        )
        .await;
    client.wait_output("o", b"hi\n").await;
    assert_eq!(client.write("o", b"go\n", "w1").await, "accepted");
    let events = client.wait_closed("o").await;
    assert_eq!(
        kinds(&events),
        vec![
            (1, "process/output"),
            (2, "process/exited"),
            (3, "process/closed")
        ]
    );
    assert_eq!(client.inbox().exited("o").unwrap()["exitCode"], 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_labelled_and_seqs_have_no_gaps() {
    let server = TestServer::start().await;
    let client = server.session().await;
    client
        .sh(
            "m",
            "for i in 1 2 3; do echo out$i; echo err$i >&2; done",
            json!({}),
        )
        .await;
    let events = client.wait_closed("m").await;
    let seqs: Vec<u64> = events.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert_eq!(events.last().unwrap().1, "process/closed");
    let inbox = client.inbox();
    let stdout: Vec<u8> = inbox.events["m"]
        .values()
        .filter(|e| e["params"]["stream"] == "stdout")
        .flat_map(|e| crate::helpers::unb64(e["params"]["chunk"].as_str().unwrap()))
        .collect();
    assert_eq!(stdout, b"out1\nout2\nout3\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_ids_bad_params_and_spawn_failures() {
    let server = TestServer::start().await;
    let client = server.session().await;
    client.sh("dup", "sleep 30", json!({})).await;
    let params = json!({"processId": "dup", "argv": ["true"], "cwd": "file:///tmp", "env": {},
                        "tty": false});
    let err = client.call_error("process/start", params.clone()).await;
    assert_eq!(
        err,
        json!({"code": -32600, "message": "process dup already exists"})
    );

    let mut missing_tty = params.clone();
    missing_tty["processId"] = json!("x");
    missing_tty.as_object_mut().unwrap().remove("tty");
    let err = client.call_error("process/start", missing_tty).await;
    assert_eq!(
        err,
        json!({"code": -32602, "message": "missing field `tty`"})
    );
    let mut relative = params.clone();
    relative["processId"] = json!("x");
    relative["cwd"] = json!("tmp");
    assert_eq!(
        client.call_error("process/start", relative).await["code"],
        -32602
    );

    let mut missing = params.clone();
    missing["processId"] = json!("nope");
    missing["argv"] = json!(["/nonexistent/program"]);
    let err = client.call_error("process/start", missing).await;
    assert_eq!(err["code"], -32603);
    assert_eq!(err["data"], json!({"kind": "spawnNotFound"}));
    // Not executable: Codex's kind for it too.
    let mut denied = params.clone();
    denied["processId"] = json!("nope");
    denied["argv"] = json!(["/etc/passwd"]);
    let err = client.call_error("process/start", denied).await;
    assert_eq!(err["code"], -32603);
    assert_eq!(err["data"], json!({"kind": "spawnPermissionDenied"}));
    // The failed id is free again.
    client.start("nope", &["true"], json!({})).await;
    client.wait_closed("nope").await;
    assert_eq!(
        client
            .call("process/terminate", json!({"processId": "dup"}))
            .await["running"],
        true
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_is_exact_and_arg0_is_honoured() {
    let server = TestServer::start().await;
    let client = server.session().await;
    client
        .start(
            "env",
            &["/usr/bin/env"],
            json!({"env": {"ONLY": "this one"}}),
        )
        .await;
    client.wait_closed("env").await;
    assert_eq!(client.inbox().output_of("env"), b"ONLY=this one\n");

    client
        .start(
            "a0",
            &["/bin/sh", "-c", "echo \"$0\""],
            json!({"arg0": "custom"}),
        )
        .await;
    client.wait_closed("a0").await;
    assert_eq!(client.inbox().output_of("a0"), b"custom\n");
}
