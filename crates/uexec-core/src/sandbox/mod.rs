//! Sandbox profiles and network policy: what a command may write and reach (issue 10).
//!
//! Why a launcher: the local backend starts children from a multi-threaded process, where
//! only async-signal-safe calls are allowed between the fork and the exec. Namespaces,
//! mounts, Landlock and seccomp set-up allocate, so a sandboxed command runs as
//! `uexec __sandbox-exec [policy] -- argv...`, a hidden subcommand of the binary that is
//! single-threaded, applies the layers and then execs the command. The flow:
//! 1. [`prepare`] (at plan time) picks the layers the profile and network need, checks them
//!    against what the machine supports (asked once per launcher, `--probe`), refuses or
//!    drops the missing ones ([`Fallback`]), makes a private tmp for the session and rewrites
//!    the spawn to go through the launcher, with the marker variables set;
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
//! 3. every snapshot of the session carries a [`SandboxReport`]: the layers applied, and
//!    whether the output shows a denial ([`SandboxSession::judge`]).
//!
//! The launcher is usually already running when a command comes: the engine keeps one
//! started ahead and hands it the rest of the spawn ([`warm`]), so the exec of the `uexec`
//! binary is off the command's path.
//!
//! The launcher applies exactly the layers it is given and fails (exit 126) if one of them
//! cannot be applied: what the report says is what ran.

mod ceiling;
pub mod doctor;
mod evidence;
mod exe;
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
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use crate::backend::SpawnSpec;
use crate::error::ExecError;

pub use exe::Launcher;
pub use protect::UexecDirs;

/// The hidden subcommand of the `uexec` binary that runs the launcher.
pub const LAUNCHER_SUBCOMMAND: &str = "__sandbox-exec";
/// Exit code of the launcher when a layer it was asked for could not be applied.
pub const LAUNCHER_FAILED_EXIT_CODE: i32 = 126;
/// Environment variable read only by the launcher: a comma-separated list of layers whose
/// set-up fails with EPERM, as on a machine without them (tests of refusal and fallback).
pub const FAULT_ENV: &str = "UEXEC_SANDBOX_FAULT";

/// What a command may write (Codex's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// Reads anywhere; writes only to /dev/null, the terminal and a private tmp.
    ReadOnly,
    /// Also writes under the workdir and the writable roots, except `.git` and uexec's own
    /// directories.
    WorkspaceWrite,
    /// No filesystem restriction.
    #[default]
    DangerFullAccess,
}

impl Profile {
    pub const NAMES: &'static [&'static str] =
        &["read-only", "workspace-write", "danger-full-access"];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::WorkspaceWrite => "workspace-write",
            Self::DangerFullAccess => "danger-full-access",
        }
    }
}

impl FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "read-only" => Ok(Self::ReadOnly),
            "workspace-write" => Ok(Self::WorkspaceWrite),
            "danger-full-access" => Ok(Self::DangerFullAccess),
            _ => Err(format!(
                "unknown sandbox profile {s:?} (expected one of: {})",
                Self::NAMES.join(", ")
            )),
        }
    }
}

/// Whether a command may use the network.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Network {
    #[default]
    On,
    /// Only a loopback interface of its own; IPv4 and IPv6 sockets fail with EPERM.
    Off,
    /// Only a loopback of its own, and uexec's HTTP(S) proxy there, which lets through the
    /// hosts of the list and fails the session on any other ([`proxy`]).
    Allow(Vec<AllowEntry>),
}

impl Network {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::On => "on",
            Self::Off => "off",
            Self::Allow(_) => "allowlist",
        }
    }

    /// The network namespace applies (off, or the allowlist).
    fn isolated(&self) -> bool {
        !matches!(self, Self::On)
    }
}

pub use ceiling::{narrow, show as show_allow_entry, Widening};
pub use proxy::AllowEntry;

impl FromStr for Network {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "on" => Ok(Self::On),
            "off" => Ok(Self::Off),
            _ => Err(format!(
                "unknown network policy {s:?} (expected \"off\" or \"on\")"
            )),
        }
    }
}

/// What to do when a layer the policy needs is missing on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fallback {
    /// Refuse to run the command (the default).
    #[default]
    Refuse,
    /// Run with the layers that work; the report says which.
    BestEffort,
}

impl Fallback {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Refuse => "refuse",
            Self::BestEffort => "best-effort",
        }
    }
}

impl FromStr for Fallback {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "refuse" => Ok(Self::Refuse),
            "best-effort" => Ok(Self::BestEffort),
            _ => Err(format!(
                "unknown sandbox fallback {s:?} (expected \"refuse\" or \"best-effort\")"
            )),
        }
    }
}

/// What a request to a host off the allowlist does besides being refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDenial {
    /// Fail the session and terminate the command (the default).
    #[default]
    Terminate,
    /// Record the denial and let the command run on: its snapshots report it (`denied:
    /// true`, the host named), and its End is failed with it.
    Record,
}

impl OnDenial {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Terminate => "terminate",
            Self::Record => "record",
        }
    }
}

impl FromStr for OnDenial {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "terminate" => Ok(Self::Terminate),
            "record" => Ok(Self::Record),
            _ => Err(format!(
                "unknown network denial action {s:?} (expected \"terminate\" or \"record\")"
            )),
        }
    }
}

/// One mechanism of the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layer {
    /// User, pid and mount namespaces: descendants die with the session; `.git` and uexec's
    /// directories are mounted read-only.
    Namespaces,
    /// A network namespace with only loopback (network off).
    NetworkNamespace,
    /// Landlock: the filesystem rules of the profile.
    Landlock,
    /// seccomp: no ptrace (nor process_vm_*), no TIOCSTI, no IPv4/IPv6 sockets when the
    /// network is off, no mount calls when the profile restricts writes.
    Seccomp,
}

impl Layer {
    pub const ALL: [Layer; 4] = [
        Layer::Namespaces,
        Layer::NetworkNamespace,
        Layer::Landlock,
        Layer::Seccomp,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Namespaces => "namespaces",
            Self::NetworkNamespace => "network-namespace",
            Self::Landlock => "landlock",
            Self::Seccomp => "seccomp",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.as_str() == s)
    }
}

/// The sandbox defaults of a store.
#[derive(Debug, Clone, Default)]
pub struct SandboxConfig {
    /// The `uexec` binary that runs [`LAUNCHER_SUBCOMMAND`] (usually this process's own:
    /// [`Launcher::current_exe`]); without it, asking for a sandbox is an error.
    pub launcher: Option<Launcher>,
    /// Profile when a call names none.
    pub profile: Profile,
    /// Network policy when a call names none.
    pub network: Network,
    /// Writable under `workspace-write`, besides the workdir (must exist).
    pub writable_roots: Vec<PathBuf>,
    pub fallback: Fallback,
    /// What a host off an allowlist does to the session.
    pub on_denial: OnDenial,
    /// Exec the launcher for each command instead of keeping one started ahead
    /// ([`warm`]). Per launcher, for the whole process: a launcher any store runs warm
    /// is warm for all.
    pub cold_launcher: bool,
}

/// Whether the output shows that the sandbox said no.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    No,
    /// An EACCES/EPERM/EROFS-like message on a path outside the writable roots (or a
    /// network error with the network off): kept as evidence.
    Likely,
    /// The sandbox's own verdict (the allowlist proxy refused a host).
    Yes,
}

impl Denied {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::No => "false",
            Self::Likely => "likely",
            Self::Yes => "true",
        }
    }
}

/// What a snapshot says of its session's sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxReport {
    pub profile: Profile,
    pub network: Network,
    /// The layers applied.
    pub layers: Vec<Layer>,
    /// Layers the policy needed that this machine lacks (best effort ran without them).
    pub missing: Vec<Layer>,
    pub denied: Denied,
    /// What shows a denial: the proxy's verdicts (certain), then output lines (likely).
    pub evidence: Vec<String>,
}

impl SandboxReport {
    /// One line for the model when something was (likely) denied.
    pub fn denial_text(&self) -> Option<String> {
        let first = self.evidence.first()?;
        let how = match self.denied {
            Denied::No => return None,
            Denied::Likely => "likely blocked",
            Denied::Yes => "blocked",
        };
        Some(format!(
            "Sandbox ({}, network {}) {how} this: {first}\nIf the command needs it, ask the user to widen the policy (sandbox or network).",
            self.profile.as_str(),
            self.network.as_str()
        ))
    }
}

/// A session's sandbox: its report and its private tmp (removed when the last clone goes).
#[derive(Debug, Clone)]
pub struct SandboxSession {
    report: SandboxReport,
    writable: Vec<PathBuf>,
    tmp: Option<Arc<PrivateTmp>>,
    /// The `.git` placeholders the session holds, for its drop: each is removed after the
    /// last session using it.
    _placeholders: Option<Arc<git::Placeholders>>,
    /// The allowlist proxy's socket, until the session's monitor takes it.
    proxy: Option<Arc<Mutex<Option<proxy::ProxySocket>>>>,
}

impl SandboxSession {
    /// The report for a snapshot whose body is `output`, given the verdicts the session's
    /// monitor recorded since the last snapshot (certain denials: they come first).
    pub fn judge(&self, output: &str, verdicts: Vec<String>) -> SandboxReport {
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

    /// The policy monitor of the session, when it has one (the allowlist proxy): taken once.
    pub fn take_monitor(&self) -> Option<Box<dyn crate::PolicyMonitor>> {
        let socket = self
            .proxy
            .as_ref()?
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()?;
        Some(Box::new(socket))
    }

    /// The private tmp of the session (`TMPDIR`).
    pub fn tmp(&self) -> Option<&Path> {
        self.tmp.as_ref().map(|t| t.path.as_path())
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
        crate::fs::private_dir(base)?;
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

/// Where private tmps go: `$XDG_RUNTIME_DIR/uexec-sandbox`, else `<tmp>/uexec-sandbox-<uid>`.
pub fn runtime_base() -> PathBuf {
    crate::fs::sandbox_base_path()
}

/// The layers a policy needs.
pub fn needed_layers(profile: Profile, network: &Network) -> Vec<Layer> {
    let mut layers = Vec::new();
    if profile != Profile::DangerFullAccess || network.isolated() {
        layers.push(Layer::Namespaces);
    }
    if network.isolated() {
        layers.push(Layer::NetworkNamespace);
    }
    if profile != Profile::DangerFullAccess {
        layers.push(Layer::Landlock);
    }
    if !layers.is_empty() {
        layers.push(Layer::Seccomp);
    }
    layers
}

/// What a machine supports, as the launcher's `--probe` says: per layer, `Err(why)` when
/// missing.
pub type Support = HashMap<Layer, Result<(), String>>;

/// Probes per launcher, once per process (a launcher run costs a few ms; the answer does not
/// change while the process lives). The launcher is kept with its answer: a held
/// descriptor stays open, so its number names no other launcher later.
static SUPPORT: Mutex<Vec<(Launcher, Support)>> = Mutex::new(Vec::new());

fn support_of(launcher: &Launcher) -> Result<Support, String> {
    let mut cache = SUPPORT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, support)) = cache.iter().find(|(l, _)| l == launcher) {
        return Ok(support.clone());
    }
    // Blocking, once per launcher and process (a few ms): the plan is synchronous.
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
    cache.push((launcher.clone(), support.clone()));
    Ok(support)
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

/// Validates a call's sandbox against the server's ([`ceiling`]: a call may only narrow it)
/// and, when one applies, rewrites `spec` to run through the launcher (step 1 of the module
/// docs). `workspace` is the server's working directory: under `workspace-write` it and the
/// writable roots are writable, wherever the command itself runs. `None` when the command
/// runs unsandboxed.
pub fn prepare(
    config: &SandboxConfig,
    workspace: &Path,
    dirs: &UexecDirs,
    profile: Option<Profile>,
    network: Option<Network>,
    spec: &mut SpawnSpec,
) -> Result<Option<SandboxSession>, ExecError> {
    let (profile, network) = narrow(config.profile, &config.network, profile, network)?;
    let needed = needed_layers(profile, &network);
    if needed.is_empty() {
        return Ok(None);
    }
    let launcher = config.launcher.as_ref().ok_or_else(|| {
        ExecError::invalid(
            "sandbox",
            "this uexec has no sandbox launcher configured (StoreConfig::sandbox.launcher); \
             it cannot run sandboxed commands",
        )
    })?;
    for root in &config.writable_roots {
        if !root.is_dir() {
            return Err(ExecError::invalid(
                "writable_roots",
                format!("{} does not exist or is not a directory", root.display()),
            ));
        }
    }
    let support = support_of(launcher).map_err(ExecError::Spawn)?;
    #[cfg(target_os = "linux")]
    warm::register(launcher, !config.cold_launcher);
    let mut layers = Vec::new();
    let mut missing = Vec::new();
    for layer in needed {
        match support.get(&layer) {
            Some(Ok(())) => layers.push(layer),
            Some(Err(why)) if config.fallback == Fallback::Refuse => {
                return Err(ExecError::Spawn(format!(
                    "sandbox layer {} is unavailable on this machine: {why} (run `uexec doctor`; \
                     best-effort fallback runs without it)",
                    layer.as_str()
                )))
            }
            _ => missing.push(layer),
        }
    }
    let tmp = PrivateTmp::create(&runtime_base())
        .map_err(|e| ExecError::Spawn(format!("cannot create the sandbox's private tmp: {e}")))?;
    let mut writable = vec![tmp.path.clone()];
    if profile == Profile::WorkspaceWrite {
        // The server's roots, not the command's workdir: that is the model's argument.
        writable.push(workspace.to_path_buf());
        writable.extend(config.writable_roots.iter().cloned());
    }
    // Read-only mounts nothing: Landlock already stops its writes, and a mount namespace
    // costs its making and its teardown.
    let protection = match profile {
        Profile::WorkspaceWrite => Some(
            protect::protection(
                &writable[1..],
                &spec.cwd,
                &tmp.path,
                &protect::own_paths(dirs, launcher),
                &runtime_base(),
            )
            .map_err(|e| ExecError::Spawn(format!("cannot protect the sandbox's paths: {e}")))?,
        ),
        _ => None,
    };

    let utf8 = |p: &Path| {
        p.to_str().map(str::to_owned).ok_or_else(|| {
            ExecError::invalid("sandbox", format!("{} is not valid UTF-8", p.display()))
        })
    };
    let mut argv = vec![
        utf8(&launcher.program())?,
        LAUNCHER_SUBCOMMAND.to_owned(),
        "--layers".to_owned(),
        layers
            .iter()
            .map(|l| l.as_str())
            .collect::<Vec<_>>()
            .join(","),
    ];
    if profile != Profile::DangerFullAccess {
        for path in &writable {
            argv.push("--write".to_owned());
            argv.push(utf8(path)?);
        }
    }
    for mount in protection.iter().flat_map(|p| &p.mounts) {
        argv.push(mount.flag().to_owned());
        argv.push(utf8(mount.path())?);
    }
    let mut proxy = None;
    match &network {
        Network::On => {}
        Network::Off => argv.push("--network-off".to_owned()),
        Network::Allow(allow) => {
            let (socket, launcher_end) = proxy::ProxySocket::pair(allow.clone(), config.on_denial)
                .map_err(|e| ExecError::Spawn(format!("cannot start the network proxy: {e}")))?;
            argv.push("--proxy-fd".to_owned());
            argv.push(uexec_sys::PASSED_FD.to_string());
            spec.passed_fd = Some(crate::backend::PassedFd::new(launcher_end));
            for (name, value) in proxy::proxy_env(allow) {
                spec.env.insert(name.into(), value.into());
            }
            proxy = Some(Arc::new(Mutex::new(Some(socket))));
        }
    }
    if let Some(arg0) = spec.arg0.take() {
        argv.push("--arg0".to_owned());
        argv.push(arg0);
    }
    argv.push("--".to_owned());
    argv.append(&mut spec.argv);
    spec.argv = argv;
    // `ps` shows the launcher by its path; it is exec'd from the file held.
    spec.arg0 = Some(utf8(launcher.display())?);
    spec.env
        .insert("UEXEC_SANDBOX".into(), profile.as_str().into());
    if network == Network::Off {
        spec.env
            .insert("UEXEC_SANDBOX_NETWORK_DISABLED".into(), "1".into());
    }
    spec.env.insert("TMPDIR".into(), tmp.path.clone().into());
    Ok(Some(SandboxSession {
        report: SandboxReport {
            profile,
            network,
            layers,
            missing,
            denied: Denied::No,
            evidence: Vec::new(),
        },
        writable,
        tmp: Some(Arc::new(tmp)),
        _placeholders: protection.map(|p| Arc::new(p.placeholders)),
        proxy,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_and_networks_parse_and_name_the_choices() {
        assert_eq!("read-only".parse(), Ok(Profile::ReadOnly));
        let e = "readonly".parse::<Profile>().expect_err("unknown");
        assert!(e.contains("workspace-write"), "{e}");
        assert_eq!("off".parse(), Ok(Network::Off));
        assert!("maybe".parse::<Network>().is_err());
        assert_eq!("best-effort".parse(), Ok(Fallback::BestEffort));
        assert_eq!("record".parse(), Ok(OnDenial::Record));
        let e = "ignore".parse::<OnDenial>().expect_err("unknown");
        assert!(e.contains("\"terminate\" or \"record\""), "{e}");
    }

    #[test]
    fn layers_follow_the_policy() {
        assert!(needed_layers(Profile::DangerFullAccess, &Network::On).is_empty());
        assert_eq!(
            needed_layers(Profile::ReadOnly, &Network::On),
            [Layer::Namespaces, Layer::Landlock, Layer::Seccomp]
        );
        assert_eq!(
            needed_layers(Profile::DangerFullAccess, &Network::Off),
            [Layer::Namespaces, Layer::NetworkNamespace, Layer::Seccomp]
        );
    }

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
    fn no_launcher_is_a_clear_error() {
        let mut spec = SpawnSpec {
            argv: vec!["/bin/sh".into()],
            arg0: None,
            cwd: std::env::temp_dir(),
            env: Default::default(),
            env_mode: Default::default(),
            tty: false,
            pipe_stdin: false,
            passed_fd: None,
        };
        let e = prepare(
            &SandboxConfig::default(),
            &std::env::temp_dir(),
            &UexecDirs::default(),
            Some(Profile::ReadOnly),
            None,
            &mut spec,
        )
        .expect_err("no launcher");
        assert!(e.to_string().contains("sandbox"), "{e}");
        assert!(prepare(
            &SandboxConfig::default(),
            &std::env::temp_dir(),
            &UexecDirs::default(),
            None,
            None,
            &mut spec
        )
        .expect("unsandboxed")
        .is_none());
    }
}
