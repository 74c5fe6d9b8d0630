//! The engine over the remote backend, against `uexec serve` in this process (127.0.0.1:0).
//! The same scenarios run against the real codex in `codex_interop.rs`; the ones here at the
//! end need to reach into the server (its timers, its shutdown).

use std::time::Duration;

use uexec_client::{ClientError, RemoteBackend};
use uexec_core::ExecRequest;
use uexec_server::ServerConfig;

use crate::helpers::TestServer;
use crate::remote_support::scenarios::{
    self, eventually, exec, pid_alive, poll, rig, run_to_exit, write,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_hi_runs_on_the_server() {
    let server = TestServer::start().await;
    scenarios::echo_hi(&server.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_sent_as_a_bearer_header() {
    let server = TestServer::start_with(ServerConfig::default(), Some("s3cret")).await;
    let refused = RemoteBackend::connect(&server.url(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, ClientError::Connect { ref reason, .. } if reason.contains("401")),
        "{refused:?}"
    );
    let wrong = RemoteBackend::connect(&server.url(), Some("nope".into())).await;
    assert!(wrong.is_err());
    let backend = RemoteBackend::connect(&server.url(), Some("s3cret".into()))
        .await
        .unwrap();
    assert!(backend.session_id().is_some());
    let err = RemoteBackend::connect("http://127.0.0.1:1", None)
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::InvalidUrl { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_command_is_polled_to_completion_with_output_once_and_in_order() {
    let server = TestServer::start().await;
    scenarios::long_command_polled_to_completion(&server.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tty_cat_echoes_what_is_written_and_ends_on_ctrl_d() {
    let server = TestServer::start().await;
    scenarios::tty_cat_write_and_ctrl_d(&server.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_on_pipes_runs_the_trap_or_kills_with_130() {
    let server = TestServer::start().await;
    scenarios::ctrl_c_on_pipes(&server.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_kills_the_remote_process() {
    let server = TestServer::start().await;
    scenarios::terminate_kills_the_process(&server.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_failures_name_the_cause() {
    let server = TestServer::start().await;
    scenarios::spawn_failures_name_the_cause(&server.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_get_the_servers_environment_with_forced_variables() {
    let server = TestServer::start().await;
    scenarios::environment_is_the_servers_with_forced_variables(&server.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_fails_the_session_with_the_first_message() {
    let config = ServerConfig {
        detached_session_ttl: Duration::from_millis(300),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(config, None).await;
    let pid = scenarios::dropped_connection_fails_the_session(server.addr).await;
    // The server ends the detached session, and with it the process.
    eventually(&format!("pid {pid} to die"), || !pid_alive(pid)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_is_resumed_without_losing_or_repeating_output() {
    let server = TestServer::start().await;
    scenarios::dropped_connection_is_resumed(server.addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_the_server_no_longer_retained_is_marked_not_dropped_silently() {
    let config = ServerConfig {
        retained_output_max_bytes: 16 * 1024,
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(config, None).await;
    let out = scenarios::print_while_disconnected(server.addr, 20_000).await;
    assert!(
        out.starts_with("one\n\n[… "),
        "{}",
        &out[..out.len().min(300)]
    );
    assert!(out.contains(" chunks of output lost: "), "{}", &out[..300]);
    assert!(out.ends_with("\n19999\n20000\nthree\n"));
    assert!(
        !out.contains("\ntwo\n"),
        "the start of the flood was evicted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_jobs_die_once_the_exit_is_reported() {
    // `kill_leftovers` is a `process/terminate` after the exit; uexec serve then kills what is
    // left of the group (codex 0.171 leaves it running).
    let server = TestServer::start().await;
    let rig = rig(&server.url()).await;
    let cmd = "sleep 1000 >/dev/null 2>&1 & echo pid=$!";
    let (out, last) = run_to_exit(&rig.store, exec(cmd, 2000)).await;
    assert_eq!(last.exit_code(), Some(0), "{last:?}");
    let pid: u32 = out.trim().trim_start_matches("pid=").parse().unwrap();
    eventually(&format!("background job {pid} to die"), || !pid_alive(pid)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_the_server_forgot_is_marked_exited_on_write() {
    let server = TestServer::start().await;
    let rig = rig(&server.url()).await;
    let req = ExecRequest {
        tty: Some(true),
        ..exec("cat", 500)
    };
    let id = rig
        .store
        .exec_command(req)
        .await
        .unwrap()
        .session_id()
        .unwrap();
    // The server ends every session: its processes are killed and forgotten, no event is
    // pushed to the still-open connection.
    server.server.shutdown();
    let s = rig.store.write_stdin(write(id, "x", 500)).await.unwrap();
    assert_eq!((s.session_id(), s.exit_code()), (None, None), "{s:?}");
    assert_eq!(
        rig.store.write_stdin(poll(id, 250)).await.unwrap_err(),
        uexec_core::ExecError::UnknownProcess(id)
    );
}
