//! Nothing a sandboxed command writes runs later outside it (issue 23, section 3): the
//! launcher runs from the running binary, uexec's directories and binaries stay read-only
//! beneath a writable root (repositories: `sandbox_git`). Through a real
//! `uexec mcp` over stdio, on the real kernel.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};

use crate::helpers::{
    call, children_of, eventually, scratch_dir, send_signal, structured, text, Client, Recorder,
    UEXEC,
};

/// The engine binary the tests copy and run.
const ENGINE: &str = env!("CARGO_BIN_EXE_uexec-engine");

/// `PROGRAM mcp ARGS` in `dir`, with HOME `dir/home`, no `XDG_RUNTIME_DIR` and `env`; its
/// client and pid.
pub(crate) async fn server(
    program: &Path,
    dir: &Path,
    extra: &[&str],
    env: &[(&str, &Path)],
) -> (Client, u32) {
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(["mcp", "--in-process"])
        .args(extra)
        .current_dir(dir)
        .env("HOME", dir.join("home"))
        .env("SHELL", "/bin/bash")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("XDG_STATE_HOME")
        .env_remove("XDG_CONFIG_HOME");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let transport = TokioChildProcess::new(cmd).unwrap();
    let pid = transport.id().unwrap_or(0);
    let client = Recorder::default().serve(transport).await.unwrap();
    (client, pid)
}

pub(crate) async fn exec(client: &Client, arguments: Value) -> rmcp::model::CallToolResult {
    let mut arguments = arguments;
    if arguments.get("login").is_none() {
        arguments["login"] = json!(false);
    }
    call(client, "exec_command", arguments).await
}

/// A fresh directory, canonical (the temp dir may be reached through a symlink).
pub(crate) fn scratch(name: &str) -> PathBuf {
    scratch_dir(&format!("sbxfs-{name}"))
        .canonicalize()
        .unwrap()
}

/// A copy of `from` at `to`, executable.
fn copy_executable(from: &str, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(from, to).unwrap();
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Replaces `path` as a command would: a new file renamed over it (a running binary cannot be
/// written in place).
fn replace_with_script(path: &Path, script: &str) {
    let next = path.with_extension("next");
    std::fs::write(&next, script).unwrap();
    std::fs::set_permissions(&next, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&next, path).unwrap();
}

fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// The live children of `server` whose command line holds `needle`.
fn children_running(server: u32, needle: &str) -> Vec<u32> {
    children_of(server)
        .into_iter()
        .filter(|p| p.state != 'Z')
        .filter(|p| cmdline(p.pid).iter().any(|a| a == needle))
        .map(|p| p.pid)
        .collect()
}

fn uid_of(dir: &Path) -> u32 {
    std::fs::metadata(dir).unwrap().uid()
}

#[tokio::test]
async fn a_launcher_binary_replaced_on_disk_never_runs() {
    let dir = scratch("exe");
    let engine = dir.join("bin/uexec-engine");
    copy_executable(ENGINE, &engine);
    let (client, pid) = server(&engine, &dir, &["--sandbox", "read-only"], &[]).await;
    // The server runs; a command (or anyone) puts something else at its path.
    let marker = dir.join("replacement-ran");
    replace_with_script(
        &engine,
        &format!(
            "#!/bin/sh\n\
             echo \"$*\" >> {m}\n\
             [ \"$1\" = __sandbox-exec ] || exit 0\n\
             case \"$2\" in\n\
               --probe) printf 'namespaces ok\\nnetwork-namespace ok\\nlandlock ok\\nseccomp ok\\n'; exit 0;;\n\
               --warm) exit 0;;\n\
             esac\n\
             while [ \"$1\" != -- ]; do shift; done\n\
             shift\n\
             exec \"$@\"\n",
            m = marker.display()
        ),
    );
    // The probe, the launcher started ahead, and those started after each command.
    let outside = dir.join("outside");
    for _ in 0..3 {
        let r = exec(
            &client,
            json!({"cmd": format!("touch {} 2>/dev/null; echo ran=$UEXEC_SANDBOX", outside.display())}),
        )
        .await;
        assert!(text(&r).contains("ran=read-only"), "{}", text(&r));
        assert!(!outside.exists(), "a command ran unsandboxed");
        assert!(
            !marker.exists(),
            "the replacement ran: {:?}",
            std::fs::read_to_string(&marker)
        );
    }
    // The one waiting is the server's own binary, shown by its path.
    let mut waiting = Vec::new();
    eventually("a launcher waiting", Duration::from_secs(5), || {
        waiting = children_running(pid, "--warm");
        waiting.len() == 1
    })
    .await;
    let argv = cmdline(waiting[0]);
    assert_eq!(
        argv[..3],
        [
            engine.display().to_string(),
            "__sandbox-exec".into(),
            "--warm".into()
        ]
    );
    // Named after its path by the launcher itself, just after its exec (until then `exe`).
    let comm = || std::fs::read_to_string(format!("/proc/{}/comm", waiting[0])).unwrap();
    eventually(
        "the launcher named after its path",
        Duration::from_secs(5),
        || comm().trim() == "uexec-engine",
    )
    .await;
    let exe = std::fs::read_link(format!("/proc/{}/exe", waiting[0])).unwrap();
    assert!(
        exe.display().to_string().ends_with("(deleted)"),
        "runs the file the server started from: {}",
        exe.display()
    );
    // A last-will watchdog started again after a death is the running binary too.
    let watchdog = children_running(pid, "__last-will");
    assert_eq!(watchdog.len(), 1, "{watchdog:?}");
    send_signal(watchdog[0], "KILL");
    eventually("another watchdog", Duration::from_secs(10), || {
        children_running(pid, "__last-will")
            .iter()
            .any(|p| *p != watchdog[0])
    })
    .await;
    assert!(
        !marker.exists(),
        "the replacement ran: {:?}",
        std::fs::read_to_string(&marker)
    );
}

#[tokio::test]
async fn the_engine_and_the_front_in_a_writable_root_cannot_be_replaced() {
    let dir = scratch("bin");
    let engine = dir.join("bin/uexec-engine");
    let front = dir.join("bin/uexec");
    copy_executable(ENGINE, &engine);
    copy_executable(UEXEC, &front);
    let before = |p: &Path| std::fs::metadata(p).unwrap().ino();
    let (engine_ino, front_ino) = (before(&engine), before(&front));
    let (client, _) = server(&engine, &dir, &["--sandbox", "workspace-write"], &[]).await;
    let r = exec(
        &client,
        json!({"cmd": "touch mine && echo wrote; \
                       rm -f bin/uexec-engine; echo evil > bin/uexec; \
                       printf '#!/bin/sh\\n' > new && chmod +x new && mv new bin/uexec-engine; \
                       mv bin bin2; ls bin2 2>&1; true"}),
    )
    .await;
    let out = text(&r);
    assert!(out.contains("wrote"), "the root is writable: {out}");
    assert!(dir.join("mine").exists(), "{out}");
    assert_eq!(before(&engine), engine_ino, "{out}");
    assert_eq!(before(&front), front_ino, "{out}");
    assert!(
        !dir.join("bin2").exists(),
        "the binaries' directory was moved aside: {out}"
    );
    assert_eq!(
        std::fs::metadata(&front).unwrap().len(),
        std::fs::metadata(UEXEC).unwrap().len(),
        "{out}"
    );
    assert!(out.contains("Read-only file system"), "{out}");
}

#[tokio::test]
async fn uexecs_directories_stay_read_only_when_the_temp_dir_lies_in_the_workspace() {
    let dir = scratch("tmpdir");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let uid = uid_of(&dir);
    let logs = dir.join("logs");
    let logs_arg = logs.display().to_string();
    let (client, _) = server(
        Path::new(UEXEC),
        &dir,
        &["--structured", "--transcripts-dir", &logs_arg],
        &[("TMPDIR", &tmp)],
    )
    .await;
    // A login command (unsandboxed) builds the shell snapshot later login commands source.
    let r = exec(&client, json!({"cmd": "echo logged-in", "login": true})).await;
    assert!(text(&r).contains("logged-in"), "{}", text(&r));
    let runtime = tmp.join(format!("uexec-{uid}"));
    let base = tmp.join(format!("uexec-sandbox-{uid}"));
    let snapshot: PathBuf = std::fs::read_dir(&runtime)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "sh"))
        .unwrap_or_else(|| panic!("no shell snapshot in {}", runtime.display()));
    let script = std::fs::read(&snapshot).unwrap();
    // Another session, with its own private tmp.
    let r = exec(
        &client,
        json!({"cmd": "echo \"other=$TMPDIR\"; exec sleep 30", "yield_time_ms": 300,
               "sandbox": "workspace-write"}),
    )
    .await;
    let other = text(&r)
        .lines()
        .find_map(|l| l.strip_prefix("other=").map(PathBuf::from))
        .unwrap_or_else(|| panic!("{}", text(&r)));
    assert!(other.starts_with(&base), "{}", other.display());
    let other_id = structured(&r)["session_id"].clone();

    let state = dir.join("home/.local/state/uexec");
    let config = dir.join("home/.config/uexec");
    // The record of decisions (`uexec audit`): every call so far was written there, and a
    // sandboxed command may not forge, truncate or remove a line of it.
    let audit = state.join("audit/audit.jsonl");
    let record = std::fs::read(&audit).expect("the calls so far are in the record");
    let cmd = format!(
        "echo 'touch {pwned}' >> {snapshot}; touch {runtime}/planted; touch {other}/planted; \
         touch {state}/planted; mkdir {config}/planted; touch {logs}/planted; \
         echo '{{\"decision\":\"allow\",\"command\":\"forged\"}}' >> {audit}; : > {audit}; \
         rm -f {audit}; mv {state}/audit {state}/audit.moved; \
         mv {runtime} {runtime}.moved; mv {tmp} {tmp}.moved; mv {home}/.local {home}/.local.moved; \
         touch \"$TMPDIR/mine\" && echo own-tmp-ok; touch {dir}/mine && echo workspace-ok",
        pwned = dir.join("pwned").display(),
        snapshot = snapshot.display(),
        runtime = runtime.display(),
        other = other.display(),
        state = state.display(),
        config = config.display(),
        logs = logs.display(),
        tmp = tmp.display(),
        home = dir.join("home").display(),
        dir = dir.display(),
        audit = audit.display(),
    );
    let r = exec(&client, json!({"cmd": cmd, "sandbox": "workspace-write"})).await;
    let out = text(&r);
    let after = std::fs::read(&audit).expect("the record is still there");
    // It grew by this call's own decision (whose command names the forgery), nothing else.
    assert!(after.starts_with(&record), "the record was cut: {out}");
    assert!(
        !String::from_utf8_lossy(&after)
            .lines()
            .any(|l| l == r#"{"decision":"allow","command":"forged"}"#),
        "a line was forged into the record from inside the sandbox: {out}"
    );
    assert!(!state.join("audit.moved").exists(), "{out}");
    assert!(out.contains("own-tmp-ok"), "{out}");
    assert!(out.contains("workspace-ok"), "{out}");
    assert_eq!(
        std::fs::read(&snapshot).unwrap(),
        script,
        "the snapshot changed: {out}"
    );
    for planted in [
        runtime.join("planted"),
        other.join("planted"),
        state.join("planted"),
        config.join("planted"),
        logs.join("planted"),
    ] {
        assert!(!planted.exists(), "{}: {out}", planted.display());
    }
    for moved in [
        dir.join("tmp.moved"),
        runtime.with_extension("moved"),
        dir.join("home/.local.moved"),
    ] {
        assert!(!moved.exists(), "{}: {out}", moved.display());
    }
    assert!(runtime.is_dir() && tmp.is_dir(), "{out}");
    let erofs = out.matches("Read-only file system").count();
    assert!(erofs >= 6, "{out}");
    // Later login commands still read the snapshot as it was.
    let r = exec(&client, json!({"cmd": "echo again", "login": true})).await;
    assert!(text(&r).contains("again"), "{}", text(&r));
    assert!(!dir.join("pwned").exists());
    call(
        &client,
        "terminate_session",
        json!({"session_id": other_id}),
    )
    .await;
}

#[tokio::test]
async fn a_placeholder_left_by_a_killed_uexec_is_swept_by_the_next_one() {
    let dir = scratch("sweep");
    let (first_root, second_root, tmp) = (dir.join("first"), dir.join("second"), dir.join("tmp"));
    for d in [&first_root, &second_root, &tmp] {
        std::fs::create_dir_all(d).unwrap();
    }
    let (client, pid) = server(
        Path::new(UEXEC),
        &first_root,
        &["--structured"],
        &[("TMPDIR", &tmp)],
    )
    .await;
    let r = exec(
        &client,
        json!({"cmd": "exec sleep 60", "yield_time_ms": 200, "sandbox": "workspace-write"}),
    )
    .await;
    assert!(structured(&r)["session_id"].is_number(), "{}", text(&r));
    let placeholder = first_root.join(".git");
    assert!(
        placeholder.is_dir(),
        "the running session holds a placeholder"
    );
    send_signal(pid, "KILL");
    eventually("the first server gone", Duration::from_secs(5), || {
        crate::helpers::proc_stat(pid).is_none_or(|s| s.state == 'Z')
    })
    .await;
    assert!(placeholder.is_dir(), "nobody removed it");
    // The next uexec's first sandboxed command sweeps what the dead one left.
    let (client, _) = server(
        Path::new(UEXEC),
        &second_root,
        &["--structured"],
        &[("TMPDIR", &tmp)],
    )
    .await;
    let r = exec(&client, json!({"cmd": "true", "sandbox": "read-only"})).await;
    assert_eq!(structured(&r)["exit_code"], 0, "{}", text(&r));
    assert!(
        !placeholder.exists(),
        "the stale placeholder is still there"
    );
}

/// Tries to write `root/.git/pwned` past its read-only mount: unmounting it, through
/// `/proc/PID/root` of a process outside the sandbox (`outside`, dumpable), by a hard link,
/// and by cloning the mount tree (`open_tree`) and clearing its read-only flags
/// (`mount_setattr`); with `nested`, the clone in a user and mount namespace of its own.
/// Prints what each step gave, `WROTE` for a write that went through.
fn lift_read_only_script(root: &Path, outside: u32, nested: bool) -> String {
    format!(
        r#"
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
def err(): return os.strerror(ctypes.get_errno())
def write(path, **kw):
    try:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644, **kw))
        print("WROTE", path)
    except OSError as e:
        print("write", path, e)
print("umount", libc.umount2(b"{root}/.git", 2), err())
write("{root}/.git/pwned")
write("/proc/{outside}/root{root}/.git/pwned")
open("{root}/mine", "w").close()
try:
    os.link("{root}/mine", "{root}/.git/pwned")
    print("WROTE link")
except OSError as e:
    print("link", e)
if {nested}:
    print("unshare", libc.unshare(0x10000000 | 0x00020000), err())
fd = libc.syscall(428, -100, b"{root}", 1 | 0x80000 | 0x8000)
print("open_tree", fd, err())
attr = ctypes.create_string_buffer(struct.pack("QQQQ", 0, 1, 0, 0), 32)
print("mount_setattr", libc.syscall(442, fd, b"", 0x1000 | 0x8000, attr, 32), err())
write(".git/pwned", dir_fd=fd)
"#,
        nested = if nested { "True" } else { "False" },
        root = root.display(),
    )
}

#[tokio::test]
async fn a_sandboxed_command_cannot_lift_the_read_only_mounts() {
    let dir = scratch("lift");
    std::fs::create_dir_all(dir.join(".git")).unwrap();
    let (client, _) = server(Path::new(UEXEC), &dir, &["--structured"], &[]).await;
    for nested in [false, true] {
        let script = dir.join("lift.py");
        let outside = std::process::id();
        std::fs::write(&script, lift_read_only_script(&dir, outside, nested)).unwrap();
        let r = exec(
            &client,
            json!({"cmd": format!("python3 {}", script.display()), "sandbox": "workspace-write"}),
        )
        .await;
        let out = text(&r);
        assert!(
            out.contains("open_tree") && out.contains("umount -1"),
            "{out}"
        );
        assert!(!out.contains("WROTE"), "nested={nested}: {out}");
        assert!(!dir.join(".git/pwned").exists(), "nested={nested}: {out}");
    }
}

#[tokio::test]
async fn read_only_makes_no_mount_namespace_and_workspace_write_does() {
    let dir = scratch("mntns");
    let (client, _) = server(Path::new(UEXEC), &dir, &["--structured"], &[]).await;
    let host = std::fs::read_link("/proc/self/ns/mnt").unwrap();
    let namespace_of = |r: &rmcp::model::CallToolResult| {
        text(r)
            .lines()
            .find_map(|l| l.strip_prefix("ns=").map(PathBuf::from))
            .unwrap_or_else(|| panic!("{}", text(r)))
    };
    let cmd = json!({"cmd": "echo ns=$(readlink /proc/self/ns/mnt)", "sandbox": "read-only"});
    let r = exec(&client, cmd).await;
    assert_eq!(namespace_of(&r), host, "read-only mounts nothing");
    let cmd = json!({"cmd": "echo ns=$(readlink /proc/self/ns/mnt)", "sandbox": "workspace-write"});
    let r = exec(&client, cmd).await;
    assert_ne!(
        namespace_of(&r),
        host,
        "the placeholder at the root is mounted"
    );
}
