//! A real server on 127.0.0.1:0 in the test's runtime, and a real WebSocket client for it.
//!
//! The client keeps everything it receives in a `watch`ed [`Inbox`]: responses by id, process
//! events by process id and seq (never by arrival order: a server may send them out of
//! order), anything else in arrival order. Tests wait on the inbox with deadlines, never
//! with sleeps.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;
use uexec_core::LocalBackend;
use uexec_server::transport::ws::WsListener;
use uexec_server::{ExecServer, ServerConfig};

/// Default deadline of a wait.
pub const WAIT: Duration = Duration::from_secs(10);

/// An exec server serving WebSocket on an ephemeral loopback port.
pub struct TestServer {
    pub server: Arc<ExecServer>,
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl TestServer {
    pub async fn start() -> Self {
        Self::start_with(ServerConfig::default(), None).await
    }

    pub async fn start_with(config: ServerConfig, token: Option<&str>) -> Self {
        let server = ExecServer::new(config, Arc::new(LocalBackend));
        let listener = WsListener::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr = listener.local_addr();
        let token = token.map(str::to_string);
        let task = tokio::spawn({
            let server = server.clone();
            async move {
                let _ = listener.serve(server, token).await;
            }
        });
        Self { server, addr, task }
    }

    pub fn url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    /// A connected client that completed the handshake.
    pub async fn session(&self) -> Client {
        let client = Client::connect(&self.url()).await;
        client.handshake(None).await;
        client
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
        self.server.shutdown();
    }
}

/// Everything a client received.
#[derive(Debug, Default)]
pub struct Inbox {
    pub responses: HashMap<String, Value>,
    /// processId -> seq -> `{"method", "params"}`.
    pub events: HashMap<String, BTreeMap<u64, Value>>,
    pub other: Vec<Value>,
    /// Answers with id -1 (to frames that were not messages), in arrival order.
    pub malformed: Vec<Value>,
    /// WebSocket pings received.
    pub pings: usize,
    pub closed: bool,
}

impl Inbox {
    pub fn events_of(&self, process_id: &str) -> Vec<(u64, String)> {
        self.events
            .get(process_id)
            .map(|m| {
                m.iter()
                    .map(|(seq, e)| (*seq, e["method"].as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Output bytes of a process in seq order.
    pub fn output_of(&self, process_id: &str) -> Vec<u8> {
        let Some(events) = self.events.get(process_id) else {
            return Vec::new();
        };
        events
            .values()
            .filter(|e| e["method"] == "process/output")
            .flat_map(|e| unb64(e["params"]["chunk"].as_str().unwrap_or_default()))
            .collect()
    }

    fn event_params(&self, process_id: &str, method: &str) -> Option<Value> {
        self.events
            .get(process_id)?
            .values()
            .find(|e| e["method"] == method)
            .map(|e| e["params"].clone())
    }

    pub fn exited(&self, process_id: &str) -> Option<Value> {
        self.event_params(process_id, "process/exited")
    }

    /// `closed` seen and every seq before it too.
    pub fn complete(&self, process_id: &str) -> bool {
        let Some(closed) = self.event_params(process_id, "process/closed") else {
            return false;
        };
        let last = closed["seq"].as_u64().unwrap_or(0);
        let seen = self
            .events
            .get(process_id)
            .map(|m| m.len() as u64)
            .unwrap_or(0);
        seen == last
    }
}

/// A WebSocket client of the dialect.
pub struct Client {
    out: mpsc::UnboundedSender<Message>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    inbox: watch::Receiver<Inbox>,
    next_id: AtomicI64,
    pub session_id: std::sync::Mutex<Option<String>>,
}

impl Client {
    pub async fn connect(url: &str) -> Self {
        let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        Self::from_socket(ws)
    }

    pub fn from_socket<S>(ws: tokio_tungstenite::WebSocketStream<S>) -> Self
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (mut sink, mut stream) = ws.split();
        let (out, mut out_rx) = mpsc::unbounded_channel::<Message>();
        let (inbox_tx, inbox) = watch::channel(Inbox::default());
        let writer = tokio::spawn(async move {
            while let Some(msg) = out_rx.recv().await {
                let close = matches!(msg, Message::Close(_));
                if sink.send(msg).await.is_err() || close {
                    break;
                }
            }
        });
        let reader = tokio::spawn(async move {
            while let Some(Ok(msg)) = stream.next().await {
                let value: Value = match msg {
                    Message::Text(t) => serde_json::from_str(t.as_str()).unwrap(),
                    Message::Binary(b) => serde_json::from_slice(&b).unwrap(),
                    Message::Ping(_) => {
                        inbox_tx.send_modify(|inbox| inbox.pings += 1);
                        continue;
                    }
                    _ => continue,
                };
                inbox_tx.send_modify(|inbox| file(inbox, value));
            }
            inbox_tx.send_modify(|inbox| inbox.closed = true);
        });
        Self {
            out,
            tasks: vec![writer, reader],
            inbox,
            next_id: AtomicI64::new(1),
            session_id: std::sync::Mutex::new(None),
        }
    }

    pub fn send_raw(&self, msg: Message) {
        let _ = self.out.send(msg);
    }

    pub fn send_json(&self, value: &Value) {
        self.send_raw(Message::Text(value.to_string().into()));
    }

    pub fn notify(&self, method: &str, params: Value) {
        self.send_json(&json!({"method": method, "params": params}));
    }

    /// Sends a request; returns its id.
    pub fn send_request(&self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id.fetch_add(1, Ordering::Relaxed));
        self.send_json(&json!({"id": id, "method": method, "params": params}));
        id
    }

    /// Waits for the response to `id`.
    pub async fn response(&self, id: &Value) -> Value {
        let key = id.to_string();
        self.wait_for(&format!("the response to {key}"), |inbox| {
            inbox.responses.get(&key).cloned()
        })
        .await
    }

    /// The raw response to a request.
    pub async fn request(&self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.response(&id).await
    }

    /// The `result` of a request that must succeed.
    pub async fn call(&self, method: &str, params: Value) -> Value {
        let reply = self.request(method, params).await;
        assert!(reply.get("error").is_none(), "{method} failed: {reply}");
        reply["result"].clone()
    }

    /// The `error` of a request that must fail.
    pub async fn call_error(&self, method: &str, params: Value) -> Value {
        let reply = self.request(method, params).await;
        assert!(
            reply.get("result").is_none(),
            "{method} was expected to fail: {reply}"
        );
        reply["error"].clone()
    }

    pub async fn handshake(&self, resume: Option<&str>) -> Value {
        let mut params = json!({"clientName": "uexec-it"});
        if let Some(id) = resume {
            params["resumeSessionId"] = json!(id);
        }
        let reply = self.request("initialize", params).await;
        if let Some(sid) = reply["result"]["sessionId"].as_str() {
            *self.session_id.lock().unwrap() = Some(sid.to_string());
            self.notify("initialized", json!({}));
        }
        reply
    }

    pub fn session_id(&self) -> String {
        self.session_id.lock().unwrap().clone().unwrap()
    }

    pub async fn start(&self, process_id: &str, argv: &[&str], extra: Value) -> Value {
        let mut params = json!({
            "processId": process_id,
            "argv": argv,
            "cwd": "file:///tmp",
            "env": {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
            "tty": false,
            "pipeStdin": false,
        });
        if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        self.call("process/start", params).await
    }

    pub async fn sh(&self, process_id: &str, script: &str, extra: Value) -> Value {
        self.start(process_id, &["/bin/sh", "-c", script], extra)
            .await
    }

    pub async fn write(&self, process_id: &str, data: &[u8], write_id: &str) -> String {
        let result = self
            .call(
                "process/write",
                json!({"processId": process_id, "chunk": b64(data), "writeId": write_id}),
            )
            .await;
        result["status"].as_str().unwrap().to_string()
    }

    /// Waits (deadline [`WAIT`]) until `f` finds something in the inbox.
    pub async fn wait_for<T>(&self, what: &str, mut f: impl FnMut(&Inbox) -> Option<T>) -> T {
        let mut rx = self.inbox.clone();
        let mut found = None;
        let waited = {
            let wait = rx.wait_for(|inbox| {
                found = f(inbox);
                found.is_some() || inbox.closed
            });
            tokio::time::timeout(WAIT, wait).await.map(|r| r.is_ok())
        };
        match (found, waited) {
            (Some(v), _) => v,
            (None, Ok(_)) => panic!("connection closed while waiting for {what}"),
            (None, Err(_)) => panic!("timed out waiting for {what}"),
        }
    }

    pub async fn wait_output(&self, process_id: &str, needle: &[u8]) -> Vec<u8> {
        self.wait_for(&format!("{needle:?} from {process_id}"), |inbox| {
            let out = inbox.output_of(process_id);
            out.windows(needle.len())
                .any(|w| w == needle)
                .then_some(out)
        })
        .await
    }

    pub async fn wait_closed(&self, process_id: &str) -> Vec<(u64, String)> {
        self.wait_for(&format!("the complete events of {process_id}"), |inbox| {
            inbox
                .complete(process_id)
                .then(|| inbox.events_of(process_id))
        })
        .await
    }

    pub async fn wait_connection_closed(&self) {
        self.wait_for("the connection to close", |inbox| {
            inbox.closed.then_some(())
        })
        .await
    }

    pub fn inbox(&self) -> watch::Ref<'_, Inbox> {
        self.inbox.borrow()
    }

    pub fn close(&self) {
        self.send_raw(Message::Close(None));
    }
}

impl Drop for Client {
    /// Drops the socket without a close handshake.
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn file(inbox: &mut Inbox, value: Value) {
    if value["id"] == -1 {
        inbox.malformed.push(value);
    } else if value.get("id").is_some()
        && (value.get("result").is_some() || value.get("error").is_some())
    {
        inbox.responses.insert(value["id"].to_string(), value);
    } else if let (Some(method), Some(pid), Some(seq)) = (
        value["method"].as_str(),
        value["params"]["processId"].as_str(),
        value["params"]["seq"].as_u64(),
    ) {
        if method.starts_with("process/") {
            inbox
                .events
                .entry(pid.to_string())
                .or_default()
                .insert(seq, value);
            return;
        }
        inbox.other.push(value);
    } else {
        inbox.other.push(value);
    }
}

pub fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

pub fn unb64(text: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

/// Waits until `check` holds, polling (for conditions outside any connection, e.g. /proc).
pub async fn eventually(what: &str, check: impl FnMut() -> bool) {
    eventually_within(what, WAIT, check).await;
}

/// [`eventually`] with its own deadline.
pub async fn eventually_within(what: &str, wait: Duration, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + wait;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether a pid is still there to be dealt with: running, or a zombie nobody reaped yet (a
/// zombie child of the server is a bug, so it counts as alive). Only a zombie left to PID 1
/// (an orphan; the container's init may never reap it) counts as gone.
pub fn pid_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The command name may hold spaces and parentheses: the fields start after the last ')'.
    let mut fields = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace())
        .into_iter()
        .flatten();
    !matches!((fields.next(), fields.next()), (Some("Z" | "X"), Some("1")))
}
