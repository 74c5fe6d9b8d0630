//! A person's yes to a command's text, under `--rules-at exec` (issue 40): the execs the
//! same `prompt` rule holds in that session go on without asking again, recorded as decided
//! by that yes; an exec another `prompt` rule holds is still asked, a `forbidden` one still
//! refused, and another session's exec is asked anew.

use std::time::Duration;

use serde_json::json;

use crate::person::Person;
use crate::rules_at_exec::{exec, names_the_push, recorded, server};

#[tokio::test]
async fn a_yes_to_the_command_covers_the_execs_its_rule_holds_in_that_session() {
    let s = server(
        "exec-text-yes",
        Person::answering(json!({"answer": "run once"})),
        &[],
    )
    .await;
    let (failed, said) = exec(
        &s.client,
        json!({"cmd": "touch made && echo made it", "login": false, "yield_time_ms": 10000}),
    )
    .await;
    assert!(!failed && said.contains("made it"), "{said}");
    assert!(s.dir.join("made").exists(), "{said}");
    // Asked once, on the text; the exec of touch the same rule holds went on on that yes.
    let asked = s.person.questions();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].contains("touch made"), "{}", asked[0]);
    let home = s.dir.join("home");
    crate::helpers::eventually("the exec's record", Duration::from_secs(10), || {
        recorded(&home).iter().any(|(d, o, by)| {
            d == "prompt"
                && o == "admitted"
                && by.contains("by their earlier yes to the command")
                && by.contains("at exec in session")
        })
    })
    .await;
    // Another session's exec the rule holds is asked: the yes was that session's.
    let (failed, said) = exec(
        &s.client,
        json!({"cmd": "$(echo touch) again", "login": false, "yield_time_ms": 10000}),
    )
    .await;
    assert!(!failed && s.dir.join("again").exists(), "{said}");
    let asked = s.person.questions();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[1].contains("touch again"), "{}", asked[1]);
    s.client.cancel().await.unwrap();
}

#[tokio::test]
async fn after_a_yes_to_the_command_another_rules_exec_is_still_asked_and_a_forbidden_one_refused()
{
    let s = server(
        "exec-text-yes-other",
        Person::answering(json!({"answer": "run once"})),
        &[],
    )
    .await;
    let (failed, said) = exec(
        &s.client,
        json!({
            "cmd": "touch a; $(echo deploy) now; $(echo git) push || echo refused",
            "login": false,
            "yield_time_ms": 10000,
        }),
    )
    .await;
    assert!(!failed, "{said}");
    assert!(
        s.dir.join("a").exists() && said.contains("deployed now"),
        "{said}"
    );
    assert!(said.contains("refused") && names_the_push(&said), "{said}");
    assert!(!said.contains("git ran push"), "{said}");
    // The text's question (touch), then the exec of deploy, which another rule holds.
    let asked = s.person.questions();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[0].contains("touch a"), "{}", asked[0]);
    assert!(
        asked[1].contains("deploy now") && asked[1].contains("it ships"),
        "{}",
        asked[1]
    );
    s.client.cancel().await.unwrap();
}
