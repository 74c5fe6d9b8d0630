//! Fewer polls: wait conditions, the hard timeout, piped stdin, output hygiene, exit notices
//! and `wait`, with real processes.

use std::time::Duration;

use uexec_core::{
    ExecError, ExecRequest, HygieneRequest, Reason, Until, WaitRequest, WriteRequest,
};

use crate::helpers::{collect, eventually, exec, poll, store, write, Gate};

fn until_pattern(p: &str) -> Option<Until> {
    Some(Until {
        pattern: Some(p.into()),
        ..Until::default()
    })
}

fn exec_until(cmd: &str, yield_ms: i64, until: Option<Until>) -> ExecRequest {
    ExecRequest {
        until,
        ..exec(cmd, yield_ms)
    }
}

#[tokio::test]
async fn a_pattern_ends_the_window_at_the_match() {
    let store = store();
    let s = store
        .exec_command(exec_until(
            "sleep 0.3; echo booting; sleep 0.2; echo 'ready on :3000'; exec sleep 30",
            30_000,
            until_pattern(r"ready on :\d+"),
        ))
        .await
        .unwrap();
    assert_eq!(s.reason, Reason::Matched, "{s:?}");
    assert!(s.session_id().is_some(), "still running");
    let m = s.matched.clone().expect("the match");
    assert_eq!(m.text, "ready on :3000");
    assert_eq!(m.offset, "booting\n".len() as u64);
    assert_eq!(s.output, "booting\nready on :3000\n");
    assert!(s.wall_time < Duration::from_secs(20), "{:?}", s.wall_time);
}

#[tokio::test]
async fn a_match_spans_reads_and_ignores_escape_sequences() {
    let store = store();
    let s = store
        .exec_command(exec_until(
            r"printf 'rea'; sleep 0.3; printf '\033[1mdy\033[0m\n'; exec sleep 30",
            30_000,
            until_pattern("^ready$"),
        ))
        .await
        .unwrap();
    assert_eq!(s.reason, Reason::Matched, "{s:?}");
    assert_eq!(s.matched.unwrap().text, "ready");
    assert!(
        s.output.contains("\u{1b}[1m"),
        "the output itself is untouched"
    );
}

#[tokio::test]
async fn a_poll_matches_output_that_arrived_between_calls() {
    let store = store();
    let gate = Gate::new();
    let s = store
        .exec_command(exec(
            &format!("{}; echo ready; exec sleep 30", gate.wait()),
            250,
        ))
        .await
        .unwrap();
    let id = s.session_id().expect("running");
    gate.open();
    eventually("ready printed", Duration::from_secs(10), || {
        store
            .recent_output(id, 100)
            .is_some_and(|o| o.contains("ready"))
    })
    .await;
    let p = store
        .write_stdin(WriteRequest {
            until: until_pattern("ready"),
            ..poll(id, 60_000)
        })
        .await
        .unwrap();
    assert_eq!(p.reason, Reason::Matched);
    assert!(p.wall_time < Duration::from_secs(30), "{:?}", p.wall_time);
    assert_eq!(p.output, "ready\n");
}

#[tokio::test]
async fn idle_needs_output_then_quiet() {
    let store = store();
    let idle = Some(Until {
        idle_ms: Some(400),
        ..Until::default()
    });
    let s = store
        .exec_command(exec_until(
            "echo a; sleep 0.1; echo b; exec sleep 30",
            30_000,
            idle.clone(),
        ))
        .await
        .unwrap();
    assert_eq!(s.reason, Reason::Idle, "{s:?}");
    assert_eq!(s.output, "a\nb\n");
    // A session that prints nothing is never idle: the window ends the wait.
    let quiet = store
        .exec_command(exec_until("exec sleep 30", 1000, idle))
        .await
        .unwrap();
    assert_eq!(quiet.reason, Reason::Window, "{quiet:?}");
    assert!(quiet.wall_time >= Duration::from_millis(1000));
}

#[tokio::test]
async fn exit_alone_ends_it_and_says_so() {
    let store = store();
    let s = store
        .exec_command(exec_until(
            "echo early; sleep 0.4; echo done",
            30_000,
            Some(Until {
                exit: true,
                ..Until::default()
            }),
        ))
        .await
        .unwrap();
    assert_eq!((s.reason, s.exit_code()), (Reason::Exited, Some(0)));
    assert_eq!(s.output, "early\ndone\n");
}

#[tokio::test]
async fn a_prompt_ends_the_window_and_a_secret_one_is_flagged() {
    let store = store();
    let prompt = Some(Until {
        prompt: true,
        ..Until::default()
    });
    let tty = |cmd: &str| ExecRequest {
        tty: Some(true),
        ..exec_until(cmd, 30_000, prompt.clone())
    };
    let s = store
        .exec_command(tty("sleep 0.2; read -p 'Continue? [y/N] ' x; echo got-$x"))
        .await
        .unwrap();
    assert_eq!(s.reason, Reason::Prompt, "{s:?}");
    assert!(!s.awaiting_secret);
    assert!(s.output.ends_with("[y/N] "), "{:?}", s.output);
    let id = s.session_id().unwrap();
    let (out, last) = collect(
        &store,
        store.write_stdin(write(id, "y\r", 2000)).await.unwrap(),
    )
    .await;
    assert_eq!(last.exit_code(), Some(0));
    assert!(out.contains("got-y"), "{out:?}");

    let s = store
        .exec_command(tty("read -s -p 'Password: ' x; echo; echo got-${#x}"))
        .await
        .unwrap();
    assert_eq!(s.reason, Reason::Prompt, "{s:?}");
    assert!(s.awaiting_secret, "echo is off: {s:?}");
    let id = s.session_id().unwrap();
    // The model may not type a secret; Ctrl-C still aborts the prompt.
    match store.write_stdin(write(id, "hunter2\r", 2000)).await {
        Err(e @ ExecError::SecretPrompt { .. }) => {
            assert!(e.to_string().contains("waits for a secret"), "{e}")
        }
        other => panic!("a secret write went through: {other:?}"),
    }
    let (_, last) = collect(
        &store,
        store.write_stdin(write(id, "\u{3}", 2000)).await.unwrap(),
    )
    .await;
    assert_eq!(last.exit_code(), Some(130));

    // A server that allows it types the secret (never echoed back).
    let trusting = crate::helpers::store_with(|c| c.allow_secret_input = true);
    let s = trusting
        .exec_command(tty("read -s -p 'Password: ' x; echo; echo got-${#x}"))
        .await
        .unwrap();
    let id = s.session_id().unwrap();
    let (out, _) = collect(
        &trusting,
        trusting
            .write_stdin(write(id, "hunter2\r", 2000))
            .await
            .unwrap(),
    )
    .await;
    assert!(out.contains("got-7"), "{out:?}");
    assert!(!out.contains("hunter2"), "echo was off: {out:?}");

    // A reader with no prompt at all, found asleep in read(0) once it gets there.
    let s = store
        .exec_command(tty("sleep 0.5; exec cat"))
        .await
        .unwrap();
    assert_eq!((s.reason, s.output.as_str()), (Reason::Prompt, ""), "{s:?}");
    store.terminate(s.session_id().unwrap()).unwrap();
}

#[tokio::test]
async fn quiet_programs_that_do_not_read_are_not_prompts() {
    let store = store();
    let prompt = Some(Until {
        prompt: true,
        ..Until::default()
    });
    for cmd in [
        // A progress line without its newline, then a sleep.
        "printf 'Downloading... 45%%'; exec sleep 30",
        // A server idling in select() after a finished line.
        "python3 -c \"import select; print('serving on :8000', flush=True); select.select([], [], [], 30)\"",
    ] {
        let s = store
            .exec_command(ExecRequest {
                tty: Some(true),
                ..exec_until(cmd, 1500, prompt.clone())
            })
            .await
            .unwrap();
        assert_eq!(s.reason, Reason::Window, "{cmd}: {s:?}");
        store.terminate(s.session_id().unwrap()).unwrap();
    }
}

#[tokio::test]
async fn the_hard_timeout_terms_then_kills_and_reports_124() {
    let store = store();
    let polite = store
        .exec_command(ExecRequest {
            timeout_ms: Some(500),
            ..exec(
                "trap 'echo got-TERM; exit 3' TERM; echo started; sleep 30 & wait",
                10_000,
            )
        })
        .await
        .unwrap();
    assert_eq!(polite.exit_code(), Some(124), "{polite:?}");
    assert_eq!(polite.timed_out_ms, Some(500));
    assert!(polite.output.contains("got-TERM"), "{:?}", polite.output);

    // One that ignores SIGTERM gets SIGKILL after the grace; a short window does not
    // confuse the two timeouts: the session runs on past it.
    let stubborn = store
        .exec_command(ExecRequest {
            timeout_ms: Some(300),
            ..exec(
                "trap '' TERM; echo started; while :; do sleep 0.1; done",
                250,
            )
        })
        .await
        .unwrap();
    let id = stubborn.session_id().expect("running past the window");
    let (_, last) = collect(&store, stubborn).await;
    assert_eq!(last.exit_code(), Some(124), "session {id}");
    assert_eq!(last.timed_out_ms, Some(300));
}

#[tokio::test]
async fn out_of_range_timeouts_and_conditions_name_their_field() {
    let store = store();
    for (req, field) in [
        (
            ExecRequest {
                timeout_ms: Some(0),
                ..exec("true", 250)
            },
            "timeout_ms",
        ),
        (
            ExecRequest {
                timeout_ms: Some(i64::MAX),
                ..exec("true", 250)
            },
            "timeout_ms",
        ),
        (exec_until("true", 250, until_pattern("(")), "until.pattern"),
        (
            exec_until(
                "true",
                250,
                Some(Until {
                    idle_ms: Some(-5),
                    ..Until::default()
                }),
            ),
            "until.idle_ms",
        ),
        (
            ExecRequest {
                pipe_stdin: true,
                tty: Some(true),
                ..exec("true", 250)
            },
            "stdin",
        ),
    ] {
        match store.exec_command(req).await {
            Err(ExecError::InvalidArgument { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    assert!(store.list_sessions().is_empty(), "nothing was started");
}

#[tokio::test]
async fn piped_stdin_is_written_and_closed_with_eof() {
    let store = store();
    let s = store
        .exec_command(ExecRequest {
            pipe_stdin: true,
            ..exec(
                r#"while IFS= read -r l || [ -n "$l" ]; do printf '%s\n' "${l^^}"; done"#,
                250,
            )
        })
        .await
        .unwrap();
    let id = s.session_id().expect("waiting for input");
    let w = store.write_stdin(write(id, "hello\n", 500)).await.unwrap();
    assert_eq!(w.output, "HELLO\n");
    let last = store
        .write_stdin(WriteRequest {
            eof: true,
            ..write(id, "bye", 5000)
        })
        .await
        .unwrap();
    assert_eq!((last.exit_code(), last.output.as_str()), (Some(0), "BYE\n"));
}

#[tokio::test]
async fn eof_without_a_stdin_pipe_is_refused_and_changes_nothing() {
    let store = store();
    let s = store
        .exec_command(exec("echo up; exec sleep 30", 250))
        .await
        .unwrap();
    let id = s.session_id().unwrap();
    let err = store
        .write_stdin(WriteRequest {
            eof: true,
            ..poll(id, 250)
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err, ExecError::InvalidArgument { field: "eof", .. }),
        "{err:?}"
    );
    assert_eq!(store.list_sessions().len(), 1, "still running");
}

#[tokio::test]
async fn hygiene_strips_escapes_and_collapses_carriage_returns() {
    let store = store();
    let s = store
        .exec_command(ExecRequest {
            hygiene: HygieneRequest {
                strip_ansi: Some(true),
                collapse_cr: Some(true),
            },
            ..exec(r"printf '\033[31mred\033[0m\n10%%\r20%%\r30%%\n'", 5000)
        })
        .await
        .unwrap();
    assert_eq!(s.output, "red\n30%\n");
    let raw = store
        .exec_command(exec(r"printf '\033[31mred\033[0m\n10%%\r20%%\n'", 5000))
        .await
        .unwrap();
    assert_eq!(
        raw.output, "\u{1b}[31mred\u{1b}[0m\n10%\r20%\n",
        "off by default"
    );
}

#[tokio::test]
async fn an_unwatched_exit_is_noticed_once() {
    let store = store();
    let gate = Gate::new();
    let command = format!("{}; exit 3", gate.wait());
    let s = store.exec_command(exec(&command, 250)).await.unwrap();
    let id = s.session_id().expect("running");
    gate.open();
    let mut notices = Vec::new();
    eventually("the exit notice", Duration::from_secs(10), || {
        notices.extend(store.take_exit_notices());
        !notices.is_empty()
    })
    .await;
    assert_eq!(notices.len(), 1);
    assert_eq!((notices[0].session_id, notices[0].exit_code), (id, Some(3)));
    assert_eq!(notices[0].command, command);
    assert!(store.take_exit_notices().is_empty(), "once");
    // The session still reports its own exit to a poll.
    let p = store.write_stdin(poll(id, 5000)).await.unwrap();
    assert_eq!(p.exit_code(), Some(3));

    // An exit a call watched is not noticed again.
    let gate = Gate::new();
    let watched = store
        .exec_command(exec(&format!("{}; exit 4", gate.wait()), 250))
        .await
        .unwrap();
    let id = watched.session_id().unwrap();
    gate.open();
    let p = store.write_stdin(poll(id, 10_000)).await.unwrap();
    assert_eq!(p.exit_code(), Some(4));
    let settled = store.exec_command(exec("true", 1000)).await.unwrap();
    assert_eq!(settled.exit_code(), Some(0));
    assert!(store.take_exit_notices().is_empty());
}

#[tokio::test]
async fn wait_returns_at_the_first_condition_or_waits_for_all() {
    let store = store();
    let gate = Gate::new();
    let a = store
        .exec_command(exec(
            &format!("{}; echo A-ready; exec sleep 30", gate.wait()),
            250,
        ))
        .await
        .unwrap()
        .session_id()
        .unwrap();
    let b = store
        .exec_command(exec("echo B; exec sleep 30", 250))
        .await
        .unwrap()
        .session_id()
        .unwrap();
    gate.open();
    let results = store
        .wait(WaitRequest {
            session_ids: vec![a, b],
            until: until_pattern("ready"),
            yield_time_ms: Some(60_000),
            ..WaitRequest::default()
        })
        .await
        .unwrap();
    let snaps: Vec<_> = results
        .into_iter()
        .map(|(id, r)| (id, r.unwrap()))
        .collect();
    assert_eq!(snaps[0].0, a);
    assert_eq!(snaps[0].1.reason, Reason::Matched);
    assert_eq!(snaps[0].1.output, "A-ready\n");
    assert_eq!(snaps[1].1.reason, Reason::Window);
    assert!(snaps[0].1.wall_time < Duration::from_secs(30));

    let gate = Gate::new();
    let c = store
        .exec_command(exec(&format!("{}; exit 1", gate.wait()), 250))
        .await
        .unwrap()
        .session_id()
        .unwrap();
    let d = store
        .exec_command(exec(&format!("{}; sleep 0.3; exit 2", gate.wait()), 250))
        .await
        .unwrap()
        .session_id()
        .unwrap();
    gate.open();
    let all = store
        .wait(WaitRequest {
            session_ids: vec![c, d],
            all: true,
            yield_time_ms: Some(60_000),
            ..WaitRequest::default()
        })
        .await
        .unwrap();
    let codes: Vec<_> = all
        .into_iter()
        .map(|(_, r)| r.unwrap().exit_code())
        .collect();
    assert_eq!(codes, [Some(1), Some(2)]);
}

#[tokio::test]
async fn wait_refuses_bad_id_lists_before_touching_anything() {
    let store = store();
    let gate = Gate::new();
    let a = store
        .exec_command(exec(
            &format!("{}; echo out; exec sleep 30", gate.wait()),
            250,
        ))
        .await
        .unwrap()
        .session_id()
        .unwrap();
    gate.open();
    for (ids, want) in [(vec![], "session_ids"), (vec![a, a], "session_ids")] {
        let e = store
            .wait(WaitRequest {
                session_ids: ids,
                ..WaitRequest::default()
            })
            .await
            .unwrap_err();
        assert!(
            matches!(e, ExecError::InvalidArgument { field, .. } if field == want),
            "{e:?}"
        );
    }
    let e = store
        .wait(WaitRequest {
            session_ids: vec![a, 99_999],
            ..WaitRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e, ExecError::UnknownProcess(99_999));
    // Nothing was drained: a poll still gets all the output.
    let p = store
        .write_stdin(WriteRequest {
            until: until_pattern("out"),
            ..poll(a, 30_000)
        })
        .await
        .unwrap();
    assert_eq!(p.output, "out\n");
}
