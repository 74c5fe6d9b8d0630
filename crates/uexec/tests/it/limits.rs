//! Limits of a session's cgroup (`--memory-max`, `--pids-max`, `--cpu-max`, a call's
//! `limits`) on this project's machines, whose cgroup v2 offers none of the memory, pids
//! and cpu controllers (they are bound to v1): every face refuses a limit flag at start-up,
//! naming it and saying why, the daemon refuses a client's, and a call's `limits` is
//! refused, naming the field, with nothing run. What the kernel then does with a limit is
//! not tried here (see docs/src/cgroups.md: the writes and the OOM report are tested against a
//! directory shaped like a cgroup, in `uexec-core`).

use std::process::Stdio;

use serde_json::json;

use crate::helpers::{call, scratch_dir, stdio_client, text, UEXEC};
use crate::place::DaemonPlace as Place;

/// Whether the kernel offers `controller` to this test's cgroup in v2.
fn offered(controller: &str) -> bool {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let own = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("/");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    mounts.lines().any(|line| {
        let Some((before, after)) = line.split_once(" - ") else {
            return false;
        };
        let Some(mountpoint) = before.split(' ').nth(4) else {
            return false;
        };
        let dir = std::path::Path::new(mountpoint).join(own.trim_start_matches('/'));
        after.starts_with("cgroup2 ")
            && std::fs::read_to_string(dir.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|w| w == controller))
    })
}

/// These tests say what a machine without the controllers does.
fn require_no_controllers() {
    for c in ["memory", "pids", "cpu"] {
        assert!(
            !offered(c),
            "this test is for machines whose cgroup v2 offers no {c} controller (this \
             project's: they are bound to v1); here it is offered"
        );
    }
}

fn uexec_out(args: &[&str]) -> std::process::Output {
    let dir = scratch_dir("limits");
    std::process::Command::new(UEXEC)
        .args(args)
        .current_dir(&dir)
        .env("HOME", &dir)
        // A daemon a plain `uexec mcp` would start is this test's, not the user's.
        .env("XDG_RUNTIME_DIR", &dir)
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_limit_flag_the_machine_cannot_apply_stops_every_face_at_its_start_naming_it() {
    require_no_controllers();
    let socket = scratch_dir("limits-daemon").join("d.sock");
    let socket = socket.to_str().unwrap();
    for (args, flag, what) in [
        (
            vec!["mcp", "--in-process", "--memory-max", "512M"],
            "--memory-max",
            "memory",
        ),
        (
            vec!["mcp", "--in-process", "--pids-max", "64"],
            "--pids-max",
            "number of processes",
        ),
        (
            vec!["mcp", "--in-process", "--cpu-max", "0.5"],
            "--cpu-max",
            "CPU time",
        ),
        (
            vec!["daemon", "--socket", socket, "--memory-max", "max"],
            "--memory-max",
            "memory",
        ),
        (
            vec!["serve", "--pids-max", "max"],
            "--pids-max",
            "number of processes",
        ),
    ] {
        let out = uexec_out(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(&format!(
                "{flag}: this machine cannot limit a session's {what}: the"
            )),
            "{args:?}: {err}"
        );
        assert!(
            err.contains("cgroup v1 hierarchy") && err.contains("`uexec doctor`"),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}: it served");
    }
    // `uexec doctor` says the same, before anyone tries.
    let doctor = String::from_utf8(uexec_out(&["doctor"]).stdout).unwrap();
    for flag in ["--memory-max", "--pids-max", "--cpu-max"] {
        assert!(
            doctor.contains(&format!("limits: {flag} (the ")),
            "{doctor}"
        );
    }
    assert!(
        doctor.contains("--memory-max, --pids-max, --cpu-max would be refused at start-up"),
        "{doctor}"
    );
}

#[test]
fn a_bad_limit_value_is_refused_by_name_with_its_units() {
    for (args, said) in [
        (vec!["mcp", "--memory-max", "12Q"], "K, M, G or T"),
        (vec!["mcp", "--memory-max", "64K"], "below the least"),
        (vec!["daemon", "--pids-max", "1"], "below the least"),
        (vec!["serve", "--cpu-max", "0"], "least CPU share"),
        (vec!["mcp", "--cpu-max", "lots"], "number of CPUs"),
    ] {
        let out = uexec_out(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("for '{} <", args[1])) && err.contains(said),
            "{args:?}: {err}"
        );
    }
    // Each face's --help has them under one heading, with their units.
    for face in ["mcp", "daemon", "serve"] {
        let help = String::from_utf8(uexec_out(&[face, "--help"]).stdout).unwrap();
        let at = help
            .find("Limits:")
            .unwrap_or_else(|| panic!("{face}: {help}"));
        let limits = &help[at..];
        for flag in ["--memory-max <BYTES>", "--pids-max <N>", "--cpu-max <CPUS>"] {
            assert!(limits.contains(flag), "{face}: {limits}");
        }
        assert!(limits.contains("K, M, G or T suffix"), "{face}: {limits}");
    }
}

#[tokio::test]
async fn a_call_s_limits_are_refused_by_name_where_they_cannot_be_applied() {
    require_no_controllers();
    let (client, _, _) = stdio_client(&[]).await;
    let dir = scratch_dir("limits-call");
    let ran = dir.join("ran");
    let cmd = format!("touch {}", ran.display());
    for (limits, field) in [
        (json!({"memory_max": "512M"}), "limits.memory_max"),
        (json!({"pids_max": 20}), "limits.pids_max"),
    ] {
        let r = crate::sandbox::exec_error(
            &client,
            json!({"cmd": cmd, "login": false, "limits": limits}),
        )
        .await;
        assert!(
            r.contains(&format!(
                "exec_command failed: invalid arguments: {field}: this machine cannot limit"
            )) && r.contains("`uexec doctor`"),
            "{r}"
        );
        assert!(!ran.exists(), "{field}: the command ran without its limit");
    }
    // Bad values name their field, and so does a CPU limit, which is the server's alone.
    for (limits, field) in [
        (json!({"memory_max": "lots"}), "limits.memory_max"),
        (json!({"pids_max": 0}), "limits.pids_max"),
        (json!({"cpu_max": 1}), "limits.cpu_max"),
    ] {
        let r = crate::sandbox::exec_error(
            &client,
            json!({"cmd": cmd, "login": false, "limits": limits}),
        )
        .await;
        assert!(r.contains(&format!("invalid arguments: {field}: ")), "{r}");
    }
    // Without limits, the command runs.
    let r = call(&client, "exec_command", json!({"cmd": cmd, "login": false})).await;
    assert!(text(&r).contains("exited with code 0"), "{}", text(&r));
    assert!(ran.exists());
    client.cancel().await.unwrap();

    // Codex's dialect has no such argument.
    let (codex, _, _) = stdio_client(&["--codex-compat"]).await;
    let r = crate::sandbox::exec_error(
        &codex,
        json!({"cmd": "true", "login": false, "limits": {"pids_max": 20}}),
    )
    .await;
    assert!(r.contains("invalid arguments: limits: "), "{r}");
    codex.cancel().await.unwrap();
}

#[test]
fn the_daemon_refuses_a_client_s_limits_it_cannot_apply_naming_the_flag() {
    require_no_controllers();
    let place = Place::new("limits");
    let out = place
        .command(&["mcp", "--daemon", "--memory-max", "256M"])
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("--memory-max: this machine cannot limit a session's memory"),
        "{err}"
    );
}
