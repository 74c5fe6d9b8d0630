//! The CLI for people, against a real daemon: run, ls, logs, send, poll, wait, kill.

use std::process::Output;

use serde_json::{json, Value};

use crate::helpers::{call, structured, text, Client};
use crate::place::DaemonPlace as Place;

fn uexec(place: &Place, args: &[&str]) -> Output {
    place
        .command(args)
        .env("UEXEC_DETERMINISTIC_IDS", "1")
        .output()
        .unwrap()
}

async fn agent(place: &Place) -> Client {
    place
        .client(&["--codex-compat", "--owner", "agent-1"])
        .await
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub(crate) fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

#[test]
fn run_exits_with_the_commands_code_or_leaves_a_session() {
    let place = Place::new("cli");
    let done = uexec(
        &place,
        &[
            "run",
            "--",
            "sh",
            "-c",
            "for i in $(seq 40); do echo out$i; echo err$i >&2; done; exit 7",
        ],
    );
    assert_eq!(done.status.code(), Some(7), "{}", stderr(&done));
    // One stream, as on a terminal: stdout and stderr in the order the program wrote them
    // (on two pipes, 4 to 18 of these 40 pairs kept it).
    let expected: String = (1..=40).map(|i| format!("out{i}\nerr{i}\n")).collect();
    assert_eq!(stdout(&done), expected);

    let json = uexec(&place, &["run", "--json", "--", "echo", "it's quoted"]);
    assert_eq!(json_of(&json)["output"], "it's quoted\n");

    let long = uexec(
        &place,
        &[
            "run",
            "--yield",
            "300",
            "--",
            "echo first; sleep 1; echo second; exit 5",
        ],
    );
    // A window (without -d) that left it running: exit 4, not 0.
    assert_eq!(long.status.code(), Some(4), "{}", stderr(&long));
    assert_eq!(stdout(&long), "first\n");
    let err = stderr(&long);
    let id: String = err
        .split("session ")
        .nth(1)
        .unwrap_or_default()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    assert!(!id.is_empty(), "{err}");

    let listed = json_of(&uexec(&place, &["ls", "--json"]));
    let me = &listed["sessions"][0];
    assert_eq!(me["session_id"].to_string(), id);
    assert_eq!(me["owner"], "@person");

    // logs -f prints everything, to the end, without taking it from the session.
    let logs = uexec(&place, &["logs", "-f", &id]);
    assert_eq!(stdout(&logs), "first\nsecond\n", "{}", stderr(&logs));
    let waited = uexec(&place, &["wait", &id]);
    assert_eq!(waited.status.code(), Some(5), "{}", stderr(&waited));
    let tail = uexec(&place, &["logs", "--tail", "1", &id]);
    assert_eq!(stdout(&tail), "second\n");
    // `-n`, as `tail -n` spells it.
    let tail = uexec(&place, &["logs", "-n", "1", &id]);
    assert_eq!(stdout(&tail), "second\n", "{}", stderr(&tail));
}

#[tokio::test]
async fn a_person_sees_types_into_and_kills_an_agents_session() {
    let place = Place::new("cli");
    let agent = agent(&place).await;
    let r = call(
        &agent,
        "exec_command",
        json!({"cmd": "echo ready; read -r line; echo \"got $line\"; exec sleep 30", "tty": true,
               "login": false, "yield_time_ms": 500}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    let listed = json_of(&uexec(&place, &["ls", "--json"]));
    let row = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session_id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(row["owner"], "agent-1");
    assert_eq!(row["tty"], true);

    let sent = uexec(&place, &["send", &id.to_string(), "hello from a person"]);
    assert!(sent.status.success(), "{}", stderr(&sent));
    // The agent still gets what the session printed: the person took nothing.
    let mut seen = String::new();
    for _ in 0..20 {
        let p = call(
            &agent,
            "write_stdin",
            json!({"session_id": id, "yield_time_ms": 5000}),
        )
        .await;
        seen.push_str(structured(&p)["output"].as_str().unwrap_or_default());
        if seen.contains("got hello from a person") {
            break;
        }
    }
    assert!(seen.contains("got hello from a person"), "{seen:?}");
    let logs = uexec(&place, &["logs", &id.to_string()]);
    assert!(
        stdout(&logs).contains("got hello from a person"),
        "{}",
        stdout(&logs)
    );

    let killed = uexec(&place, &["kill", &id.to_string()]);
    assert!(killed.status.success(), "{}", stderr(&killed));
    let after = call(&agent, "write_stdin", json!({"session_id": id})).await;
    assert!(
        text(&after).contains("Unknown process id")
            || structured(&after).get("exit_code").is_some(),
        "{}",
        text(&after)
    );
    agent.cancel().await.unwrap();
}

#[test]
fn bad_input_is_refused_with_a_clear_error_and_a_meaningful_code() {
    let place = Place::new("cli");
    let cases: [(&[&str], i32, &str); 12] = [
        (&["logs", "not a name"], 2, "invalid value 'not a name'"),
        (
            &["logs", "-n", "0", "1000"],
            2,
            "invalid value '0' for '--tail <N>'",
        ),
        // The engine's field is `workdir`; the person typed `--cwd`.
        (
            &["run", "--cwd", "/nonexistent/uexec-cli", "--", "touch x"],
            2,
            "invalid arguments: --cwd: /nonexistent/uexec-cli does not exist",
        ),
        (&["run", "--yield", "10", "--", "true"], 2, "--yield"),
        // A mistyped flag is an error, not the first word of the command.
        (&["run", "--yeild", "100", "--", "touch x"], 2, "'--yeild'"),
        (&["run", "--timeout", "1", "--", "touch x"], 2, "--timeout"),
        (
            &["run", "--until-idle", "0", "--", "touch x"],
            2,
            "--until-idle",
        ),
        (&["poll", "1000", "--until-idle", "0"], 2, "--until-idle"),
        // The engine would wait 5 s for a shorter poll: say so instead.
        (&["poll", "1000", "--yield", "100"], 2, "--yield"),
        (&["send", "1000"], 2, "required"),
        (&["kill", "99999"], 3, "Unknown session 99999"),
        (&["wait", "99999"], 3, "Unknown session 99999"),
    ];
    for (args, code, says) in cases {
        let out = uexec(&place, args);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{args:?}: errors go to stderr");
        assert!(
            !stderr(&out).contains("workdir"),
            "{args:?}: the CLI's words: {}",
            stderr(&out)
        );
    }
    // Nothing was started by any of them.
    let ls = json_of(&uexec(&place, &["ls", "--json"]));
    assert_eq!(ls["sessions"], serde_json::json!([]), "{ls}");
    assert!(!place.cwd.join("x").exists(), "no command ran");
}

/// A verb that only reads, or names a session that would have to exist, says there is
/// nothing without starting a daemon to find out.
#[test]
fn read_only_verbs_start_no_daemon_to_say_there_is_nothing() {
    let place = Place::new("cli-nodaemon");
    let ls = uexec(&place, &["ls"]);
    assert_eq!(ls.status.code(), Some(0), "{}", stderr(&ls));
    assert_eq!(stdout(&ls), "no sessions\n");
    assert_eq!(
        json_of(&uexec(&place, &["ls", "--json"]))["sessions"],
        json!([])
    );
    for verb in ["logs", "kill", "wait", "poll"] {
        let out = uexec(&place, &[verb, "1000"]);
        assert_eq!(out.status.code(), Some(3), "{verb}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("Unknown session 1000"),
            "{verb}: {}",
            stderr(&out)
        );
    }
    let send = uexec(&place, &["send", "1000", "y"]);
    assert_eq!(send.status.code(), Some(3), "{}", stderr(&send));
    assert!(!place.socket().exists(), "a daemon was started");
    // A verb that starts something starts the daemon, and then they all see it.
    let run = uexec(&place, &["run", "--no-login", "--", "true"]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    assert!(place.socket().exists());
    let ls = uexec(&place, &["ls", "--json"]);
    assert_eq!(ls.status.code(), Some(0), "{}", stderr(&ls));
}

#[test]
fn ls_lines_its_columns_up_and_prints_no_control_characters() {
    let place = Place::new("cli");
    // A command and a working directory with an escape sequence in them (an OSC that would
    // retitle the person's terminal), and output with colours in it.
    let odd_dir = place.cwd.join("dir\u{1b}]0;owned\u{7}");
    std::fs::create_dir(&odd_dir).unwrap();
    let odd_dir = odd_dir.to_str().unwrap();
    for cmd in [
        ": '\u{1b}]0;owned\u{7}'; printf '\\033[31mred\\033[0m\\n'; exec sleep 30",
        "exec sleep 30",
    ] {
        let started = uexec(
            &place,
            &[
                "run",
                "--no-login",
                "--yield",
                "250",
                "--cwd",
                odd_dir,
                "--",
                cmd,
            ],
        );
        assert_eq!(started.status.code(), Some(4), "{}", stderr(&started));
    }
    let ls = uexec(&place, &["ls"]);
    let out = stdout(&ls);
    let mut lines = out.lines();
    let header = lines.next().unwrap_or_default();
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 2, "{out}");
    for column in ["OWNER", "STATE", "TTY", "CWD", "COMMAND", "LAST LINE"] {
        let at = header.find(column).unwrap_or_else(|| panic!("{header}"));
        for row in &rows {
            let cell: String = row.chars().skip(at).collect();
            let before: String = row.chars().take(at).collect();
            assert!(
                before.ends_with(' ') && !cell.starts_with(' '),
                "{column} at {at} in {header:?} / {row:?}"
            );
        }
    }
    assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
    // A clipped working directory keeps its end, where directories differ.
    assert!(
        rows.iter()
            .all(|row| row.contains("\u{2026}") && row.contains("/work/dir ]0;owned ")),
        "{out}"
    );
    let json = json_of(&uexec(&place, &["ls", "--json"]));
    for s in json["sessions"].as_array().unwrap() {
        let id = s["session_id"].to_string();
        assert_eq!(uexec(&place, &["kill", &id]).status.code(), Some(0));
    }
}

#[test]
fn send_eof_ends_a_terminals_input_with_ctrl_d() {
    let place = Place::new("cli");
    let started = uexec(
        &place,
        &[
            "run",
            "--tty",
            "--no-login",
            "--yield",
            "250",
            "--json",
            "--",
            "cat; echo after-eof",
        ],
    );
    let id = json_of(&started)["session_id"].to_string();
    let sent = uexec(&place, &["send", &id, "hello", "--eof"]);
    assert!(sent.status.success(), "{}", stderr(&sent));
    // cat read the line, then the end of input, and exited.
    let waited = uexec(&place, &["wait", &id]);
    assert_eq!(waited.status.code(), Some(0), "{}", stderr(&waited));
    let logs = stdout(&uexec(&place, &["logs", &id]));
    assert!(logs.contains("after-eof"), "{logs:?}");
}

#[test]
fn completions_are_printed_for_the_usual_shells() {
    let place = Place::new("cli");
    for shell in ["bash", "zsh", "fish"] {
        let out = uexec(&place, &["completions", shell]);
        assert!(out.status.success());
        assert!(stdout(&out).contains("logs"), "{shell}");
    }
    let bad = uexec(&place, &["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn completions_into_a_pipe_nobody_reads_end_quietly_and_a_full_disk_is_said() {
    use std::os::unix::process::ExitStatusExt as _;
    let place = Place::new("cli");
    // `uexec completions bash | head -1`, as a shell runs it.
    let out = std::process::Command::new("sh")
        .args([
            "-c",
            &format!("{} completions bash | head -1", crate::helpers::UEXEC),
        ])
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "_uexec() {\n");
    assert_eq!(stderr(&out), "");
    // A reader gone before the first byte, whatever the timing: SIGPIPE, as any Unix tool.
    for verb in [&["completions", "bash"][..], &["doctor"]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = place.command(verb).stdout(writer).output().unwrap();
        assert_eq!(stderr(&out), "", "{verb:?}");
        assert_eq!(out.status.signal(), Some(13), "{verb:?}: {:?}", out.status);
    }
    // A write that fails otherwise is said, exit 125.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = place
        .command(&["completions", "bash"])
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("uexec: cannot write to stdout: "),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_transcript_exports_as_an_asciicast_recording() {
    let place = Place::new("cli");
    let run = uexec(
        &place,
        &[
            "run",
            "--json",
            "--no-login",
            "--",
            "printf 'h\\303\\251llo\\n'; sleep 0.3; printf 'world\\n'",
        ],
    );
    let code = json_of(&run)["exit_code"].clone();
    assert_eq!(code, 0);
    let id = json_of(&uexec(&place, &["ls", "--json"]))["sessions"]
        .as_array()
        .map(Vec::len);
    assert_eq!(id, Some(0), "it exited");
    // The person's own sessions are found by id after their exit too.
    let cast = uexec(&place, &["logs", "--asciicast", "1000"]);
    let out = stdout(&cast);
    let mut lines = out.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap_or("{}")).unwrap();
    assert_eq!(header["version"], 2, "{out}");
    let mut text = String::new();
    let mut last_t = 0.0;
    for line in lines {
        let event: Value = serde_json::from_str(line).unwrap();
        assert_eq!(event[1], "o");
        let t = event[0].as_f64().unwrap();
        assert!(t >= last_t, "times only grow");
        last_t = t;
        text.push_str(event[2].as_str().unwrap());
    }
    assert_eq!(text, "héllo\nworld\n");
    assert!(last_t >= 0.2, "the pause is in the timing: {last_t}");
}

#[test]
fn run_and_poll_take_wait_conditions_and_a_hard_timeout() {
    let place = Place::new("cli");
    let ready = uexec(
        &place,
        &[
            "run",
            "--json",
            "--no-login",
            "--yield",
            "30000",
            "--until-pattern",
            "ready on :[0-9]+",
            "--",
            "sleep 0.3; echo 'ready on :3000'; exec sleep 30",
        ],
    );
    let r = json_of(&ready);
    assert_eq!(r["reason"], "matched", "{r}");
    let id = r["session_id"].as_i64().expect("still running");
    assert_eq!(
        uexec(&place, &["kill", &id.to_string()]).status.code(),
        Some(0)
    );

    let timed = uexec(
        &place,
        &[
            "run",
            "--no-login",
            "--timeout",
            "300",
            "--",
            "exec sleep 30",
        ],
    );
    assert_eq!(timed.status.code(), Some(124), "{}", stderr(&timed));

    let bad = uexec(&place, &["run", "--until-pattern", "(", "--", "true"]);
    assert_eq!(bad.status.code(), Some(2));
    // The flag the person typed, not the tool's field (`until.pattern`).
    assert!(
        stderr(&bad).contains("invalid arguments: --until-pattern: not a valid regex"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn a_reader_that_stops_reading_ends_the_cli_quietly_as_with_any_unix_tool() {
    // `uexec ls | head -1`, `uexec logs ID | head`: the reader goes away first.
    let place = Place::new("cli");
    let started = uexec(&place, &["run", "--yield", "250", "--", "exec sleep 30"]);
    assert_eq!(started.status.code(), Some(4), "{}", stderr(&started));
    let mut child = place
        .command(&["ls", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // closed before anything was written
    let out = child.wait_with_output().unwrap();
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(
        out.status.signal(),
        Some(13),
        "{:?} (13: SIGPIPE)",
        out.status
    );
}

/// The daemon keeps one store per owner, made at the owner's first connection: every later
/// `uexec run` must still run where it is typed, with its own environment and `--env`.
#[test]
fn every_run_gets_its_own_directory_and_environment() {
    let place = Place::new("cli");
    let first = uexec(&place, &["run", "--no-login", "--", "true"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let elsewhere = place.cwd.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let out = place
        .command(&[
            "run",
            "--no-login",
            "--env",
            "SET_BY_FLAG=flag",
            "--",
            "pwd; echo \"$FROM_SHELL $SET_BY_FLAG\"",
        ])
        .current_dir(&elsewhere)
        .env("FROM_SHELL", "shell")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "{}\nshell flag\n",
            elsewhere.canonicalize().unwrap().display()
        )
    );
}
