//! A person's yes or no for a client on MCP 2026-07-28 (issue 39 §2), where a server may not
//! send the client a request: a held command's call is answered with the question (an
//! input-required result carrying the form), and the client's retry brings the answer. Run
//! once runs it, and the record holds one decision; deny is refused with the person's
//! reason; a retry with a forged requestState, or with other arguments, is refused saying
//! so, and nothing runs.

use std::path::PathBuf;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitRequestParams, InputRequest, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::RoleClient;
use serde_json::{json, Value};

use crate::helpers::{args, scratch_dir, text, UEXEC};
use crate::person::Person;

const RULES: &str = r#"
prefix_rule(
    pattern = ["touch"],
    decision = "prompt",
    justification = "it writes",
)
"#;

type Client = RunningService<RoleClient, Person>;

async fn server(answer: Value) -> (Client, Person, PathBuf) {
    let dir = scratch_dir("rules-rounds");
    std::fs::create_dir_all(dir.join("home")).unwrap();
    std::fs::write(dir.join("team.rules"), RULES).unwrap();
    // A PostToolUseFailure hook that logs each failed call: a round that went back to the
    // client is none.
    let log = dir.join("failure.log");
    let hook = format!("cat >> '{}'; echo >> '{}'", log.display(), log.display());
    let hooks = json!({"hooks": {"PostToolUseFailure": [{"hooks": [{"type": "command", "command": hook}]}]}});
    std::fs::write(dir.join("hooks.json"), hooks.to_string()).unwrap();
    let mut cmd = tokio::process::Command::new(UEXEC);
    cmd.args(["mcp", "--in-process", "--hooks"])
        .arg(dir.join("hooks.json"))
        .arg("--rules")
        .arg(dir.join("team.rules"))
        .current_dir(&dir)
        .env("HOME", dir.join("home"))
        .env_remove("XDG_STATE_HOME");
    // A client of the 2026-07-28 protocol whose person answers every form with `answer`.
    let person = Person::answering(answer);
    let client = person
        .clone()
        .serve_with_lifecycle(
            TokioChildProcess::new(cmd).unwrap(),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap();
    (client, person, dir)
}

fn touch(name: &str) -> CallToolRequestParams {
    CallToolRequestParams::new("exec_command").with_arguments(args(
        json!({"cmd": format!("touch {name}"), "login": false}),
    ))
}

/// rmcp's client drives the rounds: the form to its handler, the answer in the retry.
async fn exec(client: &Client, name: &str) -> (bool, String) {
    let r = client.call_tool(touch(name)).await.unwrap();
    (r.is_error == Some(true), text(&r))
}

#[tokio::test]
async fn the_question_goes_back_to_the_client_and_its_retry_runs_the_command_once() {
    let (client, person, dir) = server(json!({"answer": "run once"})).await;
    let (failed, said) = exec(&client, "made").await;
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
    assert!(
        !dir.join("failure.log").exists(),
        "a PostToolUseFailure hook ran for the round that went back to the client"
    );
    // One decision: the person's, not a refusal for the first round.
    assert_eq!(
        crate::rules_at_exec::recorded(&dir.join("home")),
        [(
            "prompt".to_owned(),
            "admitted".to_owned(),
            "the person (the MCP client's form)".to_owned()
        )]
    );
}

#[tokio::test]
async fn a_deny_is_refused_with_the_persons_reason() {
    let (client, _, dir) = server(json!({"answer": "deny", "reason": "use the staging dir"})).await;
    let (failed, said) = exec(&client, "made").await;
    assert!(failed && said.contains("use the staging dir"), "{said}");
    assert!(!dir.join("made").exists());
    client.cancel().await.unwrap();
    // The refusal is a failed call: its PostToolUseFailure hook ran, once.
    let log = std::fs::read_to_string(dir.join("failure.log")).unwrap_or_default();
    assert_eq!(log.matches("PostToolUseFailure").count(), 1, "{log}");
    assert!(log.contains("use the staging dir"), "{log}");
}

#[tokio::test]
async fn a_retry_with_a_forged_state_or_other_arguments_is_refused_and_nothing_runs() {
    let (client, _, dir) = server(json!({"answer": "run once"})).await;
    let yes = || {
        [(
            "uexec_approval".to_owned(),
            json!({"action": "accept", "content": {"answer": "run once"}}),
        )]
        .into()
    };
    let refused = |r: CallToolResponse| match r {
        CallToolResponse::Complete(r) => {
            assert_eq!(r.is_error, Some(true), "{r:?}");
            text(&r)
        }
        other => panic!("not a result: {other:?}"),
    };
    let forged = touch("forged")
        .with_request_state("0123456789abcdef0123456789abcdef")
        .with_input_responses(yes());
    let said = refused(client.call_tool_once(forged).await.unwrap());
    assert!(
        said.contains("does not hold") && said.contains("nothing ran"),
        "{said}"
    );
    assert!(!dir.join("forged").exists());

    // The first round: the question, with the form naming the command.
    let CallToolResponse::InputRequired(asked) = client.call_tool_once(touch("a")).await.unwrap()
    else {
        panic!("no question");
    };
    let requests = asked.input_requests.unwrap();
    let Some(InputRequest::Elicitation(form)) = requests.get("uexec_approval") else {
        panic!("no form: {requests:?}");
    };
    let ElicitRequestParams::FormElicitationParams { message, .. } = &form.params else {
        panic!("not a form");
    };
    assert!(message.contains("touch a"), "{message}");
    assert!(!dir.join("a").exists(), "nothing runs before the answer");
    // Its answer cannot run another command.
    let state = asked.request_state.unwrap();
    let other = touch("b")
        .with_request_state(state.clone())
        .with_input_responses(yes());
    let said = refused(client.call_tool_once(other).await.unwrap());
    assert!(said.contains("not the call"), "{said}");
    assert!(!dir.join("b").exists() && !dir.join("a").exists());
    // And the question is spent: its own retry now is refused too.
    let late = touch("a")
        .with_request_state(state)
        .with_input_responses(yes());
    let said = refused(client.call_tool_once(late).await.unwrap());
    assert!(said.contains("does not hold"), "{said}");
    assert!(!dir.join("a").exists());
    client.cancel().await.unwrap();
}
