//! The record of the door's decisions (issue 39 §4): every decision of every face is written
//! down once, with whose command it was, who decided and by which rule; `uexec audit` reads
//! it back (text, `--json`, `--since`), with no secret of the command line in it, and `uexec
//! metrics` counts the decisions by kind. A person's own `uexec run` is recorded, not judged.
//! The execs judged in a session (`--rules-at exec`) are shown as a tree under its command.

use std::path::Path;
use std::time::Duration;

use rmcp::ServiceExt;
use serde_json::{json, Value};

use crate::helpers::{call, eventually, scratch_dir, text, UEXEC};

const RULES: &str = r#"
prefix_rule(pattern = ["git", "push"], decision = "forbidden", justification = "pushing is for people")
prefix_rule(pattern = ["touch"], decision = "prompt", justification = "it writes")
"#;

/// `uexec audit ARGS` with `home` as HOME: exit code, stdout, stderr.
fn audit(home: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(UEXEC)
        .arg("audit")
        .args(args)
        .env("HOME", home)
        .env_remove("XDG_STATE_HOME")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn entries(home: &Path) -> Vec<Value> {
    let (code, out, err) = audit(home, &["--json"]);
    assert_eq!(code, Some(0), "{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[tokio::test]
async fn an_agents_decisions_are_recorded_and_read_back_with_who_decided() {
    let dir = scratch_dir("audit-mcp");
    let home = dir.join("home");
    // A state directory an older uexec (or another tool) made 0755: the record has a
    // directory of its own, and is written all the same.
    let state = home.join(".local/state/uexec");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("team.rules"), RULES).unwrap();
    let mut cmd = tokio::process::Command::new(UEXEC);
    cmd.args(["mcp", "--in-process", "--rules"])
        .arg(dir.join("team.rules"))
        .current_dir(&dir)
        .env("HOME", &home)
        .env_remove("XDG_STATE_HOME");
    let client = crate::helpers::Recorder::default()
        .serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap();
    for cmd in [
        "echo fine",
        "GH_TOKEN=ghp_hush timeout 5 git push origin main",
        "touch made",
    ] {
        call(&client, "exec_command", json!({"cmd": cmd, "login": false})).await;
    }
    client.cancel().await.unwrap();

    let all = entries(&home);
    let seen: Vec<(&str, &str, &str)> = all
        .iter()
        .map(|e| {
            (
                e["decision"].as_str().unwrap(),
                e["outcome"].as_str().unwrap(),
                e["by"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("allow", "admitted", "no rule"),
            ("forbidden", "refused", "rules"),
            ("prompt", "refused", "no one (no answer)"),
        ],
        "{all:#?}"
    );
    let pushed = &all[1];
    assert!(
        pushed["owner"].as_str().unwrap().starts_with("mcp:"),
        "{pushed}"
    );
    assert!(
        pushed["rule"].as_str().unwrap().contains("team.rules:2"),
        "{pushed}"
    );
    assert_eq!(pushed["justification"], "pushing is for people");
    assert_eq!(pushed["part"], "git push origin main");
    assert_eq!(
        pushed["command"],
        "GH_TOKEN=*** timeout 5 git push origin main"
    );
    let file = home.join(".local/state/uexec/audit/audit.jsonl");
    let raw = std::fs::read_to_string(&file).unwrap();
    assert!(!raw.contains("ghp_hush"), "a secret reached the record");

    // Text: one line each, the refusal's rule and why on it.
    let (code, out, _) = audit(&home, &["--since", "1h"]);
    assert_eq!(code, Some(0));
    assert_eq!(out.lines().count(), 3, "{out}");
    let line = out.lines().nth(1).unwrap();
    assert!(
        line.contains("refused")
            && line.contains("forbidden")
            && line.contains("pushing is for people"),
        "{line}"
    );
    // Since a time after them all: nothing, and it says so.
    let (code, out, err) = audit(&home, &["--since", "2099-01-01T00:00:00Z"]);
    assert_eq!((code, out.as_str()), (Some(0), ""));
    assert!(err.contains("no decisions recorded in that time"), "{err}");
}

#[test]
fn a_bad_since_is_a_usage_error_naming_the_flag() {
    let dir = scratch_dir("audit-bad");
    let (code, _, err) = audit(&dir, &["--since", "5parsecs"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--since") && err.contains("5parsecs"), "{err}");
}

/// Through the daemon: an agent's `touch` is refused by the daemon's rule, the person's own
/// `uexec run -- touch` runs (recorded, not judged), and `uexec metrics` counts both.
#[tokio::test]
async fn a_persons_own_run_is_recorded_not_judged_and_metrics_count_decisions() {
    use crate::place::DaemonPlace as Place;
    let place = Place::new("audit-daemon");
    let rules = place.cwd.join("daemon.rules");
    std::fs::write(
        &rules,
        "prefix_rule(pattern = [\"touch\"], decision = \"forbidden\", justification = \"no writes\")\n",
    )
    .unwrap();
    let rules = rules.display().to_string();
    let mut daemon = place
        .command(&["daemon", "--rules", &rules])
        .env_remove("XDG_STATE_HOME")
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let socket = place.socket();
    eventually(
        "the daemon to listen",
        std::time::Duration::from_secs(10),
        || socket.exists(),
    )
    .await;
    let client = place.client(&[]).await;
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "touch by-agent", "login": false}),
    )
    .await;
    assert!(text(&r).contains("no writes"), "{}", text(&r));
    client.cancel().await.unwrap();
    let ran = place
        .command(&["run", "--no-login", "--", "touch", "by-person"])
        .env_remove("XDG_STATE_HOME")
        .output()
        .unwrap();
    assert!(ran.status.success(), "{ran:?}");
    assert!(place.cwd.join("by-person").exists());
    assert!(!place.cwd.join("by-agent").exists());

    let home = place.cwd.join("home");
    let all = entries(&home);
    let mine: Vec<(&str, &str, &str)> = all
        .iter()
        .map(|e| {
            (
                e["owner"].as_str().unwrap(),
                e["outcome"].as_str().unwrap(),
                e["by"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(mine.len(), 2, "{all:#?}");
    assert!(
        mine[0].0.starts_with("mcp:") && mine[0].1 == "refused",
        "{mine:?}"
    );
    assert_eq!(mine[1].0, "@person");
    assert_eq!(mine[1].1, "admitted");
    assert!(mine[1].2.starts_with("a person's own command"), "{mine:?}");
    assert_eq!(all[1]["decision"], "forbidden", "judged for the record");

    let metrics = place.command(&["metrics"]).output().unwrap();
    let metrics = String::from_utf8_lossy(&metrics.stdout);
    for line in [
        "uexec_decisions_total{decision=\"forbidden\",outcome=\"refused\"} 1",
        "uexec_decisions_total{decision=\"forbidden\",outcome=\"admitted\"} 1",
        "uexec_decisions_total{decision=\"allow\",outcome=\"admitted\"} 0",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
    place.command(&["daemon", "--stop"]).status().unwrap();
    daemon.wait().unwrap();
}

#[tokio::test]
async fn the_record_shows_a_sessions_execs_as_a_tree() {
    let s = crate::rules_at_exec::server("exec-tree", crate::person::Person::nobody(), &[]).await;
    // Each `; :` keeps a shell from becoming its last command: one process per level.
    std::fs::write(
        s.dir.join("nest.sh"),
        "/bin/echo one\nsh -c '/bin/echo two; sh -c \"/bin/echo three; :\"; :'\n:\n",
    )
    .unwrap();
    let (failed, said) = crate::rules_at_exec::exec(
        &s.client,
        json!({"cmd": "sh nest.sh", "login": false, "yield_time_ms": 10000}),
    )
    .await;
    assert!(!failed && said.contains("three"), "{said}");
    s.client.cancel().await.unwrap();
    let home = s.dir.join("home");
    let json = |home: &Path| {
        let out = std::process::Command::new(UEXEC)
            .args(["audit", "--json"])
            .env("HOME", home)
            .env_remove("XDG_STATE_HOME")
            .output()
            .unwrap();
        let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        lines
    };
    let mut owner = String::new();
    crate::helpers::eventually("the record", Duration::from_secs(10), || {
        let lines = json(&home);
        let three = lines.iter().find(|e| e["command"] == "/bin/echo three");
        if let Some(e) = three {
            assert!(
                e["pid"].is_u64() && e["ppid"].is_u64() && e["session"].is_i64(),
                "{e}"
            );
            owner = e["owner"].as_str().unwrap_or_default().to_owned();
        }
        three.is_some()
    })
    .await;
    let out = std::process::Command::new(UEXEC)
        .arg("audit")
        .env("HOME", &home)
        .env_remove("XDG_STATE_HOME")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // The indentation before each echo's command, and where its line is.
    let indent = |command: &str| {
        let (at, line) = text
            .lines()
            .enumerate()
            .find(|(_, l)| l.contains(&format!("{command}  — by")))
            .unwrap_or_else(|| panic!("{command}: {text}"));
        let before = &line[..line.find(command).unwrap()];
        let (_, indent) = before.rsplit_once(&owner).expect(line);
        (at, indent[2..].to_owned())
    };
    let (one, two, three) = (
        indent("/bin/echo one"),
        indent("/bin/echo two"),
        indent("/bin/echo three"),
    );
    assert!(one.0 < two.0 && two.0 < three.0, "{text}");
    assert!(one.1.ends_with("└ "), "{text}");
    assert_eq!(two.1, format!("  {}", one.1), "{text}");
    assert_eq!(three.1, format!("    {}", one.1), "{text}");
}

/// A PATH search (`execvp`) tries each directory in turn: the execs of a program that is
/// not there fail and run nothing, and the record keeps only the one that ran.
#[tokio::test(flavor = "multi_thread")]
async fn the_misses_of_a_path_search_are_not_recorded_as_execs() {
    let s = crate::rules_at_exec::server("exec-misses", crate::person::Person::nobody(), &[]).await;
    let (failed, said) = crate::rules_at_exec::exec(
        &s.client,
        json!({"cmd": "env PATH=/nowhere-a:/nowhere-b:/usr/bin:/bin true && echo found",
               "login": false, "yield_time_ms": 10000}),
    )
    .await;
    assert!(!failed && said.contains("found"), "{said}");
    s.client.cancel().await.unwrap();
    let home = s.dir.join("home");
    let commands = || {
        let out = std::process::Command::new(UEXEC)
            .args(["audit", "--json"])
            .env("HOME", &home)
            .env_remove("XDG_STATE_HOME")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["command"].to_string())
            .collect::<Vec<_>>()
    };
    crate::helpers::eventually(
        "the exec of true in the record",
        Duration::from_secs(10),
        || commands().iter().any(|c| c.ends_with("bin/true\"")),
    )
    .await;
    let all = commands();
    assert!(
        !all.iter().any(|c| c.starts_with("\"/nowhere-")),
        "a miss of the PATH search was recorded: {all:#?}"
    );
}
