//! `uexec attach`, the way a person uses it: tmux runs it (send-keys types, capture-pane
//! reads the screen) while an agent's MCP client owns the session.

use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;

use crate::helpers::{call, structured, text, Client, UEXEC};
use crate::place::DaemonPlace;
use crate::tmux::Tmux;

struct Place {
    daemon: DaemonPlace,
    tmux: Tmux,
}

impl std::ops::Deref for Place {
    type Target = DaemonPlace;
    fn deref(&self) -> &DaemonPlace {
        &self.daemon
    }
}

impl Place {
    fn new() -> Self {
        Self {
            daemon: DaemonPlace::new("attach"),
            tmux: Tmux::new("attach"),
        }
    }

    async fn agent(&self) -> Client {
        self.daemon
            .client(&["--structured", "--owner", "agent"])
            .await
    }

    fn tmux(&self, args: &[&str]) -> String {
        self.tmux.run(args)
    }

    /// `uexec attach ARGS` in a 120x30 tmux window.
    fn attach_in_tmux(&self, args: &str) {
        self.in_tmux(&format!("attach {args}"));
    }

    /// `uexec ARGS` in a 120x30 tmux window.
    fn in_tmux(&self, args: &str) {
        let line = format!(
            "env XDG_RUNTIME_DIR={} HOME={} {UEXEC} {args}",
            self.runtime.display(),
            self.cwd.join("home").display()
        );
        self.tmux.start((120, 30), &self.cwd, &line);
        self.tmux(&["set-option", "-t", "t", "remain-on-exit", "on"]);
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "t"])
    }

    async fn screen_shows(&self, what: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            let screen = self.screen();
            if screen.contains(what) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the screen never showed {what:?}:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test]
async fn a_person_answers_the_password_prompt_the_agent_may_not_type() {
    let place = Place::new();
    let agent = place.agent().await;
    let r = call(
        &agent,
        "exec_command",
        json!({"cmd": "echo deploying; read -s -p 'Password: ' x; echo; echo got-${#x}; stty size; exec sleep 30",
               "tty": true, "login": false, "yield_time_ms": 30000, "until": {"prompt": true}}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(s["awaiting_secret"], true, "{}", text(&r));
    assert!(text(&r).contains("A password prompt waits"), "{}", text(&r));
    let id = s["session_id"].as_i64().expect("running");
    let refused = call(
        &agent,
        "write_stdin",
        json!({"session_id": id, "chars": "guess\r"}),
    )
    .await;
    assert!(
        text(&refused).contains("waits for a secret"),
        "{}",
        text(&refused)
    );

    // The person attaches: the screen is redrawn with the prompt on it.
    place.attach_in_tmux(&format!("{id} --write"));
    place.screen_shows("Password:").await;
    assert!(place.screen().contains("deploying"), "{}", place.screen());
    // While they hold the lease, the model cannot type.
    let busy = call(
        &agent,
        "write_stdin",
        json!({"session_id": id, "chars": "\r"}),
    )
    .await;
    assert!(
        text(&busy).contains("a person is typing"),
        "{}",
        text(&busy)
    );
    // They type the password (never echoed), see the result, and detach.
    place.tmux(&["send-keys", "-t", "t", "hunter2", "Enter"]);
    place.screen_shows("got-7").await;
    assert!(!place.screen().contains("hunter2"), "{}", place.screen());
    // The session follows the person's terminal (not 24x80 any more).
    place.screen_shows(" 120").await;
    place.tmux(&["send-keys", "-t", "t", "C-\\"]);
    place.screen_shows("detached from session").await;

    // The session lives on, and the agent reads everything itself.
    let mut seen = String::new();
    for _ in 0..10 {
        let p = call(
            &agent,
            "write_stdin",
            json!({"session_id": id, "yield_time_ms": 5000}),
        )
        .await;
        seen.push_str(structured(&p)["output"].as_str().unwrap_or_default());
        if seen.contains("got-7") {
            break;
        }
    }
    assert!(seen.contains("got-7"), "{seen:?}");
    let listed = call(&agent, "list_sessions", json!({})).await;
    assert_eq!(structured(&listed)["sessions"][0]["session_id"], id);
    // The lease went with the person: the model may type again.
    let typed = call(
        &agent,
        "write_stdin",
        json!({"session_id": id, "chars": "\r"}),
    )
    .await;
    assert!(
        !text(&typed).contains("a person is typing"),
        "{}",
        text(&typed)
    );
    call(&agent, "terminate_session", json!({"session_id": id})).await;
    agent.cancel().await.unwrap();
}

#[tokio::test]
async fn a_pipe_session_attaches_read_only_as_a_live_log() {
    let place = Place::new();
    let agent = place.agent().await;
    let r = call(
        &agent,
        "exec_command",
        json!({"cmd": "echo line-one; while [ ! -e go ]; do sleep 0.1; done; echo line-two; exec sleep 30",
               "login": false, "yield_time_ms": 500}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    place.attach_in_tmux(&id.to_string());
    place.screen_shows("line-one").await;
    std::fs::write(place.cwd.join("go"), "").unwrap();
    place.screen_shows("line-two").await;
    // One banner line says how to leave; each log line starts at the left edge (a bare
    // `\n` in a raw terminal would have started line-two under the end of line-one).
    let screen = place.screen();
    let lines: Vec<&str> = screen.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some(format!("attached to {id} (read-only; Ctrl-\\ detaches)").as_str()),
        "{screen}"
    );
    assert!(lines.contains(&"line-one"), "{screen}");
    assert!(lines.contains(&"line-two"), "{screen}");
    // Keys go nowhere without --write; the detach key still detaches.
    place.tmux(&["send-keys", "-t", "t", "typed-by-mistake", "Enter"]);
    place.tmux(&["send-keys", "-t", "t", "C-\\"]);
    place.screen_shows("detached from session").await;
    let p = call(
        &agent,
        "write_stdin",
        json!({"session_id": id, "yield_time_ms": 5000}),
    )
    .await;
    assert!(!text(&p).contains("typed-by-mistake"), "{}", text(&p));
    call(&agent, "terminate_session", json!({"session_id": id})).await;
    agent.cancel().await.unwrap();
}

#[tokio::test]
async fn the_screen_drawn_long_ago_is_redrawn_from_the_kept_emulator() {
    // A full-screen program draws its header once, then updates one line for ~400 KiB: a
    // screen rebuilt from the last 256 KiB printed would have lost both the alternate screen
    // and the header.
    let place = Place::new();
    let agent = place.agent().await;
    let r = call(
        &agent,
        "exec_command",
        json!({"cmd": "printf '\\033[?1049h\\033[H\\033[2JHEADER-DRAWN-ONCE'; i=0; \
                       while [ $i -lt 20000 ]; do printf '\\033[2;1Htick %08d' $i; i=$((i+1)); done; \
                       printf '\\033[3;1Hdone-ticking'; exec sleep 30",
               "tty": true, "login": false, "yield_time_ms": 30000,
               "until": {"pattern": "done-ticking"}, "max_output_tokens": 10}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    place.attach_in_tmux(&id.to_string());
    place.screen_shows("done-ticking").await;
    let screen = place.screen();
    assert!(screen.contains("HEADER-DRAWN-ONCE"), "{screen}");
    assert!(screen.contains("tick 00019999"), "{screen}");
    place.tmux(&["send-keys", "-t", "t", "C-\\"]);
    place.screen_shows("detached from session").await;
    call(&agent, "terminate_session", json!({"session_id": id})).await;
    agent.cancel().await.unwrap();
}

/// `uexec attach ID` with `stdin` from `/dev/null` or a pipe left open: what it printed
/// (stdout, stderr) and how it exited, once the session (it waits for `go`) ends.
fn attach_without_a_terminal(place: &Place, id: i64, stdin: Stdio) -> (String, String, bool) {
    let mut child = place
        .command(&["attach", &id.to_string()])
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The banner comes once the daemon has attached it: only then may the session end.
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut banner = String::new();
    err.read_line(&mut banner).unwrap();
    std::fs::write(place.cwd.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        banner + &rest,
        out.status.success(),
    )
}

#[tokio::test]
async fn attach_with_a_stdin_that_is_not_a_terminal_follows_until_the_session_ends() {
    let place = Place::new();
    let agent = place.agent().await;
    for (kind, stdin) in [
        ("/dev/null", Stdio::null()),
        ("an open pipe", Stdio::piped()),
    ] {
        let _ = std::fs::remove_file(place.cwd.join("go"));
        let r = call(
            &agent,
            "exec_command",
            json!({"cmd": "echo line-one; printf 'crlf\\r\\n'; while [ ! -e go ]; do sleep 0.05; done; echo line-two",
                   "login": false, "yield_time_ms": 500}),
        )
        .await;
        let id = structured(&r)["session_id"].as_i64().expect("running");
        let (out, err, ok) = attach_without_a_terminal(&place, id, stdin);
        assert!(ok, "{kind}: {out:?} {err:?}");
        assert_eq!(
            err.lines().next(),
            Some(
                format!(
                    "attached to {id} (read-only; stdin is not a terminal: until the session ends)"
                )
                .as_str()
            ),
            "{kind}"
        );
        // The pipe log's lines end in `\r\n`, once, whoever wrote the `\r`.
        assert!(
            out.starts_with("line-one\r\ncrlf\r\n") && out.contains("line-two\r\n"),
            "{kind}: {out:?}"
        );
        assert!(!out.contains("\r\r"), "{kind}: {out:?}");
        assert!(
            out.contains(&format!("[uexec: session {id} exited with code 0]")),
            "{kind}: {out:?}"
        );
    }
    agent.cancel().await.unwrap();
}

#[tokio::test]
async fn a_persons_sessions_get_their_terminals_term_and_agents_a_dumb_one() {
    let place = Place::new();
    // A person's PTY session: their terminal's TERM (tmux's, here), what full-screen
    // programs need to draw. (The pane stays after the run: `sleep` holds it.)
    place.in_tmux("run --tty -- sh -c 'echo term=$TERM.'; exec sleep 600");
    let theirs = place.tmux(&["show-options", "-gv", "default-terminal"]);
    place
        .screen_shows(&format!("term={}.", theirs.trim()))
        .await;
    place.tmux(&["kill-session", "-t", "t"]);
    // Unless the person said otherwise.
    place.in_tmux("run --tty --env TERM=vt100 -- sh -c 'echo term=$TERM.'; exec sleep 600");
    place.screen_shows("term=vt100.").await;
    // A person's pipe session: their environment as it is (SPEC §9), TERM included.
    let out = place
        .command(&["run", "--", "sh", "-c", "echo term=$TERM."])
        .env("TERM", "xterm-kitty")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "term=xterm-kitty.\n");
    // So do an agent's PTY sessions: TERM=dumb, as Codex gives them.
    let agent = place.agent().await;
    let r = call(
        &agent,
        "exec_command",
        json!({"cmd": "echo term=$TERM.", "tty": true, "login": false}),
    )
    .await;
    assert_eq!(
        structured(&r)["output"].as_str().map(str::trim),
        Some("term=dumb.")
    );
    agent.cancel().await.unwrap();
}
