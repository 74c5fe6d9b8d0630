//! The launcher's half of rules judged at each exec (issue 40, step 2): `uexec-engine
//! __sandbox-exec --exec-notify-fd 3` installs the exec-notify filter after the sandbox's own
//! and hands its listener over the socket at fd 3; this test plays uexec's half (the
//! supervisor), on the real kernel, with and without the sandbox's layers.

use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use uexec_sys::{ChildSpec, ExecListener, ListenerState};

const ENGINE: &str = env!("CARGO_BIN_EXE_uexec-engine");

fn reader(fd: OwnedFd) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        std::fs::File::from(fd).read_to_string(&mut text).unwrap();
        text
    })
}

/// What the launcher's run showed: each exec judged (program, argv, let go on), its output,
/// its exit code.
struct Run {
    judged: Vec<(PathBuf, Vec<String>, bool)>,
    stdout: String,
    stderr: String,
    code: Option<i32>,
}

/// Runs `script` under the launcher with `layers`, refusing the execs of `refused`.
fn launch(layers: &str, script: &str, refused: &'static str) -> Run {
    let c = |s: &str| CString::new(s).unwrap();
    let argv = [
        ENGINE,
        uexec_sandbox::LAUNCHER_SUBCOMMAND,
        "--layers",
        layers,
        uexec_sandbox::EXEC_NOTIFY_FLAG,
        "3",
        "--",
        "/bin/sh",
        "-c",
        script,
    ];
    let envp = ["PATH=/usr/bin:/bin", "LANG=C"];
    let (ours, theirs) = UnixStream::pair().unwrap();
    let null = uexec_sys::dev_null().unwrap();
    let (out_read, out_write) = uexec_sys::pipe_cloexec().unwrap();
    let (err_read, err_write) = uexec_sys::pipe_cloexec().unwrap();
    let spec = ChildSpec {
        program: c(ENGINE),
        argv: argv.iter().map(|a| c(a)).collect(),
        envp: envp.iter().map(|a| c(a)).collect(),
        cwd: c("/"),
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
    let (stdout, stderr) = (reader(out_read), reader(err_read));
    let listener = match uexec_sys::recv_fd(ours.as_raw_fd()) {
        Ok(fd) => ExecListener::from(fd),
        Err(e) => panic!("no listener ({e}): {}", stderr.join().unwrap()),
    };
    let supervisor = std::thread::spawn(move || {
        let started = Instant::now();
        let mut judged = Vec::new();
        loop {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "no end: {judged:?}"
            );
            match listener.wait(100).unwrap() {
                ListenerState::Idle => continue,
                ListenerState::Gone => return judged,
                ListenerState::Ready => {}
            }
            let Ok(n) = listener.recv() else { continue };
            let call = listener
                .read_exec(&n)
                .expect("the exec's program and arguments");
            let yes = call.program != Path::new(refused);
            if yes {
                listener.respond_continue(n.id).unwrap();
            } else {
                listener.respond_error(n.id, libc::EACCES).unwrap();
            }
            let argv = call.argv.iter().map(|a| a.to_string_lossy().into_owned());
            judged.push((call.program, argv.collect(), yes));
        }
    });
    let (_, status) = uexec_sys::wait_child(Some(child.pid)).unwrap();
    Run {
        judged: supervisor.join().unwrap(),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        code: status.code(),
    }
}

fn check_refused_false(layers: &str) {
    let script = "/bin/echo allowed; /bin/false; echo after";
    let run = launch(layers, script, "/bin/false");
    let judged: Vec<(&Path, Vec<&str>, bool)> = run
        .judged
        .iter()
        .map(|(p, a, yes)| (p.as_path(), a.iter().map(String::as_str).collect(), *yes))
        .collect();
    assert_eq!(
        judged,
        [
            (Path::new("/bin/sh"), vec!["/bin/sh", "-c", script], true),
            (Path::new("/bin/echo"), vec!["/bin/echo", "allowed"], true),
            (Path::new("/bin/false"), vec!["/bin/false"], false),
        ],
        "{}",
        run.stderr
    );
    assert_eq!(run.stdout, "allowed\nafter\n", "{}", run.stderr);
    assert!(
        run.stderr.contains("/bin/false") && run.stderr.contains("Permission denied"),
        "{}",
        run.stderr
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
}

#[test]
fn without_layers_the_launcher_hands_every_exec_to_uexec() {
    check_refused_false("");
}

#[test]
fn under_the_whole_sandbox_every_exec_is_handed_to_uexec_too() {
    // Namespaces (the command is pid 2, spawned by the namespace's init), Landlock, and the
    // sandbox's own seccomp filter, installed before the exec-notify one.
    check_refused_false("namespaces,landlock,seccomp");
}

#[test]
fn the_command_itself_refused_at_its_exec_ends_the_launcher_with_127() {
    let run = launch("", "/bin/echo never", "/bin/sh");
    assert_eq!(run.judged.len(), 1, "{:?}", run.judged);
    assert_eq!(run.code, Some(127), "{}", run.stderr);
    assert!(run.stderr.contains("Permission denied"), "{}", run.stderr);
    assert_eq!(run.stdout, "");
}
