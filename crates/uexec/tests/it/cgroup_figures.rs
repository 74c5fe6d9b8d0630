//! Figures per session and pause/resume, from the session's cgroup (issue 26), against a
//! real daemon on this project's machine (cgroup v2, no controllers: `cpu.stat` and the
//! freezer work, memory and pids figures are absent): a busy loop's CPU time grows and is
//! listed, and an ended session keeps its total; a paused session uses no CPU until it is
//! resumed, and a terminate still kills it; without a cgroup, a pause is refused and says
//! why.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::cgroups::require_cgroups;
use crate::cli::{json_of, stderr, stdout};
use crate::cli_sessions::{assert_refused, listed, row, start_with, uexec};
use crate::helpers::{
    call, eventually, marker, procs_with, structured, text, wait_all_gone, UEXEC,
};
use crate::place::DaemonPlace as Place;

/// A shell burning CPU, named after `m` (its `$0`) so the test finds it.
fn busy(m: &str) -> String {
    format!("exec sh -c 'while :; do :; done' {m}")
}

/// `cmd` left running, named `name`: its id.
fn start_named(place: &Place, name: &str, cmd: &str) -> i64 {
    start_with(place, &["--yield", "250", "--name", name], cmd)
}

/// Session `id`'s row in `uexec ls --json`.
fn listed_row(place: &Place, id: i64) -> Value {
    row(&listed(place, false), id).unwrap_or_else(|| panic!("session {id} is not listed"))
}

fn cpu_seconds(place: &Place, id: i64) -> f64 {
    let r = listed_row(place, id);
    r["cpu_seconds"]
        .as_f64()
        .unwrap_or_else(|| panic!("no cpu_seconds: {r}"))
}

/// The cgroup directory process `pid` is in.
pub(crate) fn cgroup_of(pid: u32) -> PathBuf {
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    cgroup_dir(own.lines().find_map(|l| l.strip_prefix("0::")).unwrap())
}

/// The directory of the cgroup v2 `path` (as `/proc/PID/cgroup`'s `0::` line names it).
pub(crate) fn cgroup_dir(path: &str) -> PathBuf {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mountpoint = mounts
        .lines()
        .find_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            after.starts_with("cgroup2 ").then_some(())?;
            before.split(' ').nth(4).map(str::to_owned)
        })
        .unwrap();
    PathBuf::from(mountpoint).join(path.trim_start_matches('/'))
}

/// `usage_usec` of the cgroup `dir`.
fn usage_usec(dir: &std::path::Path) -> u64 {
    let stat = std::fs::read_to_string(dir.join("cpu.stat")).unwrap();
    stat.lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[tokio::test]
async fn a_busy_loop_s_cpu_time_grows_is_listed_and_kept_at_its_end() {
    require_cgroups();
    let place = Place::new("cgroup-figures");
    let m = marker();
    let id = start_named(&place, "burner", &busy(&m));
    // It grows: a first figure, then a larger one.
    let mut first = 0.0;
    eventually("a CPU figure above 0", Duration::from_secs(10), || {
        first = cpu_seconds(&place, id);
        first > 0.0
    })
    .await;
    eventually("the CPU figure to grow", Duration::from_secs(10), || {
        cpu_seconds(&place, id) > first
    })
    .await;
    // Uncounted figures are absent, not invented (no memory or pids controller here).
    let r = listed_row(&place, id);
    let controllers =
        std::fs::read_to_string(cgroup_of(procs_with(&m)[0]).join("cgroup.controllers"))
            .unwrap_or_default();
    if !controllers.contains("memory") {
        assert!(r.get("memory_bytes").is_none(), "{r}");
    }
    if !controllers.contains("pids") {
        assert!(r.get("pids").is_none(), "{r}");
    }
    // The table has its CPU column, a figure in it for this one.
    let table = stdout(&uexec(&place, &["ls"]));
    let head = table.lines().next().unwrap_or_default();
    assert!(head.contains(" CPU "), "{table}");
    let line = table
        .lines()
        .find(|l| l.starts_with(&id.to_string()))
        .unwrap_or_else(|| panic!("{table}"));
    // ID NAME OWNER STATE ENDED TTY AGE CPU ... (a running row's cells are one word each).
    let cpu = line.split_whitespace().nth(7).unwrap_or_default();
    let secs = cpu.strip_suffix('s').and_then(|n| n.parse::<f64>().ok());
    assert!(
        secs.is_some_and(|n| n > 0.0),
        "a figure, not {cpu:?}: {line}"
    );
    let killed = uexec(&place, &["kill", "burner"]);
    assert_eq!(killed.status.code(), Some(0), "{}", stderr(&killed));
    wait_all_gone(&[m], "the busy loop to die").await;

    // A session that ran to its end keeps what it used, read before its cgroup went.
    let out = uexec(
        &place,
        &[
            "run",
            "--no-login",
            "--",
            "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo counted",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ended: Vec<Value> = listed(&place, true)
        .into_iter()
        .filter(|r| r["command"].as_str().is_some_and(|c| c.contains("300000")))
        .collect();
    let [counted] = ended.as_slice() else {
        panic!("{ended:?}")
    };
    assert_eq!(counted["state"], "exited", "{counted}");
    assert!(
        counted["cpu_seconds"].as_f64().unwrap_or(0.0) > 0.0,
        "{counted}"
    );

    // An agent reads the figures too: in its list_sessions, and in the final result.
    let agent = place.client(&["--structured", "--owner", "agent-1"]).await;
    let m = marker();
    let r = call(
        &agent,
        "exec_command",
        json!({"cmd": busy(&m), "login": false, "yield_time_ms": 500}),
    )
    .await;
    let running = structured(&r)["session_id"].as_i64().expect("running");
    eventually(
        "the agent's figure above 0",
        Duration::from_secs(10),
        || cpu_seconds(&place, running) > 0.0,
    )
    .await;
    let listing = call(&agent, "list_sessions", json!({})).await;
    let item = &structured(&listing)["sessions"][0];
    assert!(
        item["cpu_seconds"].as_f64().is_some_and(|s| s > 0.0),
        "{item}"
    );
    assert!(text(&listing).contains("s CPU"), "{}", text(&listing));
    call(&agent, "terminate_session", json!({"session_id": running})).await;
    wait_all_gone(&[m], "the agent's busy loop to die").await;
    let r = call(
        &agent,
        "exec_command",
        json!({"cmd": "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done", "login": false, "yield_time_ms": 30000}),
    )
    .await;
    let done = structured(&r);
    assert_eq!(done["exit_code"], 0, "{done}");
    assert!(
        done["cpu_seconds"].as_f64().is_some_and(|s| s > 0.0),
        "{done}"
    );
    agent.cancel().await.unwrap();
}

#[tokio::test]
async fn a_paused_session_uses_no_cpu_resumes_and_still_dies_on_kill() {
    require_cgroups();
    let place = Place::new("cgroup-pause");
    let m = marker();
    let id = start_named(&place, "frozen", &busy(&m));
    eventually("the busy loop to run", Duration::from_secs(5), || {
        !procs_with(&m).is_empty()
    })
    .await;
    let cgroup = cgroup_of(procs_with(&m)[0]);
    assert!(
        cgroup.join("cgroup.freeze").exists(),
        "{}",
        cgroup.display()
    );

    let paused = uexec(&place, &["pause", "frozen"]);
    assert_eq!(paused.status.code(), Some(0), "{}", stderr(&paused));
    assert_eq!(stdout(&paused), format!("Session {id} paused\n"));
    // The pause returned once the kernel said so.
    let events = std::fs::read_to_string(cgroup.join("cgroup.events")).unwrap();
    assert!(events.lines().any(|l| l == "frozen 1"), "{events}");
    // Shown as paused: in the JSON, the table and the person's list_sessions.
    let r = listed_row(&place, id);
    assert_eq!(
        (&r["state"], &r["paused"]),
        (&json!("paused"), &json!(true)),
        "{r}"
    );
    let table = stdout(&uexec(&place, &["ls"]));
    let line = table
        .lines()
        .find(|l| l.starts_with(&id.to_string()))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(line.contains(" paused "), "{line}");

    // No CPU while frozen, across a gap measured by another session's 20 lines of output.
    let before = usage_usec(&cgroup);
    let out = uexec(
        &place,
        &[
            "run",
            "--no-login",
            "--",
            "for i in $(seq 1 20); do echo line $i; sleep 0.02; done",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), 20, "{}", stdout(&out));
    assert_eq!(usage_usec(&cgroup), before, "a frozen session used CPU");
    // Pausing again is no error; resuming runs it again.
    let again = uexec(&place, &["pause", "--json", &id.to_string()]);
    assert_eq!(json_of(&again), json!({"session_id": id, "paused": true}));
    let resumed = uexec(&place, &["resume", "frozen"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert_eq!(stdout(&resumed), format!("Session {id} resumed\n"));
    assert_eq!(listed_row(&place, id)["state"], "running");
    eventually(
        "the resumed loop to use CPU",
        Duration::from_secs(10),
        || usage_usec(&cgroup) > before,
    )
    .await;

    // A paused session still dies of a kill (cgroup.kill and SIGKILL reach frozen ones).
    assert_eq!(uexec(&place, &["pause", "frozen"]).status.code(), Some(0));
    let killed = uexec(&place, &["kill", "frozen"]);
    assert_eq!(killed.status.code(), Some(0), "{}", stderr(&killed));
    wait_all_gone(&[m], "the paused session to die").await;

    // Bad input, as the other verbs say it.
    assert_refused(&place, &["pause", "99999"], 3, "Unknown session 99999");
    assert_refused(
        &place,
        &["resume", "nosuch"],
        3,
        "Unknown session name nosuch",
    );
    assert_refused(&place, &["pause"], 2, "SESSION");
    for verb in ["pause", "resume"] {
        let help = stdout(&uexec(&place, &[verb, "--help"]));
        assert!(help.contains("Exit codes: 0"), "{help}");
    }
}

#[tokio::test]
async fn a_pause_without_a_cgroup_is_refused_and_says_why() {
    // The CLI, its daemon and the session in a mount namespace with /sys/fs/cgroup covered
    // by an empty tmpfs: sessions live on process groups there.
    let place = Place::new("cgroup-none");
    let m = marker();
    let script = format!(
        r#"mount -t tmpfs tmpfs /sys/fs/cgroup || exit 99
"$1" run --json --no-login --yield 250 --name plain -- 'exec sleep {m}' >/dev/null
"$1" pause plain
echo "pause=$?"
"$1" ls --json
"$1" kill plain >/dev/null
"$1" daemon --stop >/dev/null"#
    );
    let out = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "sh", "-c", &script])
        .args(["sh", UEXEC])
        .current_dir(&place.cwd)
        .env("XDG_RUNTIME_DIR", &place.runtime)
        .env("HOME", place.cwd.join("home"))
        .env_remove("UEXEC_DAEMON")
        .output()
        .unwrap();
    let (said, err) = (stdout(&out), stderr(&out));
    assert!(said.contains("pause=125"), "{said}\n{err}");
    assert!(
        err.contains("pausing session")
            && err.contains("no cgroup")
            && err.contains("uexec doctor"),
        "{err}"
    );
    // Listed as it is: running, no figures (`uexec ls` shows `-`).
    let json_start = said.find('{').unwrap_or_else(|| panic!("{said}"));
    let listed: Value = serde_json::from_str(&said[json_start..]).unwrap();
    let plain = &listed["sessions"][0];
    assert_eq!(plain["state"], "running", "{plain}");
    assert!(plain.get("cpu_seconds").is_none(), "{plain}");
    wait_all_gone(&[m], "the session to be killed").await;
}
