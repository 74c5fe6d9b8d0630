//! `uexec daemon --status` and `uexec --version`: which daemon runs, of which build, with
//! whose sessions; and no daemon started only to say that none runs.

use std::os::unix::fs::PermissionsExt;

use serde_json::{json, Value};

use crate::helpers::{call, structured};
use crate::place::DaemonPlace;

const ENGINE: &str = env!("CARGO_BIN_EXE_uexec-engine");

fn run(place: &DaemonPlace, args: &[&str]) -> (i32, String, String) {
    let out = place.command(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The build `uexec --version` names.
fn version_build(place: &DaemonPlace, exe: &str) -> String {
    let out = place
        .command_of(std::path::Path::new(exe), &["--version"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    let build = line
        .strip_prefix(&format!("uexec {} (build ", env!("CARGO_PKG_VERSION")))
        .and_then(|rest| rest.strip_suffix(")\n"))
        .unwrap_or_else(|| panic!("{line:?}"));
    assert!(!build.is_empty() && build != "unknown", "{line:?}");
    build.to_owned()
}

#[test]
fn with_no_daemon_the_status_says_so_and_starts_none() {
    let place = DaemonPlace::new("status-none");
    let (code, out, err) = run(&place, &["daemon", "--status"]);
    assert_eq!(code, 3, "{out}{err}");
    assert_eq!(out, "");
    assert_eq!(
        err.trim(),
        format!(
            "uexec: no uexec daemon runs for {}",
            place.socket().display()
        )
    );
    // A socket left by a daemon that was SIGKILLed: nobody listens, none is started.
    let dir = place.socket().parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    drop(std::os::unix::net::UnixListener::bind(place.socket()).unwrap());
    let (code, _, err) = run(&place, &["daemon", "--status", "--json"]);
    assert_eq!(code, 3, "{err}");
    assert_eq!(place.daemon_pid(), None);
    assert!(!dir.join("daemon.lock").exists());
}

#[tokio::test]
async fn the_status_names_the_daemon_its_build_and_the_sessions_of_each_owner() {
    let place = DaemonPlace::new("status");
    let agent = place
        .client(&["--codex-compat", "--owner", "agent-one"])
        .await;
    let r = call(
        &agent,
        "exec_command",
        json!({"cmd": "exec sleep 30", "login": false, "yield_time_ms": 250}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");

    let (code, out, err) = run(&place, &["daemon", "--status", "--json"]);
    assert_eq!(code, 0, "{err}");
    let status: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["pid"].as_u64(), place.daemon_pid().map(u64::from));
    assert_eq!(status["version"], env!("CARGO_PKG_VERSION"));
    // The build --version names is the one the daemon runs (both the front and the engine
    // say the engine's).
    assert_eq!(
        status["build"],
        version_build(&place, crate::helpers::UEXEC)
    );
    assert_eq!(status["build"], version_build(&place, ENGINE));
    assert!(status["uptime_seconds"].is_u64(), "{status}");
    assert_eq!(status["socket"], place.socket().display().to_string());
    let log = status["log_file"]
        .as_str()
        .expect("a started daemon logs to a file");
    assert!(std::path::Path::new(log).is_file(), "{log}");
    assert_eq!(status["sessions"], json!({"agent-one": 1}));

    let (code, text, err) = run(&place, &["daemon", "--status"]);
    assert_eq!(code, 0, "{err}");
    for line in [
        format!("pid: {}", status["pid"]),
        format!(
            "build: {} (this uexec's)",
            status["build"].as_str().unwrap()
        ),
        format!("log: {log}"),
        "sessions: 1".to_owned(),
        "  agent-one: 1".to_owned(),
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
    }

    // Bad input names the flag and changes nothing: the daemon and its session stay.
    let (code, _, err) = run(&place, &["daemon", "--json"]);
    assert_eq!(code, 2);
    assert!(err.contains("--status"), "{err}");
    let (code, _, err) = run(&place, &["daemon", "--status", "--stop"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("'--status' cannot be used with '--stop'"),
        "{err}"
    );
    let (code, out, _) = run(&place, &["daemon", "--status", "--json"]);
    assert_eq!(code, 0);
    let again: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(again["pid"], status["pid"]);
    assert_eq!(again["sessions"], json!({"agent-one": 1}));

    // Another build (a rebuild, a reinstall) is refused by the daemon, but told its status.
    let other = place.cwd.join("uexec-engine-other");
    std::fs::copy(ENGINE, &other).unwrap();
    let out = place
        .command_of(&other, &["daemon", "--status"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(&format!(
            "build: {} (not this uexec's: `uexec daemon --stop`",
            status["build"].as_str().unwrap()
        )),
        "{text}"
    );

    call(&agent, "terminate_session", json!({"session_id": id})).await;
    agent.cancel().await.unwrap();
}
