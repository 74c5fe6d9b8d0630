//! The sandbox's vocabulary; core names no mechanism (namespaces, Landlock, seccomp and the
//! proxy live in `uexec-sandbox`).
//!
//! What lives here, and why here:
//! 1. the policy a person sets and a call may only narrow ([`ceiling`]): [`Profile`],
//!    [`Network`] with its [`AllowEntry`] list, [`Fallback`], [`OnDenial`]; and beside it
//!    the resource [`Limits`] of a session's cgroup ([`limits`]), narrowed the same way;
//! 2. what a result says of it ([`SandboxReport`], [`Layer`], [`Denied`]);
//! 3. policy monitors ([`monitor`]): what watches a session for the policy, and what it may
//!    do to it;
//! 4. command rules ([`rules`]): the seam a rules engine implements, and the verdict it
//!    gives on a script, part by part.
//!
//! It is a leaf of the engine: it uses no other module of core, so every room may use it.
//! The seams a mechanism plugs into are in [`crate::confine`].

mod allow;
mod ceiling;
pub mod decisions;
pub mod exec_rules;
mod limits;
mod monitor;
pub mod rules;

use std::str::FromStr;

pub use allow::AllowEntry;
pub use ceiling::{narrow, show as show_allow_entry, Widening};
pub use limits::{
    check_bytes, check_pids, narrow_limits, parse_bytes, parse_cpus, parse_pids, show_bytes,
    show_count, CpuMax, Limits, CPU_PERIOD_USEC, MIN_MEMORY_MAX_BYTES, MIN_PIDS_MAX, NO_LIMIT,
};
pub use monitor::{MonitorHandle, Monitored, PolicyMonitor};

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
    /// hosts of the list and fails the session on any other.
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
    pub fn isolated(&self) -> bool {
        !matches!(self, Self::On)
    }
}

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
}
