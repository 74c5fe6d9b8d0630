//! The engine's side of the sandbox launcher, with a stand-in launcher (a shell script that
//! answers the probe and runs what follows `--`): which start a sandboxed command gets.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use uexec_core::confine::SandboxConfig;
use uexec_core::policy::Profile;
use uexec_core::{ExecRequest, LocalBackend, SessionStore, Snapshot, StoreConfig, WriteRequest};
use uexec_sandbox::{Launcher, Sandbox};

/// A store on the local backend whose sandbox is `sandbox`.
fn store_with(sandbox: Arc<Sandbox>) -> Arc<SessionStore> {
    let config = StoreConfig {
        cwd: std::env::temp_dir(),
        deterministic_ids: true,
        default_shell: Some("/bin/bash".into()),
        sandbox: SandboxConfig {
            confinement: Some(sandbox),
            ..SandboxConfig::default()
        },
        ..StoreConfig::default()
    };
    SessionStore::new(Arc::new(LocalBackend), config)
}

/// `exec_command` with `login: false` and the given window.
fn exec(cmd: &str, yield_ms: i64) -> ExecRequest {
    ExecRequest {
        cmd: cmd.into(),
        login: Some(false),
        yield_time_ms: Some(yield_ms),
        ..ExecRequest::default()
    }
}

/// Polls until the session exits; all its output and the last snapshot.
async fn collect(store: &Arc<SessionStore>, first: Snapshot) -> (String, Snapshot) {
    let mut out = first.output.clone();
    let mut last = first;
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Some(id) = last.session_id() {
        assert!(
            Instant::now() < deadline,
            "session {id} did not exit: {out}"
        );
        let poll = WriteRequest {
            session_id: id,
            yield_time_ms: Some(5000),
            ..WriteRequest::default()
        };
        last = store.write_stdin(poll).await.expect("poll");
        out.push_str(&last.output);
    }
    (out, last)
}

/// Waits for `check` to hold, failing after `timeout`.
async fn eventually(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A stand-in for `uexec __sandbox-exec` at a fresh path: `--probe` says every layer works,
/// `--warm` appends `warm PID` to `log` and exits at once (a launcher that dies waiting),
/// anything else appends `cold` and execs the command after `--`.
fn fake_launcher(dir: &Path, log: &Path) -> PathBuf {
    stand_in(dir, log, "echo warm $$ >> {log}; exit 0")
}

/// The stand-in with `warm` as its `--warm` branch (`{log}` stands for the log's path).
fn stand_in(dir: &Path, log: &Path, warm: &str) -> PathBuf {
    let warm = warm.replace("{log}", &log.display().to_string());
    let path = dir.join("fake-uexec");
    let script = format!(
        "#!/bin/sh\n\
         [ \"$1\" = __sandbox-exec ] || exit 126\n\
         shift\n\
         case \"$1\" in\n\
           --probe) printf 'namespaces ok\\nnetwork-namespace ok\\nlandlock ok\\nseccomp ok\\n'; exit 0;;\n\
           --warm) {1};;\n\
         esac\n\
         while [ \"$1\" != -- ]; do shift; done\n\
         shift\n\
         echo cold >> {0}\n\
         exec \"$@\"\n",
        log.display(),
        warm
    );
    std::fs::write(&path, script).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).unwrap();
    path
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "uexec-sandbox-launcher-{name}-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The pids of the launchers started ahead, as the log says (`warm PID` lines).
fn warm_pids(log: &str) -> Vec<u32> {
    log.lines()
        .filter_map(|l| l.strip_prefix("warm "))
        .filter_map(|pid| pid.trim().parse().ok())
        .collect()
}

/// Whether `pid` is gone: exited and reaped (a zombie still has its /proc entry). Other
/// tests of this process may leave zombies of their own: only these pids are looked at.
fn reaped(pid: u32) -> bool {
    !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

async fn run_sandboxed(launcher: PathBuf, cold_launcher: bool, times: usize) {
    let launcher = Launcher::open(launcher).unwrap();
    let sandbox = if cold_launcher {
        Sandbox::cold(launcher)
    } else {
        Sandbox::new(launcher)
    };
    let store = store_with(sandbox);
    for _ in 0..times {
        let mut request = exec("echo \"ran under $UEXEC_SANDBOX\"", 10_000);
        request.sandbox = Some(Profile::ReadOnly);
        let first = store.exec_command(request).await.unwrap();
        let (out, last) = collect(&store, first).await;
        assert_eq!(last.exit_code(), Some(0), "{out}");
        assert!(out.contains("ran under read-only"), "{out}");
    }
}

#[tokio::test]
async fn a_launcher_that_dies_waiting_leaves_the_command_to_a_cold_start_and_no_zombie() {
    let dir = scratch("dies");
    let log = dir.join("log");
    run_sandboxed(fake_launcher(&dir, &log), false, 3).await;
    // Every command ran, each through a cold start of the launcher. The first was handed to
    // the one started ahead at the probe, which had died (it said so first); later ones
    // may find the place already emptied by the reaper.
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("cold").count(), 3, "{text}");
    assert!(text.starts_with("warm "), "{text}");
    // The launchers started ahead and dead at once were reaped, not left as zombies (the
    // last one too, which no spawn came to take).
    eventually("the dead launchers reaped", Duration::from_secs(5), || {
        let text = std::fs::read_to_string(&log).unwrap();
        warm_pids(&text).into_iter().all(reaped)
    })
    .await;
}

#[tokio::test]
async fn cold_launcher_execs_the_launcher_for_each_command() {
    let dir = scratch("cold");
    let log = dir.join("log");
    run_sandboxed(fake_launcher(&dir, &log), true, 2).await;
    // None started ahead.
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "cold\n".repeat(2));
}

#[tokio::test]
async fn a_launcher_that_never_answers_is_killed_and_the_command_starts_cold() {
    let dir = scratch("mute");
    let log = dir.join("log");
    // Started ahead, it never reads its launch: the engine gives up on it after 2 s.
    let launcher = stand_in(&dir, &log, "echo warm $$ >> {log}; exec sleep 600");
    run_sandboxed(launcher, false, 1).await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("cold").count(), 1, "{text}");
    assert!(text.starts_with("warm "), "{text}");
    // It was killed and reaped (the next one started ahead sleeps on until its sandbox is
    // dropped, which kills it).
    let mute = warm_pids(&text)[0];
    assert!(reaped(mute), "the mute launcher {mute} is still there");
}
