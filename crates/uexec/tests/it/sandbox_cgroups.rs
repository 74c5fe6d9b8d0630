//! A sandboxed command as an attacker of the cgroup tree (issue 26): it knows another
//! session's cgroup and tries to kill it (`cgroup.kill`), freeze it (`cgroup.freeze`), join
//! it (`cgroup.procs`), or leave its own cgroup for uexec's or the machine's root. Each
//! attempt must fail from inside every sandbox that restricts writes, and the test checks
//! that it could have worked: unsandboxed, the same writes move, freeze and kill. (Here
//! Landlock refuses them: `/sys/fs/cgroup` is no writable root; EACCES.)

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::cgroup_figures::cgroup_of;
use crate::cgroups::require_cgroups;
use crate::helpers::{eventually, marker, procs_with, structured, text, wait_all_gone, Client};
use crate::sandbox::{exec, scratch, server};
use crate::sandbox_attacks::verdicts;

/// The attacks, each printing `NAME ok` or `NAME refused ERR`: argv[1] is the victim's
/// cgroup, argv[2] the cgroup the attacker would leave its own for.
const ATTACKS: &str = r#"
import os, sys
victim, away = sys.argv[1], sys.argv[2]
def attempt(name, path, value):
    try:
        with open(path, "w") as f:
            f.write(value)
        print(name, "ok", flush=True)
    except OSError as e:
        print(name, "refused", e.strerror, flush=True)
attempt("join", victim + "/cgroup.procs", str(os.getpid()))
attempt("leave", away + "/cgroup.procs", str(os.getpid()))
attempt("freeze", victim + "/cgroup.freeze", "1")
attempt("kill", victim + "/cgroup.kill", "1")
"#;

const NAMES: [&str; 4] = ["join", "leave", "freeze", "kill"];

/// A session left running as `sleep MARKER`, and its cgroup.
async fn victim(client: &Client) -> (String, PathBuf) {
    let m = marker();
    let r = exec(
        client,
        json!({"cmd": format!("exec sleep {m}"), "yield_time_ms": 250}),
    )
    .await;
    assert!(structured(&r)["session_id"].is_i64(), "{}", text(&r));
    let mut pid = 0;
    eventually("the victim to run", Duration::from_secs(5), || {
        pid = procs_with(&m).first().copied().unwrap_or(0);
        pid != 0
    })
    .await;
    let dir = cgroup_of(pid);
    assert!(
        dir.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('s')),
        "the victim is in no session cgroup: {}",
        dir.display()
    );
    (m, dir)
}

fn frozen(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.events"))
        .is_ok_and(|t| t.lines().any(|l| l == "frozen 1"))
}

#[tokio::test]
async fn a_sandboxed_command_can_neither_kill_freeze_join_nor_leave_a_cgroup() {
    // The test's own cgroup: outside uexec's tree.
    let outside = require_cgroups();
    let dir = scratch("attack-cgroups");
    let script = dir.join("attacks.py");
    std::fs::write(&script, ATTACKS).unwrap();
    let (client, _) = server(&dir, &["--structured"], &[]).await;
    let attack = |victim: &Path, away: &Path| {
        format!(
            "python3 {} {} {}",
            script.display(),
            victim.display(),
            away.display()
        )
    };

    // Unsandboxed, every write works: the victim is frozen, joined, left and killed.
    let (m, open) = victim(&client).await;
    let away = open.parent().unwrap().to_path_buf();
    let r = exec(&client, json!({"cmd": attack(&open, &away)})).await;
    let got = verdicts(&text(&r), &NAMES);
    assert!(
        got.iter().all(|(_, ok)| *ok),
        "unsandboxed: {got:?}\n{}",
        text(&r)
    );
    wait_all_gone(&[m], "the unsandboxed attack to kill its victim").await;

    // From inside each sandbox, none does; the victim runs on, thawed.
    let (m, target) = victim(&client).await;
    for policy in [
        json!({"sandbox": "read-only"}),
        json!({"sandbox": "workspace-write"}),
        json!({"sandbox": "workspace-write", "network": "off"}),
    ] {
        for away in [target.parent().unwrap(), outside.as_path()] {
            let mut args = policy.clone();
            args["cmd"] = Value::String(attack(&target, away));
            let r = exec(&client, args).await;
            let got = verdicts(&text(&r), &NAMES);
            assert!(
                got.iter().all(|(_, ok)| !*ok),
                "{policy}, leaving for {}: an attack got through: {got:?}\n{}",
                away.display(),
                text(&r)
            );
            assert!(!frozen(&target), "{policy}: the victim was frozen");
            assert!(
                !procs_with(&m).is_empty(),
                "{policy}: the victim was killed"
            );
        }
    }
    client.cancel().await.unwrap();
    wait_all_gone(&[m], "the victim to end with its server").await;
    let _ = std::fs::remove_dir_all(&dir);
}
