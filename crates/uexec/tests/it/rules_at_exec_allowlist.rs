//! The rules judged at every exec of a session with a network allowlist (issue 40): the
//! launcher inherits two hand-overs, the allowlist proxy's (`--proxy-fd 3`) and the exec
//! listener's (`--exec-notify-fd 4`), from the launcher started ahead and from a cold one
//! alike. A walk-around of a rule is refused at its exec, with the rule named, while the
//! allowlist still lets an allowed host through and keeps one off the list out; and nothing
//! says the rules judged the script's text only.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::helpers::{eventually, marker, procs_with, text, wait_all_gone, Client};
use crate::sandbox::{exec, scratch, server, unreached_listener};
use crate::sandbox_network::http_server;
use crate::sandbox_warm::{descends_from, waiting_launchers};

const RULES: &str = r#"
prefix_rule(
    pattern = ["git", "push"],
    decision = "forbidden",
    justification = "pushing is for people",
)
"#;

/// The rules, a `git` of the test's own that says what it was asked (first on PATH), and
/// `uexec mcp --rules-at exec` in a sandbox with `127.0.0.1:allowed` on its allowlist.
async fn allowlisted(dir: &Path, allowed: u16) -> (Client, u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::write(dir.join("team.rules"), RULES).unwrap();
    let git = dir.join("bin/git");
    std::fs::write(&git, "#!/bin/sh\necho \"git ran $*\"\n").unwrap();
    std::fs::set_permissions(&git, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let rules = dir.join("team.rules");
    let allow = format!("127.0.0.1:{allowed}");
    let flags = [
        "--rules",
        rules.to_str().unwrap(),
        "--rules-at",
        "exec",
        "--sandbox",
        "workspace-write",
        "--network-allow",
        &allow,
        "--network-denial",
        "record",
    ];
    server(dir, &flags, &[("PATH", &path)]).await
}

/// The script: the allowed host, one off the list, the walk-around, an allowed `git`.
fn script(allowed: u16, off_list: u16, m: &str) -> String {
    format!(
        "curl -sS --noproxy '' http://127.0.0.1:{allowed}/; echo; \
         curl -sSf --noproxy '' http://127.0.0.1:{off_list}/ || echo off-list-refused; \
         $(echo git) push origin || echo push-failed; git status; sleep {m}"
    )
}

/// What the run said: the allowlist held both ways, the push was refused at its exec by
/// the rule, the rest ran, and no fallback to the text was announced.
fn assert_judged_and_allowlisted(said: &str, body: &str, hidden: &std::net::TcpListener) {
    assert!(said.contains(body), "the allowed host: {said}");
    assert!(said.contains("off-list-refused"), "{said}");
    assert!(hidden.accept().is_err(), "a host off the list was reached");
    assert!(
        said.contains("push-failed") && said.contains("git ran status"),
        "{said}"
    );
    assert!(!said.contains("git ran push"), "a push ran: {said}");
    assert!(
        said.lines().any(|l| l.starts_with("refused at exec: ")
            && l.contains("/bin/git push")
            && l.contains("team.rules")
            && l.contains("pushing is for people")),
        "the refusal names the rule: {said}"
    );
    assert!(!said.contains("text only"), "{said}");
}

/// The pid of the `sleep` marked `m`.
fn sleeper(m: &str) -> u32 {
    let sleepers: Vec<u32> = procs_with(m)
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .unwrap_or_default()
                .starts_with(b"sleep\0")
        })
        .collect();
    assert_eq!(sleepers.len(), 1, "{sleepers:?}");
    sleepers[0]
}

/// Terminates the running session `said` names, and waits for its `sleep` to go.
async fn end(client: &Client, said: &str, m: &str) {
    let at = said.find("session ID ").expect(said) + "session ID ".len();
    let id: i64 = said[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .expect(said);
    crate::helpers::call(client, "terminate_session", json!({"session_id": id})).await;
    wait_all_gone(&[m.to_owned()], "the command").await;
}

/// In the launcher started ahead: the proxy's descriptor and the exec listener's travel
/// with the stdio in its launch message.
#[tokio::test]
async fn an_allowlisted_session_is_judged_at_each_exec_in_the_launcher_started_ahead() {
    let dir = scratch("exec-allow-warm");
    let port = http_server("allowed-and-judged");
    let (hidden, off_list) = unreached_listener();
    let (client, pid) = allowlisted(&dir, port).await;
    let r = exec(&client, json!({"cmd": "true"})).await;
    assert!(!text(&r).contains("text only"), "{}", text(&r));
    let mut ahead = Vec::new();
    eventually("a launcher waiting", Duration::from_secs(5), || {
        ahead = waiting_launchers(pid);
        ahead.len() == 1
    })
    .await;
    let m = marker();
    let cmd = script(port, off_list, &m);
    let said = text(&exec(&client, json!({"cmd": cmd, "yield_time_ms": 3000})).await);
    assert_judged_and_allowlisted(&said, "allowed-and-judged", &hidden);
    assert!(
        descends_from(sleeper(&m), ahead[0]),
        "the command runs under the launcher that was waiting ({}): {said}",
        ahead[0]
    );
    end(&client, &said, &m).await;
}

/// Cold (the launcher started ahead was killed): the launcher it execs gets the proxy's end
/// at fd 3 and the exec hand-over's at fd 4, and its arguments say which is which.
#[tokio::test]
async fn an_allowlisted_session_started_cold_is_judged_at_each_exec() {
    let dir = scratch("exec-allow-cold");
    let port = http_server("cold-allowed-and-judged");
    let (hidden, off_list) = unreached_listener();
    let (client, pid) = allowlisted(&dir, port).await;
    exec(&client, json!({"cmd": "true"})).await;
    let mut ahead = Vec::new();
    eventually("a launcher waiting", Duration::from_secs(5), || {
        ahead = waiting_launchers(pid);
        ahead.len() == 1
    })
    .await;
    crate::helpers::send_signal(ahead[0], "KILL");
    eventually("the killed launcher reaped", Duration::from_secs(5), || {
        crate::helpers::proc_stat(ahead[0]).is_none()
    })
    .await;
    let m = marker();
    let cmd = script(port, off_list, &m);
    let said = text(&exec(&client, json!({"cmd": cmd, "yield_time_ms": 3000})).await);
    assert_judged_and_allowlisted(&said, "cold-allowed-and-judged", &hidden);
    let launchers: Vec<String> = procs_with(&m)
        .into_iter()
        .map(|p| std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default())
        .map(|c| String::from_utf8_lossy(&c).into_owned())
        .filter(|c| c.contains("__sandbox-exec\0"))
        .collect();
    assert!(!launchers.is_empty(), "no cold launcher: {said}");
    for cmdline in launchers {
        assert!(
            cmdline.contains("\0--proxy-fd\u{0}3\0")
                && cmdline.contains("\0--exec-notify-fd\u{0}4\0"),
            "{cmdline:?}"
        );
    }
    end(&client, &said, &m).await;
}
