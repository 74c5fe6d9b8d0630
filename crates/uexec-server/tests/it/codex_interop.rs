//! The engine over the remote backend, against the real `codex exec-server` 0.171.0 (npm
//! `@openai/codex`), found through `$UEXEC_CODEX_BIN`. Without the variable each test prints
//! a notice and passes, except under `CI`, where it fails.

use crate::remote_support::peer::CodexPeer;
use crate::remote_support::scenarios;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_echo_hi() {
    let Some(codex) = CodexPeer::start().await else {
        return;
    };
    scenarios::echo_hi(&codex.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_a_long_command_is_polled_to_completion_with_output_once_and_in_order() {
    let Some(codex) = CodexPeer::start().await else {
        return;
    };
    scenarios::long_command_polled_to_completion(&codex.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_a_tty_cat_echoes_what_is_written_and_ends_on_ctrl_d() {
    let Some(codex) = CodexPeer::start().await else {
        return;
    };
    scenarios::tty_cat_write_and_ctrl_d(&codex.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_ctrl_c_on_pipes_runs_the_trap_or_kills_with_130() {
    let Some(codex) = CodexPeer::start().await else {
        return;
    };
    scenarios::ctrl_c_on_pipes(&codex.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_terminate_kills_the_remote_process() {
    let Some(codex) = CodexPeer::start().await else {
        return;
    };
    scenarios::terminate_kills_the_process(&codex.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_spawn_failures_name_the_cause() {
    let Some(codex) = CodexPeer::start().await else {
        return;
    };
    scenarios::spawn_failures_name_the_cause(&codex.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_commands_get_the_servers_environment_with_forced_variables() {
    let Some(codex) = CodexPeer::start().await else {
        return;
    };
    scenarios::environment_is_the_servers_with_forced_variables(&codex.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_a_dropped_connection_fails_the_session_with_the_first_message() {
    let Some(codex) = CodexPeer::start().await else {
        return;
    };
    let pid = scenarios::dropped_connection_fails_the_session(codex.addr).await;
    // Codex keeps a detached session ~80 s; stopping codex ends it now.
    drop(codex);
    scenarios::eventually(&format!("pid {pid} to die"), || !scenarios::pid_alive(pid)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_a_dropped_connection_is_resumed_without_losing_or_repeating_output() {
    let Some(codex) = CodexPeer::start().await else {
        return;
    };
    scenarios::dropped_connection_is_resumed(codex.addr).await;
}
