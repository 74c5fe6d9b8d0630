//! `uexec serve --rules FILE --rules-at exec` (issue 40): every process the exec server starts
//! is judged at each exec, over a real WebSocket (`uexec_client::RemoteBackend`). What walks
//! around a rule on the start's text (`cmd=git; $cmd push`) fails at its exec with EACCES, which
//! the process's own shell reports ("Permission denied", status 126) while the rest of it runs;
//! a `prompt` at exec is refused (no one can be asked on this wire, as at the door); each
//! judged exec is in `uexec audit`. Without the kernel's help (a failing probe) the server says
//! so at start and judges the text only.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use uexec_client::RemoteBackend;
use uexec_core::backend::{Backend, EnvMode, Program, SpawnSpec};

use crate::helpers::{scratch_dir, UEXEC};

// The rules and the fake `git` of the mcp tests: `git push` forbidden, `touch` a prompt.
use crate::mcp_rules::RULES;
use crate::rules_at_exec::FAKE_GIT;

/// A scratch directory with the rules, a fake `git` in `bin/` and an empty HOME.
fn place(name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch_dir(name);
    std::fs::create_dir_all(dir.join("home")).unwrap();
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::write(dir.join("team.rules"), RULES).unwrap();
    let git = dir.join("bin/git");
    std::fs::write(&git, FAKE_GIT).unwrap();
    std::fs::set_permissions(&git, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// A `uexec serve --rules team.rules --rules-at exec` on a loopback WebSocket, its stderr in
/// `dir/stderr`; killed when dropped.
struct Served {
    child: Child,
    url: String,
    dir: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(name: &str, env: &[(&str, &str)]) -> Served {
    let dir = place(name);
    let mut cmd = Command::new(UEXEC);
    cmd.args(["serve", "--listen", "ws://127.0.0.1:0", "--rules"])
        .arg(dir.join("team.rules"))
        .args(["--rules-at", "exec"])
        .current_dir(&dir)
        .env("HOME", dir.join("home"))
        .env_remove("XDG_STATE_HOME")
        .env_remove("UEXEC_TOKEN")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("stderr")).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(
        line.starts_with("ws://"),
        "no URL: {line:?}; {}",
        std::fs::read_to_string(dir.join("stderr")).unwrap_or_default()
    );
    Served {
        child,
        url: line.trim().to_owned(),
        dir,
    }
}

/// Runs `bash -c script` on the server, with the fake `git` first on PATH: (stdout and stderr
/// together, exit code).
async fn run(backend: &Arc<RemoteBackend>, dir: &Path, script: &str) -> (String, Option<i32>) {
    run_as(backend, dir, &["bash", "-c", script], false).await
}

/// Runs `argv` on the server (on a PTY when `tty`), with the fake `git` first on PATH.
async fn run_as(
    backend: &Arc<RemoteBackend>,
    dir: &Path,
    argv: &[&str],
    tty: bool,
) -> (String, Option<i32>) {
    let path = format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let spec = SpawnSpec {
        program: Program::Argv {
            argv: argv.iter().map(|a| (*a).to_owned()).collect(),
        },
        arg0: None,
        cwd: dir.to_path_buf(),
        env: [("PATH".into(), path.into())].into_iter().collect(),
        env_mode: EnvMode::Exact,
        tty,
        pipe_stdin: false,
        one_stream: false,
        passed_fd: None,
        launcher: None,
        limits: Default::default(),
    };
    let mut spawned = backend.spawn(spec).await.unwrap();
    let mut out = Vec::new();
    let read = async {
        while let Some(chunk) = spawned.output.recv().await {
            out.extend_from_slice(&chunk.bytes);
        }
        spawned.exit.await.ok().and_then(|e| e.exit_code)
    };
    let code = tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .expect("the process ended within 20 s");
    (String::from_utf8_lossy(&out).into_owned(), code)
}

/// What `uexec audit --json` recorded under `home`, one entry a line.
fn recorded(home: &Path) -> Vec<Value> {
    let out = Command::new(UEXEC)
        .args(["audit", "--json"])
        .env("HOME", home)
        .env_remove("XDG_STATE_HOME")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The entry of a judged exec of `command`, decided `decision`, with `outcome`.
fn judged_exec<'a>(
    record: &'a [Value],
    command: &str,
    decision: &str,
    outcome: &str,
) -> Option<&'a Value> {
    let field = |e: &'a Value, k: &str| e[k].as_str().unwrap_or_default();
    record.iter().find(|e| {
        field(e, "command").contains(command)
            && field(e, "decision") == decision
            && field(e, "outcome") == outcome
            && field(e, "by").contains("at exec")
            && field(e, "owner").starts_with("serve:")
    })
}

#[tokio::test]
async fn serve_judges_each_exec_a_walk_around_fails_with_eacces_and_the_rest_runs() {
    let s = serve("serve-exec", &[]);
    let backend = RemoteBackend::connect(&s.url, None).await.unwrap();
    // The start's text (`$cmd push`) matches no rule: it starts, and its exec of git push
    // is refused; the shell says so itself and goes on.
    let (out, code) = run(&backend, &s.dir, "cmd=git; $cmd push; echo after=$?").await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("after=126"), "{out}");
    assert!(out.contains("Permission denied"), "{out}");
    assert!(!out.contains("git ran push"), "a push ran: {out}");
    // A client's login shell (`-lc`, run from its profile's snapshot), and on a PTY.
    for tty in [false, true] {
        let argv = ["bash", "-lc", "cmd=git; $cmd push; echo after=$?"];
        let (out, code) = run_as(&backend, &s.dir, &argv, tty).await;
        assert_eq!(code, Some(0), "tty {tty}: {out}");
        assert!(out.contains("after=126"), "tty {tty}: {out}");
        assert!(
            !out.contains("git ran push"),
            "tty {tty}: a push ran: {out}"
        );
    }
    // An allowed exec runs.
    let (out, code) = run(&backend, &s.dir, "cmd=git; $cmd status").await;
    assert_eq!((out.trim(), code), ("git ran status", Some(0)), "{out}");
    // A prompt at exec: no one can be asked here, so it is refused, as at the door.
    let (out, _) = run(&backend, &s.dir, "t=touch; $t made; echo after=$?").await;
    assert!(out.contains("after=126"), "{out}");
    assert!(!s.dir.join("made").exists(), "{out}");
    // Each judged exec is in the record (written beside the judging: waited for).
    let home = s.dir.join("home");
    crate::helpers::eventually(
        "the judged execs in the record",
        Duration::from_secs(10),
        || {
            let record = recorded(&home);
            judged_exec(&record, "git push", "forbidden", "refused").is_some()
                && judged_exec(&record, "git status", "allow", "admitted").is_some()
                && judged_exec(&record, "touch made", "prompt", "refused").is_some()
        },
    )
    .await;
    let record = recorded(&home);
    let held = judged_exec(&record, "touch made", "prompt", "refused").unwrap();
    assert!(
        held["reason"]
            .as_str()
            .is_some_and(|r| r.contains("no person can be asked")),
        "{held}"
    );
    backend.close();
}

#[tokio::test]
async fn serve_at_exec_still_refuses_to_start_a_missing_program_or_directory() {
    use uexec_core::backend::BackendErrorKind;
    let s = serve("serve-exec-missing", &[]);
    let backend = RemoteBackend::connect(&s.url, None).await.unwrap();
    let spec = |argv: &[&str], cwd: &Path| SpawnSpec {
        program: Program::Argv {
            argv: argv.iter().map(|a| (*a).to_owned()).collect(),
        },
        arg0: None,
        cwd: cwd.to_path_buf(),
        env: [("PATH".into(), "/usr/bin:/bin".into())]
            .into_iter()
            .collect(),
        env_mode: EnvMode::Exact,
        tty: false,
        pipe_stdin: false,
        one_stream: false,
        passed_fd: None,
        launcher: None,
        limits: Default::default(),
    };
    // The launcher in between starts whatever the program: the start must fail all the
    // same, as without it (`spawnNotFound`, `spawnPermissionDenied`).
    let not_executable = s.dir.join("team.rules");
    let missing = s.dir.join("nowhere");
    for (argv, cwd, kind) in [
        (
            &["/nonexistent/program"][..],
            &s.dir,
            BackendErrorKind::NotFound,
        ),
        (
            &["no-such-program-here"][..],
            &s.dir,
            BackendErrorKind::NotFound,
        ),
        (&["true"][..], &missing, BackendErrorKind::NotFound),
        (
            &[not_executable.to_str().unwrap()][..],
            &s.dir,
            BackendErrorKind::PermissionDenied,
        ),
    ] {
        let error = backend
            .spawn(spec(argv, cwd))
            .await
            .expect_err("it does not start");
        assert_eq!(error.kind, kind, "{argv:?}: {error:?}");
    }
    backend.close();
}

#[tokio::test]
async fn serve_without_the_kernels_help_judges_the_text_and_says_so() {
    let s = serve("serve-exec-fallback", &[("UEXEC_TEST_EXEC_NOTIFY", "fail")]);
    let stderr = std::fs::read_to_string(s.dir.join("stderr")).unwrap();
    assert!(
        stderr.contains("--rules-at exec")
            && stderr.contains("UEXEC_TEST_EXEC_NOTIFY=fail")
            && stderr.contains("text only"),
        "{stderr}"
    );
    let backend = RemoteBackend::connect(&s.url, None).await.unwrap();
    // The text alone: the walk-around is not caught (honest about the limit).
    let (out, code) = run(&backend, &s.dir, "cmd=git; $cmd push").await;
    assert_eq!((out.trim(), code), ("git ran push", Some(0)), "{out}");
    // The door still judges the text: a plain push does not start.
    let refused = backend
        .spawn(SpawnSpec {
            program: Program::Argv {
                argv: vec!["git".into(), "push".into()],
            },
            arg0: None,
            cwd: s.dir.clone(),
            env: Default::default(),
            env_mode: EnvMode::Exact,
            tty: false,
            pipe_stdin: false,
            one_stream: false,
            passed_fd: None,
            launcher: None,
            limits: Default::default(),
        })
        .await;
    let error = refused.expect_err("a push starts not");
    assert!(error.message.contains("pushing is for people"), "{error:?}");
    backend.close();
}

#[test]
fn serve_rules_at_is_in_help_and_a_bad_use_is_a_usage_error() {
    let dir = place("serve-exec-usage");
    let help = Command::new(UEXEC)
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let rules = help.find("Rules:").expect(&help);
    assert!(help[rules..].contains("--rules-at"), "{help}");
    for (flags, names) in [
        (&["--rules-at", "exec"][..], "--rules"),
        (
            &["--rules", "team.rules", "--rules-at", "always"][..],
            "always",
        ),
    ] {
        let out = Command::new(UEXEC)
            .args(["serve", "--listen", "stdio"])
            .args(flags)
            .current_dir(&dir)
            .env("HOME", dir.join("home"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(
            stderr.contains("--rules-at") && stderr.contains(names),
            "{stderr}"
        );
    }
}
