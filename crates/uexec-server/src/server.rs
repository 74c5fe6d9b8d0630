//! The transport-free exec server: what every connection shares.
//!
//! An [`ExecServer`] owns the session [`Registry`], the [`Backend`] processes run on, the
//! [`ServerConfig`] and the environment description computed at startup. Transports
//! (`transport::ws`, `transport::stdio`) turn their frames into calls on a
//! [`Connection`](crate::connection::Connection) made by [`ExecServer::connect`] (defined
//! beside the connection, so this module need not name it), and call
//! [`ExecServer::shutdown`] on the way out so no process outlives the server.

use std::sync::Arc;

use uexec_core::backend::Placement;
use uexec_core::shell_snapshot::ShellSnapshots;
use uexec_core::Backend;
use uexec_protocol::EnvironmentInfo;

use crate::config::ServerConfig;
use crate::registry::Registry;

/// Shared state of one exec server.
pub struct ExecServer {
    pub(crate) registry: Arc<Registry>,
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) config: ServerConfig,
    pub(crate) environment: EnvironmentInfo,
    /// Present when the config allows snapshots and processes run on this machine.
    pub(crate) shell_snapshots: Option<ShellSnapshots>,
    /// What its processes did and how long calls took, for `GET /metrics`.
    pub(crate) metrics: Arc<uexec_core::metrics::Metrics>,
    /// The command rules every `process/start` is judged by (`--rules`); `None`: none.
    pub(crate) rules: Option<Arc<dyn uexec_core::policy::rules::CommandRules>>,
    /// Where the door's decisions are written down (`uexec audit`); `None`: counted only.
    pub(crate) decisions: Option<Arc<dyn uexec_core::spawn::DecisionLog>>,
    /// With `--rules-at exec`: the judge of every exec of each process (`None`: the text
    /// of each start only).
    pub(crate) at_exec: Option<crate::exec_rules::ExecJudge>,
}

impl std::fmt::Debug for ExecServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecServer")
            .field("config", &self.config)
            .field("sessions", &self.registry.session_count())
            .finish_non_exhaustive()
    }
}

impl ExecServer {
    /// A server running processes on `backend`.
    pub fn new(config: ServerConfig, backend: Arc<dyn Backend>) -> Arc<Self> {
        Self::with_rules(config, backend, None, None, None)
    }

    /// A server whose starts are judged by `rules` first: a refusal is a JSON-RPC error
    /// naming the rule, and nothing starts (no person can be asked on this wire: a rule
    /// that asks for one refuses, saying so); each decision goes to `decisions`. With
    /// `at_exec` (the launcher that hands execs over) and a local backend, every exec of
    /// each process is judged by the same rules too ([`crate::exec_rules`]).
    pub fn with_rules(
        config: ServerConfig,
        backend: Arc<dyn Backend>,
        rules: Option<Arc<dyn uexec_core::policy::rules::CommandRules>>,
        decisions: Option<Arc<dyn uexec_core::spawn::DecisionLog>>,
        at_exec: Option<Arc<dyn uexec_core::confine::Confinement>>,
    ) -> Arc<Self> {
        let local = backend.placement() == Placement::Local;
        let shell_snapshots = (config.shell_snapshot && local).then(ShellSnapshots::default);
        let at_exec = match (at_exec, &rules) {
            (Some(launcher), Some(rules)) if local => Some(crate::exec_rules::ExecJudge::new(
                launcher,
                rules.clone(),
                decisions.clone(),
            )),
            _ => None,
        };
        Arc::new(Self {
            registry: Arc::new(Registry::new(config.detached_session_ttl)),
            shell_snapshots,
            backend,
            config,
            environment: crate::environment::detect(),
            metrics: Arc::default(),
            rules,
            decisions,
            at_exec,
        })
    }

    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// The figures as Prometheus text, with what is true now: its processes, running or
    /// exited and retained (their CPU time and memory where they have a cgroup).
    pub fn metrics_text(&self) -> String {
        self.metrics.render(&self.registry.now())
    }

    /// Ends every session and kills every process.
    pub fn shutdown(&self) {
        self.registry.shutdown();
    }

    /// Live sessions (attached or detached).
    pub fn session_count(&self) -> usize {
        self.registry.session_count()
    }
}
