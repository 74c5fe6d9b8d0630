//! No uexec face lets a sandboxed command out: a command in a `read-only` sandbox has the
//! user's uid, yet it cannot use the user's daemon (through `uexec run`), cannot drive a
//! token-less `uexec serve` or `uexec mcp --http` on loopback, cannot reach an abstract Unix
//! socket made outside, and cannot signal a process outside. The same requests made from
//! outside the sandbox still work, so each refusal is the sandbox's.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::json;
use tokio::io::AsyncBufReadExt;

use crate::helpers::{call, rand_suffix, structured, text, Client, Recorder, UEXEC};
use crate::net_support::{mcp_http, python, request_as, serve, CLIENT};
use crate::place::DaemonPlace as Place;

/// `uexec mcp --in-process ARGS` in the place's working directory, with its private
/// runtime directory (where the daemon its commands try to reach listens).
async fn server(place: &Place, extra: &[&str], env: &[(&str, &str)]) -> Client {
    let mut cmd = tokio::process::Command::new(UEXEC);
    cmd.args(["mcp", "--in-process"])
        .args(extra)
        .current_dir(&place.cwd)
        .env("XDG_RUNTIME_DIR", &place.runtime)
        .env("HOME", place.cwd.join("home"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    Recorder::default()
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap()
}

/// Runs `cmd` (no login shell) and returns its output, checking that it ran sandboxed.
async fn sandboxed(client: &Client, cmd: &str) -> String {
    let r = call(
        client,
        "exec_command",
        json!({"cmd": cmd, "login": false, "yield_time_ms": 30_000}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(
        s["sandbox"]["profile"],
        "read-only",
        "not sandboxed: {}",
        text(&r)
    );
    s["output"].as_str().unwrap_or_default().to_owned()
}

/// A name, `uexec mcp` flags beyond `--structured --sandbox read-only`, and its environment.
type SandboxCase = (
    &'static str,
    &'static [&'static str],
    &'static [(&'static str, &'static str)],
);

/// Runs its closure when dropped: a test's daemon stops even when the test fails.
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// A daemon's socket in a private directory of its own (not uexec's runtime directory, so
/// that only the daemon's own check stands between the sandbox and it).
fn daemon_socket(place: &Place) -> PathBuf {
    let dir = place.cwd.join("daemon");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir.join("daemon.sock")
}

#[tokio::test]
async fn a_sandboxed_uexec_run_is_refused_by_the_daemon_and_runs_nothing() {
    let place = Place::new("doors-daemon");
    let socket = daemon_socket(&place);
    let socket_arg = socket.display().to_string();
    let _stop = OnDrop(|| {
        let _ = place
            .command(&["daemon", "--stop", "--socket", &socket_arg])
            .output();
    });
    // From outside, `uexec run` starts the daemon and runs.
    let outside = place.cwd.join("ran-outside");
    let out = place
        .command(&["run", "--socket", &socket_arg, "--", "touch"])
        .arg(&outside)
        .output()
        .unwrap();
    assert!(
        out.status.success() && outside.exists(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Network off and on; and without the namespaces layer (best effort), where the seccomp
    // filter is what tells the command apart.
    let cases: [SandboxCase; 3] = [
        ("network-off", &["--network", "off"], &[]),
        ("network-on", &["--network", "on"], &[]),
        (
            "no-namespaces",
            &["--sandbox-fallback", "best-effort"],
            &[("UEXEC_SANDBOX_FAULT", "namespaces")],
        ),
    ];
    for (case, flags, env) in cases {
        let mut args = vec!["--structured", "--sandbox", "read-only"];
        args.extend_from_slice(flags);
        let client = server(&place, &args, env).await;
        let escaped = place.cwd.join(format!("escaped-{case}"));
        let cmd = format!(
            "{UEXEC} run --socket {socket_arg} -- sh -c 'touch {}'; echo rc=$?",
            escaped.display()
        );
        let out = sandboxed(&client, &cmd).await;
        assert!(!escaped.exists(), "{case}: the daemon ran it: {out}");
        assert!(
            out.contains("a sandboxed command may not use the uexec daemon"),
            "{case}: {out}"
        );
        assert!(!out.contains("rc=0"), "{out}");
        client.cancel().await.unwrap();
    }
    // The daemon still serves its user outside.
    let again = place.cwd.join("ran-outside-again");
    let out = place
        .command(&["run", "--socket", &socket_arg, "--", "touch"])
        .arg(&again)
        .output()
        .unwrap();
    assert!(
        out.status.success() && again.exists(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The status line a sandboxed `CLIENT` gets from `addr` (`kind`: "ws" or "mcp").
async fn sandboxed_request(client: &Client, script: &Path, addr: &str, kind: &str) -> String {
    let (host, port) = addr.rsplit_once(':').unwrap();
    let out = sandboxed(
        client,
        &format!("{} {} {host} {port} {kind}", python(), script.display()),
    )
    .await;
    out.trim().to_owned()
}

#[tokio::test]
async fn a_sandboxed_command_is_not_the_user_of_a_token_less_loopback_listener() {
    let place = Place::new("doors-tcp");
    let script = place.cwd.join("client.py");
    std::fs::write(&script, CLIENT).unwrap();
    let exec_server = serve(&["--listen", "ws://127.0.0.1:0"]);
    let http = mcp_http(&["--http", "127.0.0.1:0"]);
    // The user itself is let in.
    assert_eq!(request_as(None, &exec_server.addr, "ws", None), "101");
    assert_eq!(request_as(None, &http.addr, "mcp", None), "200");
    // The network is on by default in read-only: the listener is reachable, and refuses.
    let client = server(&place, &["--structured", "--sandbox", "read-only"], &[]).await;
    assert_eq!(
        sandboxed_request(&client, &script, &exec_server.addr, "ws").await,
        "403"
    );
    assert_eq!(
        sandboxed_request(&client, &script, &http.addr, "mcp").await,
        "403"
    );
    // Said plainly.
    let (host, port) = http.addr.rsplit_once(':').unwrap();
    let out = sandboxed(
        &client,
        &format!("curl -sS -X POST -H 'Content-Type: application/json' -d '{{}}' http://{host}:{port}/mcp"),
    )
    .await;
    assert!(
        out.contains("a sandboxed command is not the server's user"),
        "{out}"
    );
    // And the user still is, afterwards.
    assert_eq!(request_as(None, &exec_server.addr, "ws", None), "101");
    assert_eq!(request_as(None, &http.addr, "mcp", None), "200");
    client.cancel().await.unwrap();
}

/// Connects to the abstract socket `name`; prints `connected` or the errno's name.
const ABSTRACT_CLIENT: &str = r#"
import errno, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0" + sys.argv[1])
    print("connected")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
"#;

#[tokio::test]
async fn a_sandboxed_command_reaches_no_abstract_socket_and_signals_nothing_outside() {
    use std::os::linux::net::SocketAddrExt;
    let place = Place::new("doors-scope");
    let script = place.cwd.join("abstract.py");
    std::fs::write(&script, ABSTRACT_CLIENT).unwrap();
    let name = format!("uexec-test-{}", rand_suffix());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap();
    let pid = sleeper.id();
    let probe = format!(
        "{} {} {name}; kill -0 {pid} 2>/dev/null && echo signalled || echo not-signalled",
        python(),
        script.display()
    );
    // From here, both work: the test can tell the difference.
    let out = std::process::Command::new("sh")
        .args(["-c", &probe])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "connected\nsignalled\n"
    );
    // In a sandbox with Landlock alone holding these lines (the namespaces layer missing:
    // no pid namespace hides the sleeper there), and with every layer.
    let full: &[&str] = &["--structured", "--sandbox", "read-only"];
    let best_effort: &[&str] = &[
        "--structured",
        "--sandbox",
        "read-only",
        "--sandbox-fallback",
        "best-effort",
    ];
    for (flags, env) in [
        (best_effort, &[("UEXEC_SANDBOX_FAULT", "namespaces")][..]),
        (full, &[][..]),
    ] {
        let client = server(&place, flags, env).await;
        let out = sandboxed(&client, &probe).await;
        assert_eq!(out, "EPERM\nnot-signalled\n", "{flags:?} {env:?}");
        client.cancel().await.unwrap();
    }
    assert!(
        sleeper.try_wait().unwrap().is_none(),
        "the sleeper lives on"
    );
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

/// The uid of `nobody` on this machine.
fn nobody_uid() -> u32 {
    let out = std::process::Command::new("id")
        .args(["-u", "nobody"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// `UEXEC ARGS` as `nobody` in `root`, with its own XDG_RUNTIME_DIR and HOME. Through
/// `setpriv`, which execs (runuser forks and waits: killing it would leave uexec running).
fn as_nobody(root: &Path, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("setpriv");
    cmd.args([
        "--reuid=nobody",
        "--regid=nogroup",
        "--clear-groups",
        "--",
        "env",
    ])
    .arg(format!("XDG_RUNTIME_DIR={}", root.join("run").display()))
    .arg(format!("HOME={}", root.join("home").display()))
    .arg(UEXEC)
    .args(args)
    .current_dir(root);
    cmd
}

/// Without `CAP_SYS_PTRACE` the server cannot look into its own user's non-dumpable
/// processes (the `uexec` front and the CLI verbs are): those are let in, and a sandboxed
/// command of that user is still refused, on the daemon's socket and on loopback.
#[tokio::test]
async fn an_unprivileged_users_own_cli_is_let_in_and_its_sandboxed_command_is_not() {
    let root = std::env::temp_dir().join(format!("uexec-it-doors-nobody-{}", rand_suffix()));
    for dir in ["run", "sock", "home"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    for dir in ["", "run", "sock", "home"] {
        let path = root.join(dir);
        std::os::unix::fs::chown(&path, Some(nobody_uid()), None).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let socket = root.join("sock").join("daemon.sock").display().to_string();
    let _stop = OnDrop(|| {
        let _ = std::process::Command::new("runuser")
            .args([
                "-u", "nobody", "--", UEXEC, "daemon", "--stop", "--socket", &socket,
            ])
            .output();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&root);
        }
    });
    let outside = root.join("ran-outside");
    let mut run = as_nobody(&root, &["run", "--socket", &socket, "--", "touch"]);
    let out = run.arg(&outside).output().await.unwrap();
    assert!(
        out.status.success() && outside.exists(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut http = as_nobody(&root, &["mcp", "--http", "127.0.0.1:0"]);
    let mut http = http
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(http.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next_line().await.unwrap().expect("an address");
        if let Some(url) = line.strip_prefix("uexec mcp: serving streamable HTTP at http://") {
            break url.trim_end_matches("/mcp").to_owned();
        }
    };
    assert_eq!(request_as(Some("nobody"), &addr, "mcp", None), "200");
    let script = root.join("client.py");
    std::fs::write(&script, CLIENT).unwrap();
    std::os::unix::fs::chown(&script, Some(nobody_uid()), None).unwrap();
    let (host, port) = addr.rsplit_once(':').unwrap();
    let request = format!("{} {} {host} {port} mcp", python(), script.display());

    let client = Recorder::default()
        .serve(
            TokioChildProcess::new(as_nobody(
                &root,
                &[
                    "mcp",
                    "--in-process",
                    "--structured",
                    "--sandbox",
                    "read-only",
                ],
            ))
            .unwrap(),
        )
        .await
        .unwrap();
    let escaped = root.join("escaped");
    let out = sandboxed(
        &client,
        &format!(
            "{UEXEC} run --socket {socket} -- touch {}; {request}",
            escaped.display()
        ),
    )
    .await;
    assert!(!escaped.exists(), "{out}");
    assert!(
        out.contains("a sandboxed command may not use the uexec daemon"),
        "{out}"
    );
    assert!(out.ends_with("403\n"), "{out}");
    client.cancel().await.unwrap();
}
