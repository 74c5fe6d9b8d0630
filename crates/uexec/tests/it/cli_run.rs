//! `uexec run` in the foreground, as a person meets it: the output as it comes, the
//! command's own exit code, stdin passed on, Ctrl-C that interrupts the command (twice:
//! kills it), Ctrl-\ that leaves it running (and says how to find it), `--tty` joined to
//! this terminal, and nothing left running by a run that ended.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::helpers::UEXEC;
use crate::place::DaemonPlace as Place;
use crate::tmux::Tmux;

/// How long a test waits for what must come (a failure guard, not a synchronisation).
const PATIENCE: Duration = Duration::from_secs(60);

fn spawn(place: &Place, args: &[&str]) -> Child {
    place
        .command(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A child's stdout, line by line as it comes.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// `uexec run --no-login -- SCRIPT`, once it printed its first line, `ready`.
fn ready(place: &Place, script: &str) -> Child {
    let mut child = spawn(place, &["run", "--no-login", "--", script]);
    let lines = lines_of(&mut child);
    assert_eq!(lines.recv_timeout(PATIENCE).as_deref(), Ok("ready"));
    child
}

fn finish(child: Child) -> Output {
    child.wait_with_output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn sessions(place: &Place) -> Vec<Value> {
    let out = place.command(&["ls", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["sessions"].as_array().cloned().unwrap_or_default()
}

fn signal(child: &Child, signal: i32) {
    // SAFETY: kill(2) of our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
}

/// Waits until a signal sent to `child` is no longer pending: its handler took it.
fn taken(child: &Child, signal: i32) {
    let bit = 1u64 << (signal - 1);
    let deadline = Instant::now() + PATIENCE;
    loop {
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
        let pending = status
            .lines()
            .filter(|l| l.starts_with("ShdPnd:") || l.starts_with("SigPnd:"))
            .map(|l| u64::from_str_radix(l.split_whitespace().nth(1).unwrap_or("0"), 16).unwrap())
            .fold(0, |a, b| a | b);
        if pending & bit == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "signal {signal} never taken");
        std::thread::yield_now();
    }
}

/// `uexec kill ID`, which must succeed.
fn kill(place: &Place, id: &str) {
    let killed = place.command(&["kill", id]).output().unwrap();
    assert_eq!(killed.status.code(), Some(0), "{}", stderr(&killed));
}

/// The session id a "still running as session N" line names.
pub fn session_named(text: &str) -> String {
    text.split("session ")
        .nth(1)
        .unwrap_or_default()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect()
}

#[test]
fn output_arrives_as_it_comes_and_the_run_exits_with_the_commands_code() {
    let place = Place::new("run");
    // The first run starts the daemon (the engine makes it); the second is the front's.
    for round in 0..2 {
        let gate = place.cwd.join(format!("gate-{round}"));
        let made = Command::new("mkfifo").arg(&gate).status().unwrap();
        assert!(made.success());
        let script = format!(
            "echo first; read go < {}; echo second; exit 7",
            gate.display()
        );
        let mut child = spawn(&place, &["run", "--no-login", "--", &script]);
        let lines = lines_of(&mut child);
        // The command is blocked on the gate: its first line came before its end.
        assert_eq!(lines.recv_timeout(PATIENCE).as_deref(), Ok("first"));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&gate)
            .unwrap()
            .write_all(b"go\n")
            .unwrap();
        assert_eq!(lines.recv_timeout(PATIENCE).as_deref(), Ok("second"));
        let out = finish(child);
        assert_eq!(
            out.status.code(),
            Some(7),
            "round {round}: {}",
            stderr(&out)
        );
        assert!(stderr(&out).is_empty(), "{}", stderr(&out));
        // Its end was reported to the run: nothing is left to see or to poll.
        assert_eq!(sessions(&place), Vec::<Value>::new());
    }
}

#[test]
fn stdin_goes_through_byte_for_byte_and_the_output_is_not_cut_at_a_models_budget() {
    let place = Place::new("run");
    let sort = |input: &[u8], args: &[&str]| {
        let mut child = place
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let input = input.to_vec();
        let writer = std::thread::spawn(move || stdin.write_all(&input));
        let out = finish(child);
        writer.join().unwrap().unwrap();
        out
    };
    let sorted = sort(b"b\na\n", &["run", "--", "sort"]);
    assert_eq!(sorted.status.code(), Some(0), "{}", stderr(&sorted));
    assert_eq!(sorted.stdout, b"a\nb\n");
    // Any bytes, more than a pipe or a frame holds, come back as they went.
    let bytes: Vec<u8> = (0..300_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let cat = sort(&bytes, &["run", "--no-login", "--", "cat"]);
    assert_eq!(cat.status.code(), Some(0), "{}", stderr(&cat));
    assert!(
        cat.stdout == bytes,
        "{} bytes back of {}",
        cat.stdout.len(),
        bytes.len()
    );
    // 100,000 lines are ~590 KB, far past the 10,000 tokens a model's result holds.
    let seq = place
        .command(&["run", "--no-login", "--", "seq 1 100000"])
        .output()
        .unwrap();
    let expected: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
    assert_eq!(seq.status.code(), Some(0), "{}", stderr(&seq));
    assert!(
        seq.stdout == expected.as_bytes(),
        "{} bytes of {}",
        seq.stdout.len(),
        expected.len()
    );
}

#[test]
fn ctrl_c_interrupts_the_command_twice_kills_it_and_ctrl_backslash_leaves_it_running() {
    let place = Place::new("run");
    for round in 0..2 {
        let child = ready(&place, "echo ready; exec sleep 100");
        signal(&child, libc::SIGINT);
        let out = finish(child);
        assert_eq!(
            out.status.code(),
            Some(130),
            "round {round}: {}",
            stderr(&out)
        );
        assert_eq!(sessions(&place), Vec::<Value>::new());
    }
    // A command that ignores Ctrl-C: the second kills it.
    let child = ready(&place, "trap '' INT; echo ready; exec sleep 100");
    signal(&child, libc::SIGINT);
    // Two signals sent before the first is taken are one: wait until it was.
    taken(&child, libc::SIGINT);
    signal(&child, libc::SIGINT);
    let out = finish(child);
    assert_eq!(out.status.code(), Some(137), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Ctrl-C again: killing session"),
        "{}",
        stderr(&out)
    );
    assert_eq!(sessions(&place), Vec::<Value>::new());
    // Ctrl-\ (SIGQUIT) leaves it running, and says where.
    let child = ready(&place, "echo ready; exec sleep 100");
    signal(&child, libc::SIGQUIT);
    let out = finish(child);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let id = session_named(&stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "still running as session {id} (uexec attach {id})"
        )),
        "{}",
        stderr(&out)
    );
    let listed = sessions(&place);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["session_id"].to_string(), id);
    assert_eq!(listed[0]["state"], "running");
    kill(&place, &id);
}

#[test]
fn a_run_told_to_stop_or_read_no_more_ends_its_command() {
    let place = Place::new("run");
    // SIGTERM (a script's `timeout`, a supervisor) or SIGHUP (its terminal closed): the
    // command is this run's job.
    for stop in [libc::SIGTERM, libc::SIGHUP] {
        let child = ready(&place, "echo ready; exec sleep 100");
        signal(&child, stop);
        let out = finish(child);
        assert_ne!(out.status.code(), Some(0), "{stop}: {}", stderr(&out));
        assert_eq!(sessions(&place), Vec::<Value>::new(), "{stop}");
    }
    // `uexec run -- yes | head -1`: the reader goes; so does `yes`.
    let mut child = spawn(&place, &["run", "--no-login", "--", "yes"]);
    let mut out = child.stdout.take().unwrap();
    let mut some = [0u8; 4];
    out.read_exact(&mut some).unwrap();
    assert_eq!(&some, b"y\ny\n");
    drop(out);
    let done = finish(child);
    assert!(!stderr(&done).contains("panicked"), "{}", stderr(&done));
    assert_eq!(sessions(&place), Vec::<Value>::new());
}

#[test]
fn detach_returns_at_the_spawn_and_a_window_says_with_its_exit_code_whether_it_was_asked() {
    let place = Place::new("run");
    // -d alone: started, its id on stdout, exit 0 (the command's own code comes from wait).
    let done = place
        .command(&["run", "-d", "--", "exit 3"])
        .output()
        .unwrap();
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    let id = String::from_utf8_lossy(&done.stdout).trim().to_owned();
    assert!(id.parse::<i32>().is_ok(), "{id:?}");
    let waited = place.command(&["wait", &id]).output().unwrap();
    assert_eq!(waited.status.code(), Some(3), "{}", stderr(&waited));
    // -d with a window: what it printed by then; it runs on, as asked (0).
    let left = place
        .command(&["run", "--detach", "--yield", "250", "--", "exec sleep 30"])
        .output()
        .unwrap();
    assert_eq!(left.status.code(), Some(0), "{}", stderr(&left));
    let id = session_named(&stderr(&left));
    let running: Vec<Value> = sessions(&place)
        .into_iter()
        .filter(|s| s["state"] == "running")
        .collect();
    assert_eq!(running.len(), 1, "{running:?}");
    assert_eq!(running[0]["session_id"].to_string(), id);
    kill(&place, &id);
    // A window without -d that leaves it running: 4.
    let left = place
        .command(&["run", "--yield", "250ms", "--", "exec sleep 30"])
        .output()
        .unwrap();
    assert_eq!(left.status.code(), Some(4), "{}", stderr(&left));
    kill(&place, &session_named(&stderr(&left)));
    // `--until-pattern` returns once it matched: what was asked (0)...
    let ready = place
        .command(&[
            "run",
            "--until-pattern",
            "ready",
            "--",
            "echo ready; exec sleep 30",
        ])
        .output()
        .unwrap();
    assert_eq!(ready.status.code(), Some(0), "{}", stderr(&ready));
    kill(&place, &session_named(&stderr(&ready)));
    // ...and 4 when the window ran out first, even with -d: it never got ready.
    let never = place
        .command(&[
            "run",
            "-d",
            "--yield",
            "250ms",
            "--until-pattern",
            "ready",
            "--",
            "exec sleep 30",
        ])
        .output()
        .unwrap();
    assert_eq!(never.status.code(), Some(4), "{}", stderr(&never));
    kill(&place, &session_named(&stderr(&never)));
    // Bad input names the flag.
    let bad = place
        .command(&["run", "-d=yes", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
}

/// A person's terminal, as tmux gives one.
struct Terminal {
    tmux: Tmux,
}

impl Terminal {
    fn new(place: &Place, line: &str) -> Self {
        let term = Self {
            tmux: Tmux::new("run"),
        };
        let shell = format!(
            "env XDG_RUNTIME_DIR={} HOME={} bash --norc --noprofile",
            place.runtime.display(),
            place.cwd.join("home").display()
        );
        term.tmux.start((100, 30), &place.cwd, &shell);
        term.keys(&[line, "Enter"]);
        term
    }

    fn tmux(&self, args: &[&str]) -> String {
        self.tmux.run(args)
    }

    fn keys(&self, keys: &[&str]) {
        self.tmux.keys(keys);
    }

    /// Whether the screen shows `what` within `patience`.
    fn shows_within(&self, what: &str, patience: Duration) -> bool {
        let deadline = Instant::now() + patience;
        while Instant::now() < deadline {
            if self.tmux(&["capture-pane", "-p", "-t", "t"]).contains(what) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    fn shows(&self, what: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let screen = self.tmux(&["capture-pane", "-p", "-t", "t"]);
            if screen.contains(what) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "the screen never showed {what:?}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn a_tty_run_is_this_terminal_joined_to_the_command() {
    let place = Place::new("run");
    let term = Terminal::new(
        &place,
        &format!("{UEXEC} run --tty -- python3 -q; echo \"run exited $?\""),
    );
    term.shows(">>>");
    // What the person types goes to the REPL, not to the shell behind the run.
    term.keys(&["print(6*7)", "Enter"]);
    term.shows("42");
    // Its terminal is this one's size.
    term.keys(&["import shutil; print(shutil.get_terminal_size())", "Enter"]);
    term.shows("columns=100, lines=30");
    // ...and follows it when it changes (SIGWINCH passed on as the terminal's new size).
    term.tmux(&["resize-window", "-t", "t", "-x", "120", "-y", "40"]);
    // The size reaches the command a moment later: ask until it says so.
    let deadline = Instant::now() + PATIENCE;
    loop {
        term.keys(&["print(shutil.get_terminal_size())", "Enter"]);
        if term.shows_within("columns=120, lines=40", Duration::from_secs(2)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new size never reached the command"
        );
    }
    term.keys(&["exit(5)", "Enter"]);
    term.shows("run exited 5");
    // Ctrl-\ detaches: the command runs on, and the run says where.
    term.keys(&[
        &format!("{UEXEC} run --tty -- cat; echo \"run exited $?\""),
        "Enter",
    ]);
    term.keys(&["typed", "Enter"]);
    term.shows("typed\ntyped");
    term.keys(&["C-\\"]);
    let screen = term.shows("run exited 4");
    let id = session_named(&screen[screen.find("still running as").unwrap_or(0)..]);
    assert!(!id.is_empty(), "{screen}");
    assert_eq!(sessions(&place).len(), 1);
    kill(&place, &id);
}

#[test]
fn a_named_run_is_found_by_its_name() {
    let place = Place::new("run");
    let web = place
        .command(&[
            "run",
            "-d",
            "--name",
            "web",
            "--until-pattern",
            "ready",
            "--",
            "echo ready; exec sleep 30",
        ])
        .output()
        .unwrap();
    assert_eq!(web.status.code(), Some(0), "{}", stderr(&web));
    let logs = place.command(&["logs", "web"]).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&logs.stdout),
        "ready\n",
        "{}",
        stderr(&logs)
    );
    // One running session per name: a second is refused, naming the flag, and runs nothing.
    let again = place
        .command(&["run", "--name", "web", "--", "touch started"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(stderr(&again).contains("--name"), "{}", stderr(&again));
    assert!(!place.cwd.join("started").exists());
    let bad = place
        .command(&["run", "--name", "12345", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("--name"), "{}", stderr(&bad));
    kill(&place, "web");
    // Once it ended, the name is free again.
    let reused = place
        .command(&["run", "--name", "web", "--", "echo again"])
        .output()
        .unwrap();
    assert_eq!(reused.status.code(), Some(0), "{}", stderr(&reused));
    assert_eq!(reused.stdout, b"again\n");
}

/// The daemon's peak resident memory (VmHWM), in bytes.
fn daemon_peak(place: &Place) -> u64 {
    let pid = place.daemon_pid().expect("a daemon runs");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb * 1024
}

#[test]
fn a_reader_that_falls_behind_is_told_what_it_skipped_and_memory_stays_bounded() {
    let place = Place::new("run");
    let started = place.command(&["run", "--", "true"]).output().unwrap();
    assert_eq!(started.status.code(), Some(0), "{}", stderr(&started));
    // 100 MB printed while this reader reads nothing: the run's stdout pipe fills, then its
    // socket, then the daemon's feed of it.
    let mut child = spawn(
        &place,
        &[
            "run",
            "--no-login",
            "--",
            "head -c 100000000 /dev/zero; echo; echo done",
        ],
    );
    let deadline = Instant::now() + PATIENCE;
    while !sessions(&place)
        .iter()
        .any(|s| s["state"] == "exited" && s["command"].as_str().unwrap_or("").starts_with("head"))
    {
        assert!(Instant::now() < deadline, "the command never ended");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    let done = finish(child);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    assert!(
        out.len() < 100_000_000 / 2,
        "{} bytes: nothing was skipped",
        out.len()
    );
    // Told how much, and shown how it ended.
    let printed = 100_000_000 + "\ndone\n".len() as u64;
    let skipped = printed - out.len() as u64;
    assert!(
        stderr(&done).contains(&format!("{skipped} bytes of output not shown")),
        "{skipped}: {}",
        stderr(&done)
    );
    assert!(
        out.ends_with(b"\0\ndone\n"),
        "{:?}",
        &out[out.len().saturating_sub(16)..]
    );
    let peak = daemon_peak(&place);
    assert!(peak < 64 << 20, "the daemon peaked at {peak} bytes");
}
