//! Bad input gets an error naming the field and changes nothing (SPEC §8).

use uexec_core::{ExecError, ExecRequest};

use crate::helpers::{exec, store};

fn field_of(e: &ExecError) -> &'static str {
    match e {
        ExecError::InvalidArgument { field, .. } => field,
        other => panic!("expected an invalid-argument error, got {other:?}"),
    }
}

#[tokio::test]
async fn bad_exec_arguments_name_their_field() {
    let store = store();
    let file = std::env::temp_dir().join(format!("uexec-not-a-dir-{}", std::process::id()));
    std::fs::write(&file, "x").unwrap();
    let cases = [
        (
            ExecRequest {
                cmd: String::new(),
                ..exec("x", 250)
            },
            "cmd",
        ),
        (exec("echo a\0b", 250), "cmd"),
        (
            ExecRequest {
                workdir: Some("no-such-dir-7c1e".into()),
                ..exec("pwd", 250)
            },
            "workdir",
        ),
        (
            ExecRequest {
                workdir: Some(file.display().to_string()),
                ..exec("pwd", 250)
            },
            "workdir",
        ),
        (
            ExecRequest {
                shell: Some("/no/such/shell".into()),
                ..exec("pwd", 250)
            },
            "shell",
        ),
        (
            ExecRequest {
                max_output_tokens: Some(-1),
                ..exec("pwd", 250)
            },
            "max_output_tokens",
        ),
    ];
    for (req, field) in cases {
        let e = store.exec_command(req.clone()).await.unwrap_err();
        assert_eq!(field_of(&e), field, "{req:?}");
        assert!(e
            .to_string()
            .starts_with(&format!("invalid arguments: {field}: ")));
    }
    let e = store
        .exec_command(ExecRequest {
            workdir: Some("no-such-dir-7c1e".into()),
            ..exec("pwd", 250)
        })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no-such-dir-7c1e"), "{e}");
    assert!(store.list_sessions().is_empty());
    // Nothing was reserved: the first real session still gets 1000.
    let s = store.exec_command(exec("sleep 1", 250)).await.unwrap();
    assert_eq!(s.session_id(), Some(1000));
    std::fs::remove_file(&file).unwrap();
}

#[tokio::test]
async fn absurd_windows_are_clamped_not_refused() {
    let store = store();
    let s = store.exec_command(exec("echo ok", i64::MIN)).await.unwrap();
    assert_eq!(s.exit_code(), Some(0));
    let s = store.exec_command(exec("echo ok", i64::MAX)).await.unwrap();
    assert_eq!(s.exit_code(), Some(0));
}
