//! The person's terminal as tmux leaves it (issue 42 §3): detaching from a full-screen
//! program puts the terminal back, a key typed read-only says why nothing happens, a
//! session's own size comes back after `attach --write`, and another owner's output cannot
//! write the clipboard, retitle the window or query the terminal (`--raw` lets it).

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

impl Place {
    fn new(kind: &str) -> Self {
        Self {
            daemon: DaemonPlace::new(kind),
            tmux: Tmux::new(kind),
        }
    }

    async fn agent(&self) -> Client {
        self.daemon
            .client(&["--structured", "--owner", "agent"])
            .await
    }

    /// An agent's tty session of `cmd`, still running.
    async fn session(&self, agent: &Client, cmd: &str) -> i64 {
        let r = call(
            agent,
            "exec_command",
            json!({"cmd": cmd, "tty": true, "login": false, "yield_time_ms": 250}),
        )
        .await;
        structured(&r)["session_id"]
            .as_i64()
            .unwrap_or_else(|| panic!("not running: {}", text(&r)))
    }

    /// A shell in a 120x30 tmux window running `uexec attach ARGS`, then `echo AFTER`.
    fn attach_in_tmux(&self, args: &str) {
        let line = format!(
            "env XDG_RUNTIME_DIR={} HOME={} {UEXEC} attach {args}; echo AFTER; exec sleep 600",
            self.daemon.runtime.display(),
            self.daemon.cwd.join("home").display()
        );
        self.tmux.start(
            (120, 30),
            &self.daemon.cwd,
            &format!("sh -c '{}'", line.replace('\'', "'\\''")),
        );
    }

    /// tmux's format `what` of the pane, e.g. `#{alternate_on}`.
    fn pane(&self, what: &str) -> String {
        self.tmux
            .run(&["display-message", "-p", "-t", "t", what])
            .trim()
            .to_owned()
    }

    async fn until(&self, what: &str, mut check: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while !check() {
            assert!(
                std::time::Instant::now() < deadline,
                "never {what}:\n{}",
                self.screen()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn screen(&self) -> String {
        self.tmux.run(&["capture-pane", "-p", "-t", "t"])
    }

    async fn screen_shows(&self, what: &str) {
        self.until(&format!("showed {what:?}"), || self.screen().contains(what))
            .await;
    }

    fn go(&self) {
        std::fs::write(self.daemon.cwd.join("go"), "").unwrap();
    }

    /// Waits for the `go` file, then runs `then`.
    fn on_go(&self, then: &str) -> String {
        format!(
            "while [ ! -e '{}' ]; do sleep 0.05; done; {then}",
            self.daemon.cwd.join("go").display()
        )
    }
}

#[tokio::test]
async fn detaching_from_a_full_screen_program_puts_the_terminal_back() {
    let place = Place::new("att-restore");
    let agent = place.agent().await;
    // It keeps (re)entering its full screen, as a redrawing program does.
    let cmd =
        r"while :; do printf '\033[?1049h\033[?1h\033=\033[?25l'; echo FULLSCREEN; sleep 0.2; done";
    let id = place.session(&agent, cmd).await;
    place.attach_in_tmux(&id.to_string());
    place.screen_shows("FULLSCREEN").await;
    place
        .until("the program's modes on", || {
            place.pane("#{alternate_on} #{keypad_cursor_flag} #{keypad_flag} #{cursor_flag}")
                == "1 1 1 0"
        })
        .await;
    place.tmux.keys(&["C-\\"]);
    place.screen_shows("AFTER").await;
    assert_eq!(
        place.pane("#{alternate_on} #{keypad_cursor_flag} #{keypad_flag} #{cursor_flag}"),
        "0 0 0 1",
        "{}",
        place.screen()
    );
    assert!(
        place.screen().contains("detached from session"),
        "{}",
        place.screen()
    );
    call(&agent, "terminate_session", json!({"session_id": id})).await;
    agent.cancel().await.unwrap();
}

#[tokio::test]
async fn a_key_typed_read_only_says_so_on_the_bottom_line() {
    let place = Place::new("att-readonly");
    let agent = place.agent().await;
    let id = place
        .session(&agent, "clear; echo SERVING; exec sleep 600")
        .await;
    place.attach_in_tmux(&id.to_string());
    place.screen_shows("SERVING").await;
    assert!(!place.screen().contains("read-only: Ctrl-\\ detaches"));
    place.tmux.keys(&["x"]);
    place
        .screen_shows("read-only: Ctrl-\\ detaches; --write to type")
        .await;
    let last = place
        .screen()
        .lines()
        .nth(29)
        .unwrap_or_default()
        .to_owned();
    assert!(last.contains("read-only:"), "the bottom row: {last:?}");
    place.tmux.keys(&["C-\\"]);
    place.screen_shows("AFTER").await;
    call(&agent, "terminate_session", json!({"session_id": id})).await;
    agent.cancel().await.unwrap();
}

#[tokio::test]
async fn a_session_gets_its_own_size_back_after_attach_write() {
    let place = Place::new("att-size");
    let agent = place.agent().await;
    // It says its size whenever it changes.
    let id = place
        .session(
            &agent,
            "exec bash --norc --noprofile -c \"trap 'echo size=\\$(stty size)' WINCH; echo ready; while :; do sleep 0.05; done\"",
        )
        .await;
    place.attach_in_tmux(&format!("{id} --write"));
    place.screen_shows("size=30 120").await;
    place.tmux.keys(&["C-\\"]);
    place.screen_shows("AFTER").await;
    let mut seen = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !seen.contains("size=24 80") {
        assert!(std::time::Instant::now() < deadline, "{seen:?}");
        let p = call(
            &agent,
            "write_stdin",
            json!({"session_id": id, "yield_time_ms": 1000}),
        )
        .await;
        seen.push_str(structured(&p)["output"].as_str().unwrap_or_default());
    }
    let after = seen.rsplit("size=").next().unwrap_or_default();
    assert!(after.starts_with("24 80"), "{seen:?}");
    call(&agent, "terminate_session", json!({"session_id": id})).await;
    agent.cancel().await.unwrap();
}

/// `uexec attach ID [--raw]` into a pipe until the session (which waits for `go`) ends:
/// the bytes it printed.
fn attached_bytes(place: &Place, id: i64, raw: bool) -> Vec<u8> {
    let mut args = vec!["attach".to_owned(), id.to_string()];
    if raw {
        args.push("--raw".to_owned());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = place
        .daemon
        .command(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut banner = String::new();
    err.read_line(&mut banner).unwrap();
    assert!(banner.contains("attached to"), "{banner}");
    place.go();
    let out = child.wait_with_output().unwrap();
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert!(out.status.success() || rest.contains("exited"), "{rest}");
    out.stdout
}

#[tokio::test]
async fn another_owners_clipboard_writes_titles_and_queries_are_filtered_unless_raw() {
    let place = Place::new("att-filter");
    let agent = place.agent().await;
    let cmd = place.on_go(
        r"printf 'A\033]52;c;aGVsbG8=\007B\033]2;PWNED\007C\033P+q544e\033\\D\033[1mE\033[0m\n'; sleep 0.2",
    );
    for raw in [false, true] {
        let _ = std::fs::remove_file(place.daemon.cwd.join("go"));
        let id = place.session(&agent, &cmd).await;
        let bytes = attached_bytes(&place, id, raw);
        let text = String::from_utf8_lossy(&bytes);
        let has = |needle: &str| text.contains(needle);
        assert!(has("A") && has("B") && has("C") && has("D"), "{text:?}");
        // Drawing passes either way.
        assert!(has("\x1b[1mE"), "{text:?}");
        assert_eq!(
            has("\x1b]52;c;aGVsbG8="),
            raw,
            "clipboard, raw={raw}: {text:?}"
        );
        assert_eq!(has("\x1b]2;PWNED"), raw, "title, raw={raw}: {text:?}");
        assert_eq!(has("\x1bP+q544e"), raw, "DCS, raw={raw}: {text:?}");
    }
    agent.cancel().await.unwrap();
}
