//! A client checks the daemon before it says anything: the socket's directory must be this
//! user's and private, and the listener must run as this user. A socket planted by another
//! user (in a directory of theirs, or moved into one of ours) hears nothing, not even the
//! hello; no daemon is started in a directory that fails the check; and an agent's hello
//! never carries a secret-looking variable unless `--env-keep` names it, while a person's
//! (`uexec run`) carries their environment whole, to a listener that passed the checks.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;

use crate::helpers::rand_suffix;
use crate::net_support::python;
use crate::place::DaemonPlace as Place;

/// A listener that prints, for each connection, how many bytes it read and their first line
/// (`got N LINE`), and closes it, until one sends `END`. With `make-dir`, it first makes the socket's directory, open to all.
/// It exits when its stdin closes (the test is over, whatever happened).
const LISTENER: &str = r#"
import os, socket, sys, threading
threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
path = sys.argv[1]
if sys.argv[2] == "make-dir":
    os.mkdir(os.path.dirname(path))
    os.chmod(os.path.dirname(path), 0o777)
s = socket.socket(socket.AF_UNIX)
s.bind(path)
os.chmod(path, 0o777)
s.listen(16)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.settimeout(10)
    data = b""
    try:
        while b"\n" not in data:
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    c.close()
    if data == b"END\n":
        break
    print("got", len(data), data.split(b"\n")[0].decode(errors="replace"), flush=True)
print("end", flush=True)
"#;

struct Listener {
    child: Child,
    lines: std::io::Lines<BufReader<ChildStdout>>,
    /// Closed on drop: the listener then exits.
    _stdin: std::process::ChildStdin,
}

impl Listener {
    /// Starts [`LISTENER`] on `socket`, as `user` (None: this test's user).
    fn start(user: Option<&str>, socket: &Path, make_dir: bool) -> Self {
        let mut cmd = match user {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--", python()]);
                c
            }
            None => Command::new(python()),
        };
        let mut child = cmd
            .args(["-c", LISTENER])
            .arg(socket)
            .arg(if make_dir { "make-dir" } else { "no" })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "ready");
        let _stdin = child.stdin.take().unwrap();
        Self {
            child,
            lines,
            _stdin,
        }
    }

    /// Ends the listener (through `socket`, where it now is): the first lines it heard.
    fn heard(mut self, socket: &Path) -> Vec<String> {
        UnixStream::connect(socket)
            .unwrap()
            .write_all(b"END\n")
            .unwrap();
        let mut heard = Vec::new();
        for line in self.lines.by_ref() {
            let line = line.unwrap();
            if line == "end" {
                break;
            }
            heard.push(line);
        }
        self.child.wait().unwrap();
        heard
    }
}

/// Runs `cmd` (stdin closed) to its end, killed after 30 s.
fn finish(mut cmd: Command) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("still running after 30 s");
        }
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A new directory of ours, mode 0700.
fn private_dir(place: &Place, name: &str) -> PathBuf {
    let dir = place.cwd.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// `uexec mcp --daemon` and `uexec run` (the front, then the engine) against `socket`: both
/// refuse, naming the socket and saying `why`; the run's command never runs.
fn both_clients_refuse(place: &Place, socket: &Path, why: &str) {
    let socket_arg = socket.display().to_string();
    let mut mcp = place.command(&["mcp", "--daemon", "--daemon-socket", &socket_arg]);
    mcp.env("FOO_API_KEY", "sk-planted-0123456789");
    let out = finish(mcp);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains(&socket_arg) && err.contains(why), "{err}");

    let ran = place.cwd.join(format!("ran-{}", rand_suffix()));
    let mut run = place.command(&["run", "--socket", &socket_arg, "--", "touch"]);
    run.arg(&ran).env("FOO_API_KEY", "sk-planted-0123456789");
    let out = finish(run);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains(&socket_arg) && err.contains(why), "{err}");
    assert!(!ran.exists());
}

#[test]
fn a_socket_planted_by_another_user_hears_nothing() {
    let place = Place::new("planted");
    // nobody's directory, open to all, in the shared temp dir; its listener in it.
    let theirs = std::env::temp_dir().join(format!("uexec-planted-{}", rand_suffix()));
    let planted = theirs.join("daemon.sock");
    let listener = Listener::start(Some("nobody"), &planted, true);
    both_clients_refuse(&place, &planted, "refusing");

    // The same listener moved into a private directory of ours: the directory passes, the
    // listener's uid does not.
    let ours = private_dir(&place, "ours").join("daemon.sock");
    std::fs::rename(&planted, &ours).unwrap();
    let nobody = Command::new("id").args(["-u", "nobody"]).output().unwrap();
    let nobody = String::from_utf8_lossy(&nobody.stdout).trim().to_owned();
    both_clients_refuse(
        &place,
        &ours,
        &format!("served by uid {nobody}, not by this user"),
    );

    // No daemon is started in a directory that fails the check either.
    let socket_arg = planted.display().to_string();
    let out = finish(place.command(&["mcp", "--daemon", "--daemon-socket", &socket_arg]));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(&theirs.display().to_string()) && err.contains("mode 0700"),
        "{err}"
    );
    assert!(!err.contains("exited at start"), "{err}");
    assert!(!planted.exists());

    // Connected to (the listener's uid is known only then), but sent nothing.
    let _ = std::fs::remove_dir_all(&theirs);
    let heard = listener.heard(&ours);
    assert!(
        heard.iter().all(|line| line.trim_end() == "got 0"),
        "the planted socket heard {heard:?}"
    );
}

/// The variable names of a hello line, decoded.
fn hello_env_names(line: &str) -> Vec<String> {
    let hello: Value = serde_json::from_str(line.splitn(3, ' ').nth(2).unwrap()).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    hello["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| String::from_utf8(b64.decode(pair[0].as_str().unwrap()).unwrap()).unwrap())
        .collect()
}

#[test]
fn an_agents_hello_carries_no_secret_looking_variable_unless_kept_a_persons_all() {
    let place = Place::new("hello-env");
    let socket = private_dir(&place, "fake").join("daemon.sock");
    let socket_arg = socket.display().to_string();
    let listener = Listener::start(None, &socket, false);
    let secrets = [
        ("FOO_API_KEY", "sk-0123456789"),
        ("KEPT_TOKEN", "kept-value"),
        ("GITHUB_PAT", "ghp_0123"),
        ("UEXEC_IT_PLAIN", "plain"),
    ];
    let mut mcp = place.command(&[
        "mcp",
        "--daemon",
        "--daemon-socket",
        &socket_arg,
        "--env-keep",
        "KEPT_TOKEN",
    ]);
    let mut run = place.command(&["run", "--socket", &socket_arg, "--", "true"]);
    for (k, v) in secrets {
        mcp.env(k, v);
        run.env(k, v);
    }
    finish(mcp);
    finish(run);
    let heard = listener.heard(&socket);
    // The front's hello, then the engine's it handed over to (the fake daemon answered
    // nothing), after `uexec mcp --daemon`'s.
    assert!(heard.len() >= 2, "{heard:?}");
    for (i, line) in heard.iter().enumerate() {
        let names = hello_env_names(line);
        assert!(names.iter().any(|n| n == "UEXEC_IT_PLAIN"), "{names:?}");
        // The agent's (the first) only what `--env-keep` names; the person's everything:
        // their own commands get it, and the listener is theirs (checked before).
        let person = i > 0;
        assert_eq!(
            names.iter().any(|n| n == "FOO_API_KEY"),
            person,
            "{names:?}"
        );
        assert_eq!(names.iter().any(|n| n == "GITHUB_PAT"), person, "{names:?}");
        assert!(names.iter().any(|n| n == "KEPT_TOKEN"), "{i}: {names:?}");
    }
}

/// `uexec mcp --daemon --daemon-socket DIR/daemon.sock` with DIR not made yet (as CI runs
/// the conformance suite): the client makes DIR private (0700, ours) and starts the daemon
/// there; a DIR that exists but is not private is still refused (above).
#[tokio::test]
async fn a_socket_directory_not_made_yet_is_made_private_and_the_daemon_starts_there() {
    use std::os::unix::fs::PermissionsExt;
    let place = Place::new("trust-newdir");
    let dir = place.runtime.join("not-yet");
    let socket = dir.join("daemon.sock");
    let socket_arg = socket.display().to_string();
    let client = place
        .client(&["--codex-compat", "--daemon-socket", &socket_arg])
        .await;
    let r = crate::helpers::call(
        &client,
        "exec_command",
        serde_json::json!({"cmd": "echo through-the-new-dir", "login": false}),
    )
    .await;
    assert!(crate::helpers::text(&r).contains("through-the-new-dir"));
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    client.cancel().await.unwrap();
    let _ = place
        .command(&["daemon", "--stop", "--socket", &socket_arg])
        .output();
}
