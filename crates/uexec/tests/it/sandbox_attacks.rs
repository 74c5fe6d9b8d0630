//! A sandboxed command as an attacker would write it: steering or reading a process
//! outside (ptrace, `/proc/PID/mem` and `environ`, `process_vm_readv`), typing into the
//! terminal uexec reads (TIOCSTI), a descriptor of uexec's left open, and a shell the model
//! wrote standing in for a login shell. Each attempt must fail from inside, and the test
//! checks it could have worked (the same call outside the sandbox, or the target alive).

use std::path::Path;

use serde_json::{json, Value};

use crate::helpers::{structured, text};
use crate::sandbox::{exec, scratch, server};

/// The Python one-liners of the attacks, each printing `NAME ok` or `NAME refused ERR`.
const ATTACKS: &str = r#"
import ctypes, os, sys
pid = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
def report(name, ok, err=0):
    print(name, "ok" if ok else "refused " + os.strerror(err), flush=True)
r = libc.ptrace(16, pid, None, None)  # PTRACE_ATTACH
report("ptrace", r == 0, ctypes.get_errno())
if r == 0:
    libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
for name, path in [("environ", f"/proc/{pid}/environ"), ("mem", f"/proc/{pid}/mem")]:
    try:
        open(path, "rb").close()
        report(name, True)
    except OSError as e:
        report(name, False, e.errno)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8)
local = iovec(ctypes.cast(buf, ctypes.c_void_p), 8)
remote = iovec(0x400000, 8)
r = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
report("process_vm_readv", r >= 0 or ctypes.get_errno() == 14, ctypes.get_errno())
"#;

const NAMES: [&str; 4] = ["ptrace", "environ", "mem", "process_vm_readv"];

fn python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// The attacks' verdicts, by name: each attack prints `NAME ok` or `NAME refused ERR`;
/// true where one worked.
pub(crate) fn verdicts(out: &str, names: &[&str]) -> Vec<(String, bool)> {
    names
        .iter()
        .map(|name| {
            let line = out
                .lines()
                .find(|l| l.starts_with(&format!("{name} ")))
                .unwrap_or_else(|| panic!("no verdict for {name}: {out}"));
            (name.to_string(), line.ends_with(" ok"))
        })
        .collect()
}

#[tokio::test]
async fn no_process_outside_can_be_traced_or_read_from_any_sandbox() {
    let dir = scratch("attack-ptrace");
    let script = dir.join("attacks.py");
    std::fs::write(&script, ATTACKS).unwrap();
    // A process of the same user outside every sandbox, with an environment worth reading.
    let mut victim = std::process::Command::new("sleep")
        .arg("300")
        .env("VICTIM_API_KEY", "not-for-the-sandbox")
        .spawn()
        .unwrap();
    let cmd = format!("{} {} {}", python(), script.display(), victim.id());
    let (client, _) = server(&dir, &["--structured"], &[]).await;
    // Outside the sandbox, the same attacks work: the test can tell.
    let r = exec(&client, json!({"cmd": cmd})).await;
    let open = verdicts(&text(&r), &NAMES);
    assert!(open.iter().all(|(_, ok)| *ok), "unsandboxed: {open:?}");
    for policy in [
        json!({"sandbox": "read-only"}),
        json!({"sandbox": "workspace-write", "network": "off"}),
        json!({"network": "off"}),
    ] {
        let mut args = policy.clone();
        args["cmd"] = Value::String(cmd.clone());
        let r = exec(&client, args).await;
        let got = verdicts(&text(&r), &NAMES);
        assert!(
            got.iter().all(|(_, ok)| !*ok),
            "{policy}: an attack got through: {got:?}\n{}",
            text(&r)
        );
    }
    assert!(victim.try_wait().unwrap().is_none(), "the victim survived");
    victim.kill().unwrap();
    victim.wait().unwrap();
    client.cancel().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn typing_into_the_sessions_terminal_with_tiocsti_is_refused() {
    let dir = scratch("attack-tiocsti");
    let (client, _) = server(&dir, &["--structured"], &[]).await;
    let cmd = format!(
        "{} -c 'import fcntl, termios\ntry:\n    fcntl.ioctl(0, termios.TIOCSTI, b\"x\")\n    print(\"typed\")\nexcept OSError as e:\n    print(\"refused\", e.strerror)'",
        python()
    );
    let r = exec(&client, json!({"cmd": cmd, "tty": true})).await;
    let unsandboxed = text(&r);
    let r = exec(
        &client,
        json!({"cmd": cmd, "tty": true, "sandbox": "read-only"}),
    )
    .await;
    let out = text(&r);
    assert!(out.contains("refused Operation not permitted"), "{out}");
    // (Kernels with legacy TIOCSTI off refuse it outside too; where they allow it, the
    // difference is the sandbox's.)
    assert!(
        unsandboxed.contains("typed") || unsandboxed.contains("refused"),
        "{unsandboxed}"
    );
    client.cancel().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_sandboxed_command_holds_no_descriptor_but_its_stdio() {
    let dir = scratch("attack-fds");
    let (client, _) = server(&dir, &["--structured"], &[]).await;
    // `ls` lists its own descriptors (stdio and the directory it reads): what a command
    // started by uexec holds, unsandboxed, is the baseline.
    let cmd = "ls /proc/self/fd | tr '\\n' ' '";
    let fds = |r: &rmcp::model::CallToolResult| {
        structured(r)["output"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    let baseline = fds(&exec(&client, json!({"cmd": cmd})).await);
    assert_eq!(baseline, "0 1 2 3", "unsandboxed");
    for args in [
        json!({"cmd": cmd, "sandbox": "read-only"}),
        json!({"cmd": cmd, "sandbox": "workspace-write", "network": "off"}),
        json!({"cmd": cmd, "network": {"allow": ["example.com"]}}),
        json!({"cmd": cmd, "sandbox": "read-only", "tty": true}),
    ] {
        let got = fds(&exec(&client, args.clone()).await);
        assert_eq!(got, baseline, "{args}");
    }
    client.cancel().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The model writes a script named `bash` and asks for it as a login shell: uexec builds
/// login snapshots by running the shell's profile outside any sandbox, so a sandboxed call
/// must never do that with the model's shell.
#[tokio::test]
async fn a_shell_the_model_wrote_never_runs_outside_the_sandbox() {
    let dir = scratch("attack-shell");
    // Outside the workspace: what only an unsandboxed process can write.
    let elsewhere = scratch("attack-shell-outside");
    let outside = elsewhere.join("ran-outside");
    let (client, _) = server(&dir, &["--structured", "--sandbox", "workspace-write"], &[]).await;
    let fake = dir.join("bin").join("bash");
    let r = exec(
        &client,
        json!({"cmd": format!(
            "mkdir -p bin && printf '#!/bin/sh\\ntouch {}\\nexec /bin/bash \"$@\"\\n' > bin/bash && chmod +x bin/bash && echo planted",
            outside.display()
        )}),
    )
    .await;
    assert!(
        text(&r).contains("planted") && fake.exists(),
        "{}",
        text(&r)
    );
    // (Not `exec`, which asks for `login: false`: this call wants a login shell.)
    let r = crate::helpers::call(
        &client,
        "exec_command",
        json!({"cmd": "echo via-the-planted-shell", "shell": fake.display().to_string(), "login": true}),
    )
    .await;
    assert!(text(&r).contains("via-the-planted-shell"), "{}", text(&r));
    assert!(
        !outside.exists(),
        "the model's shell ran outside the sandbox"
    );
    assert_eq!(structured(&r)["sandbox"]["profile"], "workspace-write");
    client.cancel().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&elsewhere);
}

/// Another local user who made the sandboxes' base directory first (with no
/// `XDG_RUNTIME_DIR`, it is `$TMPDIR/uexec-sandbox-<uid>`, a guessable name) would see, and
/// could swap, what uexec puts there: a sandboxed command is refused, naming it.
#[tokio::test]
async fn a_sandbox_base_another_user_made_first_is_refused() {
    let dir = scratch("attack-base");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let uid = std::fs::metadata(&dir).map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid()
    });
    let base = tmp.join(format!("uexec-sandbox-{}", uid.unwrap()));
    std::fs::create_dir_all(&base).unwrap();
    std::os::unix::fs::chown(&base, Some(65534), Some(65534)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o777)).unwrap();
    let tmp_env = tmp.display().to_string();
    let (client, _) = server(&dir, &["--structured"], &[("TMPDIR", &tmp_env)]).await;
    let e = crate::sandbox::exec_error(
        &client,
        json!({"cmd": "echo ran", "sandbox": "read-only", "login": false}),
    )
    .await;
    assert!(!e.contains("ran\n"), "{e}");
    assert!(
        e.contains(&base.display().to_string()) && e.contains("refusing"),
        "{e}"
    );
    // Unsandboxed commands do not need it.
    let r = exec(&client, json!({"cmd": "echo ran"})).await;
    assert!(text(&r).contains("ran"), "{}", text(&r));
    client.cancel().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
