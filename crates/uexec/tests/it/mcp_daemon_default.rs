//! A plain `uexec mcp` keeps its sessions in the user's daemon, where people see them; they
//! end when the agent's client goes away (after its `--linger`), unless a person keeps one
//! (`uexec keep`); a daemon that cannot be reached leaves the server in-process, saying why.

use std::time::Duration;

use serde_json::{json, Value};

use crate::daemon::start_sleeper;
use crate::helpers::{call, eventually, procs_with, structured, text};
use crate::place::DaemonPlace as Place;

/// `uexec ls --json` (`-a` with `all`): every session.
fn ls(place: &Place, all: bool) -> Vec<Value> {
    let mut args = vec!["ls", "--json"];
    if all {
        args.push("-a");
    }
    let out = place.command(&args).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["sessions"].as_array().cloned().unwrap_or_default()
}

fn session_in(list: &[Value], id: i64) -> Option<Value> {
    list.iter().find(|s| s["session_id"] == id).cloned()
}

/// The MCP connections of `owner`, as `uexec daemon --status` counts them.
fn clients_of(place: &Place, owner: &str) -> u64 {
    place
        .status()
        .and_then(|s| s["clients"][owner].as_u64())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_plain_uexec_mcp_keeps_its_sessions_in_the_daemon_until_its_client_goes() {
    let place = Place::new("default");
    let (client, stderr) = place.plain_client(&["--structured"]).await;
    let (id, m) = start_sleeper(&client).await;
    // A person sees the agent's session, under its owner.
    let listed = session_in(&ls(&place, false), id).expect("uexec ls lists it");
    assert_eq!(listed["state"], "running", "{listed}");
    let owner = listed["owner"].as_str().unwrap().to_owned();
    assert!(owner.starts_with("mcp:"), "{owner}");
    assert_eq!(clients_of(&place, &owner), 1);
    assert_eq!(procs_with(&m).len(), 1);

    // The client goes away: its session ends with it (linger 0, the default).
    client.cancel().await.unwrap();
    eventually(
        "the session to end with its client",
        Duration::from_secs(10),
        || procs_with(&m).is_empty(),
    )
    .await;
    assert_eq!(clients_of(&place, &owner), 0);
    let ended = session_in(&ls(&place, true), id).expect("uexec ls -a lists it");
    assert_eq!(ended["state"], "exited", "{ended}");
    assert_eq!(std::fs::read_to_string(&stderr).unwrap(), "", "no warning");

    // The owner's next client is told what became of it.
    let (again, _) = place.plain_client(&[]).await;
    let r = call(
        &again,
        "exec_command",
        json!({"cmd": "true", "login": false}),
    )
    .await;
    assert!(
        text(&r).contains(&format!(
            "Session {id} (echo up; sleep {m}) was stopped by uexec, as its client went away"
        )),
        "{}",
        text(&r)
    );
    again.cancel().await.unwrap();
    place.stop();
}

#[tokio::test]
async fn linger_keeps_the_sessions_for_the_next_client_of_the_same_owner() {
    let place = Place::new("linger");
    let (first, _) = place
        .plain_client(&["--structured", "--linger", "600"])
        .await;
    let (id, m) = start_sleeper(&first).await;
    let owner = session_in(&ls(&place, false), id).unwrap()["owner"]
        .as_str()
        .unwrap()
        .to_owned();
    first.cancel().await.unwrap();
    eventually(
        "the daemon to see the client gone",
        Duration::from_secs(10),
        || clients_of(&place, &owner) == 0,
    )
    .await;
    assert_eq!(procs_with(&m).len(), 1, "it lingers");
    assert_eq!(
        session_in(&ls(&place, false), id).unwrap()["state"],
        "running"
    );

    // A restarted agent (same working directory, so same owner) finds it...
    let (next, _) = place.plain_client(&["--structured"]).await;
    let listed = call(&next, "list_sessions", json!({})).await;
    let ids: Vec<i64> = crate::helpers::session_ids(&listed);
    assert_eq!(ids, [id], "{}", text(&listed));
    // ...and as the last to go, its own linger (0) ends it.
    next.cancel().await.unwrap();
    eventually(
        "the last client's linger to end it",
        Duration::from_secs(10),
        || procs_with(&m).is_empty(),
    )
    .await;
    place.stop();
}

#[tokio::test]
async fn a_session_a_person_keeps_outlives_its_client() {
    let place = Place::new("keep");
    let (client, _) = place.plain_client(&["--structured"]).await;
    let (kept, kept_marker) = start_sleeper(&client).await;
    let (other, other_marker) = start_sleeper(&client).await;
    let out = place
        .command(&["keep", &kept.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("Session {kept} kept: it runs on after its owner's clients are gone\n")
    );
    assert_eq!(session_in(&ls(&place, false), kept).unwrap()["kept"], true);
    let table = place.command(&["ls"]).output().unwrap();
    let line = String::from_utf8_lossy(&table.stdout)
        .lines()
        .find(|l| l.starts_with(&kept.to_string()))
        .map(str::to_owned)
        .unwrap();
    assert!(line.contains(" kept "), "{line}");

    client.cancel().await.unwrap();
    eventually(
        "the session nobody kept to end",
        Duration::from_secs(10),
        || procs_with(&other_marker).is_empty(),
    )
    .await;
    // Both were judged in the same moment: the kept one is still stored, and runs.
    assert_eq!(
        session_in(&ls(&place, false), kept).unwrap()["state"],
        "running"
    );
    assert!(session_in(&ls(&place, false), other).is_none());
    assert_eq!(procs_with(&kept_marker).len(), 1);

    // --undo, then bad input: a session that is not there, none at all.
    let out = place
        .command(&["keep", "--undo", &kept.to_string(), "--json"])
        .output()
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap(),
        json!({"session_id": kept, "kept": false})
    );
    let out = place.command(&["keep", "99999"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let out = place.command(&["keep"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("<SESSION>"));

    let out = place
        .command(&["kill", &kept.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    eventually("the kept one to go", Duration::from_secs(10), || {
        procs_with(&kept_marker).is_empty()
    })
    .await;
    place.stop();
}

#[tokio::test]
async fn a_daemon_that_cannot_be_reached_leaves_a_plain_uexec_mcp_in_process() {
    use std::os::unix::fs::PermissionsExt;
    let place = Place::new("nodaemon");
    // A socket in a directory others may write is never trusted.
    let open = place.cwd.join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let socket = open.join("daemon.sock");
    let socket = socket.to_str().unwrap();

    let (client, stderr) = place
        .plain_client(&["--structured", "--daemon-socket", socket])
        .await;
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "echo served", "login": false}),
    )
    .await;
    assert_eq!(structured(&r)["output"], "served\n", "{}", text(&r));
    client.cancel().await.unwrap();
    let said = std::fs::read_to_string(&stderr).unwrap();
    assert!(
        said.contains("will not use the uexec daemon socket")
            && said.contains("this server keeps its sessions itself, as with --in-process"),
        "{said}"
    );
    assert!(!socket_exists(socket), "no daemon was started there");

    // Asked for by name, the daemon is not optional.
    let out = place
        .command(&["mcp", "--daemon", "--daemon-socket", socket])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("will not use the uexec daemon socket"),
        "{out:?}"
    );
}

fn socket_exists(path: &str) -> bool {
    std::path::Path::new(path).exists()
}

#[test]
fn the_daemons_flags_are_refused_where_the_sessions_stay_in_process() {
    let place = Place::new("flags");
    for (args, says) in [
        (&["mcp", "--linger", "soon"][..], "'--linger <SECONDS|forever>'"),
        (&["mcp", "--linger=-1"][..], "'--linger <SECONDS|forever>'"),
        (
            &["mcp", "--in-process", "--linger", "5"][..],
            "the argument '--linger' is for sessions kept in the daemon, and with --in-process",
        ),
        (
            &["mcp", "--http", "127.0.0.1:0", "--owner", "x"][..],
            "the argument '--owner' is for sessions kept in the daemon, and with --http without --daemon",
        ),
        (
            &["mcp", "--no-transcripts", "--daemon-socket", "/x/s"][..],
            "with '--no-transcripts'",
        ),
        (
            &["mcp", "--daemon", "--in-process"][..],
            "cannot be used with",
        ),
        (
            &["mcp", "--daemon", "--no-transcripts"][..],
            "the argument '--no-transcripts' cannot be used with '--daemon'",
        ),
    ] {
        let out = place
            .command(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    assert!(place.status().is_none(), "nothing started a daemon");
}

/// A client that writes its requests and closes stdin at once (`printf ... | uexec mcp`)
/// still gets the answers the daemon gives: the relay carries the daemon's side to its end
/// (a call still running then is cancelled: `client_gone.rs`).
#[test]
fn requests_then_stdin_closed_are_all_answered_through_the_daemon() {
    let place = Place::new("eof");
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    let (answer, said) = crate::helpers::piped(place.command(&["mcp"]), &[init]);
    assert!(
        answer.contains(r#""id":1"#) && answer.contains("serverInfo"),
        "{said}: {answer:?}"
    );
    assert!(place.status().is_some(), "answered by the daemon");
}
