//! The seams a confinement mechanism plugs into (`uexec-sandbox` implements them; the
//! binary hands one to the stores), and the store's sandbox configuration.
//!
//! A command is confined in three steps:
//! 1. the plan checks the call against the server's policy, a ceiling
//!    ([`crate::policy::narrow`]), and the configuration (a confinement, the writable
//!    roots), so every refusal a call can earn is decided in core;
//! 2. the [`Confinement`] turns the effective policy into a confined spawn: a
//!    [`Launch`](crate::backend::Launch) on the [`SpawnSpec`], and what it needs beside;
//! 3. the session keeps the [`Confined`] side, which judges each result and may watch the
//!    session as a policy monitor.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::backend::SpawnSpec;
use crate::error::ExecError;
use crate::policy::{Fallback, Layer, Network, OnDenial, PolicyMonitor, Profile, SandboxReport};

/// The sandbox of a store: the policy of commands that name none (and the ceiling of
/// those that do), and the mechanism that applies it.
#[derive(Debug, Clone, Default)]
pub struct SandboxConfig {
    /// What confines a command (the `uexec-sandbox` crate's launcher); without it, asking
    /// for a sandbox is an error.
    pub confinement: Option<Arc<dyn Confinement>>,
    /// Profile when a call names none.
    pub profile: Profile,
    /// Network policy when a call names none.
    pub network: Network,
    /// Writable under `workspace-write`, besides the workdir (must exist).
    pub writable_roots: Vec<PathBuf>,
    pub fallback: Fallback,
    /// What a host off an allowlist does to the session.
    pub on_denial: OnDenial,
}

/// uexec's directories that one store's configuration names, besides the per-user ones
/// (which `crate::fs` knows): a confinement keeps them read-only.
#[derive(Debug, Clone, Default)]
pub struct UexecDirs {
    /// The transcripts root (`StoreConfig::transcripts`, perhaps a `--transcripts-dir`).
    pub transcripts: Option<PathBuf>,
    /// Where shell snapshots are kept (`StoreConfig::shell_snapshots`).
    pub shell_snapshots: Option<PathBuf>,
}

/// One command's effective policy, checked against the ceiling, for the confinement.
#[derive(Debug)]
pub struct Confine<'a> {
    pub profile: Profile,
    pub network: Network,
    /// The layers the policy needs ([`crate::policy::needed_layers`]; never empty).
    pub layers: Vec<Layer>,
    /// The server's working directory: under `workspace-write` it and the writable roots
    /// are writable, wherever the command itself runs.
    pub workspace: &'a Path,
    /// The store's writable roots, each an existing directory.
    pub writable_roots: &'a [PathBuf],
    pub fallback: Fallback,
    pub on_denial: OnDenial,
    pub dirs: UexecDirs,
}

/// Turns a planned spawn into a confined one.
pub trait Confinement: std::fmt::Debug + Send + Sync + 'static {
    /// Confines `spec` as `policy` says: sets its launcher (and what the launcher needs:
    /// environment, a passed descriptor), and returns the session's side of it. Fails when
    /// a layer is missing and the fallback refuses, or when the set-up fails.
    fn confine(
        &self,
        policy: Confine<'_>,
        spec: &mut SpawnSpec,
    ) -> Result<Arc<dyn Confined>, ExecError>;

    /// Hands every exec of `spec`'s processes to uexec (`RulesAt::Exec`): gives `spec` a
    /// launcher that installs the exec-notify filter (after the sandbox's layers, when
    /// [`Self::confine`] gave it one) and returns uexec's end of the socket its listener
    /// comes on. `Err(why)` when it cannot; the script's text was judged all the same.
    fn judge_execs(&self, spec: &mut SpawnSpec) -> Result<std::os::fd::OwnedFd, String> {
        let _ = spec;
        Err("this confinement cannot hand execs over".to_owned())
    }
}

/// A confined session's side of its sandbox; dropped with the session (its private tmp
/// goes with it).
pub trait Confined: std::fmt::Debug + Send + Sync + 'static {
    /// The report for a result whose body is `output`, given the verdicts the session's
    /// monitor recorded since the last result (certain denials: they come first).
    fn judge(&self, output: &str, verdicts: Vec<String>) -> SandboxReport;
    /// The policy monitor of the session, when it has one (the allowlist proxy): taken
    /// once.
    fn take_monitor(&self) -> Option<Box<dyn PolicyMonitor>>;
}
