//! `uexec kill` for people, against a real daemon: a signal only (`--signal`), several
//! sessions at once, every running one of an owner (`--all --owner`), and its bad input.

use serde_json::json;

use crate::cli::{json_of, stderr, stdout};
use crate::cli_sessions::{assert_refused, start, start_ready, uexec, wait_listed_exited};
use crate::helpers::{marker, procs_with};
use crate::place::DaemonPlace as Place;

#[tokio::test]
async fn kill_sends_a_signal_kills_several_and_all_of_an_owner() {
    let place = Place::new("cli-sessions");
    // --signal only signals: the command's trap runs, and it exits as it says.
    let trapped = start_ready(
        &place,
        "trap 'echo got-term; exit 9' TERM; echo armed; while :; do sleep 0.05; done",
        "armed",
    );
    let sent = uexec(&place, &["kill", "--signal", "TERM", &trapped.to_string()]);
    assert_eq!(sent.status.code(), Some(0), "{}", stderr(&sent));
    assert_eq!(
        stdout(&sent),
        format!("Sent SIGTERM to session {trapped}\n")
    );
    assert_eq!(wait_listed_exited(&place, trapped)["exit_code"], 9);
    assert!(stdout(&uexec(&place, &["logs", &trapped.to_string()])).contains("got-term"));
    // A session that has exited takes no signal: said so, with a code of its own.
    let late = uexec(&place, &["kill", "-s", "TERM", &trapped.to_string()]);
    assert_eq!(late.status.code(), Some(5), "{}", stderr(&late));
    assert!(
        stderr(&late).contains(&format!("session {trapped} had already exited with code 9")),
        "{}",
        stderr(&late)
    );
    // Names as `kill` takes them: int, SIGINT, 2.
    let m = marker();
    let interrupted = start(&place, &format!("exec sleep {m}")).expect("running");
    let sent = uexec(
        &place,
        &[
            "kill",
            "--signal",
            "sigint",
            &interrupted.to_string(),
            "--json",
        ],
    );
    assert_eq!(
        json_of(&sent),
        json!({"session_id": interrupted, "signal": "INT"}),
        "{}",
        stderr(&sent)
    );
    assert_eq!(wait_listed_exited(&place, interrupted)["exit_code"], 130);

    // Several at once: the unknown one is said, the others are killed all the same.
    let (m1, m2) = (marker(), marker());
    let one = start(&place, &format!("exec sleep {m1}")).expect("running");
    let two = start(&place, &format!("exec sleep {m2}")).expect("running");
    let both = uexec(
        &place,
        &["kill", &one.to_string(), "99999", &two.to_string()],
    );
    assert_eq!(both.status.code(), Some(3), "{}", stderr(&both));
    assert_eq!(
        stdout(&both),
        format!("Session {one} terminated\nSession {two} terminated\n")
    );
    assert!(
        stderr(&both).contains("Unknown session 99999"),
        "{}",
        stderr(&both)
    );
    crate::helpers::wait_all_gone(&[m1, m2], "the killed sessions' processes to go").await;

    // --all --owner: only that owner's running sessions.
    let agent = place
        .client(&["--codex-compat", "--owner", "agent-1"])
        .await;
    let (ma, mp) = (marker(), marker());
    let r = crate::helpers::call(
        &agent,
        "exec_command",
        json!({"cmd": format!("exec sleep {ma}"), "login": false, "yield_time_ms": 250}),
    )
    .await;
    let agents = crate::helpers::structured(&r)["session_id"]
        .as_i64()
        .expect("running");
    let persons = start(&place, &format!("exec sleep {mp}")).expect("running");
    let owned = uexec(&place, &["kill", "--all", "--owner", "agent-1"]);
    assert_eq!(owned.status.code(), Some(0), "{}", stderr(&owned));
    assert_eq!(stdout(&owned), format!("Session {agents} terminated\n"));
    crate::helpers::wait_all_gone(&[ma], "the agent's session to go").await;
    assert!(!procs_with(&mp).is_empty(), "another owner's session stays");
    let all = uexec(&place, &["kill", "--all", "--json"]);
    assert_eq!(
        json_of(&all),
        json!({"sessions": [{"session_id": persons, "terminated": true}], "errors": []})
    );
    crate::helpers::wait_all_gone(&[mp], "the person's session to go").await;
    let none = uexec(&place, &["kill", "--all"]);
    assert_eq!(none.status.code(), Some(0), "{}", stderr(&none));
    assert_eq!(stdout(&none), "no running sessions\n");
    agent.cancel().await.unwrap();
}

#[test]
fn kill_refuses_bad_input_naming_the_flag() {
    let place = Place::new("cli-sessions");
    let cases: [(&[&str], &str); 5] = [
        (&["kill", "--signal", "FOO", "1000"], "invalid value 'FOO' for '--signal <SIGNAL>': not a signal uexec sends; one of HUP, INT, QUIT, KILL, USR1, USR2, TERM"),
        (&["kill"], "required"),
        (&["kill", "--owner", "x", "1000"], "--all"),
        (&["kill", "--all", "1000"], "cannot be used with"),
        (&["kill", "--signal", "0", "1000"], "'--signal <SIGNAL>'"),
    ];
    for (args, says) in cases {
        assert_refused(&place, args, 2, says);
    }
    assert!(!place.socket().exists(), "bad input starts nothing");
    let help = stdout(&uexec(&place, &["kill", "--help"]));
    for line in [
        "--signal <SIGNAL>",
        "--all",
        "--owner <OWNER>",
        "Exit codes",
        "3 no such session",
    ] {
        assert!(help.contains(line), "{line}: {help}");
    }
}
