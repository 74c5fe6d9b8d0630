//! A task's result promises only what is on disk (issue 38 §5): the transcript of a session
//! watched by a task stopped at its full disk, and the result that woke the model still said
//! the transcript had every byte the command printed. It names where the transcript stopped
//! and why, as every other result does. The disk is a 1 MiB tmpfs only the server sees: it
//! runs as root of a user namespace in a mount namespace of its own.

use std::process::Stdio;

use serde_json::json;

use crate::helpers::{scratch_dir, UEXEC};
use crate::raw_mcp::{meta, tasks_caps, text_of, Raw};

/// A raw client of `uexec mcp --in-process` whose transcripts go to a tmpfs of `size`.
fn server_on_a_small_tmpfs(size: &str) -> Raw {
    let probe = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "true"])
        .stderr(Stdio::piped())
        .output()
        .expect("unshare (util-linux) runs");
    assert!(
        probe.status.success(),
        "this test needs user namespaces: {}",
        String::from_utf8_lossy(&probe.stderr).trim()
    );
    let place = scratch_dir("tasks-full-disk");
    let mount = place.join("mnt");
    std::fs::create_dir_all(&mount).unwrap();
    std::fs::create_dir_all(place.join("home")).unwrap();
    let mut cmd = tokio::process::Command::new("unshare");
    cmd.args(["--user", "--map-root-user", "--mount", "sh", "-c"])
        .arg(r#"mount -t tmpfs -o "size=$1,mode=0700" tmpfs "$2" && exec "$3" mcp --in-process --transcripts-dir "$2/sessions""#)
        .args(["sh", size])
        .arg(&mount)
        .arg(UEXEC)
        .current_dir(&place)
        .env("HOME", place.join("home"));
    Raw::of(cmd)
}

#[tokio::test]
async fn a_task_s_result_names_where_the_transcript_stopped_on_a_full_disk() {
    let mut raw = server_on_a_small_tmpfs("1m");
    // About 4.6 MB once the gate opens: the transcript stops near 1 MiB.
    let gate = scratch_dir("tasks-full-disk-gate").join("go");
    let cmd = format!(
        "echo first; while [ ! -e '{}' ]; do sleep 0.02; done; seq 1 700000",
        gate.display()
    );
    let created = raw
        .request(
            "tools/call",
            json!({"_meta": meta(tasks_caps()), "name": "exec_command",
                   "arguments": {"background": true, "cmd": cmd, "login": false,
                                 "yield_time_ms": 250}}),
        )
        .await;
    let task = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    std::fs::write(&gate, "").unwrap();
    let done = raw
        .task_until(tasks_caps(), &task, |got| {
            ["completed", "failed", "cancelled"].contains(&got["status"].as_str().unwrap_or(""))
        })
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    let text = text_of(&done["result"]);
    let first = text.lines().next().unwrap_or_default();
    assert!(first.contains("exited with code 0"), "{text}");
    // Not every byte: where the transcript stopped, and why.
    assert!(!text.contains("every byte"), "{text}");
    let at: u64 = first
        .split("the transcript stopped at byte ")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("where the transcript stopped: {text}"));
    assert!(at > 0 && at <= 1 << 20, "stopped at {at}: {text}");
    assert!(
        first.contains(&format!(
            "the transcript stopped at byte {at}: No space left on device; what came after is lost)"
        )),
        "{text}"
    );
    raw.close().await;
}
