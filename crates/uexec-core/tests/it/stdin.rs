//! write_stdin with real processes: PTY writes, Ctrl-C on pipes, the interaction lock.

use uexec_core::{ExecError, ExecRequest};

use crate::helpers::{collect, exec, poll, store, write};

#[tokio::test]
async fn ctrl_c_on_a_pipe_session_runs_the_trap_or_kills_with_130() {
    let store = store();
    let cases = [
        (
            "trap 'echo INT-TRAP; exit 42' INT; echo READY; while true; do sleep 0.1; done",
            42,
        ),
        ("echo READY; exec sleep 30", 130),
    ];
    for (cmd, code) in cases {
        let s = store.exec_command(exec(cmd, 500)).await.unwrap();
        let id = s.session_id().expect("running");
        let mut out = s.output.clone();
        while !out.contains("READY") {
            out.push_str(&store.write_stdin(poll(id, 5000)).await.unwrap().output);
        }
        let w = store.write_stdin(write(id, "\u{3}", 2000)).await.unwrap();
        let (out, last) = collect(&store, w).await;
        assert_eq!(last.exit_code(), Some(code), "{cmd}: {out}");
    }
}

#[tokio::test]
async fn a_pipe_session_refuses_input_and_keeps_running() {
    let store = store();
    let gate = crate::helpers::Gate::new();
    let s = store
        .exec_command(exec(&format!("{}; echo still-here", gate.wait()), 250))
        .await
        .unwrap();
    let id = s.session_id().unwrap();
    let err = store.write_stdin(write(id, "abc", 250)).await.unwrap_err();
    gate.open();
    assert_eq!(err, ExecError::StdinClosed { session_id: id });
    // The engine's words; the MCP face adds Codex's hint (`tools::render::error_text`).
    assert_eq!(err.to_string(), "stdin is closed for this session");
    let (out, last) = collect(&store, store.write_stdin(poll(id, 5000)).await.unwrap()).await;
    assert_eq!(last.exit_code(), Some(0));
    assert!(out.contains("still-here"));
}

#[tokio::test]
async fn a_tty_session_echoes_and_ends_on_ctrl_d() {
    let store = store();
    let req = ExecRequest {
        tty: Some(true),
        ..exec("cat", 500)
    };
    let s = store.exec_command(req).await.unwrap();
    let id = s.session_id().unwrap();
    let mut out = store
        .write_stdin(write(id, "hello\n", 500))
        .await
        .unwrap()
        .output;
    while out.matches("hello").count() < 2 {
        out.push_str(&store.write_stdin(poll(id, 5000)).await.unwrap().output);
    }
    let e = store.write_stdin(write(id, "\u{4}", 2000)).await.unwrap();
    let (_, last) = collect(&store, e).await;
    assert_eq!(last.exit_code(), Some(0));
}

#[tokio::test]
async fn concurrent_polls_never_split_or_duplicate_output() {
    let store = store();
    let s = store
        .exec_command(exec(
            "for i in $(seq 1 40); do echo line-$i; sleep 0.01; done; sleep 0.3",
            250,
        ))
        .await
        .unwrap();
    let id = s.session_id().unwrap();
    let mut out = s.output;
    loop {
        let (a, b) = tokio::join!(
            store.write_stdin(poll(id, 5000)),
            store.write_stdin(poll(id, 5000))
        );
        let mut done = false;
        for r in [a, b] {
            match r {
                Ok(snap) => {
                    out.push_str(&snap.output);
                    done |= snap.session_id().is_none();
                }
                Err(ExecError::UnknownProcess(_)) => done = true,
                Err(e) => panic!("{e}"),
            }
        }
        if done {
            break;
        }
    }
    let lines: Vec<&str> = out.lines().collect();
    let expected: Vec<String> = (1..=40).map(|i| format!("line-{i}")).collect();
    assert_eq!(lines, expected);
}

#[tokio::test]
async fn chars_over_one_mebibyte_are_refused() {
    let store = store();
    let req = ExecRequest {
        tty: Some(true),
        ..exec("cat", 250)
    };
    let id = store.exec_command(req).await.unwrap().session_id().unwrap();
    let big = "x".repeat(1024 * 1024 + 1);
    let err = store.write_stdin(write(id, &big, 250)).await.unwrap_err();
    assert!(
        matches!(err, ExecError::InvalidArgument { field: "chars", .. }),
        "{err}"
    );
    assert_eq!(store.list_sessions().len(), 1, "nothing else changes");
    store.terminate(id).unwrap();
}
