//! The launcher started ahead of a sandboxed command: the command runs in it, and a waiting
//! launcher handed a bad launch reports it and leaves quietly.

use std::time::Duration;

use serde_json::json;

use crate::helpers::{
    call, eventually, marker, procs_with, rand_suffix, send_signal, structured, text,
    wait_all_gone, UEXEC,
};
use crate::sandbox::{exec, scratch, server};

#[tokio::test]
async fn a_sandboxed_command_runs_in_the_launcher_started_ahead() {
    let dir = scratch("warm");
    let (client, pid) = server(&dir, &["--codex-compat", "--sandbox", "read-only"], &[]).await;
    // The first sandboxed command probes the machine, which starts a launcher waiting.
    let r = exec(&client, json!({"cmd": "true"})).await;
    assert_eq!(structured(&r)["exit_code"], 0, "{}", text(&r));
    let mut ahead = Vec::new();
    eventually("a launcher waiting", Duration::from_secs(5), || {
        ahead = waiting_launchers(pid);
        ahead.len() == 1
    })
    .await;
    let m = marker();
    let r = exec(
        &client,
        json!({"cmd": format!("echo \"in $PWD as $UEXEC_SANDBOX\"; sleep {m}"), "yield_time_ms": 250}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    // Its stdout is the session's pipe, its directory the call's, its environment the
    // command's (not the launcher's empty one).
    let expected = format!("in {} as read-only", dir.canonicalize().unwrap().display());
    assert!(text(&r).contains(&expected), "{}", text(&r));
    // (A cold launcher's command line holds the command too: pick the sleep itself.)
    let sleeper: Vec<u32> = procs_with(&m)
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .unwrap_or_default()
                .starts_with(b"sleep\0")
        })
        .collect();
    assert_eq!(sleeper.len(), 1, "{sleeper:?}");
    assert!(
        descends_from(sleeper[0], ahead[0]),
        "the command runs under the launcher that was waiting ({})",
        ahead[0]
    );
    // The next one is already waiting.
    eventually("the next launcher waiting", Duration::from_secs(5), || {
        waiting_launchers(pid).iter().any(|p| *p != ahead[0])
    })
    .await;
    call(&client, "terminate_session", json!({"session_id": id})).await;
    wait_all_gone(&[m], "the command").await;
    // A server that goes takes its waiting launcher along.
    let next = waiting_launchers(pid);
    send_signal(pid, "KILL");
    eventually("the waiting launcher to go", Duration::from_secs(5), || {
        next.iter()
            .all(|p| crate::helpers::proc_stat(*p).is_none_or(|s| s.state == 'Z'))
    })
    .await;
}

/// A launch message as the engine writes it (`uexec_sandbox::warm`): magic, body
/// length, tty flag, count of passed descriptors (none here), counts, NUL-terminated cwd,
/// arguments and environment.
fn launch_message(cwd: &str, args: &[&str], env: &[&str]) -> Vec<u8> {
    let mut body = vec![0u8, 0u8];
    body.extend((args.len() as u32).to_le_bytes());
    body.extend((env.len() as u32).to_le_bytes());
    for s in std::iter::once(&cwd).chain(args).chain(env) {
        body.extend(s.as_bytes());
        body.push(0);
    }
    let mut message = b"UXW2".to_vec();
    message.extend((body.len() as u32).to_le_bytes());
    message.extend(body);
    message
}

/// `uexec __sandbox-exec --warm` with a socket as stdin: the engine's end, and the process.
fn warm_launcher() -> (std::os::unix::net::UnixStream, std::process::Child) {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let child = std::process::Command::new(UEXEC)
        .args(["__sandbox-exec", "--warm"])
        .stdin(std::os::fd::OwnedFd::from(theirs))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    (ours, child)
}

/// Sends `message` with three descriptors (stdio) attached to its first byte.
fn send_launch(socket: &std::os::unix::net::UnixStream, message: &[u8]) {
    use std::os::fd::AsRawFd;
    let null = std::fs::File::open("/dev/null").unwrap();
    let fd = null.as_raw_fd();
    uexec_sys::send_with_fds(socket.as_raw_fd(), &message[..1], &[fd, fd, fd]).unwrap();
    std::io::Write::write_all(&mut &*socket, &message[1..]).unwrap();
}

fn read_report(socket: &std::os::unix::net::UnixStream) -> (u32, i32) {
    let mut report = [0u8; 8];
    std::io::Read::read_exact(&mut &*socket, &mut report).unwrap();
    (
        u32::from_ne_bytes(report[..4].try_into().unwrap()),
        i32::from_ne_bytes(report[4..].try_into().unwrap()),
    )
}

#[test]
fn a_waiting_launcher_reports_a_bad_launch_and_leaves_quietly_without_one() {
    // No launch: the engine's end closes, the launcher exits 0 having run nothing.
    let (socket, mut child) = warm_launcher();
    drop(socket);
    assert_eq!(child.wait().unwrap().code(), Some(0));

    // A working directory that is gone: the report says so (stage 2, ENOENT), as a cold
    // spawn's does, and nothing runs.
    let (socket, mut child) = warm_launcher();
    let witness = std::env::temp_dir().join(format!("uexec-warm-{}", rand_suffix()));
    let touch = format!("/usr/bin/touch {}", witness.display());
    let argv: Vec<&str> = ["--layers", "", "--"]
        .into_iter()
        .chain(touch.split(' '))
        .collect();
    send_launch(
        &socket,
        &launch_message("/nonexistent/dir", &argv, &["PATH=/usr/bin:/bin"]),
    );
    assert_eq!(read_report(&socket), (2, libc::ENOENT));
    assert_eq!(child.wait().unwrap().code(), Some(126));
    assert!(!witness.exists());

    // A message that is not one: a protocol error (stage 1, EPROTO).
    let (socket, mut child) = warm_launcher();
    let mut bad = launch_message("/", &argv, &[]);
    bad[..4].copy_from_slice(b"NOPE");
    send_launch(&socket, &bad);
    assert_eq!(read_report(&socket), (1, libc::EPROTO));
    assert_eq!(child.wait().unwrap().code(), Some(126));
    // Passed descriptors said to follow stdio that do not, or more than a launch may pass:
    // protocol errors too.
    for passed in [2, uexec_sys::MAX_PASSED_FDS as u8 + 1] {
        let (socket, mut child) = warm_launcher();
        let mut bad = launch_message("/", &argv, &[]);
        bad[9] = passed;
        send_launch(&socket, &bad);
        assert_eq!(read_report(&socket), (1, libc::EPROTO), "{passed} passed");
        assert_eq!(child.wait().unwrap().code(), Some(126));
    }

    // A good one runs the command (no layers: the launcher execs it) after a zero report.
    let (socket, mut child) = warm_launcher();
    send_launch(
        &socket,
        &launch_message("/", &argv, &["PATH=/usr/bin:/bin"]),
    );
    assert_eq!(read_report(&socket), (0, 0));
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert!(witness.exists());
    let _ = std::fs::remove_file(&witness);
}

/// The launchers `server` started ahead and left waiting (`uexec __sandbox-exec --warm`).
pub(crate) fn waiting_launchers(server: u32) -> Vec<u32> {
    crate::helpers::children_of(server)
        .into_iter()
        .filter(|p| {
            let cmdline = std::fs::read(format!("/proc/{}/cmdline", p.pid)).unwrap_or_default();
            cmdline.ends_with(b"__sandbox-exec\0--warm\0")
        })
        .map(|p| p.pid)
        .collect()
}

/// Whether `ancestor` is `pid`'s parent, grandparent, ...
pub(crate) fn descends_from(pid: u32, ancestor: u32) -> bool {
    let mut at = pid;
    while let Some(stat) = crate::helpers::proc_stat(at) {
        if stat.ppid == ancestor {
            return true;
        }
        if stat.ppid <= 1 {
            return false;
        }
        at = stat.ppid;
    }
    false
}

/// The launcher started ahead is born in a cgroup of its own, made ahead for the session
/// that will take it (moving it into the session's at the launch would wait on the
/// kernel's cgroup lock, milliseconds after an idle pause): the command it becomes runs
/// there, the session adopts that cgroup, and removes it at its end.
#[tokio::test]
async fn the_launcher_started_ahead_is_born_in_the_cgroup_its_session_adopts() {
    let own = crate::cgroups::require_cgroups();
    let dir = scratch("warm-cgroup");
    let (client, pid) = server(&dir, &["--codex-compat", "--sandbox", "read-only"], &[]).await;
    let r = exec(&client, json!({"cmd": "true"})).await;
    assert_eq!(structured(&r)["exit_code"], 0, "{}", text(&r));
    let mut ahead = Vec::new();
    eventually("a launcher waiting", Duration::from_secs(5), || {
        ahead = waiting_launchers(pid);
        ahead.len() == 1
    })
    .await;
    let v2 = |p: u32| {
        std::fs::read_to_string(format!("/proc/{p}/cgroup"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .map(str::to_owned)
            .unwrap_or_default()
    };
    let born = v2(ahead[0]);
    let (parent, leaf) = born.rsplit_once('/').expect("a cgroup path");
    assert!(
        parent.ends_with(&format!("/uexec.{pid}")) && leaf.starts_with('s'),
        "the waiting launcher is in {born}, not a session's cgroup of uexec.{pid}"
    );
    let m = marker();
    let r = exec(
        &client,
        json!({"cmd": format!("cat /proc/self/cgroup; sleep {m}"), "yield_time_ms": 250}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    assert!(
        text(&r).contains(&format!("0::{born}\n")),
        "the command runs in the launcher's cgroup {born}: {}",
        text(&r)
    );
    let adopted = own.join(format!("uexec.{pid}")).join(leaf);
    assert!(adopted.exists(), "{}", adopted.display());
    call(&client, "terminate_session", json!({"session_id": id})).await;
    wait_all_gone(&[m], "the command").await;
    eventually("the adopted cgroup removed", Duration::from_secs(5), || {
        !adopted.exists()
    })
    .await;
    drop(client);
}
