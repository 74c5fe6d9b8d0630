//! Every exec handed to a supervisor (seccomp user notification): a child installs the
//! filter, sends its listener over a socket pair and runs a script; this process judges each
//! exec from the program and arguments it reads, and lets it go on or fails it with EACCES.
//!
//! The child is this test binary again (so no `unsafe` here): run with [`CHILD`] set, the
//! test [`child_half`] installs the filter, sends the listener on descriptor 3 and becomes
//! `/bin/sh -c SCRIPT`.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::{Duration, Instant};

use uexec_sys::{ChildSpec, ExecCall, ExecListener, ListenerState};

/// Set in the child: the script it runs under the filter, or [`PROBE`].
const CHILD: &str = "UEXEC_SYS_EXEC_NOTIFY_CHILD";
/// The child's other task: ask `probe_exec_notify` under its own listener, print the answer.
const PROBE: &str = "probe";
const DEADLINE: Duration = Duration::from_secs(60);

/// The child's half (see the module docs); in a plain run, what the supervisor's half needs:
/// this machine can hand execs to a supervisor.
#[test]
fn child_half() {
    let Ok(script) = std::env::var(CHILD) else {
        uexec_sys::probe_exec_notify().expect("seccomp user notification works here");
        return;
    };
    let socket = uexec_sys::adopt_inherited_unix_socket(uexec_sys::PASSED_FD).unwrap();
    let listener = ExecListener::install().unwrap();
    uexec_sys::send_fd(socket.as_raw_fd(), listener.as_raw_fd()).unwrap();
    drop(listener);
    if script == PROBE {
        match uexec_sys::probe_exec_notify() {
            Ok(()) => println!("\nprobe: ok"),
            Err(e) => println!("\nprobe: {}", e.raw_os_error().unwrap_or(0)),
        }
        uexec_sys::exit_now(0);
    }
    // The script's output starts a line of its own, after libtest's "test child_half ... ".
    println!();
    let e = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .env_remove(CHILD)
        .exec();
    panic!("exec /bin/sh: {e}");
}

/// A child started as [`child_half`] and the listener it sent.
struct Child {
    pid: u32,
    listener: ExecListener,
    stdout: std::thread::JoinHandle<String>,
    stderr: std::thread::JoinHandle<String>,
}

fn reader(fd: OwnedFd) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        std::fs::File::from(fd).read_to_string(&mut text).unwrap();
        text
    })
}

fn start(script: &str) -> Child {
    let exe = std::env::current_exe().unwrap();
    let c = |s: &[u8]| CString::new(s).unwrap();
    let argv = [
        exe.as_os_str().as_bytes(),
        b"child_half",
        b"--exact",
        b"--nocapture",
        b"--test-threads=1",
    ];
    let mut envp: Vec<CString> = std::env::vars_os()
        .filter(|(k, _)| k != CHILD)
        .map(|(k, v)| c(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
        .collect();
    envp.push(c(format!("{CHILD}={script}").as_bytes()));
    let (ours, theirs) = UnixStream::pair().unwrap();
    let null = uexec_sys::dev_null().unwrap();
    let (out_read, out_write) = uexec_sys::pipe_cloexec().unwrap();
    let (err_read, err_write) = uexec_sys::pipe_cloexec().unwrap();
    let spec = ChildSpec {
        program: c(exe.as_os_str().as_bytes()),
        argv: argv.iter().map(|a| c(a)).collect(),
        envp,
        cwd: c(b"/"),
        stdio: [
            null.as_raw_fd(),
            out_write.as_raw_fd(),
            err_write.as_raw_fd(),
        ],
        controlling_tty: false,
        passed_fds: vec![theirs.as_raw_fd()],
        program_fd: None,
        cgroup: None,
    };
    let child = uexec_sys::spawn_child(&spec).unwrap();
    drop((theirs, null, out_write, err_write));
    let stderr = reader(err_read);
    let listener = match uexec_sys::recv_fd(ours.as_raw_fd()) {
        Ok(fd) => ExecListener::from(fd),
        Err(e) => panic!(
            "no listener ({e}); the child said: {}",
            stderr.join().unwrap()
        ),
    };
    Child {
        pid: child.pid,
        listener,
        stdout: reader(out_read),
        stderr,
    }
}

/// What a supervised run showed.
struct Run {
    /// Every exec judged, in order, and whether it was let go on.
    judged: Vec<(ExecCall, bool)>,
    stdout: String,
    stderr: String,
    status: std::process::ExitStatus,
}

/// Runs `script` under the filter, letting every exec go on that `allow` allows.
fn supervise(script: &str, allow: fn(&ExecCall) -> bool) -> Run {
    let child = start(script);
    let listener = child.listener;
    // Judged as on a kernel of its own: with the synchronous wake-up where there is one.
    let synced = listener.sync_wake_up();
    if kernel_at_least(6, 6) {
        synced.expect("SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP on Linux 6.6+");
    }
    let supervisor = std::thread::spawn(move || {
        let started = Instant::now();
        let mut judged = Vec::new();
        loop {
            assert!(started.elapsed() < DEADLINE, "no end after {judged:?}");
            match listener.wait(100).unwrap() {
                ListenerState::Idle => continue,
                ListenerState::Gone => return judged,
                ListenerState::Ready => {}
            }
            let Ok(n) = listener.recv() else { continue };
            let mut call = listener
                .read_exec(&n)
                .expect("the exec's program and arguments");
            call.find_process()
                .expect("its process and parent, while held");
            let yes = allow(&call);
            let answer = if yes {
                listener.respond_continue(n.id)
            } else {
                listener.respond_error(n.id, libc::EACCES)
            };
            answer.expect("an answer to a live exec");
            judged.push((call, yes));
        }
    });
    let (_, status) = uexec_sys::wait_child(Some(child.pid)).unwrap();
    Run {
        judged: supervisor.join().unwrap(),
        stdout: child.stdout.join().unwrap(),
        stderr: child.stderr.join().unwrap(),
        status,
    }
}

/// Whether the running kernel is `major.minor` or later.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (major, minor)
}

fn args(call: &ExecCall) -> Vec<&str> {
    call.argv.iter().map(|a| a.to_str().unwrap()).collect()
}

#[test]
fn each_exec_is_judged_in_order_and_a_refused_one_fails_with_permission_denied() {
    let script = "true; /bin/echo allowed; /bin/false; echo after";
    let run = supervise(script, |call| call.program != Path::new("/bin/false"));
    let judged: Vec<(&Path, Vec<&str>, bool)> = run
        .judged
        .iter()
        .map(|(call, yes)| (call.program.as_path(), args(call), *yes))
        .collect();
    assert_eq!(
        judged,
        [
            (Path::new("/bin/sh"), vec!["/bin/sh", "-c", script], true),
            (Path::new("/bin/echo"), vec!["/bin/echo", "allowed"], true),
            (Path::new("/bin/false"), vec!["/bin/false"], false),
        ]
    );
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines.contains(&"allowed") && lines.contains(&"after"),
        "{lines:?}"
    );
    assert!(
        run.stderr.contains("/bin/false") && run.stderr.contains("Permission denied"),
        "{}",
        run.stderr
    );
    assert!(run.status.success(), "{:?}", run.status);
}

#[test]
fn a_tree_of_200_execs_is_judged_once_each() {
    let run = supervise("for i in $(seq 200); do /bin/true & done; wait", |_| true);
    let trues = run
        .judged
        .iter()
        .filter(|(call, _)| call.program == Path::new("/bin/true"))
        .count();
    assert_eq!(trues, 200, "{}", run.stderr);
    assert!(run.status.success(), "{:?} {}", run.status, run.stderr);
}

#[test]
fn each_exec_names_its_process_and_that_process_s_parent() {
    // The shell execs once (its pid is the child's), forks a shell that execs `true` and
    // then, with `exec`, `echo`: one process, two execs, one parent.
    let run = supervise("sh -c '/bin/true; exec /bin/echo x'; :", |_| true);
    assert!(run.status.success(), "{:?} {}", run.status, run.stderr);
    let tree: Vec<(&str, u32, u32)> = run
        .judged
        .iter()
        .map(|(c, _)| (c.program.to_str().unwrap(), c.pid, c.ppid))
        .collect();
    let [(_, top, _), (_, inner, inner_parent), (_, t, t_parent), (_, e, e_parent)] = tree[..]
    else {
        panic!("{tree:?}");
    };
    assert_eq!(inner_parent, top, "{tree:?}");
    assert_eq!((t_parent, e, e_parent), (inner, inner, top), "{tree:?}");
    assert_ne!(t, inner, "{tree:?}");
}

#[test]
fn relative_paths_and_fexecve_are_read_as_the_files_they_name() {
    let script = "cd /usr/bin && ./true relative && exec python3 -c \"import os; \
                  os.execve(os.open('/usr/bin/true', os.O_RDONLY), ['by-fd', 'x'], {})\"";
    let run = supervise(script, |_| true);
    assert!(run.status.success(), "{:?} {}", run.status, run.stderr);
    let relative = run.judged.iter().find(|(c, _)| c.argv[0] == *"./true");
    let relative = relative.map(|(c, _)| (c.program.as_path(), args(c)));
    assert_eq!(
        relative,
        Some((Path::new("/usr/bin/true"), vec!["./true", "relative"]))
    );
    let last = run
        .judged
        .last()
        .map(|(c, _)| (c.program.as_path(), args(c)));
    assert_eq!(last, Some((Path::new("/usr/bin/true"), vec!["by-fd", "x"])));
}

#[test]
fn an_exec_held_when_its_process_is_killed_leaves_nothing_to_answer() {
    let child = start("/bin/echo never");
    // The child's own exec of /bin/sh waits: take it, answer nothing, kill the child.
    let started = Instant::now();
    while child.listener.wait(100).unwrap() != ListenerState::Ready {
        assert!(started.elapsed() < DEADLINE, "no exec arrived");
    }
    let held = child.listener.recv().unwrap();
    let call = child.listener.read_exec(&held).unwrap();
    assert_eq!(call.program, Path::new("/bin/sh"));
    assert!(child.listener.id_valid(held.id));
    uexec_sys::kill_process(child.pid, libc::SIGKILL);
    let (_, status) = uexec_sys::wait_child(Some(child.pid)).unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    assert!(!child.listener.id_valid(held.id));
    let late = child.listener.respond_continue(held.id).unwrap_err();
    assert_eq!(late.raw_os_error(), Some(libc::ENOENT));
    assert_eq!(child.listener.wait(5_000).unwrap(), ListenerState::Gone);
    let said = child.stdout.join().unwrap();
    assert!(!said.contains("never"), "{said}");
}

#[test]
fn under_a_listener_already_the_probe_says_busy() {
    let child = start(PROBE);
    let (_, status) = uexec_sys::wait_child(Some(child.pid)).unwrap();
    assert!(status.success(), "{}", child.stderr.join().unwrap());
    let said = child.stdout.join().unwrap();
    let probe = said.lines().find(|l| l.starts_with("probe: "));
    assert_eq!(
        probe,
        Some(format!("probe: {}", libc::EBUSY).as_str()),
        "{said}"
    );
}
