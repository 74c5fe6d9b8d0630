//! The confinement mechanism: how a command is kept to what the sandbox policy lets it
//! write and reach. Core owns the policy (`uexec_core::policy`) and the seams; this crate
//! implements them ([`Sandbox`] is a `Confinement`) and is handed to the stores by the
//! binary.
//!
//! Why a launcher: the local backend starts children from a multi-threaded process, where
//! only async-signal-safe calls are allowed between the fork and the exec. Namespaces,
//! mounts, Landlock and seccomp set-up allocate, so a sandboxed command runs as
//! `uexec __sandbox-exec [policy] -- argv...`, a hidden subcommand of the binary that is
//! single-threaded, applies the layers and then execs the command. The flow:
//! 1. core's plan checks the call against the ceiling and hands the effective policy to
//!    [`Sandbox::confine`], which checks its layers against what the machine supports
//!    (asked once per sandbox, `--probe`), refuses or drops the missing ones (`Fallback`),
//!    makes a private tmp for the session and gives the spawn its launcher (a typed
//!    `Launch` that renders the launcher's argv around the command's), with the marker
//!    variables set;
//!    The launcher is exec'd from the file this process holds, never by path ([`exe`]); under
//!    `workspace-write`, what must stay read-only beneath the writable roots is chosen
//!    ([`protect`]: uexec's own directories and binaries, the repositories, `.git`
//!    placeholders: [`git`]);
//! 2. the launcher ([`launcher`]) enters a user, pid and mount namespace (and a network
//!    namespace when the network is off or an allowlist, whose proxy port it hands to uexec:
//!    [`proxy`]), mounts those paths read-only over themselves, restricts the filesystem
//!    with Landlock and some syscalls with seccomp, then
//!    forks the pid namespace's init, which runs the command: when the command exits, or
//!    the launcher is killed, everything it left behind dies with the namespace;
//! 3. every snapshot of the session carries a `SandboxReport`: the layers applied, and
//!    whether the output shows a denial ([`SandboxSession`]'s `judge`).
//!
//! The launcher is usually already running when a command comes: each [`Sandbox`] keeps one
//! started ahead and hands it the rest of the spawn ([`warm`]), so the exec of the `uexec`
//! binary is off the command's path.
//!
//! The launcher applies exactly the layers it is given and fails (exit 126) if one of them
//! cannot be applied: what the report says is what ran.

//! # Architecture invariants
//!
//! - This crate knows no face: no tool name, no CLI flag but the launcher's own.
//! - It decides no policy: what a call may ask is core's ceiling, checked before
//!   [`Sandbox::confine`] is called; here only what the machine can do is checked.
//! - What it keeps (the probe's answer, the launcher started ahead) are values of a
//!   [`Sandbox`], not statics; the one process-wide state is the registry of `.git`
//!   placeholders, which belong to the filesystem, not to a sandbox.
//! - Every `unsafe` is in `uexec-sys`.

#![forbid(unsafe_code)]

pub mod doctor;
mod evidence;
mod exe;
mod exec_launch;
mod git;
#[cfg(target_os = "linux")]
mod landlock;
#[cfg(target_os = "linux")]
pub mod launcher;
#[cfg(target_os = "linux")]
mod namespaces;
pub mod protect;
pub mod proxy;
#[cfg(target_os = "linux")]
mod seccomp;
#[cfg(target_os = "linux")]
pub mod warm;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use uexec_core::backend::{Launch, SpawnSpec, Started};
use uexec_core::confine::{Confine, Confined, Confinement};
use uexec_core::policy::{Denied, Fallback, Layer, Network, Profile, SandboxReport};
use uexec_core::{ExecError, PolicyMonitor};

pub use exe::Launcher;

/// The hidden subcommand of the `uexec` binary that runs the launcher.
pub const LAUNCHER_SUBCOMMAND: &str = "__sandbox-exec";
/// The launcher's flag that installs the exec-notify filter last and hands its listener to
/// uexec over the Unix socket inherited at the descriptor given (rules judged at each exec).
pub const EXEC_NOTIFY_FLAG: &str = "--exec-notify-fd";
/// Exit code of the launcher when a layer it was asked for could not be applied.
pub const LAUNCHER_FAILED_EXIT_CODE: i32 = 126;
/// Environment variable read only by the launcher: a comma-separated list of layers whose
/// set-up fails with EPERM, as on a machine without them (tests of refusal and fallback).
pub const FAULT_ENV: &str = "UEXEC_SANDBOX_FAULT";

/// What a machine supports, as the launcher's `--probe` says: per layer, `Err(why)` when
/// missing.
pub type Support = HashMap<Layer, Result<(), String>>;

/// The confinement of commands through a launcher (`uexec __sandbox-exec`): what the binary
/// builds once and hands to every store, so that what it learns and keeps is shared.
#[derive(Debug)]
pub struct Sandbox {
    launcher: Launcher,
    /// What the machine supports, asked once (a launcher run costs a few ms; the answer does
    /// not change while the process lives). A failed probe is asked again next time.
    support: Mutex<Option<Support>>,
    /// The launcher started ahead of the next command (none kept when cold).
    #[cfg(target_os = "linux")]
    pool: Arc<warm::Pool>,
}

impl Sandbox {
    /// A sandbox that keeps one launcher started ahead ([`warm`]).
    pub fn new(launcher: Launcher) -> Arc<Self> {
        Self::with_pool(launcher, true)
    }

    /// A sandbox that execs the launcher for each command (benchmarks, tests).
    pub fn cold(launcher: Launcher) -> Arc<Self> {
        Self::with_pool(launcher, false)
    }

    /// The sandbox of this very binary (`/proc/self/exe`).
    pub fn current_exe() -> std::io::Result<Arc<Self>> {
        Ok(Self::new(Launcher::current_exe()?))
    }

    #[cfg_attr(not(target_os = "linux"), allow(unused_variables))]
    fn with_pool(launcher: Launcher, warm: bool) -> Arc<Self> {
        Arc::new(Self {
            launcher,
            support: Mutex::new(None),
            #[cfg(target_os = "linux")]
            pool: warm::Pool::new(warm),
        })
    }

    pub fn launcher(&self) -> &Launcher {
        &self.launcher
    }

    fn support(&self) -> Result<Support, String> {
        let mut cache = self
            .support
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(support) = cache.as_ref() {
            return Ok(support.clone());
        }
        // Blocking, once per sandbox (a few ms): the plan is synchronous.
        let launcher = &self.launcher;
        let (stdout, status) = launcher.probe().map_err(|e| {
            format!(
                "cannot run the sandbox launcher {}: {e}",
                launcher.display().display()
            )
        })?;
        let support = parse_probe(&stdout);
        if support.len() != Layer::ALL.len() {
            return Err(format!(
                "the sandbox launcher {} did not say what this machine supports ({status})",
                launcher.display().display(),
            ));
        }
        *cache = Some(support.clone());
        Ok(support)
    }
}

/// A spawn through the launcher: the launcher's arguments for one command, rendered around
/// the command's own argv when the backend spawns it, and started warm when one waits.
#[derive(Debug)]
struct SandboxLaunch {
    launcher: Launcher,
    /// The launcher's program (`/proc/self/...`) and the path `ps` shows, as UTF-8.
    program: String,
    display: String,
    /// What follows the subcommand, before the command (`--layers`, `--write`, mounts,
    /// network).
    flags: Vec<String>,
    #[cfg(target_os = "linux")]
    pool: Arc<warm::Pool>,
}

impl Launch for SandboxLaunch {
    fn render(&self, argv: Vec<String>, arg0: Option<String>) -> (Vec<String>, Option<String>) {
        let mut rendered = vec![self.program.clone(), LAUNCHER_SUBCOMMAND.to_owned()];
        rendered.extend(self.flags.iter().cloned());
        if let Some(arg0) = arg0 {
            rendered.push("--arg0".to_owned());
            rendered.push(arg0);
        }
        rendered.push("--".to_owned());
        rendered.extend(argv);
        // `ps` shows the launcher by its path; it is exec'd from the file held.
        (rendered, Some(self.display.clone()))
    }

    #[cfg(target_os = "linux")]
    fn start(&self, child: &uexec_sys::ChildSpec) -> std::io::Result<Option<Started>> {
        self.pool.launch(&self.launcher, child).map(Some)
    }

    #[cfg(not(target_os = "linux"))]
    fn start(&self, _child: &uexec_sys::ChildSpec) -> std::io::Result<Option<Started>> {
        Ok(None)
    }
}

impl Confinement for Sandbox {
    fn judge_execs(&self, spec: &mut SpawnSpec) -> Result<std::os::fd::OwnedFd, String> {
        exec_launch::judge_execs(self, spec)
    }

    /// Checks the policy's layers against what this machine supports and gives `spec` its
    /// launcher (step 1 of the crate docs).
    fn confine(
        &self,
        policy: Confine<'_>,
        spec: &mut SpawnSpec,
    ) -> Result<Arc<dyn Confined>, ExecError> {
        let launcher = &self.launcher;
        let support = self.support().map_err(ExecError::Spawn)?;
        #[cfg(target_os = "linux")]
        self.pool.planned(launcher);
        let Confine {
            profile,
            network,
            layers: needed,
            workspace,
            writable_roots,
            fallback,
            on_denial,
            dirs,
        } = policy;
        let mut layers = Vec::new();
        let mut missing = Vec::new();
        for layer in needed {
            match support.get(&layer) {
                Some(Ok(())) => layers.push(layer),
                Some(Err(why)) if fallback == Fallback::Refuse => {
                    return Err(ExecError::Spawn(format!(
                        "sandbox layer {} is unavailable on this machine: {why} (run `uexec doctor`; \
                         best-effort fallback runs without it)",
                        layer.as_str()
                    )))
                }
                _ => missing.push(layer),
            }
        }
        let tmp = PrivateTmp::create(&runtime_base()).map_err(|e| {
            ExecError::Spawn(format!("cannot create the sandbox's private tmp: {e}"))
        })?;
        let mut writable = vec![tmp.path.clone()];
        if profile == Profile::WorkspaceWrite {
            // The server's roots, not the command's workdir: that is the model's argument.
            writable.push(workspace.to_path_buf());
            writable.extend(writable_roots.iter().cloned());
        }
        // Read-only mounts nothing: Landlock already stops its writes, and a mount namespace
        // costs its making and its teardown.
        let protection = match profile {
            Profile::WorkspaceWrite => Some(
                protect::protection(
                    &writable[1..],
                    &spec.cwd,
                    &tmp.path,
                    &protect::own_paths(&dirs, launcher),
                    &runtime_base(),
                )
                .map_err(|e| {
                    ExecError::Spawn(format!("cannot protect the sandbox's paths: {e}"))
                })?,
            ),
            _ => None,
        };

        let utf8 = |p: &Path| {
            p.to_str().map(str::to_owned).ok_or_else(|| {
                ExecError::invalid("sandbox", format!("{} is not valid UTF-8", p.display()))
            })
        };
        let program = utf8(&launcher.program())?;
        let mut flags = vec![
            "--layers".to_owned(),
            layers
                .iter()
                .map(|l| l.as_str())
                .collect::<Vec<_>>()
                .join(","),
        ];
        if profile != Profile::DangerFullAccess {
            for path in &writable {
                flags.push("--write".to_owned());
                flags.push(utf8(path)?);
            }
        }
        for mount in protection.iter().flat_map(|p| &p.mounts) {
            flags.push(mount.flag().to_owned());
            flags.push(utf8(mount.path())?);
        }
        let mut proxy = None;
        match &network {
            Network::On => {}
            Network::Off => flags.push("--network-off".to_owned()),
            Network::Allow(allow) => {
                let (socket, launcher_end) = proxy::ProxySocket::pair(allow.clone(), on_denial)
                    .map_err(|e| {
                        ExecError::Spawn(format!("cannot start the network proxy: {e}"))
                    })?;
                let fd = spec.pass_fd(launcher_end).map_err(ExecError::Spawn)?;
                flags.push("--proxy-fd".to_owned());
                flags.push(fd.to_string());
                for (name, value) in proxy::proxy_env(allow) {
                    spec.env.insert(name.into(), value.into());
                }
                proxy = Some(Mutex::new(Some(socket)));
            }
        }
        spec.launcher = Some(Arc::new(SandboxLaunch {
            launcher: launcher.clone(),
            program,
            display: utf8(launcher.display())?,
            flags,
            #[cfg(target_os = "linux")]
            pool: self.pool.clone(),
        }));
        spec.env
            .insert("UEXEC_SANDBOX".into(), profile.as_str().into());
        if network == Network::Off {
            spec.env
                .insert("UEXEC_SANDBOX_NETWORK_DISABLED".into(), "1".into());
        }
        spec.env.insert("TMPDIR".into(), tmp.path.clone().into());
        Ok(Arc::new(SandboxSession {
            report: SandboxReport {
                profile,
                network,
                layers,
                missing,
                denied: Denied::No,
                evidence: Vec::new(),
            },
            writable,
            _tmp: tmp,
            _placeholders: protection.map(|p| p.placeholders),
            proxy,
        }))
    }
}

/// Where private tmps go: `$XDG_RUNTIME_DIR/uexec-sandbox` (else in `/run/user/<uid>`),
/// else `<tmp>/uexec-sandbox-<uid>` ([`uexec_core::fs::sandbox_base_path`]).
pub fn runtime_base() -> PathBuf {
    uexec_core::fs::sandbox_base_path()
}

/// A session's sandbox: its report and its private tmp (removed with the session).
#[derive(Debug)]
pub struct SandboxSession {
    report: SandboxReport,
    writable: Vec<PathBuf>,
    _tmp: PrivateTmp,
    /// The `.git` placeholders the session holds, for its drop: each is removed after the
    /// last session using it.
    _placeholders: Option<git::Placeholders>,
    /// The allowlist proxy's socket, until the session's monitor takes it.
    proxy: Option<Mutex<Option<proxy::ProxySocket>>>,
}

impl Confined for SandboxSession {
    fn judge(&self, output: &str, verdicts: Vec<String>) -> SandboxReport {
        let likely = evidence::find(output, &self.writable, &self.report.network);
        let denied = match (verdicts.is_empty(), likely.is_empty()) {
            (false, _) => Denied::Yes,
            (true, false) => Denied::Likely,
            (true, true) => Denied::No,
        };
        let mut evidence = verdicts;
        evidence.extend(likely);
        SandboxReport {
            denied,
            evidence,
            ..self.report.clone()
        }
    }

    fn take_monitor(&self) -> Option<Box<dyn PolicyMonitor>> {
        let socket = self
            .proxy
            .as_ref()?
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()?;
        Some(Box::new(socket))
    }
}

/// A directory removed (with its contents) when dropped.
#[derive(Debug)]
struct PrivateTmp {
    path: PathBuf,
}

impl PrivateTmp {
    fn create(base: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        // Another user's directory of that name would see (and could swap) what we put there.
        uexec_core::fs::private_dir(base)?;
        sweep_stale(base);
        let path = base.join(format!(
            "{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(Self { path })
    }
}

/// Removes, once per process, what dead uexec processes left in `base` (a uexec killed with
/// SIGKILL cannot clean up): entries are named `PID-...`, and an entry whose PID no longer
/// runs is stale; their `.git` placeholders go too ([`git::sweep`]). A recycled PID only
/// delays the sweep.
fn sweep_stale(base: &Path) {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| {
        git::sweep(base);
        let Ok(entries) = std::fs::read_dir(base) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let Some(Ok(pid)) = name.split('-').next().map(str::parse::<u32>) else {
                continue;
            };
            if Path::new(&format!("/proc/{pid}")).exists() {
                continue;
            }
            let path = entry.path();
            let _ = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
    });
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Lines `LAYER ok` or `LAYER unavailable: WHY`.
fn parse_probe(text: &str) -> Support {
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once(' ')?;
            let layer = Layer::parse(name)?;
            let verdict = match rest.strip_prefix("unavailable: ") {
                Some(why) => Err(why.to_owned()),
                None if rest == "ok" => Ok(()),
                None => return None,
            };
            Some((layer, verdict))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_lines_parse() {
        let s = parse_probe("landlock ok\nseccomp unavailable: Operation not permitted\nnoise\n");
        assert_eq!(s.get(&Layer::Landlock), Some(&Ok(())));
        assert_eq!(
            s.get(&Layer::Seccomp),
            Some(&Err("Operation not permitted".to_owned()))
        );
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn the_launch_wraps_the_command_and_shows_the_launcher_by_its_path() {
        let launcher = Launcher::current_exe().expect("this test binary");
        let launch = SandboxLaunch {
            program: "/proc/self/exe".to_owned(),
            display: "/usr/bin/uexec".to_owned(),
            flags: vec!["--layers".to_owned(), "namespaces".to_owned()],
            #[cfg(target_os = "linux")]
            pool: warm::Pool::new(false),
            launcher,
        };
        let (argv, arg0) = launch.render(
            vec!["bash".to_owned(), "-c".to_owned(), "ls".to_owned()],
            Some("-bash".to_owned()),
        );
        assert_eq!(
            argv,
            [
                "/proc/self/exe",
                LAUNCHER_SUBCOMMAND,
                "--layers",
                "namespaces",
                "--arg0",
                "-bash",
                "--",
                "bash",
                "-c",
                "ls"
            ]
        );
        assert_eq!(arg0.as_deref(), Some("/usr/bin/uexec"));
    }
}
