//! The rules judged at every exec of a real session (issue 40): `uexec mcp --in-process
//! --rules FILE --rules-at exec` driven by an rmcp client. What walks around a rule on the
//! script's text (`$(echo git) push`, `eval`, `sh -c` inside a script file) is refused at
//! its exec, with the rule named in the result, while the script's allowed parts ran and its
//! own `|| echo` saw the failure; a held exec is answered by the client's form; a kernel
//! without the feature (a failing probe) falls back to the text and says so.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

use crate::helpers::{args, scratch_dir, text, UEXEC};
use crate::person::Person;

const RULES: &str = r#"
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
prefix_rule(
    pattern = ["deploy"],
    decision = "prompt",
    justification = "it ships",
)
"#;

/// A `git` of the test's own (first on PATH): it says what it was asked.
pub(crate) const FAKE_GIT: &str = "#!/bin/sh\necho \"git ran $*\"\n";
/// A `deploy` of the test's own, which a `prompt` rule holds.
const FAKE_DEPLOY: &str = "#!/bin/sh\necho \"deployed $*\"\n";

pub(crate) struct Server {
    pub client: RunningService<RoleClient, Person>,
    pub person: Person,
    pub dir: PathBuf,
}

/// A scratch directory with the rules, a fake `git` on PATH and an empty HOME.
fn place(name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch_dir(name);
    std::fs::create_dir_all(dir.join("home")).unwrap();
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::write(dir.join("team.rules"), RULES).unwrap();
    for (name, script) in [("git", FAKE_GIT), ("deploy", FAKE_DEPLOY)] {
        let program = dir.join("bin").join(name);
        std::fs::write(&program, script).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

fn path_with(dir: &Path) -> String {
    format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

pub(crate) async fn server(name: &str, person: Person, env: &[(&str, &str)]) -> Server {
    server_with(name, person, env, &[]).await
}

async fn server_with(name: &str, person: Person, env: &[(&str, &str)], extra: &[&str]) -> Server {
    let dir = place(name);
    let mut cmd = tokio::process::Command::new(UEXEC);
    cmd.args(["mcp", "--in-process", "--rules"])
        .arg(dir.join("team.rules"))
        .args(["--rules-at", "exec"])
        .args(extra)
        .current_dir(&dir)
        .env("HOME", dir.join("home"))
        .env("PATH", path_with(&dir));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(std::fs::File::create(dir.join("stderr")).unwrap())
        .spawn()
        .unwrap();
    let client = person.clone().serve(transport).await.unwrap();
    Server {
        client,
        person,
        dir,
    }
}

pub(crate) async fn exec(
    client: &RunningService<RoleClient, Person>,
    arguments: Value,
) -> (bool, String) {
    let r = client
        .call_tool(CallToolRequestParams::new("exec_command").with_arguments(args(arguments)))
        .await
        .unwrap();
    (r.is_error == Some(true), text(&r))
}

/// The `refused at exec` line of `git push` by the rule, in `said`.
pub(crate) fn names_the_push(said: &str) -> bool {
    said.lines().any(|l| {
        l.starts_with("refused at exec: ")
            && l.contains("/bin/git push")
            && l.contains("team.rules")
            && l.contains("pushing is for people")
    })
}

#[tokio::test]
async fn walk_arounds_are_refused_at_their_exec_while_the_rest_runs() {
    let s = server("exec-walk", Person::nobody(), &[]).await;
    // A script file, run by bash: each walk-around's exec is refused, and its own error
    // handling sees an ordinary failure.
    std::fs::write(
        s.dir.join("walk.sh"),
        "echo before\n\
         $(echo git) push origin main || echo \"failed 1\"\n\
         eval \"git push --force\" || echo \"failed 2\"\n\
         sh -c 'git push' || echo \"failed 3\"\n\
         git status\n\
         echo after\n",
    )
    .unwrap();
    let (failed, said) = exec(
        &s.client,
        json!({"cmd": "bash walk.sh", "login": false, "yield_time_ms": 10000}),
    )
    .await;
    assert!(!failed, "{said}");
    for line in [
        "before",
        "failed 1",
        "failed 2",
        "failed 3",
        "git ran status",
        "after",
    ] {
        assert!(said.contains(line), "{line:?} missing: {said}");
    }
    assert!(!said.contains("git ran push"), "a push ran: {said}");
    assert!(said.contains("Permission denied"), "{said}");
    assert!(names_the_push(&said), "{said}");
    // One line per refused command: `sh` looking further down PATH after the refusal
    // (execvp does on EACCES) is judged each time, and said once.
    let refused = said
        .lines()
        .filter(|l| l.starts_with("refused at exec: "))
        .count();
    assert_eq!(refused, 3, "{said}");
    // Straight on the command line, past the text's judgement (which sees `$(...)`).
    let (failed, said) = exec(
        &s.client,
        json!({"cmd": "$(echo git) push origin || echo failed; echo done", "login": false}),
    )
    .await;
    assert!(!failed, "{said}");
    assert!(
        said.contains("failed") && said.contains("done") && !said.contains("git ran"),
        "{said}"
    );
    assert!(names_the_push(&said), "{said}");
    // A login shell (run from its profile's snapshot) on a PTY is judged the same way.
    let (failed, said) = exec(
        &s.client,
        json!({"cmd": "$(echo git) push || echo failed", "login": true, "tty": true}),
    )
    .await;
    assert!(!failed && said.contains("failed"), "{said}");
    assert!(names_the_push(&said) && !said.contains("git ran"), "{said}");
    // Each exec is in the record, under its session: the refused pushes and the rest (the
    // record is written beside the judging, so it is waited for).
    let home = s.dir.join("home");
    let in_record = |decision: &str, admitted: bool| {
        recorded(&home).iter().any(|(d, o, by)| {
            by.contains("at exec in session") && d == decision && (o == "admitted") == admitted
        })
    };
    crate::helpers::eventually("the record", Duration::from_secs(10), || {
        in_record("forbidden", false) && in_record("allow", true)
    })
    .await;
    // A command with nothing forbidden says nothing more.
    let (failed, said) = exec(
        &s.client,
        json!({"cmd": "git log; echo ok", "login": false}),
    )
    .await;
    assert!(!failed && said.contains("git ran log"), "{said}");
    assert!(!said.contains("at exec"), "{said}");
    s.client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_held_exec_with_no_one_to_ask_is_refused_saying_so() {
    let s = server("exec-nobody", Person::nobody(), &[]).await;
    let (failed, said) = exec(
        &s.client,
        json!({"cmd": "$(echo touch) made || echo failed", "login": false}),
    )
    .await;
    assert!(!failed, "{said}");
    assert!(!s.dir.join("made").exists(), "{said}");
    assert!(
        said.contains("failed")
            && said.contains("at exec")
            && said.contains("it writes")
            && said.contains("no person can be asked"),
        "{said}"
    );
    s.client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_held_exec_runs_on_the_persons_yes_through_the_form() {
    let person = Person::answering(json!({"answer": "run once"}));
    let s = server("exec-yes", person, &[]).await;
    let (failed, said) = exec(
        &s.client,
        json!({"cmd": "$(echo touch) made && echo made it", "login": false, "yield_time_ms": 10000}),
    )
    .await;
    assert!(!failed, "{said}");
    assert!(s.dir.join("made").exists(), "{said}");
    assert!(said.contains("made it"), "{said}");
    let asked = s.person.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains("touch made") && asked[0].contains("it writes"),
        "{}",
        asked[0]
    );
    s.client.cancel().await.unwrap();
}

#[tokio::test]
async fn without_the_kernels_help_the_text_is_judged_and_that_is_said() {
    let s = server(
        "exec-fallback",
        Person::nobody(),
        &[("UEXEC_TEST_EXEC_NOTIFY", "fail")],
    )
    .await;
    // The text still judges: a plain push is refused before anything runs.
    let (failed, said) = exec(&s.client, json!({"cmd": "git push", "login": false})).await;
    assert!(failed && said.contains("pushing is for people"), "{said}");
    // A walk-around is not caught (the text cannot see it): honest about the limit.
    let (failed, said) = exec(
        &s.client,
        json!({"cmd": "$(echo git) push origin", "login": false}),
    )
    .await;
    assert!(!failed && said.contains("git ran push origin"), "{said}");
    s.client.cancel().await.unwrap();
    let stderr = std::fs::read_to_string(s.dir.join("stderr")).unwrap();
    assert!(
        stderr.contains("--rules-at exec")
            && stderr.contains("UEXEC_TEST_EXEC_NOTIFY=fail")
            && stderr.contains("text only"),
        "{stderr}"
    );
    // uexec doctor says the same, in text and in JSON.
    let doctor = |json: bool| {
        let mut cmd = std::process::Command::new(UEXEC);
        cmd.arg("doctor")
            .env("HOME", s.dir.join("home"))
            .env("UEXEC_TEST_EXEC_NOTIFY", "fail");
        if json {
            cmd.arg("--json");
        }
        String::from_utf8(cmd.output().unwrap().stdout).unwrap()
    };
    let text = doctor(false);
    assert!(
        text.contains("rules at each exec") && text.contains("available: NO"),
        "{text}"
    );
    let facts: Value = serde_json::from_str(&doctor(true)).unwrap();
    assert_eq!(facts["rules_at_exec"]["available"], json!(false), "{facts}");
}

#[test]
fn rules_at_without_rules_or_with_a_bad_word_is_a_usage_error() {
    let dir = place("exec-usage");
    for (flags, names) in [
        (&["--rules-at", "exec"][..], "--rules"),
        (
            &["--rules", "team.rules", "--rules-at", "always"][..],
            "always",
        ),
    ] {
        let out = std::process::Command::new(UEXEC)
            .args(["mcp", "--in-process"])
            .args(flags)
            .current_dir(&dir)
            .env("HOME", dir.join("home"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(
            stderr.contains("--rules-at") && stderr.contains(names),
            "{stderr}"
        );
    }
}

/// What `uexec audit` recorded under `home`: (decision, outcome, by).
pub(crate) fn recorded(home: &Path) -> Vec<(String, String, String)> {
    let out = std::process::Command::new(UEXEC)
        .args(["audit", "--json"])
        .env("HOME", home)
        .env_remove("XDG_STATE_HOME")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let e: Value = serde_json::from_str(l).unwrap();
            let field = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
            (field("decision"), field("outcome"), field("by"))
        })
        .collect()
}

/// The session id a running result names.
fn running_id(said: &str) -> i64 {
    let at = said.find("session ID ").expect(said) + "session ID ".len();
    said[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .expect(said)
}

#[tokio::test]
async fn a_session_killed_while_an_exec_is_held_leaves_nothing_behind() {
    use crate::helpers::{eventually, proc_stat};
    // The person takes their time, and says yes: too late.
    let person = Person::answering(json!({"answer": "run once"})).thinking(Duration::from_secs(2));
    let s = server("exec-held-kill", person, &[]).await;
    let (failed, said) = exec(
        &s.client,
        json!({
            "cmd": "sh -c 'echo $$ > held.pid; exec $(echo touch) made'; echo after > after",
            "login": false,
            "yield_time_ms": 300,
        }),
    )
    .await;
    assert!(!failed, "{said}");
    let id = running_id(&said);
    let asked = s.person.asked.clone();
    eventually("the question", Duration::from_secs(10), || {
        !asked.lock().unwrap().is_empty()
    })
    .await;
    let held: u32 = std::fs::read_to_string(s.dir.join("held.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(proc_stat(held).is_some(), "the held exec's process waits");
    let r = s
        .client
        .call_tool(
            CallToolRequestParams::new("terminate_session")
                .with_arguments(args(json!({"session_id": id}))),
        )
        .await
        .unwrap();
    assert!(r.is_error != Some(true), "{}", text(&r));
    eventually("the held process gone", Duration::from_secs(5), || {
        proc_stat(held).is_none()
    })
    .await;
    // The yes comes after the end: nothing runs on it.
    let answered = s.person.answered.clone();
    eventually("the person's answer", Duration::from_secs(10), || {
        *answered.lock().unwrap() == 1
    })
    .await;
    let (failed, said) = exec(&s.client, json!({"cmd": "echo still here", "login": false})).await;
    assert!(!failed && said.contains("still here"), "{said}");
    assert!(!s.dir.join("made").exists() && !s.dir.join("after").exists());
    s.client.cancel().await.unwrap();
}

#[tokio::test]
async fn under_the_sandbox_and_on_a_terminal_the_execs_are_judged_too() {
    let s = server_with(
        "exec-sandboxed",
        Person::nobody(),
        &[],
        &["--sandbox", "workspace-write"],
    )
    .await;
    for tty in [false, true] {
        let (failed, said) = exec(
            &s.client,
            json!({
                "cmd": "$(echo git) push || echo failed; git status",
                "login": false,
                "tty": tty,
                "yield_time_ms": 10000,
            }),
        )
        .await;
        assert!(!failed, "tty {tty}: {said}");
        assert!(
            said.contains("failed") && said.contains("git ran status") && names_the_push(&said),
            "tty {tty}: {said}"
        );
        assert!(!said.contains("git ran push"), "tty {tty}: {said}");
    }
    s.client.cancel().await.unwrap();
    // With a network allowlist too: see `rules_at_exec_allowlist`.
}

/// Through the daemon (the default place of `uexec mcp`): the client's `--rules-at exec`
/// goes in its hello, and the daemon's sessions are judged at each exec.
#[tokio::test]
async fn through_the_daemon_the_execs_are_judged_too() {
    use crate::helpers::call;
    use crate::place::DaemonPlace as Place;
    let place = Place::new("exec-daemon");
    let dir = place.cwd.clone();
    std::fs::write(dir.join("team.rules"), RULES).unwrap();
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        let git = dir.join("bin/git");
        std::fs::write(&git, FAKE_GIT).unwrap();
        std::fs::set_permissions(&git, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let rules = dir.join("team.rules").display().to_string();
    let client = place
        .client(&["--rules", &rules, "--rules-at", "exec"])
        .await;
    // The program's path decides its name: ./bin/git is git.
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "$(echo ./bin/git) push || echo failed; ./bin/git status", "login": false}),
    )
    .await;
    let said = text(&r);
    assert!(r.is_error != Some(true), "{said}");
    assert!(
        said.contains("failed") && said.contains("git ran status") && names_the_push(&said),
        "{said}"
    );
    assert!(!said.contains("git ran push"), "{said}");
    client.cancel().await.unwrap();
    place.stop();
}

#[tokio::test]
async fn a_structured_result_carries_the_refusals_as_notices() {
    let s = server_with("exec-structured", Person::nobody(), &[], &["--structured"]).await;
    let r = s
        .client
        .call_tool(
            CallToolRequestParams::new("exec_command").with_arguments(args(
                json!({"cmd": "$(echo git) push || echo failed", "login": false}),
            )),
        )
        .await
        .unwrap();
    let facts = r.structured_content.clone().unwrap_or_default();
    let notices = facts["notices"].as_array().cloned().unwrap_or_default();
    assert_eq!(notices.len(), 1, "{facts}");
    assert!(
        names_the_push(notices[0].as_str().unwrap_or_default()),
        "{facts}"
    );
    assert!(
        facts["output"]
            .as_str()
            .unwrap_or_default()
            .contains("failed"),
        "{facts}"
    );
    s.client.cancel().await.unwrap();
}
