//! Hooks through the daemon (issue 39 §3): a client's `--hooks` travel in its hello and the
//! daemon runs them, so a command that outlives its window and its client has its
//! PostToolUse fired once at its exit, by the daemon, with no poll and no client connected;
//! a client that comes back (a restart) does not fire it again.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{call, eventually, text};
use crate::place::DaemonPlace as Place;

#[tokio::test]
async fn a_commands_post_tool_use_fires_once_at_its_exit_after_its_client_is_gone() {
    let place = Place::new("hooks-daemon");
    let post = place.cwd.join("post.sh");
    let log = place.cwd.join("post.log");
    std::fs::write(
        &post,
        format!(
            "#!/bin/bash\nprintf '%s\\n' \"$(cat)\" >> '{}'\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&post, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let hooks = place.cwd.join("hooks.json");
    let settings = json!({"hooks": {"PostToolUse": [{"matcher": "Bash",
        "hooks": [{"type": "command", "command": post.display().to_string()}]}]}});
    std::fs::write(&hooks, settings.to_string()).unwrap();
    let logged = || -> Vec<Value> {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let mut daemon = place
        .command(&["daemon"])
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let socket = place.socket();
    eventually("the daemon to listen", Duration::from_secs(10), || {
        socket.exists()
    })
    .await;
    let hooks = hooks.display().to_string();
    let client = place.client(&["--hooks", &hooks, "--linger", "60"]).await;
    // The command waits for a file the test writes once its client is gone.
    let go = place.cwd.join("go");
    let cmd = format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done; echo late; exit 5",
        go.display()
    );
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": cmd, "login": false, "yield_time_ms": 250}),
    )
    .await;
    assert!(
        text(&r).contains("Process running with session ID"),
        "{}",
        text(&r)
    );
    client.cancel().await.unwrap();
    assert!(logged().is_empty(), "fired before the exit");
    std::fs::write(&go, "").unwrap();
    eventually(
        "the PostToolUse at the exit",
        Duration::from_secs(30),
        || !logged().is_empty(),
    )
    .await;
    let events = logged();
    assert_eq!(events[0]["tool_input"]["cmd"], cmd.as_str());
    assert_eq!(events[0]["tool_response"]["exit_code"], 5);
    assert_eq!(events[0]["tool_response"]["ended"], "after_return");
    // A client back (its restart): its own quick command fires once, the old one not again.
    let client = place.client(&["--hooks", &hooks]).await;
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "echo again", "login": false}),
    )
    .await;
    assert!(text(&r).contains("again"), "{}", text(&r));
    let cmds: Vec<Value> = logged()
        .iter()
        .map(|e| e["tool_input"]["cmd"].clone())
        .collect();
    assert_eq!(cmds, [json!(cmd), json!("echo again")]);
    client.cancel().await.unwrap();
    place.command(&["daemon", "--stop"]).status().unwrap();
    daemon.wait().unwrap();
}
