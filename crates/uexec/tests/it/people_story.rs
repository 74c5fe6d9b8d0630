//! The book's "For people" walk (docs/src/people.md), walked step by step as a person types it: a bash in a
//! real terminal (tmux: send-keys types, capture-pane reads the screen) with `uexec` on its
//! PATH, while an agent's `uexec mcp` (the daemon, by default) shares the daemon. `make` and `npm` are
//! stand-ins in the person's `~/bin`, which their `~/.profile` puts on the PATH of the login
//! shell that `uexec run` runs commands in. The steps are numbered as the book's.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::cli_run::session_named;
use crate::helpers::{call, structured, text, Client, UEXEC};
use crate::place::DaemonPlace;
use crate::tmux::Tmux;

/// How long a step may take to show what it must (a failure guard, not a synchronisation).
const PATIENCE: Duration = Duration::from_secs(60);

/// `make test`: two tests, one fails.
const MAKE: &str = "#!/bin/sh
echo 'test parse ... ok'
echo 'test render ... FAILED'
echo '1 passed; 1 failed'
exit 2
";

/// `npm test` watches until interrupted; `npm run dev` serves a request for each `hit`.
const NPM: &str = "#!/bin/sh
case \"$*\" in
test) echo 'watching for changes...'; exec sleep 600 ;;
'run dev')
  echo '> dev'; echo 'ready on :5173'
  while :; do
    if [ -e hit ]; then rm -f hit; echo 'GET / 200'; fi
    sleep 0.05
  done ;;
esac
";

/// The prompt: each command's exit code comes back in front of the next one.
const PROMPT: &str = "(exit $?) $ ";

/// A person's terminal: bash in tmux, in the place's working directory.
pub(crate) struct Terminal {
    tmux: Tmux,
}

/// A line typed at the prompt: its `nth` echo on the screen starts its output.
pub(crate) struct Typed {
    line: String,
    nth: usize,
}

impl Terminal {
    pub(crate) fn new(place: &DaemonPlace) -> Self {
        let home = place.cwd.join("home");
        let bin = home.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for (name, script) in [("make", MAKE), ("npm", NPM)] {
            std::fs::write(bin.join(name), script).unwrap();
            let made = Command::new("chmod")
                .arg("+x")
                .arg(bin.join(name))
                .status()
                .unwrap();
            assert!(made.success());
        }
        std::fs::write(home.join(".profile"), "PATH=\"$HOME/bin:$PATH\"\n").unwrap();
        let uexec_dir = std::path::Path::new(UEXEC).parent().unwrap();
        let path = format!(
            "{}:{}",
            uexec_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let term = Self {
            tmux: Tmux::new("story"),
        };
        let shell = format!(
            "env -u UEXEC_DAEMON XDG_RUNTIME_DIR={} HOME={} PATH={path} PS1='{PROMPT}' bash --norc --noprofile",
            place.runtime.display(),
            home.display(),
        );
        term.tmux.start((220, 50), &place.cwd, &shell);
        term
    }

    fn tmux(&self, args: &[&str]) -> String {
        self.tmux.run(args)
    }

    /// The whole screen and its history, wrapped lines joined.
    pub(crate) fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-J", "-S", "-", "-t", "t"])
    }

    fn echo_of(line: &str) -> String {
        format!("$ {line}\n")
    }

    /// Types `line` and Enter at the prompt.
    pub(crate) fn type_line(&self, line: &str) -> Typed {
        let nth = self.screen().matches(&Self::echo_of(line)).count();
        self.tmux(&["send-keys", "-t", "t", "-l", line]);
        self.tmux(&["send-keys", "-t", "t", "Enter"]);
        Typed {
            line: line.to_owned(),
            nth,
        }
    }

    /// Presses keys (tmux names: `C-c`, `Enter`) or types words.
    pub(crate) fn keys(&self, keys: &[&str]) {
        self.tmux.keys(keys);
    }

    /// What the screen shows after the echo of `typed`, once there is one.
    fn after(&self, typed: &Typed) -> Option<String> {
        let screen = self.screen();
        let echo = Self::echo_of(&typed.line);
        let (at, _) = screen.match_indices(&echo).nth(typed.nth)?;
        Some(screen[at + echo.len()..].to_owned())
    }

    /// What `typed` has printed once it shows `what`.
    pub(crate) async fn shows(&self, typed: &Typed, what: &str) -> String {
        self.until(typed, what, |out| {
            out.contains(what).then(|| out.to_owned())
        })
        .await
    }

    /// What `typed` printed, and its exit code, once the next prompt came.
    pub(crate) async fn ends(&self, typed: &Typed) -> (String, i32) {
        self.until(typed, "the next prompt", |out| {
            let at = out.find("(exit ")?;
            let code = out[at + 6..].split(')').next()?.parse().ok()?;
            Some((out[..at].to_owned(), code))
        })
        .await
    }

    async fn until<T>(
        &self,
        typed: &Typed,
        what: &str,
        mut done: impl FnMut(&str) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(out) = self.after(typed) {
                if let Some(t) = done(&out) {
                    return t;
                }
            }
            assert!(
                Instant::now() < deadline,
                "`{}` never showed {what}:\n{}",
                typed.line,
                self.screen()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Types `line`, which must end with `code`; what it printed.
    pub(crate) async fn run(&self, line: &str, code: i32) -> String {
        let typed = self.type_line(line);
        let (out, got) = self.ends(&typed).await;
        assert_eq!(got, code, "`{line}` printed:\n{out}");
        out
    }
}

/// The line of `uexec ls`'s table that starts with `id`.
fn row<'a>(table: &'a str, id: &str) -> Option<&'a str> {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(id))
}

/// Where the daemon keeps session `id`'s transcript (`uexec ls -a --json` says).
fn transcript_of(place: &DaemonPlace, id: &str) -> std::path::PathBuf {
    let out = place.command(&["ls", "-a", "--json"]).output().unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sessions = listed["sessions"].as_array().cloned().unwrap_or_default();
    let session = sessions
        .iter()
        .find(|s| s["session_id"].as_i64() == id.parse().ok())
        .unwrap_or_else(|| panic!("no session {id}: {listed}"));
    std::path::PathBuf::from(session["transcript"].as_str().expect("a transcript"))
}

/// The agent's output until it shows `what`.
async fn agent_reads(agent: &Client, id: i64, what: &str) -> String {
    let mut seen = String::new();
    let deadline = Instant::now() + PATIENCE;
    while !seen.contains(what) {
        assert!(
            Instant::now() < deadline,
            "the agent never read {what:?}: {seen:?}"
        );
        let p = call(
            agent,
            "write_stdin",
            json!({"session_id": id, "yield_time_ms": 2000}),
        )
        .await;
        seen.push_str(structured(&p)["output"].as_str().unwrap_or_default());
    }
    seen
}

#[tokio::test]
async fn the_readmes_story_for_people_in_a_real_terminal() {
    let place = DaemonPlace::new("story");
    let term = Terminal::new(&place);

    // 1. A command of your own: its output, then make's exit code.
    let out = term.run("uexec run -- make test", 2).await;
    assert_eq!(
        out,
        "test parse ... ok\ntest render ... FAILED\n1 passed; 1 failed\n"
    );
    // Its output as it comes: `npm test` watches until Ctrl-C, which ends it with 130.
    let typed = term.type_line("uexec run -- npm test");
    term.shows(&typed, "watching for changes...").await;
    term.keys(&["C-c"]);
    let (_, code) = term.ends(&typed).await;
    assert_eq!(code, 130);

    // 2. A dev server left running, named: back at the ready line, exit code 0 (it got
    // ready, as asked), and where it is.
    let out = term
        .run(
            "uexec run -d --name web --until-pattern 'ready on :[0-9]+' -- npm run dev",
            0,
        )
        .await;
    assert!(out.starts_with("> dev\nready on :5173\n"), "{out}");
    let web = session_named(&out);
    assert!(
        out.contains(&format!(
            "uexec: still running as session {web}: `uexec logs -f {web}` follows it, \
             `uexec wait {web}` waits for it, `uexec kill {web}` stops it"
        )),
        "{out}"
    );

    // 3. What runs: one line, the person's, running, with its last line; not step 1's runs.
    let table = term.run("uexec ls", 0).await;
    assert!(table.starts_with("ID "), "{table}");
    assert_eq!(table.lines().count(), 2, "{table}");
    let line = row(&table, &web).unwrap_or_else(|| panic!("{table}"));
    assert_eq!(line.split_whitespace().nth(1), Some("web"), "{table}");
    for part in ["@person", "running", "npm run dev", "ready on :5173"] {
        assert!(line.contains(part), "{part}: {table}");
    }
    // The daemon the first run started: pid, version and build, uptime, sessions by owner.
    let status = term.run("uexec daemon --status", 0).await;
    for part in ["pid: ", "version: ", "build: ", "uptime: ", "  @person: 1"] {
        assert!(status.contains(part), "{part}: {status}");
    }

    // 4. Its output: everything so far, then live; Ctrl-C stops following, not the server.
    let follow = term.type_line("uexec logs -f web");
    term.shows(&follow, "ready on :5173").await;
    std::fs::write(place.cwd.join("hit"), "").unwrap();
    let out = term.shows(&follow, "GET / 200").await;
    assert!(out.starts_with("> dev\nready on :5173\n"), "{out}");
    term.keys(&["C-c"]);
    term.ends(&follow).await;
    // Only what it printed in the last 10 minutes: all of it, here.
    let out = term.run("uexec logs --since 10m web", 0).await;
    assert_eq!(out, "> dev\nready on :5173\nGET / 200\n");
    // Or since a time: what came after it only.
    term.run("since=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)", 0).await;
    let since = term.type_line("uexec logs -f --since \"$since\" web");
    std::fs::write(place.cwd.join("hit"), "").unwrap();
    let out = term.shows(&since, "GET / 200").await;
    assert!(!out.contains("ready on"), "{out}");
    term.keys(&["C-c"]);
    term.ends(&since).await;

    // 5. Its screen, live: a banner says how to leave; Ctrl-\ detaches, the server runs on.
    let attach = term.type_line("uexec attach web");
    term.shows(
        &attach,
        &format!("attached to {web} (read-only; Ctrl-\\ detaches)"),
    )
    .await;
    // What it printed (the two requests of step 4 included), then a new request, live.
    let gets = |n: usize| move |out: &str| (out.matches("GET / 200").count() >= n).then_some(());
    term.until(&attach, "two requests", gets(2)).await;
    assert!(term
        .after(&attach)
        .is_some_and(|out| out.contains("ready on :5173")));
    std::fs::write(place.cwd.join("hit"), "").unwrap();
    term.until(&attach, "a third request", gets(3)).await;
    term.keys(&["C-\\"]);
    let (out, code) = term.ends(&attach).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("[detached from session {web}: it keeps running]")),
        "{out}"
    );

    // 6. An agent's session, through its client's `uexec mcp`: seen, answered and kept.
    let (agent, _) = place.plain_client(&["--codex-compat"]).await;
    let r = call(
        &agent,
        "exec_command",
        json!({"cmd": "printf 'Overwrite config.toml? [y/N] '; read a; echo \"answer: $a\"; exec sleep 600",
               "tty": true, "yield_time_ms": 1000}),
    )
    .await;
    let asked = structured(&r)["session_id"].as_i64().expect("running");
    let id = asked.to_string();
    let table = term.run("uexec ls", 0).await;
    let line = row(&table, &id).unwrap_or_else(|| panic!("{table}"));
    // Its owner: `mcp:` and the agent's working directory, cut from the left to the
    // column's width (where directories differ); its state says it waits for the person.
    let owner = line.split_whitespace().nth(2).unwrap_or_default();
    let agents = format!("mcp:{}", place.cwd.display());
    assert!(
        owner == agents || agents.ends_with(owner.trim_start_matches('…')),
        "{owner}: {table}"
    );
    assert!(line.contains("waiting (input)"), "{table}");
    let answer = term.type_line(&format!("uexec attach {id} --write"));
    term.shows(&answer, "Overwrite config.toml? [y/N]").await;
    term.keys(&["y", "Enter"]);
    term.shows(&answer, "answer: y").await;
    term.keys(&["C-\\"]);
    let (out, _) = term.ends(&answer).await;
    assert!(out.contains("keys go to the session"), "{out}");
    agent_reads(&agent, asked, "answer: y").await;
    let typed = call(
        &agent,
        "write_stdin",
        json!({"session_id": asked, "chars": "\r"}),
    )
    .await;
    assert!(
        !text(&typed).contains("a person is typing"),
        "{}",
        text(&typed)
    );
    // Kept by the person, it outlives the agent's client; the restarted client (same
    // working directory, same owner) lists it again.
    let out = term.run(&format!("uexec keep {id}"), 0).await;
    assert!(
        out.contains(&format!(
            "Session {id} kept: it runs on after its owner's clients are gone"
        )),
        "{out}"
    );
    agent.cancel().await.unwrap();
    let (agent, _) = place.plain_client(&["--codex-compat"]).await;
    let listed = call(&agent, "list_sessions", json!({})).await;
    assert_eq!(
        structured(&listed)["sessions"][0]["session_id"],
        asked,
        "{}",
        text(&listed)
    );

    // 7. Stopping: a signal, then `ls` says how it ended; a kill, and the session is gone.
    let out = term.run("uexec kill --signal TERM web", 0).await;
    assert_eq!(out, format!("Sent SIGTERM to session {web}\n"));
    let out = term.run(&format!("uexec kill {id}"), 0).await;
    assert_eq!(out, format!("Session {id} terminated\n"));
    let deadline = Instant::now() + PATIENCE;
    let table = loop {
        let table = term.run("uexec ls", 0).await;
        if row(&table, &web).is_some_and(|l| !l.contains("running")) {
            break table;
        }
        assert!(Instant::now() < deadline, "{table}");
    };
    assert!(
        row(&table, &web).is_some_and(|l| l.contains("exited 143")),
        "{table}"
    );
    assert!(row(&table, &id).is_none(), "{table}");
    let listed = call(&agent, "list_sessions", json!({})).await;
    assert_eq!(
        structured(&listed)["sessions"],
        json!([]),
        "{}",
        text(&listed)
    );
    agent.cancel().await.unwrap();

    // 8. Cleaning up: `ls -a` lists the reported ones too (step 1's runs, the killed one);
    // `rm` forgets one, `prune` the rest.
    let table = term.run("uexec ls -a", 0).await;
    assert_eq!(table.lines().count(), 5, "{table}");
    for ended in ["exited 2", "exited 130", "exited 143"] {
        assert!(table.contains(ended), "{ended}: {table}");
    }
    assert!(
        row(&table, &id).is_some_and(|l| l.contains("exited 137")),
        "{table}"
    );
    let transcript = transcript_of(&place, &web);
    assert!(transcript.is_dir(), "{}", transcript.display());
    let out = term.run("uexec rm web", 0).await;
    assert_eq!(out, format!("Session {web} removed\n"));
    assert!(!transcript.exists(), "{}", transcript.display());
    let out = term.run("uexec prune", 0).await;
    assert!(out.starts_with("Removed 3 ended session(s): "), "{out}");
    let out = term.run("uexec ls -a", 0).await;
    assert_eq!(out, "no sessions\n");

    // 9. The daemon: `--stop` stops it, and `--status` then says none runs (exit 3).
    let out = term.run("uexec daemon --stop", 0).await;
    assert!(out.starts_with("stopped the uexec daemon (pid "), "{out}");
    term.run("uexec daemon --status", 3).await;
    // The next run starts a new one.
    let out = term.run("uexec run -- echo back", 0).await;
    assert_eq!(out, "back\n");
    term.run("uexec daemon --status", 0).await;
}
