//! The conventions people already have, kept by the CLI (issue 42 §2): `run -d` returns at
//! the spawn with exit 0 and the id (as `docker run -d`); durations take units on every
//! verb; `wait` gives the stored code of any session `ls -a` lists (as `docker wait`), `kill`
//! of an ended one says so with a code of its own, `attach` exits with the session's code;
//! errors speak of sessions and flags, never of the tools underneath, and a usage error is
//! 2; a second Ctrl-C forces the end; a `uexec run` killed takes its command with it.
//!
//! Every test drives the real `uexec` against a real daemon in a private place.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::helpers::{marker, procs_with, UEXEC};
use crate::place::DaemonPlace as Place;
use crate::tmux::Tmux;

/// How long a test waits for what must come (a failure guard, not a synchronisation).
const PATIENCE: Duration = Duration::from_secs(60);

fn uexec(place: &Place, args: &[&str]) -> Output {
    place.command(args).stdin(Stdio::null()).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fifo in the place: a command that reads it waits until the test writes a line.
fn gate(place: &Place, name: &str) -> PathBuf {
    let path = place.cwd.join(name);
    let made = Command::new("mkfifo").arg(&path).status().unwrap();
    assert!(made.success());
    path
}

/// Lets the command waiting on `gate` go on (blocks until it opened the gate to read).
fn open(gate: &Path) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(gate)
        .unwrap()
        .write_all(b"go\n")
        .unwrap();
}

/// `uexec run -d ARGS`, which must succeed at once: the session id it printed.
fn detached(place: &Place, args: &[&str]) -> String {
    let mut all = vec!["run", "-d", "--no-login"];
    all.extend_from_slice(args);
    let out = uexec(place, &all);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let id = stdout(&out).trim().to_owned();
    assert!(id.parse::<i32>().is_ok(), "stdout is the id alone: {id:?}");
    id
}

/// `uexec ls -a --json`'s session `id`, if listed.
fn listed(place: &Place, id: &str) -> Option<Value> {
    let out = uexec(place, &["ls", "-a", "--json"]);
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    all["sessions"]
        .as_array()?
        .iter()
        .find(|s| s["session_id"].as_i64().map(|i| i.to_string()).as_deref() == Some(id))
        .cloned()
}

#[test]
fn run_d_returns_at_the_spawn_with_exit_0_and_the_id_while_the_command_runs() {
    let place = Place::new("conv");
    let go = gate(&place, "go");
    let done = place.cwd.join("done");
    let script = format!("read x < {}; touch {}", go.display(), done.display());
    // The command cannot end before the gate opens, and the run has returned: at the spawn.
    let id = detached(&place, &["--", &script]);
    assert!(!done.exists());
    assert_eq!(listed(&place, &id).unwrap()["state"], "running");
    // --json says the same as JSON.
    let json = uexec(&place, &["run", "-d", "--json", "--", "exec sleep 30"]);
    assert_eq!(json.status.code(), Some(0), "{}", stderr(&json));
    let other: Value = serde_json::from_slice(&json.stdout).unwrap();
    let other = other["session_id"].to_string();
    assert_eq!(listed(&place, &other).unwrap()["state"], "running");
    assert_eq!(uexec(&place, &["kill", &other]).status.code(), Some(0));
    open(&go);
    let waited = uexec(&place, &["wait", &id]);
    assert_eq!(waited.status.code(), Some(0), "{}", stderr(&waited));
    assert!(done.exists());
}

#[test]
fn a_set_e_script_goes_on_past_two_run_d() {
    let place = Place::new("conv");
    let (a, b) = (gate(&place, "a"), gate(&place, "b"));
    let script = format!(
        "set -e\n\
         a=$({UEXEC} run -d -- 'read x < {}; exit 3')\n\
         b=$({UEXEC} run -d -- 'read x < {}; exit 0')\n\
         echo \"$a $b\"\n",
        a.display(),
        b.display()
    );
    let out = place
        .command_of(Path::new("sh"), &["-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ids: Vec<String> = stdout(&out).split_whitespace().map(str::to_owned).collect();
    assert_eq!(ids.len(), 2, "{}", stdout(&out));
    open(&a);
    open(&b);
    assert_eq!(uexec(&place, &["wait", &ids[0]]).status.code(), Some(3));
    assert_eq!(uexec(&place, &["wait", &ids[1]]).status.code(), Some(0));
}

#[test]
fn durations_take_units_everywhere_and_a_bare_number_keeps_its_documented_unit() {
    let place = Place::new("conv");
    let go = gate(&place, "go");
    let id = detached(&place, &["--", &format!("read x < {}", go.display())]);
    // `wait --timeout`: 1s, 1000ms and a bare 1 (seconds, as documented) are one second.
    for timeout in ["1s", "1000ms", "1"] {
        let started = Instant::now();
        let out = uexec(&place, &["wait", "--timeout", timeout, &id]);
        let took = started.elapsed();
        assert_eq!(out.status.code(), Some(124), "{timeout}: {}", stderr(&out));
        assert!(took >= Duration::from_secs(1), "{timeout}: {took:?}");
        assert!(took < PATIENCE, "{timeout}: {took:?}");
        assert!(
            stderr(&out).contains(&format!("session {id} still runs after 1s")),
            "{timeout}: {}",
            stderr(&out)
        );
    }
    open(&go);
    // `run --timeout`: 1s, and a bare 1000 (ms, as documented).
    for timeout in ["1s", "1000"] {
        let started = Instant::now();
        let out = uexec(
            &place,
            &["run", "--timeout", timeout, "--", "exec sleep 30"],
        );
        assert_eq!(out.status.code(), Some(124), "{timeout}: {}", stderr(&out));
        assert!(started.elapsed() < PATIENCE);
    }
    // A window with units: `--yield 250ms`, `--until-idle 50ms`.
    let idle = uexec(
        &place,
        &[
            "run",
            "--yield",
            "30s",
            "--until-idle",
            "50ms",
            "--",
            "echo hi; exec sleep 30",
        ],
    );
    assert_eq!(idle.status.code(), Some(0), "{}", stderr(&idle));
    assert_eq!(stdout(&idle), "hi\n");
    let id = stderr(&idle)
        .split("session ")
        .nth(1)
        .unwrap_or_default()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>();
    assert_eq!(uexec(&place, &["kill", &id]).status.code(), Some(0));
}

#[test]
fn a_bad_duration_is_a_usage_error_naming_its_flag() {
    let place = Place::new("conv");
    for (args, flag) in [
        (&["wait", "--timeout", "5parsecs", "1"][..], "--timeout"),
        (&["run", "--timeout", "5parsecs", "--", "true"], "--timeout"),
        (&["run", "--yield", "5parsecs", "--", "true"], "--yield"),
        (&["run", "--yield", "1h", "--", "true"], "--yield"),
        (
            &["run", "--until-idle", "soon", "--", "true"],
            "--until-idle",
        ),
        (&["poll", "--yield", "5parsecs", "1"], "--yield"),
    ] {
        let out = uexec(&place, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(flag), "{args:?}: {}", stderr(&out));
    }
    // Out of range: said in units.
    let out = uexec(&place, &["run", "--yield", "1h", "--", "true"]);
    assert!(stderr(&out).contains("250ms to 30s"), "{}", stderr(&out));
    assert!(!place.socket().exists(), "nothing was started");
}

#[test]
fn wait_gives_an_ended_sessions_stored_code_every_time_and_kill_says_it_had_exited() {
    let place = Place::new("conv");
    // A foreground run reports its end to itself: the session is gone from `ls`, listed
    // by `ls -a`.
    let ran = place
        .command(&["run", "--no-login", "--", "echo bye; exit 7"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(ran.status.code(), Some(7), "{}", stderr(&ran));
    let all = uexec(&place, &["ls", "-a", "--json"]);
    let all: Value = serde_json::from_slice(&all.stdout).unwrap();
    let id = all["sessions"][0]["session_id"].to_string();
    assert_eq!(all["sessions"][0]["state"], "exited");
    for round in 0..2 {
        let waited = uexec(&place, &["wait", &id]);
        assert_eq!(
            waited.status.code(),
            Some(7),
            "{round}: {}",
            stderr(&waited)
        );
    }
    let json = uexec(&place, &["wait", "--json", &id]);
    let json: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["exit_code"], 7);
    // kill: it had already exited; nothing is done, with a code of its own.
    for args in [&["kill", &id][..], &["kill", "--signal", "TERM", &id]] {
        let killed = uexec(&place, args);
        assert_eq!(killed.status.code(), Some(5), "{}", stderr(&killed));
        assert!(
            stderr(&killed).contains(&format!("session {id} had already exited with code 7")),
            "{}",
            stderr(&killed)
        );
        assert!(!stdout(&killed).contains("terminated"));
    }
    assert_eq!(listed(&place, &id).unwrap()["exit_code"], 7);
    // A session killed by uexec: its code (SIGKILL) is stored too.
    let id = detached(&place, &["--", "exec sleep 30"]);
    assert_eq!(uexec(&place, &["kill", &id]).status.code(), Some(0));
    for _ in 0..2 {
        assert_eq!(uexec(&place, &["wait", &id]).status.code(), Some(137));
    }
}

#[test]
fn attach_exits_with_the_sessions_code() {
    let place = Place::new("conv");
    let go = gate(&place, "go");
    let id = detached(
        &place,
        &["--", &format!("echo up; read x < {}; exit 9", go.display())],
    );
    let mut attach = place
        .command(&["attach", &id])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Attached once its screen came: then the session may end.
    let mut screen = BufReader::new(attach.stdout.take().unwrap());
    let mut first = String::new();
    screen.read_line(&mut first).unwrap();
    assert!(first.contains("up"), "{first:?}");
    open(&go);
    std::io::copy(&mut screen, &mut std::io::sink()).unwrap();
    let status = attach.wait().unwrap();
    assert_eq!(status.code(), Some(9));
}

/// Words of the tools underneath that a person never types.
const TOOL_WORDS: [&str; 6] = [
    "exec_command",
    "write_stdin",
    "await_exit",
    "send_input",
    "process id",
    "tty=true",
];

#[test]
fn errors_speak_of_sessions_and_flags_and_usage_errors_are_2() {
    let place = Place::new("conv");
    let pipe = detached(&place, &["--", "exec sleep 30"]);
    let ended = detached(&place, &["--", "exit 4"]);
    assert_eq!(uexec(&place, &["wait", &ended]).status.code(), Some(4));
    let cases: [(&[&str], i32); 16] = [
        (&["kill", "99999"], 3),
        (&["wait", "99999"], 3),
        (&["send", "99999", "hi"], 3),
        (&["poll", "99999"], 3),
        (&["logs", "99999"], 3),
        (&["attach", "99999"], 3),
        (&["rm", "99999"], 3),
        // Text to a session without a terminal nor a stdin pipe: a usage error.
        (&["send", &pipe, "hi"], 2),
        // Text to a session that has exited: it is not there to take it.
        (&["send", &ended, "hi"], 3),
        (&["send", "-n", &ended, "hi"], 3),
        (&["run", "--cwd", "/nonexistent/conv", "--", "true"], 2),
        (
            &["run", "-d", "--cwd", "/nonexistent/conv", "--", "true"],
            2,
        ),
        (
            &[
                "run",
                "--yield",
                "1s",
                "--cwd",
                "/nonexistent/conv",
                "--",
                "true",
            ],
            2,
        ),
        (&["run", "--until-pattern", "(", "--", "true"], 2),
        (&["run", "--frobnicate", "--", "true"], 2),
        (&["kill", &ended], 5),
    ];
    for (args, code) in cases {
        let out = uexec(&place, args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(!err.is_empty(), "{args:?}: says why");
        for word in TOOL_WORDS {
            assert!(!err.contains(word), "{args:?} says {word:?}: {err}");
        }
    }
    assert_eq!(uexec(&place, &["kill", &pipe]).status.code(), Some(0));
}

/// A person's terminal, as tmux gives one, with `line` typed at a shell in it.
fn terminal(place: &Place, line: &str) -> Tmux {
    let tmux = Tmux::new("conv");
    let shell = format!(
        "env XDG_RUNTIME_DIR={} HOME={} bash --norc --noprofile",
        place.runtime.display(),
        place.cwd.join("home").display()
    );
    tmux.start((100, 30), &place.cwd, &shell);
    tmux.keys(&[line, "Enter"]);
    tmux
}

/// The screen once it shows `what`.
fn shows(tmux: &Tmux, what: &str) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let screen = tmux.run(&["capture-pane", "-p", "-J", "-t", "t"]);
        if screen.contains(what) {
            return screen;
        }
        assert!(
            Instant::now() < deadline,
            "never showed {what:?}:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_second_ctrl_c_forces_the_end_of_a_command_that_ignores_the_first() {
    let place = Place::new("conv");
    let tmux = terminal(
        &place,
        &format!(
            "{UEXEC} run -- \"trap '' INT; echo up $((6*7)); exec sleep 100\"; echo \"run exited $?\""
        ),
    );
    // (The line typed says `$((6*7))`: 42 is the command's.)
    shows(&tmux, "up 42");
    tmux.keys(&["C-c"]);
    // The command ignores it: the run says how to force it, or leave it.
    let screen = shows(&tmux, "has not stopped on Ctrl-C");
    assert!(
        screen.contains("Ctrl-C again kills it, Ctrl-\\ leaves it running"),
        "{screen}"
    );
    tmux.keys(&["C-c"]);
    shows(&tmux, "run exited 137");
    let all = uexec(&place, &["ls", "--json"]);
    let all: Value = serde_json::from_slice(&all.stdout).unwrap();
    assert_eq!(all["sessions"], serde_json::json!([]), "{all}");
}

#[test]
fn a_run_killed_with_sigkill_takes_its_command_with_it() {
    let place = Place::new("conv");
    let m = marker();
    let mut run = place
        .command(&[
            "run",
            "--no-login",
            "--",
            &format!("echo ready; exec sleep {m}"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(run.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first, "ready\n");
    // (The run's own command line names the marker too; it goes with the kill.)
    assert!(!procs_with(&m).is_empty());
    run.kill().unwrap();
    run.wait().unwrap();
    // As a reader gone: the daemon ends the command, and `ls -a` says how.
    let deadline = Instant::now() + PATIENCE;
    while !procs_with(&m).is_empty() {
        assert!(Instant::now() < deadline, "the command outlived its run");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = uexec(&place, &["ls", "-a", "--json"]);
    let all: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", stderr(&out)));
    let mine: Vec<&Value> = all["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["command"].as_str().unwrap_or_default().contains(&m))
        .collect();
    assert_eq!(mine.len(), 1, "{all}");
    assert_eq!(mine[0]["state"], "exited", "{all}");
}
