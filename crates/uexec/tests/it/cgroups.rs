//! A cgroup per session, on a machine with a cgroup v2 tree uexec may write (this project's
//! own: v2 at /sys/fs/cgroup/unified, no controllers): a descendant that left the session's
//! process group (`setsid -f`, a double fork) dies on terminate, at the sweep after its
//! leader's exit, and when the server is SIGKILLed; a new server kills what a dead one left;
//! no session's cgroup outlives its end; and with the cgroup2 mount hidden, sessions work on
//! process groups as before.

use std::path::PathBuf;
use std::time::Duration;

use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::json;

use crate::helpers::{
    call, eventually, marker, procs_with, scratch_dir, stdio_client, structured, text,
    wait_all_gone, Recorder, UEXEC,
};

/// This process's cgroup v2 directory (sessions' cgroups go below it), if the machine has
/// one this user may write; tests that need it say so when it is missing.
fn own_v2_dir() -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own.lines().find_map(|l| l.strip_prefix("0::"))?.to_owned();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        after.starts_with("cgroup2 ").then_some(())?;
        let mountpoint = before.split(' ').nth(4)?;
        let dir = PathBuf::from(mountpoint).join(own.trim_start_matches('/'));
        // Each caller its own: tests of this process probe at once.
        let probe = dir.join(format!(
            "uexec-it-probe.{}.{}",
            std::process::id(),
            crate::helpers::rand_suffix()
        ));
        std::fs::create_dir(&probe).ok()?;
        std::fs::remove_dir(&probe).ok()?;
        Some(dir)
    })
}

pub(crate) fn require_cgroups() -> PathBuf {
    own_v2_dir().expect(
        "this test needs a writable cgroup v2 tree (this project's machines have one at \
         /sys/fs/cgroup/unified); `uexec doctor` says why there is none",
    )
}

/// A command that leaves a `sleep MARKER` outside its process group (`setsid -f`, its
/// output closed so it holds no pipe of the session), then `tail` (its own marker) runs on.
fn escaping(escaper: &str, stayer: Option<&str>) -> String {
    let rest = match stayer {
        Some(m) => format!("exec sleep {m}"),
        None => "echo left".to_owned(),
    };
    format!("setsid -f sleep {escaper} </dev/null >/dev/null 2>&1; {rest}")
}

#[tokio::test]
async fn terminate_kills_a_descendant_that_left_the_process_group() {
    require_cgroups();
    let (client, _, _) = stdio_client(&["--structured"]).await;
    let (escaper, stayer) = (marker(), marker());
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": escaping(&escaper, Some(&stayer)), "login": false, "yield_time_ms": 300}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    eventually("both sleeps to run", Duration::from_secs(5), || {
        !procs_with(&escaper).is_empty() && !procs_with(&stayer).is_empty()
    })
    .await;
    call(&client, "terminate_session", json!({"session_id": id})).await;
    wait_all_gone(&[escaper, stayer], "the session's whole tree to die").await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_descendant_left_by_an_exited_leader_is_reported_and_dies_at_the_sweep() {
    require_cgroups();
    let (client, _, _) = stdio_client(&["--structured"]).await;
    let escaper = marker();
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": escaping(&escaper, None), "login": false, "yield_time_ms": 5000}),
    )
    .await;
    assert_eq!(structured(&r)["exit_code"], 0, "{r:?}");
    assert_left(&r, &format!("sleep {escaper}"));
    wait_all_gone(&[escaper], "what the exited leader left to be killed").await;
    client.cancel().await.unwrap();
}

/// No session's cgroup outlives its end: one found empty then (nothing left running) is
/// removed without a kill, and one whose leader left a process is killed, then removed.
#[tokio::test]
async fn a_session_s_cgroup_is_removed_at_its_end_empty_or_not() {
    require_cgroups();
    let (client, _, _) = stdio_client(&["--structured"]).await;
    // The command says which cgroup it is in.
    let whose = "sed -n 's/^0:://p' /proc/self/cgroup";
    let escaper = marker();
    for cmd in [
        whose.to_owned(),
        format!("setsid -f sleep {escaper} </dev/null >/dev/null 2>&1; {whose}"),
    ] {
        let r = call(
            &client,
            "exec_command",
            json!({"cmd": cmd, "login": false, "yield_time_ms": 5000}),
        )
        .await;
        assert_eq!(structured(&r)["exit_code"], 0, "{}", text(&r));
        let path = structured(&r)["output"]
            .as_str()
            .and_then(|o| o.lines().next())
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no cgroup printed: {}", text(&r)));
        let dir = crate::cgroup_figures::cgroup_dir(&path);
        // A session's own (`…/uexec.<pid>/s<N>`), not the server's.
        let parent = dir
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str());
        assert!(
            dir.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('s'))
                && parent.is_some_and(|p| p.starts_with("uexec.")),
            "{}",
            dir.display()
        );
        eventually(
            "the session's cgroup to be removed",
            Duration::from_secs(10),
            || !dir.exists(),
        )
        .await;
    }
    wait_all_gone(&[escaper], "what the leader left to be killed").await;
    client.cancel().await.unwrap();
}

/// `r` says its command left one process running, `command`, and that it is killed.
fn assert_left(r: &rmcp::model::CallToolResult, command: &str) {
    let left = &structured(r)["left_running"];
    assert_eq!(left["count"], 1, "{}", text(r));
    // (Named as it is seen: `setsid -f` may not have exec'd its command yet.)
    let named = left["processes"][0]["command"].as_str().unwrap_or_default();
    assert!(named.ends_with(command), "{left}");
    let pid = &left["processes"][0]["pid"];
    let line =
        format!("The command exited and left running 1 process (pid {pid}: {named}): killed now");
    assert!(text(r).contains(&line), "{}", text(r));
}

/// SPEC §2 step 4 and §6 with a cgroup: `(sleep N &); echo done` returns at its exit (not
/// at the window's end, nor at the job's), says what it left running, and the job is killed;
/// on a terminal too. Codex's dialect says nothing of it, and a sandboxed job dies with its
/// pid namespace, leaving nothing.
#[tokio::test]
async fn a_background_job_of_an_exited_command_is_named_in_its_result_and_killed() {
    require_cgroups();
    let (client, _, _) = stdio_client(&["--structured"]).await;
    for tty in [false, true] {
        let bg = marker();
        // (On a terminal the hangup at the exit would kill it: it ignores SIGHUP, as nohup.)
        let r = call(
            &client,
            "exec_command",
            json!({"cmd": format!("(trap '' HUP; sleep {bg} &); echo done"), "login": false, "tty": tty}),
        )
        .await;
        assert_eq!(structured(&r)["exit_code"], 0, "{}", text(&r));
        assert_left(&r, &format!("sleep {bg}"));
        wait_all_gone(&[bg], "the job the exited command left").await;
    }
    // A command that leaves nothing says nothing of it.
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "echo alone", "login": false}),
    )
    .await;
    assert!(structured(&r).get("left_running").is_none(), "{r:?}");
    assert!(!text(&r).contains("left running"), "{}", text(&r));
    // Sandboxed, the command's pid namespace ends with it, and its jobs with it.
    let bg = marker();
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": format!("(sleep {bg} &); echo done"), "login": false, "sandbox": "read-only"}),
    )
    .await;
    assert_eq!(structured(&r)["exit_code"], 0, "{}", text(&r));
    assert!(structured(&r).get("left_running").is_none(), "{}", text(&r));
    wait_all_gone(&[bg], "the sandboxed job, with its namespace").await;
    client.cancel().await.unwrap();

    let (codex, _, _) = stdio_client(&["--codex-compat"]).await;
    let bg = marker();
    let r = call(
        &codex,
        "exec_command",
        json!({"cmd": format!("(sleep {bg} &); echo done"), "login": false}),
    )
    .await;
    assert_eq!(structured(&r)["exit_code"], 0, "{}", text(&r));
    assert!(structured(&r).get("left_running").is_none(), "{r:?}");
    assert!(!text(&r).contains("left running"), "{}", text(&r));
    wait_all_gone(&[bg], "the job, in Codex's dialect too").await;
    codex.cancel().await.unwrap();
}

/// A stored session whose command exits while nobody watches: the exit notice of the next
/// result names what it left running, and that is killed.
#[tokio::test]
async fn an_unwatched_exit_s_notice_names_what_the_command_left_running() {
    require_cgroups();
    let (client, _, _) = stdio_client(&["--structured"]).await;
    let escaper = marker();
    let (id, gate) = crate::helpers::gated_session(&client, &escaping(&escaper, None)).await;
    std::fs::write(&gate, "").unwrap();
    wait_all_gone(
        std::slice::from_ref(&escaper),
        "what the exited command left to be killed",
    )
    .await;
    // The notice comes with the next result once the End is out: asked until it is there.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let notice = loop {
        let r = call(&client, "list_sessions", json!({})).await;
        if let Some(notice) = structured(&r)["exit_notices"][0]["text"].as_str() {
            break notice.to_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no exit notice: {}",
            text(&r)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        notice.starts_with(&format!("Session {id} ("))
            && notice.contains(&format!("sleep {escaper}) running, killed with it")),
        "{notice}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_sigkilled_server_takes_every_descendant_with_it() {
    require_cgroups();
    let (client, _, pid) = stdio_client(&["--structured"]).await;
    let (escaper, stayer) = (marker(), marker());
    call(
        &client,
        "exec_command",
        json!({"cmd": escaping(&escaper, Some(&stayer)), "login": false, "yield_time_ms": 300}),
    )
    .await;
    eventually("both sleeps to run", Duration::from_secs(5), || {
        !procs_with(&escaper).is_empty() && !procs_with(&stayer).is_empty()
    })
    .await;
    // SAFETY: a signal to the server this test started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    wait_all_gone(
        &[escaper, stayer],
        "the last will to kill the session's tree",
    )
    .await;
    drop(client);
}

#[tokio::test]
async fn a_new_server_kills_what_a_dead_uexec_left_in_its_cgroup() {
    let own = require_cgroups();
    // A uexec that is gone: a pid that no longer runs, its cgroup with a process in it.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let left = own.join(format!("uexec.{dead}"));
    let session = left.join("s1");
    std::fs::create_dir_all(&session).unwrap();
    let m = marker();
    let mut orphan = std::process::Command::new("sleep").arg(&m).spawn().unwrap();
    std::fs::write(session.join("cgroup.procs"), orphan.id().to_string()).unwrap();

    let (client, _, _) = stdio_client(&[]).await;
    // It is killed (and reaped here, its parent), and the directory is gone.
    let status = orphan.wait().unwrap();
    assert!(!status.success(), "{status:?}");
    eventually(
        "the dead uexec's cgroup to be removed",
        Duration::from_secs(5),
        || !left.exists(),
    )
    .await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn without_a_cgroup2_mount_sessions_live_on_process_groups() {
    // The server's own mount namespace, with /sys/fs/cgroup covered by an empty tmpfs.
    let place = scratch_dir("no-cgroups");
    let mut cmd = tokio::process::Command::new("unshare");
    cmd.args(["--user", "--map-root-user", "--mount", "sh", "-c"])
        .arg(r#"mount -t tmpfs tmpfs /sys/fs/cgroup && exec "$1" mcp --in-process --structured"#)
        .args(["sh", UEXEC])
        .current_dir(&place)
        .env("HOME", &place);
    let client = Recorder::default()
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap();
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "echo works", "login": false}),
    )
    .await;
    assert_eq!(structured(&r)["exit_code"], 0, "{r:?}");
    assert!(structured(&r)["output"]
        .as_str()
        .unwrap_or("")
        .contains("works"));
    // A terminate still reaches the process group.
    let m = marker();
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": format!("sleep {m} & exec sleep {m}"), "login": false, "yield_time_ms": 300}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    call(&client, "terminate_session", json!({"session_id": id})).await;
    wait_all_gone(&[m], "the process group to die").await;
    client.cancel().await.unwrap();

    // `uexec doctor` there says why there are none, and what that means.
    let out = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "sh", "-c"])
        .arg(r#"mount -t tmpfs tmpfs /sys/fs/cgroup && exec "$1" doctor"#)
        .args(["sh", UEXEC])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("a cgroup v2 per session") && said.contains("NO (no cgroup2 file system"),
        "{said}"
    );
    assert!(said.contains("Sessions live on process groups"), "{said}");
}

/// `uexec doctor` says whether this kernel starts commands straight in their session's
/// cgroup (this project's machines do: x86_64, Linux 5.7 or later), and leaves no cgroup
/// of its probe behind.
#[test]
fn doctor_says_whether_commands_are_born_in_their_session_s_cgroup() {
    let own = require_cgroups();
    let doctor = std::process::Command::new(UEXEC)
        .args(["doctor", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = doctor.id();
    let out = doctor.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["spawn_into_cgroup"]["available"], true, "{v}");
    let probe = own.join(format!("uexec.{pid}.probe"));
    assert!(!probe.exists(), "{} left behind", probe.display());
}
