//! The client's side of one exec-server session, across the connections that carry it.
//!
//! Where the session's link stands is one [`LinkState`] in a `watch`:
//! 1. `Up`: a live [`Link`] whose `initialize` gave the session id;
//! 2. `Reconnecting`: the link went down and its *supervisor* is trying to resume; requests
//!    wait (a bounded time: the attempts are bounded);
//! 3. `Down`: resuming failed; every live process was failed with `connection to <url>
//!    lost: <reason>`, requests fail at once, and the next spawn dials a fresh session;
//! 4. `Closed`: the owner closed the backend.
//!
//! The supervisor of a link, once the link is down:
//! 1. sets `Reconnecting` (unless the link was replaced or the backend closed);
//! 2. dials up to `reconnect_attempts` times, backing off, each time sending `initialize
//!    {resumeSessionId}`; a server that still sees the old connection (-32010) is retried
//!    like a failed dial, a server that no longer knows the session ends the attempts;
//! 3. resumed: `Up` again, and every live process re-reads what it missed (servers do not
//!    replay the notifications of a detached session);
//! 4. not resumed: every live process is failed, `Down`.
//!
//! The session also routes `process/output|exited|closed` notifications to the feed of their
//! `processId` (through its inbox, `inbox.rs`), and sends the requests of processes ([`RemoteSession::call`]),
//! retrying the idempotent ones across a resume.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::watch;
use uexec_protocol::jsonrpc::{decode_params, RawJson};
use uexec_protocol::{
    ClosedNotification, ErrorCode, ExitedNotification, InitializeParams, InitializeResult, Method,
    OutputNotification,
};

use crate::error::ClientError;
use crate::inbox::{engine_stream, FeedEvent, FeedHandle};
use crate::link::{CallError, Link, LinkTimers, NotificationSink};
use crate::lock;
use crate::ClientConfig;

/// Where the session's link stands.
#[derive(Debug, Clone)]
pub(crate) enum LinkState {
    Up {
        link: Arc<Link>,
        session_id: String,
        generation: u64,
    },
    Reconnecting,
    Down(String),
    Closed,
}

/// One exec-server session as the client sees it.
pub(crate) struct RemoteSession {
    url: String,
    token: Option<String>,
    config: ClientConfig,
    state: watch::Sender<LinkState>,
    feeds: Mutex<HashMap<String, FeedHandle>>,
    /// One fresh dial at a time.
    dial: tokio::sync::Mutex<()>,
    generations: AtomicU64,
    process_ids: AtomicU64,
    write_ids: AtomicU64,
    me: Weak<RemoteSession>,
}

impl std::fmt::Debug for RemoteSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteSession")
            .field("url", &self.url)
            .field("state", &*self.state.borrow())
            .finish_non_exhaustive()
    }
}

impl RemoteSession {
    /// Connects and opens a session.
    pub async fn open(
        url: &str,
        token: Option<String>,
        config: ClientConfig,
    ) -> Result<(Arc<Self>, InitializeResult), ClientError> {
        let session = Arc::new_cyclic(|me| Self {
            url: url.to_string(),
            token: token.filter(|t| !t.is_empty()),
            config,
            state: watch::channel(LinkState::Down("not connected yet".to_string())).0,
            feeds: Mutex::new(HashMap::new()),
            dial: tokio::sync::Mutex::new(()),
            generations: AtomicU64::new(1),
            process_ids: AtomicU64::new(1),
            write_ids: AtomicU64::new(1),
            me: me.clone(),
        });
        let (link, init) = session.handshake(None).await?;
        session.install(link, init.session_id.clone());
        Ok((session, init))
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The server's id of the session, while connected.
    pub fn session_id(&self) -> Option<String> {
        match &*self.state.borrow() {
            LinkState::Up { session_id, .. } => Some(session_id.clone()),
            _ => None,
        }
    }

    /// A process id not used before by this client.
    pub fn next_process_id(&self) -> String {
        format!("uexec-{}", self.process_ids.fetch_add(1, Ordering::Relaxed))
    }

    /// A `writeId` not used before by this client.
    pub fn next_write_id(&self) -> String {
        format!("uexec-w{}", self.write_ids.fetch_add(1, Ordering::Relaxed))
    }

    /// Dials and sends `initialize` (resuming `resume` when given), then `initialized`.
    async fn handshake(
        &self,
        resume: Option<&str>,
    ) -> Result<(Arc<Link>, InitializeResult), ClientError> {
        let timers = LinkTimers {
            connect_timeout: self.config.request_timeout,
            ping_interval: self.config.ping_interval,
            idle_timeout: self.config.idle_timeout,
        };
        let sink: Weak<dyn NotificationSink> = self.me.clone();
        let token = self.token.as_deref();
        let link = Link::dial(&self.url, token, &self.config.trust, timers, sink).await?;
        let params = InitializeParams {
            client_name: self.config.client_name.clone(),
            resume_session_id: resume.map(str::to_string),
        };
        let method = Method::Initialize.as_str();
        let result = link
            .request(method, &params, Some(self.config.request_timeout))
            .await
            .map_err(|e| self.call_error(method, e))?;
        let init: InitializeResult = self.decode(method, result)?;
        link.notify(Method::Initialized.as_str(), &serde_json::json!({}));
        Ok((Arc::new(link), init))
    }

    /// Makes `link` the session's link and starts its supervisor.
    fn install(&self, link: Arc<Link>, session_id: String) {
        let generation = self.generations.fetch_add(1, Ordering::Relaxed);
        let down = link.clone();
        let replaced = self.state.send_if_modified(|state| {
            if matches!(state, LinkState::Closed) {
                return false;
            }
            *state = LinkState::Up {
                link,
                session_id,
                generation,
            };
            true
        });
        if replaced {
            tokio::spawn(supervise(self.me.clone(), down, generation));
        }
    }

    /// The live link; waits while a reconnect is under way.
    pub async fn current_link(&self) -> Result<Arc<Link>, ClientError> {
        let mut rx = self.state.subscribe();
        // A link that is down but not yet replaced by its supervisor counts as reconnecting.
        let settled = |s: &LinkState| match s {
            LinkState::Reconnecting => false,
            LinkState::Up { link, .. } => !link.is_down(),
            LinkState::Down(_) | LinkState::Closed => true,
        };
        let state = match rx.wait_for(settled).await {
            Ok(state) => state.clone(),
            Err(_) => LinkState::Closed,
        };
        match state {
            LinkState::Up { link, .. } => Ok(link),
            LinkState::Down(reason) => Err(ClientError::ConnectionLost {
                url: self.url.clone(),
                reason,
            }),
            LinkState::Reconnecting | LinkState::Closed => Err(ClientError::Closed {
                url: self.url.clone(),
            }),
        }
    }

    /// The live link for a new process: after a lost connection, a fresh session is dialled.
    pub async fn link_for_spawn(&self) -> Result<Arc<Link>, ClientError> {
        match self.current_link().await {
            Err(ClientError::ConnectionLost { .. }) => {}
            other => return other,
        }
        let _one_dial = self.dial.lock().await;
        match self.current_link().await {
            Err(ClientError::ConnectionLost { .. }) => {}
            other => return other,
        }
        let (link, init) = self.handshake(None).await?;
        // The session id resumes the session: never above debug.
        tracing::info!(url = %self.url, "opened a new exec-server session");
        tracing::debug!(url = %self.url, session = %init.session_id, "new session id");
        self.install(link.clone(), init.session_id);
        Ok(link)
    }

    /// A request of a live process. Idempotent requests (`retry_across_resume`) are sent again
    /// after the link was resumed; others fail with the link.
    pub async fn call<P: Serialize, R: DeserializeOwned>(
        &self,
        method: &'static str,
        params: &P,
        timeout: Option<Duration>,
        retry_across_resume: bool,
    ) -> Result<R, ClientError> {
        let mut attempts = 0;
        loop {
            let link = self.current_link().await?;
            match link.request(method, params, timeout).await {
                Ok(value) => return self.decode(method, value),
                Err(CallError::Down(_))
                    if retry_across_resume && attempts < self.config.reconnect_attempts =>
                {
                    // `current_link` waits for the supervisor's verdict.
                    attempts += 1;
                }
                Err(e) => return Err(self.call_error(method, e)),
            }
        }
    }

    /// Sends a request whose answer does not matter, without waiting (usable from `Drop`).
    /// While reconnecting it is sent once the link is back; a lost link drops it.
    pub fn send_and_forget<P: Serialize + Send + 'static>(&self, method: &'static str, params: P) {
        let state = self.state.borrow().clone();
        match state {
            LinkState::Up { link, .. } => {
                if link.send_and_forget(method, &params) {
                    return;
                }
                self.send_later(method, params);
            }
            LinkState::Reconnecting => self.send_later(method, params),
            LinkState::Down(_) | LinkState::Closed => {}
        }
    }

    fn send_later<P: Serialize + Send + 'static>(&self, method: &'static str, params: P) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let me = self.me.clone();
        runtime.spawn(async move {
            let Some(session) = me.upgrade() else { return };
            if let Ok(link) = session.current_link().await {
                link.send_and_forget(method, &params);
            }
        });
    }

    pub fn register_feed(&self, process_id: &str, feed: FeedHandle) {
        lock(&self.feeds).insert(process_id.to_string(), feed);
    }

    /// Forgets the feed of `process_id` if it is still the one whose flag is `finished`.
    pub fn unregister_feed(&self, process_id: &str, finished: &Arc<AtomicBool>) {
        let mut feeds = lock(&self.feeds);
        if feeds.get(process_id).is_some_and(|f| f.owns(finished)) {
            feeds.remove(process_id);
        }
    }

    fn broadcast(&self, event: impl Fn() -> FeedEvent) {
        let feeds: Vec<FeedHandle> = lock(&self.feeds).values().cloned().collect();
        for feed in feeds {
            feed.send(event());
        }
    }

    /// Closes the link and fails what still runs through it.
    pub fn close(&self) {
        self.state.send_replace(LinkState::Closed);
        let reason = format!("the remote backend for {} was closed", self.url);
        self.broadcast(|| FeedEvent::Lost(reason.clone()));
    }

    fn decode<R: DeserializeOwned>(
        &self,
        method: &'static str,
        value: RawJson,
    ) -> Result<R, ClientError> {
        value.decode().map_err(|e| ClientError::BadResponse {
            url: self.url.clone(),
            method,
            reason: e.to_string(),
        })
    }

    pub fn call_error(&self, method: &'static str, error: CallError) -> ClientError {
        let url = self.url.clone();
        match error {
            CallError::Rpc(error) => ClientError::Rpc { url, method, error },
            CallError::Down(reason) => ClientError::ConnectionLost { url, reason },
            CallError::Timeout(limit) => ClientError::Timeout {
                url,
                method,
                timeout_ms: limit.as_millis(),
            },
        }
    }
}

impl NotificationSink for RemoteSession {
    fn notification(&self, method: &str, params: Option<RawJson>) {
        let routed = match Method::from_name(method) {
            Some(Method::ProcessOutput) => decode_params::<OutputNotification>(params.as_ref())
                .map(|n| {
                    let event = FeedEvent::Output {
                        seq: n.seq,
                        stream: engine_stream(n.stream),
                        bytes: n.chunk.into_bytes(),
                    };
                    (n.process_id, event)
                }),
            Some(Method::ProcessExited) => decode_params::<ExitedNotification>(params.as_ref())
                .map(|n| {
                    let event = FeedEvent::Exited {
                        seq: n.seq,
                        exit_code: n.exit_code,
                    };
                    (n.process_id, event)
                }),
            Some(Method::ProcessClosed) => decode_params::<ClosedNotification>(params.as_ref())
                .map(|n| (n.process_id, FeedEvent::Closed { seq: n.seq })),
            _ => {
                tracing::debug!(method, "ignoring a notification");
                return;
            }
        };
        match routed {
            Ok((process_id, event)) => {
                let feed = lock(&self.feeds).get(&process_id).cloned();
                match feed {
                    Some(feed) => feed.notify(event),
                    None => tracing::debug!(process_id, method, "event of an unknown process"),
                }
            }
            Err(e) => tracing::debug!(method, "malformed notification: {}", e.message),
        }
    }
}

/// Watches one link; when it goes down, resumes the session or fails its processes.
async fn supervise(me: Weak<RemoteSession>, link: Arc<Link>, generation: u64) {
    // Hold only the link's down-watch while waiting: the state owns the link.
    let down = link.down_watch();
    drop(link);
    let reason = down.await;
    let Some(session) = me.upgrade() else { return };
    let mut session_id = None;
    session.state.send_if_modified(|state| match state {
        LinkState::Up {
            generation: g,
            session_id: id,
            ..
        } if *g == generation => {
            session_id = Some(id.clone());
            *state = LinkState::Reconnecting;
            true
        }
        _ => false,
    });
    // Replaced, or the backend was closed: nothing to resume.
    let Some(session_id) = session_id else { return };
    tracing::info!(url = %session.url, %reason, "exec-server connection lost; resuming");
    match resume(&session, &session_id).await {
        Ok(link) => {
            session.install(link, session_id);
            session.broadcast(|| FeedEvent::Resumed);
        }
        Err(why) => {
            let lost = ClientError::ConnectionLost {
                url: session.url.clone(),
                reason: format!("{reason} ({why})"),
            }
            .to_string();
            tracing::warn!(url = %session.url, "{lost}");
            if !matches!(&*session.state.borrow(), LinkState::Reconnecting) {
                return; // closed meanwhile: `close` failed the feeds
            }
            // Fail the feeds while still `Reconnecting`: no spawn can register a feed before
            // `Down`, and the first one after it belongs to a fresh session.
            session.broadcast(|| FeedEvent::Lost(lost.clone()));
            session.state.send_if_modified(|state| {
                if matches!(state, LinkState::Reconnecting) {
                    *state = LinkState::Down(format!("{reason} ({why})"));
                    return true;
                }
                false
            });
        }
    }
}

/// Dials with `resumeSessionId` until it works, the server refuses for good, or the attempts
/// run out; the error says why resuming failed.
async fn resume(session: &RemoteSession, session_id: &str) -> Result<Arc<Link>, String> {
    let config = session.config();
    let mut backoff = config.reconnect_backoff;
    let mut last = String::from("no attempt was made");
    for attempt in 1..=config.reconnect_attempts {
        if matches!(&*session.state.borrow(), LinkState::Closed) {
            return Err("the backend was closed".to_string());
        }
        match session.handshake(Some(session_id)).await {
            Ok((link, _)) => {
                tracing::info!(url = %session.url, attempt, "exec-server session resumed");
                return Ok(link);
            }
            Err(e) => {
                let unknown = e.rpc_error().is_some_and(|r| {
                    r.code == ErrorCode::InvalidRequest.code()
                        || r.code == ErrorCode::NotFound.code()
                });
                // The id resumes the session: it goes in no message (the server's may echo it).
                let e = e.to_string().replace(session_id, "<session id>");
                if unknown {
                    return Err(format!("the server cannot resume the session: {e}"));
                }
                last = e;
            }
        }
        if attempt < config.reconnect_attempts {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(crate::RECONNECT_BACKOFF_MAX);
        }
    }
    Err(format!(
        "{} attempts to resume the session failed; the last: {last}",
        config.reconnect_attempts
    ))
}
