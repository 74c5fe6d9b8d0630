//! `--no-shell-snapshot` on both faces (and per connection through the daemon), and login
//! commands through `uexec mcp` running the profile once.

use serde_json::json;

use crate::helpers::{call, marker, stdio_client, text, UEXEC};

fn profile_home() -> std::path::PathBuf {
    let home = std::env::temp_dir().join(format!("uexec-it-snap-{}", marker()));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join(".bash_profile"),
        "echo run >> \"$HOME/runs\"\nexport PROFILE_VAR=from-profile\n",
    )
    .unwrap();
    home
}

fn runs(home: &std::path::Path) -> usize {
    std::fs::read_to_string(home.join("runs"))
        .unwrap_or_default()
        .lines()
        .count()
}

#[tokio::test]
async fn mcp_logins_run_the_profile_once_unless_snapshots_are_off() {
    for (flags, expected_runs) in [(&[][..], 1), (&["--no-shell-snapshot"][..], 3)] {
        let home = profile_home();
        let set_home = format!("HOME={}", home.display());
        let mut args = vec!["--shell", "/bin/bash", "--env-set", &set_home];
        args.extend_from_slice(flags);
        let (client, _, _) = stdio_client(&args).await;
        for _ in 0..3 {
            let r = call(&client, "exec_command", json!({"cmd": "echo $PROFILE_VAR"})).await;
            assert!(text(&r).contains("from-profile"), "{flags:?}: {}", text(&r));
        }
        assert_eq!(runs(&home), expected_runs, "{flags:?}");
        client.cancel().await.unwrap();
        std::fs::remove_dir_all(&home).unwrap();
    }
}

#[test]
fn the_switch_is_in_help_and_takes_no_value() {
    for face in ["mcp", "serve"] {
        let out = std::process::Command::new(UEXEC)
            .args([face, "--help"])
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(
            help.contains("--no-shell-snapshot"),
            "{face} --help: {help}"
        );
        let out = std::process::Command::new(UEXEC)
            .args([face, "--no-shell-snapshot=yes"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{face} accepted a value");
        assert!(stderr.contains("--no-shell-snapshot"), "{face}: {stderr}");
    }
}

/// Through the daemon the switch is the connection's: one owner's store serves a
/// connection with snapshots, one without (each login reads the profile), and one with
/// them again (the snapshot is still there: no new run).
#[tokio::test]
async fn through_the_daemon_each_connection_says_whether_its_logins_use_a_snapshot() {
    let place = crate::place::DaemonPlace::new("snapd");
    let home = profile_home();
    let set_home = format!("HOME={}", home.display());
    let base = [
        "--owner",
        "o",
        "--shell",
        "/bin/bash",
        "--env-set",
        &set_home,
    ];
    for (flags, runs_after) in [
        (&[][..], 1),
        (&["--no-shell-snapshot"][..], 4),
        (&[][..], 4),
    ] {
        let mut args = base.to_vec();
        args.extend_from_slice(flags);
        let client = place.client(&args).await;
        for _ in 0..3 {
            let r = call(&client, "exec_command", json!({"cmd": "echo $PROFILE_VAR"})).await;
            assert!(text(&r).contains("from-profile"), "{flags:?}: {}", text(&r));
        }
        assert_eq!(runs(&home), runs_after, "{flags:?}");
        client.cancel().await.unwrap();
    }
    place.stop();
    std::fs::remove_dir_all(&home).unwrap();
}

/// A snapshot that cannot be written (its runtime directory on a full disk) is said to be
/// the disk's fault, not the profile's, and the command still runs, as a real login.
#[test]
fn a_full_runtime_directory_is_named_as_the_cause_not_the_profile() {
    let said = crate::helpers::on_a_full_disk(
        r#"printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}' '{"jsonrpc":"2.0","method":"notifications/initialized"}' '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"exec_command","arguments":{"cmd":"echo ran-$((6*7))","shell":"/bin/bash"}}}' \
  | UEXEC_LOG=warn HOME="$1/home" XDG_RUNTIME_DIR="$1/run" "$2" mcp --in-process --no-transcripts 2>&1"#,
    );
    assert!(
        said.contains("has no room for the snapshot")
            && said.contains("No space left on device")
            && said.contains("the profile is not at fault"),
        "{said}"
    );
    assert!(!said.contains("ended before the snapshot"), "{said}");
    assert!(said.contains("ran-42"), "the command ran: {said}");
}
