//! A person's run runs as their shell would, and an agent's commands keep the hygiene
//! (issue 42 §1):
//! 1. a login profile that resets PATH (as Debian's `/etc/profile` does) no longer hides the
//!    caller's tools (a venv, `~/.cargo/bin`, `PATH=/opt/x:$PATH`): the caller's entries
//!    keep their order, and what the profile added comes where it put it; for `uexec run`
//!    from a snapshot and from a real login, and for an agent's `exec_command` through
//!    `uexec mcp`, in process and through the daemon (whose own PATH is not the client's);
//! 2. a person's run gets their environment as it is (their tokens, their colours, their
//!    pager); an agent's command does not get the person's tokens, even from a daemon the
//!    person started.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::json;

use crate::helpers::{call, text, Client, Recorder, UEXEC};
use crate::place::DaemonPlace as Place;

/// A profile that resets PATH, as Debian's `/etc/profile` does, and counts its runs.
const RESETTING_PROFILE: &str = "echo run >> \"$HOME/runs\"\nexport PATH=/usr/bin:/bin\n";

/// What a command prints of its PATH and login: the tool's word, then whether this shell is
/// a real login (`login_shell` is the one fact a snapshot's replay cannot fake), its first
/// PATH entry, and the private variable, which must be gone.
const SHOWS_THE_PATH: &str =
    "mytool; shopt -q login_shell && echo real-login || echo from-snapshot; \
    echo \"first=${PATH%%:*} marker=${UEXEC_CALLER_PATH-gone}\"";

/// The place's HOME with [`RESETTING_PROFILE`], and a private directory holding `mytool`.
fn setup(kind: &str) -> (Place, PathBuf) {
    let place = Place::new(kind);
    let home = place.cwd.join("home");
    std::fs::write(home.join(".bash_profile"), RESETTING_PROFILE).unwrap();
    let tools = place.cwd.join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    let tool = tools.join("mytool");
    std::fs::write(&tool, "#!/bin/sh\necho mytool-ran\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    (place, tools)
}

/// This test's PATH, without the tools.
fn plain_path() -> String {
    std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
}

/// The caller's PATH: the tools first, as an activated venv puts its `bin`.
fn tool_path(tools: &Path) -> String {
    format!("{}:{}", tools.display(), plain_path())
}

/// `uexec run -- CMD` as a person in the place, with bash for a shell, `path` for PATH and
/// `vars` besides.
fn run(place: &Place, path: &str, cmd: &str, vars: &[(&str, &str)]) -> Output {
    let mut command = place.command(&["run", "--", cmd]);
    command
        .env("PATH", path)
        .env("SHELL", "/bin/bash")
        .env_remove("NO_COLOR")
        .envs(vars.iter().copied())
        .stdin(Stdio::null());
    command.output().unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{:?}: {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn runs(place: &Place) -> usize {
    std::fs::read_to_string(place.cwd.join("home").join("runs"))
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn a_persons_run_finds_their_tools_past_a_profile_that_resets_path() {
    let (place, tools) = setup("people-path");
    // The daemon starts with a PATH that lacks the tools: the run's PATH is the client's.
    stdout(&run(&place, &plain_path(), "true", &[]));
    let expected =
        |how: &str| format!("mytool-ran\n{how}\nfirst={} marker=gone\n", tools.display());
    let path = tool_path(&tools);
    // The first login of this environment waits for its snapshot, and runs from it.
    let before = runs(&place);
    let out = stdout(&run(&place, &path, SHOWS_THE_PATH, &[]));
    assert_eq!(out, expected("from-snapshot"));
    assert_eq!(runs(&place), before + 1, "the snapshot's build");
    // A changed profile makes it stale: the next command is a real login.
    let profile = place.cwd.join("home").join(".bash_profile");
    std::fs::write(&profile, format!("{RESETTING_PROFILE}# edited\n")).unwrap();
    let out = stdout(&run(&place, &path, SHOWS_THE_PATH, &[]));
    assert_eq!(out, expected("real-login"));
    // What the profile added still comes, after the caller's entries (it put it last).
    let out = stdout(&run(
        &place,
        &tools.display().to_string(),
        "echo \"$PATH\"",
        &[],
    ));
    assert_eq!(out, format!("{}:/usr/bin:/bin\n", tools.display()));
}

#[test]
fn a_persons_run_gets_their_tokens_colours_and_pager() {
    let (place, _) = setup("people-env");
    // A daemon started without the token: it comes with the person's hello.
    stdout(&run(&place, &plain_path(), "true", &[]));
    let out = stdout(&run(
        &place,
        &plain_path(),
        "echo \"token=${GH_TOKEN-none} key=${FOO_API_KEY-none} color=${NO_COLOR-unset} \
         pager=${PAGER-unset} term=${TERM-unset} lang=${LC_ALL-unset}\"",
        &[
            ("GH_TOKEN", "ghp_person0123"),
            ("FOO_API_KEY", "sk-person"),
            ("PAGER", "less"),
            ("TERM", "xterm-kitty"),
            ("LC_ALL", "C"),
        ],
    ));
    assert_eq!(
        out,
        "token=ghp_person0123 key=sk-person color=unset pager=less term=xterm-kitty \
         lang=C\n"
    );
}

/// `uexec mcp ARGS` (the daemon's client, or `--in-process`) in the place, as an agent
/// started with `path` and a token of the person's in its environment.
async fn agent(place: &Place, args: &[&str], path: &str) -> Client {
    let mut cmd = tokio::process::Command::new(UEXEC);
    cmd.arg("mcp")
        .args(args)
        .args(["--shell", "/bin/bash"])
        .current_dir(&place.cwd)
        .env("XDG_RUNTIME_DIR", &place.runtime)
        .env("HOME", place.cwd.join("home"))
        .env("PATH", path)
        .env("GH_TOKEN", "ghp_person0123")
        .env_remove("UEXEC_DAEMON");
    Recorder::default()
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn an_agents_commands_find_the_tools_too_and_keep_the_hygiene() {
    let (place, tools) = setup("agent-path");
    // The daemon is the person's, started by a run with the token and without the tools.
    stdout(&run(
        &place,
        &plain_path(),
        "true",
        &[("GH_TOKEN", "ghp_person0123")],
    ));
    let path = tool_path(&tools);
    let cmd = "mytool; echo \"first=${PATH%%:*} token=${GH_TOKEN-none} color=${NO_COLOR-unset}\"";
    let expected = format!("mytool-ran\nfirst={} token=none color=1", tools.display());
    for args in [
        &["--daemon"][..],
        &["--daemon", "--no-shell-snapshot"],
        &["--in-process"],
        &["--in-process", "--no-shell-snapshot"],
    ] {
        let client = agent(&place, args, &path).await;
        let r = call(&client, "exec_command", json!({ "cmd": cmd })).await;
        assert!(text(&r).contains(&expected), "{args:?}: {}", text(&r));
        client.cancel().await.unwrap();
    }
}

#[test]
fn run_help_says_whose_environment_a_command_gets() {
    let out = std::process::Command::new(UEXEC)
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for said in [
        "The command gets your environment as it is",
        "your PATH even where a login profile resets it",
        "The hygiene is for agents' commands",
    ] {
        assert!(help.contains(said), "{said}: {help}");
    }
}
