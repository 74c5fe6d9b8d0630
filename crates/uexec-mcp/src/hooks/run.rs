//! One hook run: `sh -c COMMAND` in its own process group, the event as JSON on its stdin,
//! its stdout and stderr kept (bounded), and killed with its group when its `timeout`
//! passes: a hook never holds a call longer than that.

use std::path::Path;
use std::process::Stdio;

use tokio::io::AsyncWriteExt;

use super::HookCommand;

/// Most bytes of a hook's stdout or stderr kept.
const HOOK_OUTPUT_MAX_BYTES: usize = 64 * 1024;

/// How a hook run went.
#[derive(Debug)]
pub(super) enum Ran {
    /// It exited (`code`: `None` when a signal killed it).
    Exited {
        code: Option<i32>,
        stdout: String,
        stderr: String,
    },
    /// It did not exit within its timeout: killed, with its group.
    TimedOut,
    /// It could not be started.
    NotStarted(String),
}

/// Runs `hook` with `event` on its stdin, in `dir`.
pub(super) async fn run(hook: &HookCommand, event: &serde_json::Value, dir: &Path) -> Ran {
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(&hook.command)
        .current_dir(dir)
        .env("CLAUDE_PROJECT_DIR", dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => return Ran::NotStarted(e.to_string()),
    };
    let group = child.id();
    if let Some(mut stdin) = child.stdin.take() {
        let mut bytes = event.to_string().into_bytes();
        bytes.push(b'\n');
        // A hook that reads nothing gets EPIPE, or the pipe closes when it is killed.
        tokio::spawn(async move {
            let _ = stdin.write_all(&bytes).await;
        });
    }
    match tokio::time::timeout(hook.timeout, child.wait_with_output()).await {
        Ok(Ok(out)) => Ran::Exited {
            code: out.status.code(),
            stdout: bounded(&out.stdout),
            stderr: bounded(&out.stderr),
        },
        Ok(Err(e)) => Ran::NotStarted(e.to_string()),
        Err(_) => {
            // The shell is killed as its future drops; what it started goes with its group.
            if let Some(group) = group {
                uexec_sys::kill_group(group, uexec_sys::SIGKILL);
            }
            Ran::TimedOut
        }
    }
}

/// `bytes` as text, the first `HOOK_OUTPUT_MAX_BYTES` of it.
fn bounded(bytes: &[u8]) -> String {
    let kept = &bytes[..bytes.len().min(HOOK_OUTPUT_MAX_BYTES)];
    String::from_utf8_lossy(kept).into_owned()
}

/// How a run went, said for the model and the log when it is not a hook's answer.
pub(super) fn trouble(event: &str, hook: &HookCommand, ran: &Ran) -> Option<String> {
    let who = format!("{event} hook {:?}", hook.command);
    match ran {
        Ran::Exited { code: Some(0), .. } | Ran::Exited { code: Some(2), .. } => None,
        Ran::Exited {
            code: Some(code),
            stderr,
            ..
        } => Some(format!(
            "{who} failed (exit {code}){}; ignored, the call went on",
            said(stderr)
        )),
        Ran::Exited {
            code: None, stderr, ..
        } => Some(format!(
            "{who} crashed (killed by a signal){}; ignored, the call went on",
            said(stderr)
        )),
        Ran::TimedOut => Some(format!(
            "{who} did not finish within its timeout of {} s: killed; ignored, the call went on",
            hook.timeout.as_secs_f64()
        )),
        Ran::NotStarted(e) => Some(format!(
            "{who} could not be run: {e}; ignored, the call went on"
        )),
    }
}

/// `: TEXT` for a hook's stderr, when it printed any.
fn said(stderr: &str) -> String {
    match stderr.trim() {
        "" => String::new(),
        text => format!(": {text}"),
    }
}
