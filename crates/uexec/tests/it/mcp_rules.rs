//! Command rules through a real MCP client (issue 39): `uexec mcp --rules FILE` refuses a
//! script a `forbidden` rule matches, as a tool result naming the rule, its justification
//! and the part, with nothing of the script run; a `prompt` rule asks the person by form
//! elicitation and runs on "run once", is refused with the person's reason on "deny", and is
//! refused saying no one can be asked for a client without elicitation; a bad rules file
//! stops uexec at start naming its line and column.

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

use crate::helpers::{args, scratch_dir, text, UEXEC};
use crate::person::Person;

pub(crate) const RULES: &str = r#"
prefix_rule(
    pattern = ["git", "push"],
    decision = "forbidden",
    justification = "pushing is for people",
)
prefix_rule(
    pattern = ["touch"],
    decision = "prompt",
    justification = "it writes",
)
"#;

async fn server(
    answer: Option<Value>,
    extra: &[&str],
) -> (
    RunningService<RoleClient, Person>,
    Person,
    std::path::PathBuf,
) {
    let dir = scratch_dir("rules");
    std::fs::create_dir_all(dir.join("home")).unwrap();
    std::fs::write(dir.join("team.rules"), RULES).unwrap();
    let mut cmd = tokio::process::Command::new(UEXEC);
    cmd.args(["mcp", "--in-process", "--rules"])
        .arg(dir.join("team.rules"))
        .args(extra)
        .current_dir(&dir)
        .env("HOME", dir.join("home"));
    let person = Person {
        answer,
        ..Person::default()
    };
    let client = person
        .clone()
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap();
    (client, person, dir)
}

async fn exec(client: &RunningService<RoleClient, Person>, cmd: &str) -> (bool, String) {
    let r = client
        .call_tool(
            CallToolRequestParams::new("exec_command")
                .with_arguments(args(json!({"cmd": cmd, "login": false}))),
        )
        .await
        .unwrap();
    (r.is_error == Some(true), text(&r))
}

#[tokio::test]
async fn a_forbidden_part_refuses_the_whole_script_naming_rule_part_and_reason() {
    let (client, _, dir) = server(None, &[]).await;
    // Its first part would write a marker: nothing of a refused script runs.
    let (failed, said) = exec(&client, "echo ran > marker; timeout 5 git push origin main").await;
    assert!(failed, "{said}");
    assert!(
        said.contains("refused: forbidden by rule")
            && said.contains("team.rules")
            && said.contains("prefix \"git push\"")
            && said.contains("pushing is for people")
            && said.contains("part 2 of 2: git push origin main")
            && said.contains("Nothing of the command ran"),
        "{said}"
    );
    assert!(!dir.join("marker").exists(), "the first part ran");
    // What no rule matches runs (--unmatched allow, the default).
    let (failed, said) = exec(&client, "echo fine").await;
    assert!(!failed && said.contains("fine"), "{said}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_held_command_asks_the_person_and_runs_on_their_yes() {
    let (client, person, dir) = server(Some(json!({"answer": "run once"})), &[]).await;
    let (failed, said) = exec(&client, "touch made").await;
    assert!(!failed, "{said}");
    assert!(dir.join("made").exists(), "it ran on the yes");
    let asked = person.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains("touch made") && asked[0].contains("it writes"),
        "{}",
        asked[0]
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_no_or_no_one_to_ask_refuses_and_says_why() {
    let (client, _, dir) = server(
        Some(json!({"answer": "deny", "reason": "use the staging dir"})),
        &[],
    )
    .await;
    let (failed, said) = exec(&client, "touch made").await;
    assert!(failed && said.contains("use the staging dir"), "{said}");
    assert!(!dir.join("made").exists());
    client.cancel().await.unwrap();
    // A client that cannot be asked (no elicitation): refused, saying so.
    let (client, _, dir) = server(None, &[]).await;
    let (failed, said) = exec(&client, "touch made").await;
    assert!(failed && said.contains("no person can be asked"), "{said}");
    assert!(!dir.join("made").exists());
    client.cancel().await.unwrap();
}

#[test]
fn a_bad_rules_file_stops_uexec_at_start_naming_where() {
    let dir = scratch_dir("rules-bad");
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let bad = dir.join("bad.rules");
    std::fs::write(
        &bad,
        "prefix_rule(\n    pattern = [\"ls\"],\n    decision = \"maybe\",\n)\n",
    )
    .unwrap();
    let out = std::process::Command::new(UEXEC)
        .args(["mcp", "--in-process", "--rules"])
        .arg(&bad)
        .current_dir(&dir)
        .env("HOME", dir.join("home"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("bad.rules") && stderr.contains("maybe"),
        "{stderr}"
    );
    // --unmatched alone is a usage error naming what it needs.
    let out = std::process::Command::new(UEXEC)
        .args(["mcp", "--in-process", "--unmatched", "prompt"])
        .current_dir(&dir)
        .env("HOME", dir.join("home"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--rules"), "{stderr}");
}

/// A daemon's own rules and a client's add up: the strictest decision wins, whoever's rule.
#[tokio::test]
async fn the_daemons_rules_and_a_clients_own_both_hold() {
    use crate::helpers::{call, eventually};
    use crate::place::DaemonPlace as Place;
    let place = Place::new("rules-daemon");
    let dir = scratch_dir("rules-files");
    std::fs::create_dir_all(&dir).unwrap();
    let rules = |name: &str, words: &str| {
        let path = dir.join(name);
        let text = format!("prefix_rule(pattern = [{words}], decision = \"forbidden\")\n");
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let daemons = rules("daemon.rules", "\"rm\"");
    let clients = rules("client.rules", "\"git\", \"push\"");
    let mut daemon = place
        .command(&["daemon", "--rules", &daemons])
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
    let client = place.client(&["--rules", &clients]).await;
    for (cmd, by) in [
        ("rm -f nothing", "daemon.rules"),
        ("git push", "client.rules"),
    ] {
        let r = call(&client, "exec_command", json!({"cmd": cmd, "login": false})).await;
        let said = text(&r);
        assert!(
            r.is_error == Some(true) && said.contains("refused: forbidden") && said.contains(by),
            "{cmd}: {said}"
        );
    }
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "echo fine", "login": false}),
    )
    .await;
    assert!(text(&r).contains("fine"), "{}", text(&r));
    client.cancel().await.unwrap();
    place.command(&["daemon", "--stop"]).status().unwrap();
    daemon.wait().unwrap();
}

/// A headless agent's held command waits at the daemon: `uexec approvals` lists it, `uexec
/// approve` runs it, `uexec deny --reason` refuses it with the reason the agent reads; `uexec
/// ls` shows it as waiting for approval meanwhile.
#[tokio::test]
async fn a_person_answers_a_headless_agents_held_command_at_the_daemon() {
    use crate::helpers::{call, eventually};
    use crate::place::DaemonPlace as Place;
    let place = Place::new("rules-held");
    let dir = scratch_dir("rules-held-files");
    std::fs::create_dir_all(&dir).unwrap();
    let rules = dir.join("team.rules");
    std::fs::write(&rules, RULES).unwrap();
    let rules = rules.display().to_string();
    let client = std::sync::Arc::new(place.client(&["--rules", &rules]).await);
    let cli = |args: &[&str]| {
        let out = place.command(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let waiting = || -> Vec<Value> {
        let (_, out) = cli(&["approvals", "--json"]);
        serde_json::from_str::<Value>(&out)
            .ok()
            .and_then(|v| v["approvals"].as_array().cloned())
            .unwrap_or_default()
    };
    let marker = place.socket().parent().unwrap().join("approved");
    for (answer, ran) in [
        (&["approve"][..], true),
        (&["deny", "--reason", "not today"][..], false),
    ] {
        let asking = tokio::spawn({
            let client = client.clone();
            let cmd = format!("touch {}", marker.display());
            async move { call(&client, "exec_command", json!({"cmd": cmd, "login": false})).await }
        });
        eventually(
            "the command to wait for approval",
            std::time::Duration::from_secs(10),
            || !waiting().is_empty(),
        )
        .await;
        let held = waiting();
        assert_eq!(held.len(), 1, "{held:?}");
        assert!(
            held[0]["command"].as_str().unwrap().starts_with("touch "),
            "{held:?}"
        );
        assert!(
            held[0]["why"].as_str().unwrap().contains("it writes"),
            "{held:?}"
        );
        let id = held[0]["id"].to_string();
        // `uexec ls` shows it too: no session yet, the approval's id and how to answer.
        let (code, ls) = cli(&["ls"]);
        assert_eq!(code, Some(0), "{ls}");
        assert!(
            ls.contains(&format!("approval {id}"))
                && ls.contains("waiting for approval: touch ")
                && ls.contains(&format!("uexec approve {id}")),
            "{ls}"
        );
        let (_, ls) = cli(&["ls", "--json"]);
        let ls: Value = serde_json::from_str(&ls).unwrap();
        assert_eq!(ls["approvals"][0]["id"].to_string(), id, "{ls}");
        let mut args = answer.to_vec();
        args.insert(1, &id);
        let (code, out) = cli(&args);
        assert_eq!(code, Some(0), "{out}");
        let r = asking.await.unwrap();
        assert_eq!(marker.exists(), ran, "{}", text(&r));
        if !ran {
            assert!(text(&r).contains("not today"), "{}", text(&r));
        }
        assert!(waiting().is_empty());
        // Answered: a second answer finds nothing (exit 3).
        let (code, _) = cli(&["approve", &id]);
        assert_eq!(code, Some(3));
        let _ = std::fs::remove_file(&marker);
    }
    drop(client);
    place.command(&["daemon", "--stop"]).status().unwrap();
}
