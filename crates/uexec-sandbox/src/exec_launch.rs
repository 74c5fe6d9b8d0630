//! Every exec of a session handed to uexec (issue 40, `RulesAt::Exec`): the launcher runs
//! with `--exec-notify-fd` ([`super::EXEC_NOTIFY_FLAG`]), after the sandbox's layers when
//! the session has a sandbox, alone when it has none, and sends the listener of its
//! exec-notify filter over the socket pair's end it inherits at the descriptor the flag
//! names (3, or 4 after the allowlist proxy's hand-over at 3).

use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use uexec_core::backend::{Launch, SpawnSpec, Started};

use super::{Sandbox, SandboxLaunch, EXEC_NOTIFY_FLAG, LAUNCHER_SUBCOMMAND};

/// Gives `spec` the launcher's exec hand-over, passed after any other (the allowlist
/// proxy's: fd 3, this one fd 4); uexec's end of the pair comes back.
pub(super) fn judge_execs(sandbox: &Sandbox, spec: &mut SpawnSpec) -> Result<OwnedFd, String> {
    let (ours, theirs) =
        UnixStream::pair().map_err(|e| format!("cannot make the exec hand-over's socket: {e}"))?;
    let fd = spec.pass_fd(theirs.into())?;
    let flags = vec![EXEC_NOTIFY_FLAG.to_owned(), fd.to_string()];
    spec.launcher = Some(match spec.launcher.take() {
        Some(inner) => Arc::new(AlsoExecs { inner, flags }),
        None => {
            let launcher = sandbox.launcher();
            let utf8 = |p: &std::path::Path| {
                p.to_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("{} is not valid UTF-8", p.display()))
            };
            #[cfg(target_os = "linux")]
            sandbox.pool.planned(launcher);
            Arc::new(SandboxLaunch {
                launcher: launcher.clone(),
                program: utf8(&launcher.program())?,
                display: utf8(launcher.display())?,
                flags,
                #[cfg(target_os = "linux")]
                pool: sandbox.pool.clone(),
            })
        }
    });
    Ok(ours.into())
}

/// A sandbox's launch that hands the execs over too: its flags, and the hand-over's.
#[derive(Debug)]
struct AlsoExecs {
    inner: Arc<dyn Launch>,
    flags: Vec<String>,
}

impl Launch for AlsoExecs {
    fn render(&self, argv: Vec<String>, arg0: Option<String>) -> (Vec<String>, Option<String>) {
        let (mut rendered, shown) = self.inner.render(argv, arg0);
        // After the program and the subcommand: the launcher's flags come in any order.
        let at = rendered
            .iter()
            .position(|a| a == LAUNCHER_SUBCOMMAND)
            .map_or(rendered.len().min(2), |i| i + 1);
        rendered.splice(at..at, self.flags.iter().cloned());
        (rendered, shown)
    }

    fn start(&self, child: &uexec_sys::ChildSpec) -> std::io::Result<Option<Started>> {
        self.inner.start(child)
    }
}
