//! exec_command with real processes (SPEC §2, §4).

use std::time::{Duration, Instant};

use uexec_core::{EventKind, ExecRequest};

use crate::helpers::{collect, exec, poll, store};

#[tokio::test]
async fn full_lifecycle_with_a_background_end() {
    let store = store();
    let mut events = store.subscribe();
    let req = ExecRequest {
        call_id: Some("call-first".into()),
        ..exec("sleep 0.5; printf 'HELLO-FULL-LIFECYCLE'", 1000)
    };
    let first = store.exec_command(req).await.unwrap();
    let (output, last) = collect(&store, first).await;
    assert_eq!(last.exit_code(), Some(0));
    assert!(output.contains("HELLO-FULL-LIFECYCLE"));
    // Exactly one End for the first call; a later call's End proves the stream moved on.
    let later = ExecRequest {
        call_id: Some("call-later".into()),
        ..exec("true", 1000)
    };
    assert_eq!(
        store.exec_command(later).await.unwrap().exit_code(),
        Some(0)
    );
    let mut ends = Vec::new();
    loop {
        let e = events.recv().await.unwrap();
        if let EventKind::End {
            exit_code,
            aggregated_output,
            ..
        } = &e.kind
        {
            ends.push((e.call_id.clone(), *exit_code, aggregated_output.clone()));
            if e.call_id == "call-later" {
                break;
            }
        }
    }
    let first_ends: Vec<_> = ends
        .iter()
        .filter(|(id, _, _)| id == "call-first")
        .collect();
    assert_eq!(first_ends.len(), 1, "{ends:?}");
    assert_eq!(first_ends[0].1, Some(0));
    assert!(first_ends[0].2.contains("HELLO-FULL-LIFECYCLE"));
}

#[tokio::test]
async fn a_quick_command_returns_early_with_its_code() {
    let store = store();
    let t0 = Instant::now();
    let s = store
        .exec_command(exec("echo hi; exit 17", 10_000))
        .await
        .unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "no early return on exit"
    );
    assert_eq!((s.exit_code(), s.session_id()), (Some(17), None));
    assert_eq!(s.output, "hi\n");
    assert!(s.wall_time < Duration::from_secs(5));
    assert!(store.list_sessions().is_empty());
}

#[tokio::test]
async fn killed_by_a_signal_reports_128_plus_n_for_pipes_and_ptys() {
    let store = store();
    for tty in [false, true] {
        let req = ExecRequest {
            tty: Some(tty),
            ..exec("kill -9 $$", 5000)
        };
        let s = store.exec_command(req).await.unwrap();
        assert_eq!(s.exit_code(), Some(137), "tty={tty}");
    }
}

#[tokio::test]
async fn an_escaped_grandchild_does_not_hold_the_call() {
    let store = store();
    let t0 = Instant::now();
    let s = store
        .exec_command(exec("(sleep 30 &); echo done", 10_000))
        .await
        .unwrap();
    assert_eq!(s.exit_code(), Some(0));
    assert!(s.output.contains("done"));
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "the call waited {:?} for an output close held by a grandchild",
        t0.elapsed()
    );
}

#[tokio::test]
async fn output_printed_between_calls_is_delivered_once_in_order() {
    let store = store();
    let first = store
        .exec_command(exec(
            "for i in $(seq 1 30); do echo tick-$i; sleep 0.02; done",
            250,
        ))
        .await
        .unwrap();
    let (output, last) = collect(&store, first).await;
    assert_eq!(last.exit_code(), Some(0));
    let ticks: Vec<&str> = output.lines().collect();
    let expected: Vec<String> = (1..=30).map(|i| format!("tick-{i}")).collect();
    assert_eq!(ticks, expected);
}

#[tokio::test]
async fn stdout_and_stderr_merge_in_arrival_order() {
    let store = store();
    let s = store
        .exec_command(exec(
            "echo out-1; sleep 0.2; echo err-2 >&2; sleep 0.2; echo out-3",
            10_000,
        ))
        .await
        .unwrap();
    assert_eq!(s.output, "out-1\nerr-2\nout-3\n");
}

#[tokio::test]
async fn truncation_numbers_are_exact() {
    let store = store();
    let req = ExecRequest {
        max_output_tokens: Some(50),
        ..exec(
            "printf 'EXEC-LINE-%04d xxxxxxxxxxxxxxxxxxxx\\n' $(seq 1 999)",
            10_000,
        )
    };
    let s = store.exec_command(req).await.unwrap();
    assert_eq!(s.original_token_count, 8991);
    assert!(s.output.starts_with(
        "Warning: truncated output (original token count: 8991)\nTotal output lines: 999\n\n"
    ));
    assert!(s.output.contains("\u{2026}8941 tokens truncated\u{2026}"));
}

#[tokio::test]
async fn isatty_follows_the_tty_flag_and_the_pty_is_24x80() {
    let store = store();
    let probe = "[ -t 0 ] && echo in-tty || echo in-notty; [ -t 1 ] && echo out-tty || echo out-notty; stty size 2>/dev/null || true";
    let s = store.exec_command(exec(probe, 5000)).await.unwrap();
    assert!(
        s.output.contains("in-notty") && s.output.contains("out-notty"),
        "{}",
        s.output
    );
    let req = ExecRequest {
        tty: Some(true),
        ..exec(probe, 5000)
    };
    let s = store.exec_command(req).await.unwrap();
    assert!(
        s.output.contains("in-tty") && s.output.contains("out-tty"),
        "{}",
        s.output
    );
    assert!(s.output.contains("24 80"), "{}", s.output);
}

#[tokio::test]
async fn a_long_command_is_stored_and_polled_to_its_end() {
    let store = store();
    let s = store
        .exec_command(exec("echo first; sleep 1; echo second", 250))
        .await
        .unwrap();
    let id = s.session_id().expect("still running after 250 ms");
    assert!(s.output.contains("first") && !s.output.contains("second"));
    assert_eq!(store.list_sessions()[0].session_id, id);
    let p = store.write_stdin(poll(id, 10_000)).await.unwrap();
    let p = if p.session_id().is_some() {
        collect(&store, p).await.1
    } else {
        p
    };
    assert_eq!(p.exit_code(), Some(0));
}

#[tokio::test]
async fn a_command_that_exits_at_once_reports_almost_no_wall_time() {
    let store = store();
    let s = store.exec_command(exec("true", 5000)).await.unwrap();
    assert_eq!(s.exit_code(), Some(0));
    assert!(
        s.wall_time < Duration::from_millis(150),
        "{:?}",
        s.wall_time
    );
    assert!(s.to_text().ends_with("Original token count: 0\nOutput:\n"));
}

/// The wall time of a first call is the call's, from the spawn (as Codex's): the early-exit
/// grace before the window counts (issue 41: `sleep 1.5` read 1.35 s).
#[tokio::test]
async fn a_first_call_s_wall_time_counts_from_the_spawn() {
    let store = store();
    let s = store
        .exec_command(exec("sleep 0.4; echo done", 5000))
        .await
        .unwrap();
    assert_eq!(s.exit_code(), Some(0));
    assert!(
        s.wall_time >= Duration::from_millis(395),
        "the command slept 0.4 s, the call reported {:?}",
        s.wall_time
    );
}

#[tokio::test]
async fn forced_environment_and_secret_filtering() {
    let store = crate::helpers::store_with(|c| {
        c.env_policy.set = vec![("UEXEC_TEST_VISIBLE".into(), "yes".into())];
    });
    let s = store
        .exec_command(exec(
            r#"printf '%s|' "$TERM" "$NO_COLOR" "$PAGER" "$LANG" "${COLORTERM-unset}" "$UEXEC" "$UEXEC_TEST_VISIBLE""#,
            5000,
        ))
        .await
        .unwrap();
    assert_eq!(s.output, "dumb|1|cat|C.UTF-8||1|yes|");
}
