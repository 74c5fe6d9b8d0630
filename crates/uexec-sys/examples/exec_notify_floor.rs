//! The floor under `--rules-at exec`: runs a command with every exec of its process tree
//! handed to this supervisor by the kernel (seccomp user notification, as uexec's launcher
//! installs it), and lets each go on at once: no reading, no rules, no record. What a run
//! costs over the same command without the filter is what the kernel's round trip alone costs
//! on this machine, the least any exec-time judge can cost (bench/rules_at_exec.py runs it).
//!
//!   cargo run --release -p uexec-sys --example exec_notify_floor -- [--read] -- CMD [ARG...]
//!
//! `--read`: also read each exec as uexec's judge does while it is held (its program and
//! arguments from the process's memory, its process and parent), without judging it.
//!
//! The child is this program again (no `unsafe` here): run with [`CHILD`] set, it installs
//! the filter, sends the listener on descriptor 3 and becomes the command.

use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};

use uexec_sys::{ChildSpec, ExecListener, ListenerState};

/// Set in the child: it installs the filter and becomes the command.
const CHILD: &str = "UEXEC_EXEC_NOTIFY_FLOOR_CHILD";

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let read = args.first().is_some_and(|a| a == "--read");
    let command = match args.iter().position(|a| a == "--") {
        Some(at) if at + 1 < args.len() => &args[at + 1..],
        _ => {
            eprintln!("usage: exec_notify_floor [--read] -- CMD [ARG...]");
            std::process::exit(2);
        }
    };
    if std::env::var_os(CHILD).is_some() {
        child(command);
    }
    std::process::exit(supervise(read));
}

/// The child's half: the filter, its listener sent on descriptor 3, then the command.
fn child(command: &[std::ffi::OsString]) -> ! {
    let fail = |what: &str, e: std::io::Error| -> ! {
        eprintln!("exec_notify_floor: {what}: {e}");
        std::process::exit(127);
    };
    let socket = uexec_sys::adopt_inherited_unix_socket(uexec_sys::PASSED_FD)
        .unwrap_or_else(|e| fail("the socket on descriptor 3", e));
    let listener = ExecListener::install().unwrap_or_else(|e| fail("the filter", e));
    if let Err(e) = uexec_sys::send_fd(socket.as_raw_fd(), listener.as_raw_fd()) {
        fail("sending the listener", e);
    }
    drop((listener, socket));
    let e = std::process::Command::new(&command[0])
        .args(&command[1..])
        .env_remove(CHILD)
        .exec();
    fail("exec", e)
}

/// Starts this program again as the child, answers its execs until none is left, and
/// returns the command's exit code.
fn supervise(read: bool) -> i32 {
    let fail = |what: &str, e: std::io::Error| -> ! {
        eprintln!("exec_notify_floor: {what}: {e}");
        std::process::exit(125);
    };
    let c = |s: &[u8]| CString::new(s).unwrap_or_else(|_| fail("an argument", nul()));
    let exe = std::env::current_exe().unwrap_or_else(|e| fail("this program's path", e));
    let argv: Vec<CString> = std::env::args_os().map(|a| c(a.as_bytes())).collect();
    let mut envp: Vec<CString> = std::env::vars_os()
        .map(|(k, v)| c(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
        .collect();
    envp.push(c(format!("{CHILD}=1").as_bytes()));
    let (ours, theirs) = UnixStream::pair().unwrap_or_else(|e| fail("a socket pair", e));
    let cwd = std::env::current_dir().unwrap_or_else(|e| fail("the directory", e));
    let spec = ChildSpec {
        program: c(exe.as_os_str().as_bytes()),
        argv,
        envp,
        cwd: c(cwd.as_os_str().as_bytes()),
        stdio: [0, 1, 2],
        controlling_tty: false,
        passed_fds: vec![theirs.as_raw_fd()],
        program_fd: None,
        cgroup: None,
    };
    let child = uexec_sys::spawn_child(&spec).unwrap_or_else(|e| fail("spawning", e));
    drop(theirs);
    let listener = match uexec_sys::recv_fd(ours.as_raw_fd()) {
        Ok(fd) => ExecListener::from(fd),
        Err(e) => fail("the child's listener", e),
    };
    // As uexec's judge does (Linux 6.6; older kernels answer all the same).
    let _ = listener.sync_wake_up();
    let supervisor = std::thread::spawn(move || loop {
        match listener.wait(100) {
            Ok(ListenerState::Ready) => {}
            Ok(ListenerState::Idle) => continue,
            Ok(ListenerState::Gone) | Err(_) => return,
        }
        let Ok(n) = listener.recv() else { continue };
        if read {
            if let Ok(mut call) = listener.read_exec(&n) {
                let _ = call.find_process();
            }
        }
        let _ = listener.respond_continue(n.id);
    });
    let status = match uexec_sys::wait_child(Some(child.pid)) {
        Ok((_, status)) => status,
        Err(e) => fail("waiting for the command", e),
    };
    let _ = supervisor.join();
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

fn nul() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte")
}
