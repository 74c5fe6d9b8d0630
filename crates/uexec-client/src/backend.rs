//! [`RemoteBackend`]: the engine's [`Backend`] on an exec server.
//!
//! `spawn`, in order:
//! 1. take the session's live link (after a lost connection: dial a fresh session);
//! 2. pick a fresh `processId` and register its feed, so no event can arrive unrouted;
//! 3. send `process/start`: `cwd` as a `file://` URI; [`EnvMode::Exact`] as a plain `env`,
//!    [`EnvMode::InheritFiltered`] as `envPolicy {inherit: all, exclude: drop, set: env}`
//!    (the server's own environment minus secret-looking names, the way both servers apply
//!    a policy); if the link drops meanwhile and is resumed, the start is sent again and
//!    "already exists" then means the first one worked;
//! 4. hand the engine the feed's output channel and exit oneshot, and a [`RemoteControl`].
//!    A start that got no verdict (timeout, lost link), or whose `spawn` future was dropped
//!    once the request could be out (the caller cancelled), is followed by a
//!    `process/terminate`, in case it did start; its feed ends. A process that already ended
//!    when its start is confirmed is handed over all the same (its exit report says how).
//!
//! A refused start maps to a [`BackendError`]: `NotFound` when the server says
//! `data.kind == "spawnNotFound"`, `Unavailable` when the connection failed.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use uexec_core::backend::{Backend, BackendError, EnvMode, Placement, SpawnSpec, SpawnedProcess};
use uexec_core::env::secret_patterns;
use uexec_protocol::file_uri;
use uexec_protocol::{
    EnvPolicy, EnvPolicyInherit, EnvironmentInfo, ErrorCode, Method, StartParams, StartResult,
    TerminateParams,
};

use crate::control::RemoteControl;
use crate::error::ClientError;
use crate::feed;
use crate::inbox::{FeedEvent, FeedHandle};
use crate::link::CallError;
use crate::remote_session::RemoteSession;
use crate::ClientConfig;

/// Runs the engine's processes on an exec server (`uexec serve` or `codex exec-server`).
#[derive(Debug)]
pub struct RemoteBackend {
    session: Arc<RemoteSession>,
    environment: EnvironmentInfo,
    placement: Placement,
}

impl RemoteBackend {
    /// Connects to `url` (`ws://HOST:PORT`), sending `Authorization: Bearer <token>` when a
    /// token is given, and opens a session.
    pub async fn connect(url: &str, token: Option<String>) -> Result<Arc<Self>, ClientError> {
        Self::connect_with(url, token, ClientConfig::default()).await
    }

    /// [`RemoteBackend::connect`] with other timers and limits.
    pub async fn connect_with(
        url: &str,
        token: Option<String>,
        config: ClientConfig,
    ) -> Result<Arc<Self>, ClientError> {
        let (session, init) = RemoteSession::open(url, token, config).await?;
        let environment = match init.environment_info {
            Some(info) => info,
            None => {
                let method = Method::EnvironmentInfo.as_str();
                let timeout = Some(session.config().request_timeout);
                session
                    .call(method, &serde_json::json!({}), timeout, true)
                    .await?
            }
        };
        let placement = placement_of(&environment);
        Ok(Arc::new(Self {
            session,
            environment,
            placement,
        }))
    }

    pub fn url(&self) -> &str {
        self.session.url()
    }

    /// What the server said about its environment at connect.
    pub fn environment(&self) -> &EnvironmentInfo {
        &self.environment
    }

    /// The server's id of the current session (`None` while disconnected).
    pub fn session_id(&self) -> Option<String> {
        self.session.session_id()
    }

    /// Closes the connection; live processes fail, later spawns are refused. The server
    /// kills the session's processes when it expires the detached session.
    pub fn close(&self) {
        self.session.close();
    }

    async fn start(&self, spec: SpawnSpec) -> Result<SpawnedProcess, ClientError> {
        let link = self.session.link_for_spawn().await?;
        let process_id = self.session.next_process_id();
        let feed = feed::start(&self.session, process_id.clone());
        // From here on, dropping this future must not leave a process nobody looks at.
        let pending = PendingStart {
            session: &self.session,
            process_id: process_id.clone(),
            feed: feed.handle.clone(),
            settled: false,
        };
        let params = start_params(&process_id, spec);
        let method = Method::ProcessStart.as_str();
        let timeout = Some(self.session.config().request_timeout);
        let mut link = link;
        let mut retried = false;
        let outcome = loop {
            match link.request(method, &params, timeout).await {
                Ok(value) => {
                    break value.decode::<StartResult>().map(|_| ()).map_err(|e| {
                        ClientError::BadResponse {
                            url: self.url().to_string(),
                            method,
                            reason: e.to_string(),
                        }
                    })
                }
                Err(CallError::Rpc(e))
                    if retried
                        && e.code == ErrorCode::InvalidRequest.code()
                        && e.message.contains("already exists") =>
                {
                    break Ok(());
                }
                Err(CallError::Down(_)) if !retried && !feed.handle.is_finished() => {
                    retried = true;
                    match self.session.current_link().await {
                        Ok(next) => link = next,
                        Err(e) => break Err(e),
                    }
                }
                Err(e) => break Err(self.session.call_error(method, e)),
            }
        };
        if let Err(e) = outcome {
            pending.fail(&e);
            return Err(e);
        }
        pending.started();
        // The feed may have ended already (a quick exit, or the connection lost for good):
        // either way the exit report says how, like a local process that died at once.
        let control = RemoteControl::new(self.session.clone(), process_id, feed.handle);
        Ok(SpawnedProcess {
            pid: None,
            output: feed.output,
            exit: feed.exit,
            control: Arc::new(control),
        })
    }
}

/// A `process/start` under way. Dropped unsettled (the spawn was cancelled, or got no
/// verdict), it terminates the process in case the server started it, and ends its feed.
struct PendingStart<'a> {
    session: &'a RemoteSession,
    process_id: String,
    feed: FeedHandle,
    settled: bool,
}

impl PendingStart<'_> {
    /// The server confirmed the start: the feed may read the process from now on.
    fn started(mut self) {
        self.feed.send(FeedEvent::Started);
        self.settled = true;
    }

    /// The start failed. A server's refusal started nothing; any other failure (a timeout,
    /// a lost link) leaves it unknown, and dropping `self` unsettled terminates the process.
    fn fail(mut self, error: &ClientError) {
        if error.rpc_error().is_some() {
            self.feed
                .send(FeedEvent::Lost(format!("process/start failed: {error}")));
            self.settled = true;
        }
    }
}

impl Drop for PendingStart<'_> {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let params = TerminateParams {
            process_id: self.process_id.clone(),
        };
        self.session
            .send_and_forget(Method::ProcessTerminate.as_str(), params);
        self.feed.send(FeedEvent::Lost(format!(
            "process/start of {} got no answer",
            self.process_id
        )));
    }
}

impl Backend for RemoteBackend {
    fn spawn(&self, spec: SpawnSpec) -> BoxFuture<'_, Result<SpawnedProcess, BackendError>> {
        Box::pin(async move {
            if spec.command().0.is_empty() {
                return Err(BackendError::new("empty argv"));
            }
            // JSON carries text only: a byte-string variable cannot be sent as it is.
            if let Some((name, _)) = spec
                .env
                .iter()
                .find(|(k, v)| k.to_str().is_none() || v.to_str().is_none())
            {
                return Err(BackendError::new(format!(
                    "environment variable {} is not valid UTF-8 and cannot be sent to an exec server",
                    name.to_string_lossy()
                )));
            }
            self.start(spec).await.map_err(|e| e.to_backend_error())
        })
    }

    fn placement(&self) -> Placement {
        self.placement.clone()
    }
}

impl Drop for RemoteBackend {
    fn drop(&mut self) {
        self.close();
    }
}

/// Where the server runs things: its cwd and its user's shell.
fn placement_of(info: &EnvironmentInfo) -> Placement {
    Placement::Remote {
        cwd: info
            .cwd
            .as_deref()
            .and_then(|uri| file_uri::parse(uri).ok()),
        shell: Some(info.shell.path.clone()).filter(|p| !p.is_empty()),
    }
}

/// `process/start` for a spawn spec (whose variables were checked to be UTF-8).
fn start_params(process_id: &str, spec: SpawnSpec) -> StartParams {
    let (argv, arg0) = spec.command();
    let env: BTreeMap<String, String> = spec
        .env
        .iter()
        .map(|(k, v)| (k.to_string_lossy().into(), v.to_string_lossy().into()))
        .collect();
    let (env, env_policy) = match spec.env_mode {
        EnvMode::Exact => (env, None),
        EnvMode::InheritFiltered { drop } => (
            Default::default(),
            Some(EnvPolicy {
                inherit: EnvPolicyInherit::All,
                ignore_default_excludes: false,
                // The server's own default excludes may be narrower than uexec's rule.
                exclude: drop.into_iter().chain(secret_patterns()).collect(),
                set: env,
                include_only: Vec::new(),
            }),
        ),
    };
    StartParams {
        process_id: process_id.to_string(),
        argv,
        cwd: file_uri::to_uri(&spec.cwd),
        env,
        env_policy,
        tty: spec.tty,
        pipe_stdin: spec.pipe_stdin,
        arg0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::path::PathBuf;
    use uexec_core::backend::Program;

    fn spec(env_mode: EnvMode) -> SpawnSpec {
        SpawnSpec {
            program: Program::Shell {
                shell: "/bin/sh".into(),
                login: false,
                script: "true".into(),
            },
            arg0: None,
            cwd: PathBuf::from("/tmp/a b"),
            env: BTreeMap::from([("NO_COLOR".into(), "1".into())]),
            env_mode,
            tty: true,
            pipe_stdin: false,
            one_stream: false,
            passed_fd: None,
            launcher: None,
            limits: Default::default(),
        }
    }

    #[test]
    fn an_exact_environment_is_sent_as_env() {
        let p = start_params("uexec-1", spec(EnvMode::Exact));
        assert_eq!(p.cwd, "file:///tmp/a%20b");
        assert_eq!(p.env["NO_COLOR"], "1");
        assert!(p.env_policy.is_none());
        assert!(p.tty);
    }

    #[test]
    fn an_inherited_environment_is_sent_as_a_complete_policy() {
        let mode = EnvMode::InheritFiltered {
            drop: vec!["PAGER".into()],
        };
        let p = start_params("uexec-1", spec(mode));
        assert!(p.env.is_empty());
        // Codex 0.171 requires every field of the policy.
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(
            json["envPolicy"],
            serde_json::json!({"inherit": "all", "ignoreDefaultExcludes": false,
                               "exclude": ["PAGER", "*KEY*", "*SECRET*", "*TOKEN*",
                                           "*PASSWORD*", "*PASSWD*", "*CREDENTIAL*",
                                           "*PRIVATE*", "*COOKIE*", "*_PAT", "*_AUTH"],
                               "set": {"NO_COLOR": "1"},
                               "includeOnly": []})
        );
    }

    #[test]
    fn placement_comes_from_the_environment_info() {
        let info: EnvironmentInfo = serde_json::from_value(serde_json::json!({
            "shell": {"name": "bash", "path": "/bin/bash"},
            "cwd": "file:///srv/work",
            "executorVersion": "0.171.0"
        }))
        .unwrap();
        assert_eq!(
            placement_of(&info),
            Placement::Remote {
                cwd: Some(PathBuf::from("/srv/work")),
                shell: Some("/bin/bash".into())
            }
        );
    }
}
