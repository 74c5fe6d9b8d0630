//! The event stream (SPEC §5).

use std::time::Duration;

use uexec_core::{EndStatus, EventKind, ExecRequest};

use crate::helpers::{collect, exec, store, write};

#[tokio::test]
async fn begin_deltas_interaction_and_one_end_under_the_original_call_id() {
    let store = store();
    let mut events = store.subscribe();
    let req = ExecRequest {
        tty: Some(true),
        call_id: Some("call-original".into()),
        ..exec(
            "head -c 20000 /dev/zero | tr '\\0' a; echo; read line; echo got-$line",
            1000,
        )
    };
    let s = store.exec_command(req).await.unwrap();
    let id = s.session_id().expect("waits for a line");
    let w = store.write_stdin(write(id, "xyz\n", 1000)).await.unwrap();
    let (_, last) = collect(&store, w).await;
    assert_eq!(last.exit_code(), Some(0));

    let mut begins = 0;
    let mut deltas = Vec::new();
    let mut interactions = Vec::new();
    loop {
        let e = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("End must come")
            .unwrap();
        assert_eq!(e.call_id, "call-original", "{e:?}");
        assert_eq!(e.session_id, id);
        match &e.kind {
            EventKind::Begin { command, .. } => {
                begins += 1;
                assert_eq!(
                    command.last().map(String::as_str),
                    Some("head -c 20000 /dev/zero | tr '\\0' a; echo; read line; echo got-$line")
                );
            }
            EventKind::OutputDelta { chunk } => {
                assert!(chunk.len() <= 8192);
                deltas.extend_from_slice(chunk);
            }
            EventKind::OutputSkipped { bytes } => panic!("{bytes} bytes skipped: 20 KB fit"),
            EventKind::TerminalInteraction { stdin } => interactions.push(stdin.clone()),
            EventKind::End {
                status,
                exit_code,
                aggregated_output,
                ..
            } => {
                assert_eq!((*status, *exit_code), (EndStatus::Completed, Some(0)));
                assert!(aggregated_output.contains("got-xyz"));
                break;
            }
        }
    }
    assert_eq!(begins, 1);
    let text = String::from_utf8_lossy(&deltas);
    assert!(
        text.contains(&"a".repeat(20_000)) && text.contains("got-xyz"),
        "{text}"
    );
    assert_eq!(interactions.first().map(String::as_str), Some("xyz\n"));
}

#[tokio::test]
async fn a_spawn_failure_emits_begin_and_a_failed_end() {
    let store = store();
    let mut events = store.subscribe();
    // The shell exists, but the working directory vanishes between the check and the spawn
    // is hard to stage; a shell that is a directory-less script interpreter fails instead.
    let dir = std::env::temp_dir().join(format!("uexec-bad-shell-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shell = dir.join("broken-shell");
    std::fs::write(&shell, "#!/nonexistent/interpreter\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shell, std::fs::Permissions::from_mode(0o755)).unwrap();
    let req = ExecRequest {
        shell: Some(shell.display().to_string()),
        ..exec("true", 250)
    };
    let err = store.exec_command(req).await.unwrap_err();
    assert!(
        err.to_string().starts_with("Failed to create process: "),
        "{err}"
    );
    let begin = events.recv().await.unwrap();
    assert!(matches!(begin.kind, EventKind::Begin { .. }));
    let end = events.recv().await.unwrap();
    let EventKind::End {
        status, failure, ..
    } = &end.kind
    else {
        panic!("{end:?}")
    };
    assert_eq!(*status, EndStatus::Failed);
    assert!(failure.is_some());
    assert!(store.list_sessions().is_empty());
    // The id was released: the next session gets 1000 again.
    let s = store.exec_command(exec("sleep 1", 250)).await.unwrap();
    assert_eq!(s.session_id(), Some(1000));
    std::fs::remove_dir_all(&dir).unwrap();
}
