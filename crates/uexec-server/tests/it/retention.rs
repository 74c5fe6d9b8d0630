//! What stays readable: the newest 1 MiB as whole chunks; closed processes for a while.

use std::time::Duration;

use serde_json::json;
use uexec_server::ServerConfig;

use crate::helpers::{eventually, eventually_within, unb64, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_newest_mebibyte_is_retained_as_whole_chunks() {
    let server = TestServer::start().await;
    let client = server.session().await;
    // 3 MiB of numbered lines.
    let script = "seq 1 1000000 | head -c 3145728";
    client.sh("flood", script, json!({})).await;
    client.wait_closed("flood").await;
    let pushed = client.inbox().output_of("flood");
    assert_eq!(pushed.len(), 3 * 1024 * 1024);

    let state = client
        .call("process/read", json!({"processId": "flood"}))
        .await;
    let chunks = state["chunks"].as_array().unwrap();
    let tail: Vec<u8> = chunks
        .iter()
        .flat_map(|c| unb64(c["chunk"].as_str().unwrap()))
        .collect();
    assert!(
        tail.len() <= 1024 * 1024 && tail.len() > 1024 * 1024 - 8 * 1024,
        "{}",
        tail.len()
    );
    assert!(pushed.ends_with(&tail));
    assert!(chunks
        .iter()
        .all(|c| unb64(c["chunk"].as_str().unwrap()).len() <= 8 * 1024));
    let inbox = client.inbox();
    for c in chunks {
        let seq = c["seq"].as_u64().unwrap();
        assert_eq!(
            inbox.events["flood"][&seq]["params"]["chunk"], c["chunk"],
            "seq {seq}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_process_is_forgotten_after_the_retention_period() {
    let config = ServerConfig {
        exited_process_retention: Duration::from_millis(200),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(config, None).await;
    let client = server.session().await;
    client.start("p", &["true"], json!({})).await;
    client.wait_closed("p").await;
    let deadline = tokio::time::Instant::now() + crate::helpers::WAIT;
    loop {
        let reply = client
            .request("process/read", json!({"processId": "p"}))
            .await;
        if reply.get("error").is_some() {
            assert_eq!(reply["error"]["message"], "unknown process id p");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "p was never forgotten"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The id is free again.
    client.start("p", &["true"], json!({})).await;
    eventually("the reused id to close", || client.inbox().complete("p")).await;
}

/// Processes whose command line contains `needle`.
fn procs_with(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    String::from_utf8_lossy(&c)
                        .replace('\0', " ")
                        .contains(needle)
                })
                .unwrap_or(false)
        })
        .collect()
}

/// A background job dies soon after its process exits, as on the MCP faces (SPEC §6), not
/// at the end of the retention (30 s) nor, when it holds the output open, never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_job_left_by_an_exited_process_is_killed_and_the_process_closes() {
    let server = TestServer::start().await;
    let client = server.session().await;
    let marker = format!("{}.{}", 900 + std::process::id() % 100, std::process::id());
    let needle = format!("sleep {marker}");
    // The job holds the output pipe open: without the kill, no close would ever come.
    client
        .sh("bg", &format!("sleep {marker} & echo started"), json!({}))
        .await;
    client.wait_output("bg", b"started\n").await;
    client.wait_closed("bg").await;
    eventually_within("the job to be killed", Duration::from_secs(5), || {
        procs_with(&needle).is_empty()
    })
    .await;
    assert_eq!(client.inbox().exited("bg").unwrap()["exitCode"], 0);
}
