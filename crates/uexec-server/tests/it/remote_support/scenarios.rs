//! The engine over a [`RemoteBackend`], scenario by scenario. Each takes the address of an
//! exec server (in-process `uexec serve`, or the real codex), builds a store whose `remote`
//! environment runs there, and checks what a caller of `exec_command` / `write_stdin` sees.
//! Every server must pass every scenario; both run on this machine, so a scenario may also
//! look at `/proc` and at files the command touches.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use uexec_client::{ClientConfig, RemoteBackend};
use uexec_core::backend::{Backend, BackendErrorKind, EnvMode, Placement, Program, SpawnSpec};
use uexec_core::{
    EndStatus, EventKind, EventStream, ExecError, ExecRequest, LocalBackend, SessionStore,
    Snapshot, StoreConfig, WriteRequest,
};

use super::proxy::{Admission, TcpProxy};

/// The store's name of the remote environment.
pub const REMOTE: &str = "remote";
/// Deadline of every wait.
pub const WAIT: Duration = Duration::from_secs(20);
/// Large enough for every output of these scenarios to come back untruncated.
const MAX_TOKENS: i64 = 100_000;

/// Quick reconnects, quick gap fills.
pub fn client_config() -> ClientConfig {
    ClientConfig {
        request_timeout: Duration::from_secs(10),
        reconnect_attempts: 4,
        reconnect_backoff: Duration::from_millis(20),
        gap_fill_delay: Duration::from_millis(50),
        ..ClientConfig::default()
    }
}

/// A store whose `remote` environment is a remote backend on `url`.
pub struct Rig {
    pub store: Arc<SessionStore>,
    pub backend: Arc<RemoteBackend>,
}

pub async fn rig(url: &str) -> Rig {
    let backend = RemoteBackend::connect_with(url, None, client_config())
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
    let config = StoreConfig {
        deterministic_ids: true,
        output_token_policy_max: MAX_TOKENS as u64,
        ..StoreConfig::default()
    };
    let remote: Arc<dyn Backend> = backend.clone();
    let environments = HashMap::from([(REMOTE.to_string(), remote)]);
    let store = SessionStore::with_environments(Arc::new(LocalBackend), config, environments);
    Rig { store, backend }
}

/// What a backend is asked to run directly: `argv` in `/`, pipes, an empty environment.
pub fn spawn_spec(argv: &[&str]) -> SpawnSpec {
    SpawnSpec {
        program: Program::Argv {
            argv: argv.iter().map(|a| a.to_string()).collect(),
        },
        arg0: None,
        cwd: PathBuf::from("/"),
        env: Default::default(),
        env_mode: EnvMode::Exact,
        tty: false,
        pipe_stdin: false,
        one_stream: false,
        passed_fd: None,
        launcher: None,
        limits: Default::default(),
    }
}

pub fn exec(cmd: &str, yield_ms: i64) -> ExecRequest {
    ExecRequest {
        cmd: cmd.into(),
        login: Some(false),
        yield_time_ms: Some(yield_ms),
        max_output_tokens: Some(MAX_TOKENS),
        environment_id: Some(REMOTE.into()),
        ..ExecRequest::default()
    }
}

pub fn poll(session_id: i32, yield_ms: i64) -> WriteRequest {
    write(session_id, "", yield_ms)
}

pub fn write(session_id: i32, chars: &str, yield_ms: i64) -> WriteRequest {
    WriteRequest {
        session_id,
        chars: chars.into(),
        yield_time_ms: Some(yield_ms),
        max_output_tokens: Some(MAX_TOKENS),
        ..WriteRequest::default()
    }
}

/// Polls until the session exits; all output and the last snapshot.
pub async fn collect(store: &Arc<SessionStore>, first: Snapshot) -> (String, Snapshot) {
    let mut out = first.output.clone();
    let mut last = first;
    let deadline = tokio::time::Instant::now() + WAIT;
    while let Some(id) = last.session_id() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "session {id} did not exit; output so far: {out}"
        );
        last = store.write_stdin(poll(id, 5000)).await.expect("poll");
        out.push_str(&last.output);
    }
    (out, last)
}

/// Runs a command and polls it until it exits (a busy machine may take longer than the
/// first window); all output and the last snapshot.
pub async fn run_to_exit(store: &Arc<SessionStore>, req: ExecRequest) -> (String, Snapshot) {
    let first = store.exec_command(req).await.expect("exec_command");
    collect(store, first).await
}

/// Polls a running session until its output (accumulated in `out`) contains `needle`.
pub async fn poll_until(store: &Arc<SessionStore>, id: i32, out: &mut String, needle: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !out.contains(needle) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {needle:?} from session {id}; output so far: {out}"
        );
        let s = store.write_stdin(poll(id, 5000)).await.expect("poll");
        out.push_str(&s.output);
        assert!(s.session_id().is_some(), "session {id} exited early: {out}");
    }
}

/// Waits for `check` to hold (conditions outside the engine: /proc, files).
pub async fn eventually(what: &str, check: impl FnMut() -> bool) {
    crate::helpers::eventually_within(what, WAIT, check).await;
}

/// The End event of a session.
pub async fn end_of(events: &mut EventStream, session_id: i32) -> EventKind {
    let wait = async {
        while let Some(event) = events.recv().await {
            if event.session_id == session_id && matches!(event.kind, EventKind::End { .. }) {
                return event.kind.clone();
            }
        }
        panic!("the event stream ended before session {session_id}'s End");
    };
    tokio::time::timeout(WAIT, wait)
        .await
        .unwrap_or_else(|_| panic!("no End for session {session_id}"))
}

pub use crate::helpers::pid_alive;

/// A fresh empty directory for files a command and the test use to take turns.
pub fn scratch_dir(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "uexec-remote-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn touch(path: &Path) {
    std::fs::write(path, b"").unwrap();
}

/// The pid a command printed as `pid=N`, polling until it is there.
/// Starts a long `sleep` that first prints its pid; returns the session id and that pid.
async fn start_sleeper(store: &Arc<SessionStore>) -> (i32, u32) {
    let s = store
        .exec_command(exec("echo pid=$$; exec sleep 1000", 500))
        .await
        .unwrap();
    printed_pid(store, &s).await
}

async fn printed_pid(store: &Arc<SessionStore>, first: &Snapshot) -> (i32, u32) {
    let id = first.session_id().expect("the command runs on");
    let mut out = first.output.clone();
    poll_until(store, id, &mut out, "\n").await;
    let pid = out
        .lines()
        .find_map(|l| l.strip_prefix("pid="))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in {out:?}"));
    (id, pid)
}

pub async fn echo_hi(url: &str) {
    let rig = rig(url).await;
    // Every default: login shell, the server's shell and cwd, a 10 s window.
    let req = ExecRequest {
        cmd: "echo hi".into(),
        environment_id: Some(REMOTE.into()),
        ..ExecRequest::default()
    };
    let (out, last) = run_to_exit(&rig.store, req).await;
    assert_eq!(last.exit_code(), Some(0), "{last:?}");
    assert_eq!(out, "hi\n");
}

pub async fn long_command_polled_to_completion(url: &str) {
    let rig = rig(url).await;
    let cmd = "for i in 1 2 3 4 5 6; do echo line-$i; sleep 0.1; done; seq 1 20000";
    let s = rig.store.exec_command(exec(cmd, 250)).await.unwrap();
    assert!(
        s.session_id().is_some(),
        "still running after 250 ms: {s:?}"
    );
    let (out, last) = collect(&rig.store, s).await;
    assert_eq!(last.exit_code(), Some(0));
    let expected: String = (1..=6)
        .map(|i| format!("line-{i}\n"))
        .chain((1..=20_000).map(|i| format!("{i}\n")))
        .collect();
    assert!(
        out == expected,
        "output differs: {} bytes, expected {}; starts {:?}",
        out.len(),
        expected.len(),
        &out[..out.len().min(200)]
    );
}

pub async fn tty_cat_write_and_ctrl_d(url: &str) {
    let rig = rig(url).await;
    let req = ExecRequest {
        tty: Some(true),
        ..exec("cat", 500)
    };
    let s = rig.store.exec_command(req).await.unwrap();
    let id = s.session_id().expect("cat waits for input");
    let mut out = rig
        .store
        .write_stdin(write(id, "hello\n", 500))
        .await
        .unwrap()
        .output;
    // The terminal's echo, then cat's copy.
    let deadline = tokio::time::Instant::now() + WAIT;
    while out.matches("hello").count() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "{out:?}");
        out.push_str(&rig.store.write_stdin(poll(id, 5000)).await.unwrap().output);
    }
    let e = rig
        .store
        .write_stdin(write(id, "\u{4}", 2000))
        .await
        .unwrap();
    let (_, last) = collect(&rig.store, e).await;
    assert_eq!(last.exit_code(), Some(0));
}

pub async fn ctrl_c_on_pipes(url: &str) {
    let rig = rig(url).await;
    let cases = [
        (
            "trap 'echo INT-TRAP; exit 42' INT; echo READY; while true; do sleep 0.1; done",
            42,
        ),
        ("echo READY; exec sleep 30", 130),
    ];
    for (cmd, code) in cases {
        let s = rig.store.exec_command(exec(cmd, 500)).await.unwrap();
        let id = s.session_id().expect("running");
        let mut out = s.output.clone();
        poll_until(&rig.store, id, &mut out, "READY").await;
        let w = rig
            .store
            .write_stdin(write(id, "\u{3}", 2000))
            .await
            .unwrap();
        let (rest, last) = collect(&rig.store, w).await;
        assert_eq!(last.exit_code(), Some(code), "{cmd}: {out}{rest}");
    }
}

pub async fn terminate_kills_the_process(url: &str) {
    let rig = rig(url).await;
    let mut events = rig.store.subscribe();
    let (id, pid) = start_sleeper(&rig.store).await;
    assert!(pid_alive(pid));
    rig.store.terminate(id).unwrap();
    let err = rig.store.write_stdin(poll(id, 5000)).await.unwrap_err();
    assert_eq!(err, ExecError::UnknownProcess(id));
    eventually(&format!("pid {pid} to die"), || !pid_alive(pid)).await;
    let EventKind::End { failure, .. } = end_of(&mut events, id).await else {
        unreachable!()
    };
    assert_eq!(failure, None, "a terminated session is not a failed one");
}

pub async fn spawn_failures_name_the_cause(url: &str) {
    let rig = rig(url).await;
    let missing_shell = ExecRequest {
        shell: Some("/nonexistent/uexec-shell".into()),
        ..exec("true", 250)
    };
    let err = rig.store.exec_command(missing_shell).await.unwrap_err();
    assert!(
        matches!(err, ExecError::Spawn(ref m) if !m.is_empty()),
        "{err:?}"
    );
    let missing_dir = ExecRequest {
        workdir: Some("/nonexistent-uexec-dir".into()),
        ..exec("true", 250)
    };
    let err = rig.store.exec_command(missing_dir).await.unwrap_err();
    assert!(matches!(err, ExecError::Spawn(_)), "{err:?}");
    // The backend maps the server's `spawnNotFound` to NotFound.
    let spec = spawn_spec(&["/nonexistent/uexec-program"]);
    let err = rig.backend.spawn(spec).await.unwrap_err();
    assert_eq!(err.kind, BackendErrorKind::NotFound, "{err:?}");
    // Nothing else broke.
    let (out, last) = run_to_exit(&rig.store, exec("echo ok", 2000)).await;
    assert_eq!((last.exit_code(), out.as_str()), (Some(0), "ok\n"));
}

pub async fn environment_is_the_servers_with_forced_variables(url: &str) {
    let rig = rig(url).await;
    let Placement::Remote { cwd: Some(cwd), .. } = rig.backend.placement() else {
        panic!("no remote cwd: {:?}", rig.backend.environment());
    };
    let cmd = r#"echo "$UEXEC|$NO_COLOR|$TERM|$PAGER|${HOME:+home}|$(pwd)""#;
    let (out, last) = run_to_exit(&rig.store, exec(cmd, 2000)).await;
    assert_eq!(last.exit_code(), Some(0));
    assert_eq!(out, format!("1|1|dumb|cat|home|{}\n", cwd.display()));
}

/// Cuts the connection for good; returns the pid of the command that ran through it.
pub async fn dropped_connection_fails_the_session(upstream: SocketAddr) -> u32 {
    let proxy = TcpProxy::start(upstream).await;
    let rig = rig(&proxy.url()).await;
    let mut events = rig.store.subscribe();
    let (id, pid) = start_sleeper(&rig.store).await;

    proxy.admit(Admission::Refuse);
    proxy.cut();
    let err = rig.store.write_stdin(poll(id, 10_000)).await.unwrap_err();
    let ExecError::ProcessFailed { message, .. } = &err else {
        panic!("expected a failed process, got {err:?}");
    };
    let prefix = format!("connection to {} lost: ", proxy.url());
    assert!(message.starts_with(&prefix), "{message}");
    let EventKind::End {
        status,
        exit_code,
        failure,
        aggregated_output,
        ..
    } = end_of(&mut events, id).await
    else {
        unreachable!()
    };
    assert_eq!(status, EndStatus::Failed);
    assert_eq!(exit_code, Some(-1));
    assert_eq!(failure.as_ref(), Some(message), "the first failure is kept");
    assert!(aggregated_output.ends_with(message.as_str()));
    assert_eq!(
        rig.store.write_stdin(poll(id, 250)).await.unwrap_err(),
        ExecError::UnknownProcess(id)
    );

    // Spawns fail while the server is unreachable, and work again once it is back.
    let err = rig.store.exec_command(exec("true", 250)).await.unwrap_err();
    assert!(matches!(err, ExecError::Spawn(_)), "{err:?}");
    proxy.admit(Admission::Forward);
    let (out, last) = run_to_exit(&rig.store, exec("echo back", 2000)).await;
    assert_eq!((last.exit_code(), out.as_str()), (Some(0), "back\n"));
    pid
}

/// Breaks the connection while the command prints; nothing may be lost or repeated.
pub async fn dropped_connection_is_resumed(upstream: SocketAddr) {
    let expected_middle: String = (1..=3000).map(|i| format!("{i}\n")).collect();
    let out = print_while_disconnected(upstream, 3000).await;
    assert!(
        out == format!("one\ntwo\n{expected_middle}three\n"),
        "{out}"
    );
}

/// Runs a command that prints `one`, then (while the connection is down) `two` and `seq 1
/// lines`, then (after the resume) `three`; returns everything the calls returned.
pub async fn print_while_disconnected(upstream: SocketAddr, lines: u32) -> String {
    let proxy = TcpProxy::start(upstream).await;
    let rig = rig(&proxy.url()).await;
    let dir = scratch_dir("resume");
    let (go, printed, finish) = (dir.join("go"), dir.join("printed"), dir.join("finish"));
    let cmd = format!(
        "echo one; until [ -e {go} ]; do sleep 0.02; done; echo two; seq 1 {lines}; touch {printed}; \
         until [ -e {finish} ]; do sleep 0.02; done; echo three",
        go = go.display(),
        printed = printed.display(),
        finish = finish.display(),
    );
    let s = rig.store.exec_command(exec(&cmd, 250)).await.unwrap();
    let id = s.session_id().expect("waits for its go");
    let mut out = s.output.clone();
    // Watch without taking output (an empty poll of a running process lasts 5 s).
    let printed_so_far = |needle: &str| {
        rig.store
            .recent_output(id, usize::MAX)
            .is_some_and(|o| o.contains(needle))
    };
    eventually("one", || printed_so_far("one\n")).await;

    // New connections hang in their handshake until the command printed its middle part.
    proxy.admit(Admission::Hold);
    proxy.cut();
    touch(&go);
    eventually("the middle part to be printed", || printed.exists()).await;
    proxy.admit(Admission::Forward);

    // What was printed while disconnected comes back through `process/read`; what follows
    // comes as notifications again.
    eventually("the middle part after the resume", || {
        printed_so_far(&format!("\n{lines}\n"))
    })
    .await;
    touch(&finish);
    let (rest, last) = collect(
        &rig.store,
        rig.store.write_stdin(poll(id, 5000)).await.unwrap(),
    )
    .await;
    out.push_str(&rest);
    assert_eq!(last.exit_code(), Some(0), "{out}");
    assert!(proxy.accepted() >= 2, "the backend reconnected");
    let _ = std::fs::remove_dir_all(&dir);
    out
}
