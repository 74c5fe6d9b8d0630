//! A supervisor's view (issue 42 §1, §4), against a real daemon: a person's running sessions
//! are never pruned (a run past the limit is refused), an agent's store still prunes at
//! Codex's 64 and `ls -a` says why uexec ended a session; `ls` fits 80 columns with `-q`,
//! `--running` and `--owner`; it says what waits for a person; names resolve to the
//! person's own sessions first; `uexec mcp --owner @person` is a usage error.

use std::time::Duration;

use serde_json::{json, Value};

use crate::cli::{stderr, stdout};
use crate::cli_sessions::{listed, row, uexec};
use crate::helpers::{call, eventually, marker, procs_with, structured, text};
use crate::place::DaemonPlace as Place;

/// `uexec daemon ARGS` started in the background, once it listens.
async fn daemon(place: &Place, args: &[&str]) -> std::process::Child {
    let mut all = vec!["daemon"];
    all.extend_from_slice(args);
    let child = place
        .command(&all)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let socket = place.socket();
    eventually("the daemon to listen", Duration::from_secs(10), || {
        socket.exists()
    })
    .await;
    child
}

/// `uexec run -d` of `cmd` with a short window: its session id.
fn run_detached(place: &Place, cmd: &str) -> Result<i64, (Option<i32>, String)> {
    let out = uexec(
        place,
        &[
            "run",
            "-d",
            "--json",
            "--no-login",
            "--yield",
            "250",
            "--",
            cmd,
        ],
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    match json["session_id"].as_i64() {
        Some(id) => Ok(id),
        None => Err((out.status.code(), stderr(&out))),
    }
}

#[tokio::test]
async fn a_persons_65_detached_runs_all_live_and_past_the_limit_a_run_is_refused() {
    let place = Place::new("sup-65");
    let _daemon = daemon(&place, &["--person-sessions", "66"]).await;
    let m = marker();
    // Not `exec`: the shell, whose command line has the marker, stays.
    let cmd = format!("sleep 600; : {m}");
    // 66 runs, eight at a time.
    let ids: Vec<i64> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|k| {
                let (place, cmd) = (&place, &cmd);
                scope.spawn(move || {
                    (k..66)
                        .step_by(8)
                        .map(|_| run_detached(place, cmd).unwrap())
                        .collect::<Vec<i64>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert_eq!(ids.len(), 66);
    // The 67th is refused, saying why; nothing of it runs.
    let (code, said) = run_detached(&place, &format!("sleep 600; : {m}-67")).unwrap_err();
    assert!(code.is_some_and(|c| c != 0 && c != 4), "{code:?} {said}");
    assert!(
        said.contains("66 sessions are running") && said.contains("none is ended to make room"),
        "{said}"
    );
    assert!(procs_with(&format!("{m}-67")).is_empty());
    // None was killed: all 66 run.
    let rows = listed(&place, true);
    for id in &ids {
        let r = row(&rows, *id).unwrap_or_else(|| panic!("{id} is gone"));
        assert_eq!(r["state"], "running", "{r}");
    }
    assert_eq!(procs_with(&m).len(), 66);
    // One ended: the next run starts.
    let killed = uexec(&place, &["kill", &ids[0].to_string()]);
    assert_eq!(killed.status.code(), Some(0), "{}", stderr(&killed));
    eventually("a kill to end its session", Duration::from_secs(10), || {
        procs_with(&m).len() == 65
    })
    .await;
    run_detached(&place, &format!("sleep 600; : {m}")).unwrap();
}

#[tokio::test]
async fn an_agents_store_still_prunes_at_64_and_ls_says_pruned() {
    let place = Place::new("sup-prune");
    let agent = place.client(&["--structured", "--owner", "agent"]).await;
    let m = marker();
    let start = |n: usize| {
        let agent = &agent;
        let cmd = format!("sleep 600; : {m} {n}");
        async move {
            let r = call(
                agent,
                "exec_command",
                json!({"cmd": cmd, "login": false, "yield_time_ms": 250}),
            )
            .await;
            structured(&r)["session_id"].as_i64().expect("running")
        }
    };
    let mut ids = Vec::new();
    for n in 0..65 {
        ids.push(start(n).await);
    }
    assert_eq!(ids.len(), 65);
    eventually("the pruned session to die", Duration::from_secs(10), || {
        procs_with(&m).len() == 64
    })
    .await;
    let rows = listed(&place, true);
    let pruned: Vec<&Value> = rows.iter().filter(|r| r["stopped"] == "pruned").collect();
    assert_eq!(pruned.len(), 1, "{rows:?}");
    let id = pruned[0]["session_id"].as_i64().unwrap();
    let table = stdout(&uexec(&place, &["ls", "-a"]));
    let line = table
        .lines()
        .find(|l| l.starts_with(&id.to_string()))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(line.contains(" pruned "), "{line}");
    agent.cancel().await.unwrap();
}

#[tokio::test]
async fn a_session_whose_client_went_away_says_so_in_ls_a() {
    let place = Place::new("sup-gone");
    let agent = place.client(&["--structured", "--owner", "agent"]).await;
    let m = marker();
    let r = call(
        &agent,
        "exec_command",
        json!({"cmd": format!("sleep 600; : {m}"), "login": false, "yield_time_ms": 250}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    agent.cancel().await.unwrap();
    eventually("the session to end", Duration::from_secs(10), || {
        procs_with(&m).is_empty()
    })
    .await;
    let r = row(&listed(&place, true), id).unwrap();
    assert_eq!(r["stopped"], "client_gone", "{r}");
    let table = stdout(&uexec(&place, &["ls", "-a"]));
    assert!(table.contains("stopped: its client went away"), "{table}");
}

#[tokio::test]
async fn ls_fits_80_columns_and_filters_by_owner_and_state() {
    let place = Place::new("sup-ls");
    let long = |app: &str| format!("mcp:/home/someone/src/projects/{app}");
    let a = place
        .client(&["--structured", "--owner", &long("app-a")])
        .await;
    let b = place
        .client(&["--structured", "--owner", &long("app-b")])
        .await;
    let mut ids = Vec::new();
    for (client, cmd) in [(&a, "exec sleep 600"), (&b, "exec sleep 601"), (&b, "true")] {
        let r = call(
            client,
            "exec_command",
            json!({"cmd": cmd, "login": false, "yield_time_ms": 250}),
        )
        .await;
        ids.push(
            structured(&r)["session_id"]
                .as_i64()
                .or_else(|| text(&r).split_whitespace().find_map(|w| w.parse().ok()))
                .unwrap_or(0),
        );
    }
    let out = place
        .command(&["ls", "-a"])
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    let table = stdout(&out);
    for line in table.lines() {
        assert!(line.chars().count() <= 80, "{line:?}\n{table}");
    }
    // The owners differ where they differ: at their end, which is kept.
    assert!(
        table.contains("/app-a ") && table.contains("/app-b "),
        "{table}"
    );
    assert!(
        !table.contains("mcp:/home/someone/src/projects/app-"),
        "{table}"
    );
    // -q: ids only; --running; --owner, whole or by its end.
    let q = |args: &[&str]| -> Vec<i64> {
        let out = uexec(&place, args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let mut v: Vec<i64> = stdout(&out).lines().map(|l| l.parse().unwrap()).collect();
        v.sort();
        v
    };
    let mut running = vec![ids[0], ids[1]];
    running.sort();
    assert_eq!(q(&["ls", "-q", "--running"]), running);
    assert_eq!(q(&["ls", "-q", "--owner", "app-a"]), vec![ids[0]]);
    assert_eq!(
        q(&["ls", "-q", "--running", "--owner", &long("app-b")]),
        vec![ids[1]]
    );
    assert_eq!(q(&["ls", "-q", "--owner", "nobody"]), Vec::<i64>::new());
    for (args, says) in [
        (&["ls", "--owner", ""][..], "--owner"),
        (&["ls", "-q", "--json"][..], "--json"),
        (&["ls", "--running", "-a"][..], "--all"),
    ] {
        let out = uexec(&place, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    let help = stdout(&uexec(&place, &["ls", "--help"]));
    for flag in ["--quiet", "--running", "--owner"] {
        assert!(help.contains(flag), "{help}");
    }
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

#[tokio::test]
async fn ls_says_what_waits_for_the_person() {
    let place = Place::new("sup-waiting");
    let run = |cmd: &str| {
        let out = uexec(
            &place,
            &[
                "run",
                "-d",
                "--json",
                "--tty",
                "--no-login",
                "--yield",
                "250",
                "--",
                cmd,
            ],
        );
        let id = crate::cli::json_of(&out)["session_id"].as_i64();
        id.unwrap_or_else(|| panic!("{}", stderr(&out)))
    };
    let secret = run("read -s -p 'Password: ' x; echo got");
    let question = run("read -p 'Continue? ' y; echo got");
    let busy = run("while :; do echo tick; sleep 0.1; done");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let rows = listed(&place, false);
        let waiting = |id| row(&rows, id).unwrap()["waiting"].clone();
        if waiting(secret) == "password" && waiting(question) == "input" {
            assert!(waiting(busy).is_null(), "{rows:?}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{rows:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let table = stdout(&uexec(&place, &["ls"]));
    let line = |id: i64| {
        table
            .lines()
            .find(|l| l.starts_with(&id.to_string()))
            .unwrap_or_else(|| panic!("{table}"))
            .to_owned()
    };
    assert!(line(secret).contains("waiting (password)"), "{table}");
    assert!(line(question).contains("waiting (input)"), "{table}");
    assert!(line(busy).contains(" running "), "{table}");
    for id in [secret, question, busy] {
        uexec(&place, &["kill", &id.to_string()]);
    }
}

#[tokio::test]
async fn a_name_resolves_to_the_persons_own_session_first() {
    let place = Place::new("sup-names");
    let agent = place.client(&["--structured", "--owner", "agent"]).await;
    let m = marker();
    let probe = place.cwd.join("typed");
    let r = call(
        &agent,
        "exec_command",
        json!({"cmd": format!("cat > '{}' # {m}", probe.display()), "login": false, "yield_time_ms": 250, "name": "web", "tty": true}),
    )
    .await;
    let agents = structured(&r)["session_id"].as_i64().expect("running");
    // The person's own `web` ran and ended.
    let out = uexec(
        &place,
        &["run", "--name", "web", "--no-login", "--", "true"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // `send web` is for the person's own (ended): refused, nothing typed into the agent's.
    let sent = uexec(&place, &["send", "web", "rm -rf"]);
    assert_ne!(sent.status.code(), Some(0), "{}", stderr(&sent));
    assert!(
        std::fs::read_to_string(&probe)
            .unwrap_or_default()
            .is_empty(),
        "typed into the agent's web"
    );
    // With none of their own of that name, the agent's is reached, saying whose.
    let rm = uexec(&place, &["rm", "web"]);
    assert_eq!(rm.status.code(), Some(0), "{}", stderr(&rm));
    let sent = uexec(&place, &["send", "web", "hello"]);
    assert_eq!(sent.status.code(), Some(0), "{}", stderr(&sent));
    assert!(
        stderr(&sent).contains(&format!("session {agents} of agent")),
        "{}",
        stderr(&sent)
    );
    eventually(
        "the agent's web to get the line",
        Duration::from_secs(10),
        || std::fs::read_to_string(&probe).unwrap_or_default() == "hello\n",
    )
    .await;
    agent.cancel().await.unwrap();
}

#[test]
fn mcp_owner_may_not_be_a_person_nor_empty() {
    let place = Place::new("sup-owner");
    for owner in ["@person", "", "@me"] {
        let out = uexec(&place, &["mcp", "--owner", owner]);
        assert_eq!(out.status.code(), Some(2), "{owner:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("--owner"), "{}", stderr(&out));
    }
    let help = stdout(&uexec(&place, &["mcp", "--help"]));
    assert!(help.contains("people's"), "{help}");
}

#[tokio::test]
async fn ls_and_status_name_another_daemon_of_the_user() {
    let place = Place::new("sup-other");
    // A client that passes few variables: no XDG_RUNTIME_DIR, its daemon under TMPDIR.
    let tmp = place.cwd.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut other = place
        .command(&["daemon"])
        .env_remove("XDG_RUNTIME_DIR")
        .env("TMPDIR", &tmp)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let uid = std::fs::metadata(&place.cwd).map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    let socket = tmp
        .join(format!("uexec-{}", uid.unwrap()))
        .join("daemon.sock");
    eventually(
        "the other daemon to listen",
        Duration::from_secs(10),
        || socket.exists(),
    )
    .await;
    let out = place.command(&["ls"]).env("TMPDIR", &tmp).output().unwrap();
    let said = stdout(&out);
    assert!(
        said.contains("another uexec daemon of yours runs at")
            && said.contains(&socket.display().to_string()),
        "{said}"
    );
    let out = place
        .command(&["daemon", "--status"])
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&socket.display().to_string()),
        "{}",
        stderr(&out)
    );
    let stop = place
        .command(&["daemon", "--stop"])
        .env_remove("XDG_RUNTIME_DIR")
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    assert!(stop.status.success(), "{}", stderr(&stop));
    other.wait().unwrap();
}
