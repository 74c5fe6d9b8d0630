//! `uexec doctor` on the daemon: whether one runs for this user, whether it is of this build,
//! its log and where transcripts go; and it starts none to say so.

use serde_json::Value;

use crate::place::DaemonPlace;

const ENGINE: &str = env!("CARGO_BIN_EXE_uexec-engine");

/// `uexec doctor ARGS` by `exe` in `place`, with the state directory under its HOME.
fn doctor(place: &DaemonPlace, exe: &str, args: &[&str]) -> String {
    let mut all = vec!["doctor"];
    all.extend_from_slice(args);
    let out = place
        .command_of(std::path::Path::new(exe), &all)
        .env("XDG_STATE_HOME", place.cwd.join("home/.local/state"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn has_line(text: &str, line: &str) {
    assert!(
        text.lines().any(|l| l == line),
        "{line:?} is not a line of\n{text}"
    );
}

#[tokio::test]
async fn doctor_says_whether_the_daemon_runs_of_which_build_its_log_and_the_transcripts() {
    let place = DaemonPlace::new("doctor");
    let state = place.cwd.join("home/.local/state/uexec");
    let socket = place.socket().display().to_string();

    // None runs: said, with where one would log, and none is started to say it.
    let text = doctor(&place, crate::helpers::UEXEC, &[]);
    has_line(
        &text,
        "uexec daemon (this user's sessions, for people and agents):",
    );
    has_line(&text, &format!("  socket: {socket}"));
    has_line(
        &text,
        "  running: no (the next `uexec run` or `uexec mcp` starts one)",
    );
    has_line(
        &text,
        &format!(
            "  log: {} (where a daemon started on demand writes)",
            state.join("daemon.log").display()
        ),
    );
    has_line(
        &text,
        &format!(
            "  transcripts: {} (unless --transcripts-dir says otherwise)",
            state.join("sessions").display()
        ),
    );
    assert_eq!(place.daemon_pid(), None, "doctor started a daemon");
    // The sandbox's part is still there, first.
    assert!(
        text.starts_with("uexec sandbox support on this machine:"),
        "{text}"
    );

    // One runs (an agent's `uexec mcp --daemon` started it): its pid, this build, its log.
    let agent = place.client(&[]).await;
    let status = place.status().expect("a daemon runs");
    let pid = place.daemon_pid().expect("its pid");
    let log = status["log_file"].as_str().expect("it logs to a file");
    let text = doctor(&place, crate::helpers::UEXEC, &[]);
    assert!(
        text.lines()
            .any(|l| l.starts_with(&format!("  running: yes (pid {pid}, up "))),
        "{text}"
    );
    has_line(
        &text,
        &format!(
            "  same build as this uexec: yes ({})",
            status["build"].as_str().unwrap()
        ),
    );
    has_line(&text, &format!("  log: {log}"));

    let json: Value = serde_json::from_str(&doctor(&place, ENGINE, &["--json"])).unwrap();
    let daemon = &json["daemon"];
    assert_eq!(daemon["running"], true, "{json}");
    assert_eq!(daemon["pid"], pid);
    assert_eq!(daemon["same_build"], true);
    assert_eq!(daemon["build"], status["build"]);
    assert_eq!(daemon["log_file"], log);
    assert_eq!(daemon["socket"], socket.as_str());
    assert_eq!(
        daemon["transcripts_dir"],
        state.join("sessions").display().to_string()
    );
    assert!(json["seccomp"]["available"].is_boolean(), "{json}");

    // Another build of uexec (a rebuild, a reinstall) is told it is not the daemon's, and
    // what to do.
    let other = place.cwd.join("uexec-engine-other");
    std::fs::copy(ENGINE, &other).unwrap();
    let text = doctor(&place, other.to_str().unwrap(), &[]);
    assert!(
        text.contains(&format!(
            "  same build as this uexec: NO (it runs {} build {}, this uexec is",
            env!("CARGO_PKG_VERSION"),
            status["build"].as_str().unwrap()
        )),
        "{text}"
    );
    assert!(
        text.contains("`uexec daemon --stop`, and the next client starts a new one)"),
        "{text}"
    );

    agent.cancel().await.unwrap();
    place.stop();
}

/// A daemon a person started with its own `--transcripts-dir`: doctor names that directory,
/// the one the running daemon writes, not the default.
#[tokio::test(flavor = "multi_thread")]
async fn doctor_names_the_running_daemons_own_transcripts_dir() {
    let place = DaemonPlace::new("doctor-transcripts");
    let own = place.cwd.join("kept-here");
    let mut daemon = place
        .command(&["daemon", "--transcripts-dir", own.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let socket = place.socket();
    crate::helpers::eventually(
        "the daemon to listen",
        std::time::Duration::from_secs(10),
        || socket.exists(),
    )
    .await;
    let text = doctor(&place, crate::helpers::UEXEC, &[]);
    has_line(
        &text,
        &format!("  transcripts: {} (the running daemon's)", own.display()),
    );
    let json: Value = serde_json::from_str(&doctor(&place, ENGINE, &["--json"])).unwrap();
    assert_eq!(json["daemon"]["transcripts_dir"], own.display().to_string());
    place.stop();
    let _ = daemon.wait();
}
