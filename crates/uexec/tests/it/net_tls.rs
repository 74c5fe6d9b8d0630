//! TLS on both faces (certificates made at test time), the client's `wss://` with
//! `--remote-ca`, token files, and the refusal of a public listener in clear text.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::helpers::{call, stdio_client, structured, text, Client};
use crate::net_support::{make_cert, mcp_http, request_as, run_uexec, serve, temp_dir, Served};

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
        "--codex-compat",
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

    // Without the CA (nor the token), the client refuses the server's certificate, in words.
    let (client, _, _) =
        stdio_client(&["--codex-compat", "--environment", &format!("box={url}")]).await;
    let refused = exec_on(&client, "box", "echo never").await;
    assert_eq!(refused.is_error, Some(true), "{}", text(&refused));
    assert_eq!(
        text(&refused),
        format!(
            "exec_command failed: Failed to create process: environment box: cannot reach \
             {url}: certificate not trusted: its issuer is not among the system's root CAs: \
             give the CA's certificate (or, for a self-signed certificate, the server's own) \
             with --remote-ca FILE"
        )
    );
    client.cancel().await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

async fn exec_on(client: &Client, env: &str, cmd: &str) -> rmcp::model::CallToolResult {
    call(
        client,
        "exec_command",
        json!({"cmd": cmd, "login": false, "yield_time_ms": 5000, "environment_id": env}),
    )
    .await
}

/// The self-signed certificate of the recipe in docs/src/serve.md, made by openssl in `dir` as
/// `NAME.pem` and `NAME.key`, naming `san` (`DNS:localhost,IP:127.0.0.1`); `None` (and a
/// message) when openssl is not installed.
fn openssl_self_signed(dir: &Path, name: &str, san: &str) -> Option<(PathBuf, PathBuf)> {
    let openssl = Path::new("/usr/bin/openssl");
    if !openssl.exists() {
        eprintln!("skipped: /usr/bin/openssl is not installed");
        return None;
    }
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    let out = Command::new(openssl)
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "365", "-subj", "/CN=uexec-test"])
        .args(["-addext", &format!("subjectAltName={san}")])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // What made webpki refuse it: openssl marks a self-signed certificate as a CA.
    let text = Command::new(openssl)
        .args(["x509", "-noout", "-text", "-in"])
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("CA:TRUE"),
        "openssl made a certificate that is not a CA: this test no longer tests the case"
    );
    Some((cert, key))
}

fn serve_tls(cert: &Path, key: &Path) -> Served {
    serve(&[
        "--listen",
        "wss://127.0.0.1:0",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ])
}

/// Regression: webpki refused openssl's self-signed certificate (`CaUsedAsEndEntity`), and
/// the refusal was printed as a debug dump.
#[tokio::test]
async fn an_openssl_self_signed_certificate_is_trusted_when_remote_ca_gives_it() {
    let dir = temp_dir("openssl");
    let Some((cert, key)) = openssl_self_signed(&dir, "cert", "DNS:localhost,IP:127.0.0.1") else {
        return;
    };
    let server = serve_tls(&cert, &key);
    let port = server.addr.rsplit_once(':').unwrap().1;
    let by_ip = format!("wss://127.0.0.1:{port}");
    let by_name = format!("wss://localhost:{port}");
    let (client, _, _) = stdio_client(&[
        "--codex-compat",
        "--environment",
        &format!("ip={by_ip}"),
        "--environment",
        &format!("name={by_name}"),
        "--remote-ca",
        cert.to_str().unwrap(),
    ])
    .await;
    for env in ["ip", "name"] {
        let r = exec_on(&client, env, "echo pinned").await;
        assert_eq!(structured(&r)["output"], "pinned\n", "{env}: {}", text(&r));
    }
    client.cancel().await.unwrap();

    // Not given (or another certificate given), it is refused in words that say what to do.
    let elsewhere = dir.join("other");
    std::fs::create_dir(&elsewhere).unwrap();
    let (other, _) = make_cert(&elsewhere);
    let cases: [(&[&str], String); 2] = [
        (
            &[],
            "give this very certificate with --remote-ca FILE".to_string(),
        ),
        (
            &["--remote-ca", other.to_str().unwrap()],
            format!(
                "put this very certificate in --remote-ca {}",
                other.display()
            ),
        ),
    ];
    for (extra, hint) in cases {
        let env = format!("box={by_ip}");
        let mut args = vec!["--environment", env.as_str()];
        args.extend_from_slice(extra);
        let (client, _, _) = stdio_client(&args).await;
        let r = exec_on(&client, "box", "echo never").await;
        assert_eq!(r.is_error, Some(true), "{}", text(&r));
        assert_eq!(
            text(&r),
            format!(
                "exec_command failed: Failed to create process: environment box: cannot reach \
                 {by_ip}: certificate not trusted: it is a CA certificate (CA:TRUE, as the \
                 self-signed certificates `openssl req -x509` makes are), trusted only as a \
                 pinned certificate: {hint}"
            )
        );
        client.cancel().await.unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A pinned certificate must still name the host dialled (its subjectAltName; the CN is not
/// read), and the refusal lists what it names.
#[tokio::test]
async fn a_pinned_certificate_must_name_the_host_dialled() {
    let dir = temp_dir("pinname");
    let Some((cert, key)) = openssl_self_signed(&dir, "cert", "DNS:localhost") else {
        return;
    };
    let server = serve_tls(&cert, &key);
    let url = format!("wss://{}", server.addr);
    let (client, _, _) = stdio_client(&[
        "--codex-compat",
        "--environment",
        &format!("box={url}"),
        "--remote-ca",
        cert.to_str().unwrap(),
    ])
    .await;
    let r = exec_on(&client, "box", "echo never").await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert_eq!(
        text(&r),
        format!(
            "exec_command failed: Failed to create process: environment box: cannot reach \
             {url}: certificate not trusted: it names DNS:localhost, not 127.0.0.1: dial one \
             of those, or make the certificate with subjectAltName=IP:127.0.0.1"
        )
    );
    client.cancel().await.unwrap();
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
