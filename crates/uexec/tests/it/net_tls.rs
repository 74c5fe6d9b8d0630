//! TLS on both faces (certificates made at test time), the client's `wss://` with
//! `--remote-ca`, token files, and the refusal of a public listener in clear text.

use std::os::unix::fs::PermissionsExt as _;

use serde_json::json;

use crate::helpers::{call, stdio_client, structured, text};
use crate::net_support::{make_cert, mcp_http, request_as, run_uexec, serve, temp_dir};

#[tokio::test]
async fn an_exec_server_over_tls_runs_commands_for_a_client_trusting_its_ca() {
    let dir = temp_dir("tls");
    let (cert, key) = make_cert(&dir);
    let token = dir.join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (cert, key, token) = (
        cert.to_str().unwrap(),
        key.to_str().unwrap(),
        token.to_str().unwrap(),
    );
    let mut server = serve(&[
        "--listen",
        "wss://127.0.0.1:0",
        "--tls-cert",
        cert,
        "--tls-key",
        key,
        "--token-file",
        token,
    ]);
    let url = format!("wss://{}", server.addr);
    // Plain text to a TLS port gets no HTTP answer.
    assert_ne!(request_as(None, &server.addr, "ws", None), "101");

    let (client, _, _) = stdio_client(&[
        "--environment",
        &format!("box={url}"),
        "--environment-token-file",
        &format!("box={token}"),
        "--remote-ca",
        cert,
    ])
    .await;
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "echo over-tls", "login": false, "yield_time_ms": 5000, "environment_id": "box"}),
    )
    .await;
    if structured(&r)["exit_code"] != 0 {
        std::thread::sleep(std::time::Duration::from_millis(500));
        panic!(
            "{}\nserver status {:?}: {}",
            text(&r),
            server.child.try_wait(),
            server.stderr.lock().unwrap()
        );
    }
    assert_eq!(structured(&r)["output"], "over-tls\n");
    client.cancel().await.unwrap();

    // Without the CA (nor the token), the client refuses the server's certificate.
    let (ok, stderr) = run_uexec(&["mcp", "--environment", &format!("box={url}")]);
    assert!(!ok);
    assert!(stderr.contains("certificate"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mcp_http_serves_https() {
    let dir = temp_dir("https");
    let (cert, key) = make_cert(&dir);
    let server = mcp_http(&[
        "--http",
        "127.0.0.1:0",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    assert_eq!(request_as(None, &server.addr, "mcp", Some(&cert)), "200");
    assert_ne!(request_as(None, &server.addr, "mcp", None), "200");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_public_listener_needs_tls_unless_plain_text_is_accepted() {
    let (ok, stderr) = run_uexec(&["serve", "--listen", "ws://0.0.0.0:0", "--token", "t"]);
    assert!(!ok);
    assert!(stderr.contains("--insecure-plaintext"), "{stderr}");
    let (ok, stderr) = run_uexec(&["mcp", "--http", "0.0.0.0:0", "--token", "t"]);
    assert!(!ok);
    assert!(stderr.contains("--insecure-plaintext"), "{stderr}");

    let server = serve(&[
        "--listen",
        "ws://0.0.0.0:0",
        "--token",
        "t",
        "--insecure-plaintext",
    ]);
    let port = server.addr.rsplit_once(':').unwrap().1;
    let local = format!("127.0.0.1:{port}");
    assert_eq!(request_as(None, &local, "ws", None), "401");
}

#[test]
fn bad_tls_and_token_flags_are_named() {
    let dir = temp_dir("bad");
    let empty = dir.join("empty");
    std::fs::write(&empty, "").unwrap();
    let empty = empty.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "serve",
                "--tls-cert",
                "/nonexistent/c",
                "--tls-key",
                "/nonexistent/k",
            ],
            "--tls-cert /nonexistent/c",
        ),
        (&["serve", "--tls-cert", "/nonexistent/c"], "--tls-key"),
        (&["serve", "--listen", "wss://127.0.0.1:0"], "--tls-cert"),
        (
            &[
                "serve",
                "--listen",
                "stdio",
                "--tls-cert",
                "c",
                "--tls-key",
                "k",
            ],
            "--tls-cert and --tls-key need a wss://",
        ),
        (
            &["mcp", "--tls-cert", "c", "--tls-key", "k"],
            "--tls-cert and --tls-key serve HTTPS: they need --http",
        ),
        (
            &["serve", "--token-file", "/nonexistent/t"],
            "--token-file /nonexistent/t",
        ),
        (&["serve", "--token-file", empty], "the token file is empty"),
        (&["serve", "--max-connections", "0"], "--max-connections"),
        (
            &["mcp", "--http", "127.0.0.1:0", "--token-file", empty],
            "--token-file",
        ),
        (
            &[
                "mcp",
                "--environment",
                "box=ws://127.0.0.1:1",
                "--remote-ca",
                "/nonexistent/ca",
            ],
            "--remote-ca /nonexistent/ca",
        ),
        (
            &[
                "mcp",
                "--environment",
                "box=ws://127.0.0.1:1",
                "--remote-token-file",
                "/nonexistent/t",
            ],
            "--remote-token-file /nonexistent/t",
        ),
        (
            &[
                "mcp",
                "--environment",
                "box=ws://127.0.0.1:1",
                "--environment-token-file",
                "other=/x",
            ],
            "--environment-token-file other=/x",
        ),
        (
            &["mcp", "--environment-token-file", "nameless"],
            "--environment-token-file",
        ),
    ];
    for (args, expected) in cases {
        let (ok, stderr) = run_uexec(args);
        assert!(!ok, "{args:?} succeeded");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_new_flags_are_in_help() {
    let help = |face: &str| {
        let out = std::process::Command::new(crate::helpers::UEXEC)
            .args([face, "--help"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let serve = help("serve");
    let mcp = help("mcp");
    for flag in [
        "--tls-cert",
        "--tls-key",
        "--insecure-plaintext",
        "--token-file",
        "--max-connections",
    ] {
        assert!(serve.contains(flag), "serve --help lacks {flag}");
        assert!(mcp.contains(flag), "mcp --help lacks {flag}");
    }
    for flag in [
        "--remote-token-file",
        "--environment-token-file",
        "--remote-ca",
    ] {
        assert!(mcp.contains(flag), "mcp --help lacks {flag}");
    }
    // The secret rule is stated where the way out (--env-keep) is.
    let flat = mcp.split_whitespace().collect::<Vec<_>>().join(" ");
    for word in ["PASSWORD", "CREDENTIAL", "COOKIE", "_PAT", "_AUTH"] {
        assert!(
            flat.contains(word),
            "mcp --help does not state the secret rule: {word}"
        );
    }
}
