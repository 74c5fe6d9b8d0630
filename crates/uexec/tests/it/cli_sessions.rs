//! One place to see every session, against a real daemon: `ls` shows ended sessions with
//! their code and end, `ls -a` the reported ones too, `rm` and `prune` clear them, and an
//! ended session keeps no daemon alive.

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::cli::{json_of, stderr, stdout};
use crate::helpers::{marker, procs_with};
use crate::place::DaemonPlace as Place;

/// The CLI with random ids: an id a reported session released is not handed out again at
/// once, so a test's ids name one session each.
pub(crate) fn uexec(place: &Place, args: &[&str]) -> Output {
    place.command(args).output().unwrap()
}

/// `uexec run --json` of `cmd` with a short window; its session id if it still runs.
pub(crate) fn start(place: &Place, cmd: &str) -> Option<i64> {
    let out = uexec(
        place,
        &["run", "--json", "--no-login", "--yield", "250", "--", cmd],
    );
    let id = json_of(&out)["session_id"].as_i64();
    // A run that leaves its command running says so with its own code (4).
    let code = if id.is_some() { 4 } else { 0 };
    assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
    id
}

/// A command that exits with `code` once [`go`] is called, so that it is still running when
/// its window ends, whatever the machine's speed.
pub(crate) fn on_go(place: &Place, code: i32) -> String {
    let go = place.cwd.join(format!("go-{code}"));
    format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done; exit {code}",
        go.display()
    )
}

pub(crate) fn go(place: &Place, code: i32) {
    std::fs::write(place.cwd.join(format!("go-{code}")), "").unwrap();
}

/// `args` fail with `code`, saying `says` on stderr and nothing on stdout.
pub(crate) fn assert_refused(place: &Place, args: &[&str], code: i32, says: &str) {
    let out = uexec(place, args);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
    assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    assert!(stdout(&out).is_empty(), "{args:?}");
}

/// The rows of `uexec ls --json` (with `-a` when `all`).
pub(crate) fn listed(place: &Place, all: bool) -> Vec<Value> {
    let args: &[&str] = if all {
        &["ls", "-a", "--json"]
    } else {
        &["ls", "--json"]
    };
    let out = uexec(place, args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    json_of(&out)["sessions"].as_array().cloned().unwrap()
}

pub(crate) fn row(rows: &[Value], id: i64) -> Option<Value> {
    rows.iter().find(|r| r["session_id"] == id).cloned()
}

/// Waits (listing only: nothing is reported) until session `id` shows as exited.
pub(crate) fn wait_listed_exited(place: &Place, id: i64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(r) = row(&listed(place, false), id) {
            if r["state"] == "exited" && r.get("exit_code").is_some() {
                return r;
            }
        }
        assert!(
            Instant::now() < deadline,
            "session {id} never showed as exited"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn ls_shows_ended_sessions_with_their_code_and_ls_a_the_reported_ones_until_removed() {
    let place = Place::new("cli-sessions");
    // Ends with nobody polling it: listed by `ls`, with its code and when it ended.
    let unpolled = start(&place, &on_go(&place, 4)).expect("still running");
    go(&place, 4);
    let r = wait_listed_exited(&place, unpolled);
    assert_eq!(r["exit_code"], 4, "{r}");
    assert!(
        r["ended_at"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{r}"
    );
    assert!(r.get("reported").is_none(), "{r}");
    let table = stdout(&uexec(&place, &["ls"]));
    let line = table
        .lines()
        .find(|l| l.starts_with(&unpolled.to_string()))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        line.contains("exited 4") && line.contains(" ago "),
        "{table}"
    );
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.contains("STATE") && header.contains("ENDED"),
        "{header}"
    );

    // Reported at once (`uexec run` saw the exit): gone from `ls`, kept by `ls -a`.
    let reported = uexec(
        &place,
        &["run", "--json", "--no-login", "--", "echo bye; exit 3"],
    );
    assert_eq!(reported.status.code(), Some(3), "{}", stderr(&reported));
    let all = listed(&place, true);
    let gone = all
        .iter()
        .find(|r| r["command"] == "echo bye; exit 3")
        .cloned()
        .unwrap_or_else(|| panic!("ls -a: {all:?}"));
    let gone_id = gone["session_id"].as_i64().unwrap();
    assert_eq!(gone["exit_code"], 3, "{gone}");
    assert_eq!(gone["reported"], true, "{gone}");
    assert_eq!(gone["state"], "exited", "{gone}");
    assert!(
        row(&listed(&place, false), gone_id).is_none(),
        "ls shows only the unreported"
    );
    let transcript = std::path::PathBuf::from(gone["transcript"].as_str().expect("transcript"));
    assert!(transcript.is_dir(), "{}", transcript.display());

    // `rm` forgets one: no longer listed, its output no longer readable.
    let rm = uexec(&place, &["rm", &unpolled.to_string()]);
    assert_eq!(rm.status.code(), Some(0), "{}", stderr(&rm));
    assert_eq!(stdout(&rm), format!("Session {unpolled} removed\n"));
    assert!(row(&listed(&place, true), unpolled).is_none());
    let logs = uexec(&place, &["logs", &unpolled.to_string()]);
    assert_eq!(logs.status.code(), Some(3), "{}", stderr(&logs));

    // A running session is refused, and left running, unless --force.
    let m = marker();
    let running = start(&place, &format!("exec sleep {m}")).expect("running");
    let refused = uexec(&place, &["rm", &running.to_string()]);
    assert_eq!(refused.status.code(), Some(4), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains(&format!("session {running} is still running"))
            && stderr(&refused).contains("--force"),
        "{}",
        stderr(&refused)
    );
    assert!(stdout(&refused).is_empty());
    assert_eq!(
        row(&listed(&place, false), running).map(|r| r["state"].clone()),
        Some(json!("running"))
    );
    assert!(!procs_with(&m).is_empty(), "it still runs");
    let forced = uexec(&place, &["rm", "--force", &running.to_string()]);
    assert_eq!(forced.status.code(), Some(0), "{}", stderr(&forced));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !procs_with(&m).is_empty() {
        assert!(
            Instant::now() < deadline,
            "rm --force left the process running"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(row(&listed(&place, true), running).is_none());

    // `prune` forgets every ended one, and their transcripts; running ones stay.
    let m = marker();
    let stays = start(&place, &format!("exec sleep {m}")).expect("running");
    let pruned = uexec(&place, &["prune", "--json"]);
    assert_eq!(pruned.status.code(), Some(0), "{}", stderr(&pruned));
    assert_eq!(json_of(&pruned)["removed"], json!([gone_id]));
    let left: Vec<i64> = listed(&place, true)
        .iter()
        .filter_map(|r| r["session_id"].as_i64())
        .collect();
    assert_eq!(left, [stays]);
    assert!(!transcript.exists(), "its transcript went with it");
    let again = uexec(&place, &["prune"]);
    assert_eq!(stdout(&again), "No ended sessions to remove.\n");
    assert_eq!(
        uexec(&place, &["kill", &stays.to_string()]).status.code(),
        Some(0)
    );
}

#[test]
fn rm_and_prune_refuse_bad_input_and_start_no_daemon_for_nothing() {
    let place = Place::new("cli-sessions");
    let prune = uexec(&place, &["prune"]);
    assert_eq!(prune.status.code(), Some(0), "{}", stderr(&prune));
    assert_eq!(stdout(&prune), "No ended sessions to remove.\n");
    let rm = uexec(&place, &["rm", "1000"]);
    assert_eq!(rm.status.code(), Some(3), "{}", stderr(&rm));
    assert!(
        stderr(&rm).contains("Unknown session 1000"),
        "{}",
        stderr(&rm)
    );
    let named = uexec(&place, &["logs", "devserver"]);
    assert_eq!(named.status.code(), Some(3), "{}", stderr(&named));
    assert!(
        stderr(&named).contains("Unknown session name devserver (no uexec daemon is running)"),
        "{}",
        stderr(&named)
    );
    assert!(!place.socket().exists(), "a daemon was started");

    assert_eq!(start(&place, "true"), None);
    let cases: [(&[&str], i32, &str); 5] = [
        (&["rm"], 2, "required"),
        (&["ls", "--all=yes"], 2, "'--all'"),
        (&["prune", "1000"], 2, "unexpected argument '1000'"),
        (&["rm", "99999", "--forse"], 2, "'--forse'"),
        (&["rm", "99999"], 3, "Unknown session 99999"),
    ];
    for (args, code, says) in cases {
        assert_refused(&place, args, code, says);
    }
    // Several at once: the known one goes, the unknown one is said, the code is its.
    let listed_all = listed(&place, true);
    let id = listed_all[0]["session_id"].to_string();
    let both = uexec(&place, &["rm", "99999", &id]);
    assert_eq!(both.status.code(), Some(3), "{}", stderr(&both));
    assert_eq!(stdout(&both), format!("Session {id} removed\n"));
    assert!(listed(&place, true).is_empty());

    let help = stdout(&uexec(&place, &["rm", "--help"]));
    assert!(
        help.contains("--force") && help.contains("Exit codes"),
        "{help}"
    );
    let help = stdout(&uexec(&place, &["ls", "--help"]));
    assert!(help.contains("-a, --all"), "{help}");
}

#[test]
fn an_ended_session_nobody_polled_keeps_no_daemon_past_its_idle_timeout() {
    let place = Place::new("cli-sessions");
    let mut daemon = place
        .command(&["daemon", "--idle-timeout", "1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(daemon.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let id = start(&place, &on_go(&place, 6)).expect("still running");
    go(&place, 6);
    assert_eq!(wait_listed_exited(&place, id)["exit_code"], 6);
    // Nothing runs and nobody is connected: it goes, though a session is still listed.
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = daemon.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = daemon.kill();
            panic!("the daemon stayed for an ended session");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
}

/// An agent's named session, as people name it: ls shows the name, every verb takes it.
#[tokio::test]
async fn a_session_is_named_at_exec_command_and_every_verb_takes_its_name() {
    use crate::helpers::{call, structured, text};
    let place = Place::new("cli-sessions");
    let agent = place.client(&["--owner", "agent-1", "--structured"]).await;
    let cmd = format!("echo hi-named; {}", on_go(&place, 7));
    let r = call(
        &agent,
        "exec_command",
        json!({"cmd": cmd, "login": false, "yield_time_ms": 250, "name": "dev.server-1"}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    let rows = listed(&place, false);
    assert_eq!(row(&rows, id).unwrap()["name"], "dev.server-1");
    let table = stdout(&uexec(&place, &["ls"]));
    assert!(
        table.lines().next().unwrap_or_default().contains("NAME"),
        "{table}"
    );
    assert!(table.contains("dev.server-1"), "{table}");
    let agents = call(&agent, "list_sessions", json!({})).await;
    assert_eq!(structured(&agents)["sessions"][0]["name"], "dev.server-1");

    // The name is the owner's while the session runs: refused twice, naming `name`.
    for (name, says) in [
        (
            "dev.server-1",
            format!("is the name of session {id}, still running"),
        ),
        ("a b", "only letters, digits".to_owned()),
        ("123", "not all digits".to_owned()),
    ] {
        let again = call(
            &agent,
            "exec_command",
            json!({"cmd": "touch nothing-ran", "login": false, "name": name}),
        )
        .await;
        let t = text(&again);
        assert!(
            t.contains("exec_command failed: invalid arguments: name: ") && t.contains(&says),
            "{name}: {t}"
        );
    }
    assert!(!place.cwd.join("nothing-ran").exists());

    // logs, wait, send, poll, attach take the name.
    let logs = uexec(&place, &["logs", "dev.server-1"]);
    assert_eq!(stdout(&logs), "hi-named\n", "{}", stderr(&logs));
    let waited = uexec(&place, &["wait", "--timeout", "0", "dev.server-1"]);
    assert_eq!(waited.status.code(), Some(124), "{}", stderr(&waited));
    assert!(
        stderr(&waited).contains("dev.server-1 still runs"),
        "{}",
        stderr(&waited)
    );
    let sent = uexec(&place, &["send", "dev.server-1", "--ctrl-c"]);
    assert!(sent.status.success(), "{}", stderr(&sent));
    let polled = uexec(&place, &["poll", "--json", "dev.server-1"]);
    assert_eq!(polled.status.code(), Some(130), "{}", stderr(&polled));
    assert_eq!(json_of(&polled)["exit_code"], 130);
    // Ended and reported: still found by name (`ls -a`), and removed by it.
    let all = listed(&place, true);
    assert_eq!(row(&all, id).unwrap()["name"], "dev.server-1", "{all:?}");
    let logs = uexec(&place, &["logs", "dev.server-1"]);
    assert_eq!(stdout(&logs), "hi-named\n", "{}", stderr(&logs));
    // The name is free again; a name's running session comes before its ended ones.
    let r = call(
        &agent,
        "exec_command",
        json!({"cmd": "echo second; exec sleep 30", "login": false, "yield_time_ms": 250,
               "name": "dev.server-1"}),
    )
    .await;
    let second = structured(&r)["session_id"].as_i64().expect("running");
    let logs = uexec(&place, &["logs", "dev.server-1"]);
    assert_eq!(stdout(&logs), "second\n", "{}", stderr(&logs));
    let killed = uexec(&place, &["kill", "dev.server-1"]);
    assert_eq!(killed.status.code(), Some(0), "{}", stderr(&killed));
    let removed = uexec(&place, &["rm", "dev.server-1"]);
    assert_eq!(removed.status.code(), Some(0), "{}", stderr(&removed));
    assert_eq!(stdout(&removed), format!("Session {second} removed\n"));
    let removed = uexec(&place, &["rm", "dev.server-1"]);
    assert_eq!(stdout(&removed), format!("Session {id} removed\n"));

    for verb in ["logs", "kill", "wait", "poll", "rm", "attach"] {
        assert_refused(
            &place,
            &[verb, "no-such-name"],
            3,
            "Unknown session name no-such-name",
        );
        assert_refused(
            &place,
            &[verb, "not a name"],
            2,
            "invalid value 'not a name'",
        );
    }
    let help = stdout(&uexec(&place, &["logs", "--help"]));
    assert!(
        help.contains("<SESSION>") && help.contains("its name"),
        "{help}"
    );
    agent.cancel().await.unwrap();

    // Codex's dialect has no name.
    let codex = place
        .client(&["--codex-compat", "--owner", "agent-2"])
        .await;
    let r = call(&codex, "exec_command", json!({"cmd": "true", "name": "x"})).await;
    assert!(
        text(&r).contains("invalid arguments: name: unknown field"),
        "{}",
        text(&r)
    );
    codex.cancel().await.unwrap();
}

#[tokio::test]
async fn attach_follows_a_session_named_by_its_name() {
    use std::io::Read as _;
    let place = Place::new("cli-sessions");
    let agent = place.client(&["--owner", "agent-1", "--structured"]).await;
    let cmd = format!("echo hi-attach; {}", on_go(&place, 8));
    crate::helpers::call(
        &agent,
        "exec_command",
        json!({"cmd": cmd, "login": false, "yield_time_ms": 250, "name": "watched"}),
    )
    .await;
    let mut attach = place
        .command(&["attach", "watched"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = attach.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("hi-attach") {
        let more = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("attach showed {:?}", String::from_utf8_lossy(&seen)));
        seen.extend(more);
    }
    go(&place, 8);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = attach.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "attach did not end with the session"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // It ends with the session, and with its code.
    assert_eq!(status.code(), Some(8), "{status:?}");
    agent.cancel().await.unwrap();
}

/// `uexec run` of `cmd` until its output matches `ready`; its session id.
pub(crate) fn start_ready(place: &Place, cmd: &str, ready: &str) -> i64 {
    start_with(place, &["--yield", "30000", "--until-pattern", ready], cmd)
}

/// `uexec run --json --no-login` of `cmd` with `flags` (a window, a name), left running:
/// its id.
pub(crate) fn start_with(place: &Place, flags: &[&str], cmd: &str) -> i64 {
    let mut args = vec!["run", "--json", "--no-login"];
    args.extend_from_slice(flags);
    args.extend(["--", cmd]);
    let out = uexec(place, &args);
    // A window that met its --until-* condition did what was asked (0); one without is left
    // running unasked (4).
    let until = flags.iter().any(|f| f.starts_with("--until"));
    assert_eq!(
        out.status.code(),
        Some(if until { 0 } else { 4 }),
        "{}",
        stderr(&out)
    );
    json_of(&out)["session_id"].as_i64().expect("still running")
}
