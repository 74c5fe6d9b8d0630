//! Call ids are unique per store: two HTTP clients of one principal share a store, and their
//! JSON-RPC ids collide (each client counts from the same start), yet each client's progress
//! carries only its own command's output.

use serde_json::json;

use crate::helpers::{call, structured, Client, Recorder};
use crate::mcp_http;

async fn connect(addr: &str) -> (Client, Recorder) {
    mcp_http::http_client(addr, "shared").await
}

/// Runs a command that prints `word` five times over a second (rmcp's client sends a
/// progress token with every request).
async fn print_word(client: &Client, word: &str) {
    let r = call(
        client,
        "exec_command",
        json!({
            "cmd": format!("for i in 1 2 3 4 5; do echo {word}; sleep 0.2; done"),
            "login": false,
            "yield_time_ms": 10_000
        }),
    )
    .await;
    assert_eq!(structured(&r)["exit_code"], 0);
}

#[tokio::test]
async fn each_client_hears_only_its_own_progress() {
    let server = mcp_http::start(Some("shared"));
    let (alpha, alpha_heard) = connect(&server.addr).await;
    let (beta, beta_heard) = connect(&server.addr).await;
    tokio::join!(
        print_word(&alpha, "from-alpha"),
        print_word(&beta, "from-beta")
    );
    for (heard, mine, theirs) in [
        (&alpha_heard, "from-alpha", "from-beta"),
        (&beta_heard, "from-beta", "from-alpha"),
    ] {
        let text: String = heard
            .progress
            .lock()
            .unwrap()
            .iter()
            .filter_map(|p| p.message.clone())
            .collect();
        assert!(text.contains(mine), "{mine}: {text:?}");
        assert!(!text.contains(theirs), "{mine} heard {theirs}: {text:?}");
    }
    alpha.cancel().await.unwrap();
    beta.cancel().await.unwrap();
}
