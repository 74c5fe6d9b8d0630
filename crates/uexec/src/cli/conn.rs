//! The CLI's connection to the daemon: the hello as a person, then a small MCP client
//! (initialize, tools/call) over the same stream.

use std::path::PathBuf;

use anyhow::Context;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt as _, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use uexec_mcp::daemon::build_id;
use uexec_mcp::daemon::client::LocalHello as _;
use uexec_protocol::daemon::{Hello, Settings, PERSON, VERSION};

/// Longest line accepted from the daemon (a result carries at most a token budget of
/// output, and a transcript page 256 KiB: this is far above both).
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// Where the daemon is and what this person's commands get.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Target {
    /// The daemon's socket (default: $XDG_RUNTIME_DIR/uexec/daemon.sock, else
    /// /run/user/<uid>/uexec/daemon.sock when logind made /run/user/<uid>, else a per-user
    /// directory under the temp dir). Where no daemon has run (no socket there), this verb
    /// starts none.
    // After each verb's own flags (`uexec run` says it starts a daemon: see its variant).
    #[arg(long, value_name = "PATH", display_order = 901)]
    pub socket: Option<PathBuf>,
}

/// A tool's answer.
#[derive(Debug, Clone)]
pub struct ToolResult {
    pub is_error: bool,
    pub text: String,
    pub structured: Value,
}

impl ToolResult {
    /// A `tools/call` result.
    pub fn of(result: &Value) -> Self {
        let text = result["content"]
            .as_array()
            .map(|blocks| {
                blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        Self {
            is_error: result["isError"].as_bool().unwrap_or(false),
            text,
            structured: result
                .get("structuredContent")
                .cloned()
                .unwrap_or(Value::Null),
        }
    }
}

/// The id of the `initialize` request sent with the hello.
const INITIALIZE_ID: u64 = 1;
/// The id of a connection's first call.
pub const FIRST_CALL_ID: u64 = INITIALIZE_ID + 1;

/// A daemon connection speaking MCP. It connects at its first call, which goes with the
/// hello and the MCP handshake: a one-call verb (`uexec run`, `ls`, `kill`...) costs one
/// round trip, not two.
pub struct Conn {
    socket: PathBuf,
    hello: Hello,
    stream: Option<Stream>,
    next_id: u64,
}

struct Stream {
    reader: BufReader<tokio::io::Chain<std::io::Cursor<Vec<u8>>, OwnedReadHalf>>,
    writer: OwnedWriteHalf,
}

impl Conn {
    /// Prepares a connection as a person; the daemon is reached (and started if needed) at
    /// the first call.
    pub fn open(target: &Target, env_set: Vec<(String, String)>) -> anyhow::Result<Self> {
        let socket = match &target.socket {
            Some(path) => path.clone(),
            None => uexec_mcp::daemon::default_socket()?,
        };
        Ok(Self {
            socket,
            hello: person_hello(build_id(), env_set)?,
            stream: None,
            next_id: FIRST_CALL_ID,
        })
    }

    /// Whether a daemon may be serving: its socket exists. A verb that only reads, or names a
    /// session that would have to exist already, does not start a daemon to say there is
    /// nothing (a stale socket still starts one, as any verb would).
    pub fn daemon_may_run(&self) -> bool {
        self.socket.exists()
    }

    /// The daemon's socket this connection reaches.
    pub fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    /// Calls a tool.
    pub async fn call(&mut self, tool: &str, arguments: Value) -> anyhow::Result<ToolResult> {
        let result = self
            .request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await?;
        Ok(ToolResult::of(&result))
    }

    /// Sends a request and reads until its answer (notifications in between are skipped).
    async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let line = request_line(id, method, &params)?;
        let stream = match &mut self.stream {
            Some(stream) => {
                stream
                    .writer
                    .write_all(&line)
                    .await
                    .context("the uexec daemon closed the connection")?;
                stream
            }
            None => {
                // The MCP handshake and this request go with the hello: no round trip
                // waits for another. A refused hello is answered before any of it is read.
                let mut early = handshake_lines()?;
                early.extend_from_slice(&line);
                let connected =
                    uexec_mcp::daemon::client::connect(&self.socket, &self.hello, true, &early)
                        .await?;
                let (read, writer) = connected.stream.into_split();
                self.stream.insert(Stream {
                    reader: BufReader::new(std::io::Cursor::new(connected.after).chain(read)),
                    writer,
                })
            }
        };
        loop {
            let mut line = Vec::new();
            let n = (&mut stream.reader)
                .take(MAX_LINE_BYTES as u64)
                .read_until(b'\n', &mut line)
                .await?;
            if n == 0 {
                anyhow::bail!("the uexec daemon closed the connection");
            }
            if let Some(result) = answer(&line, id, method)? {
                return Ok(result);
            }
        }
    }
}

/// The hello of a person (who sees every session) to a daemon of the engine build `build`
/// (see [`build_id_of`](uexec_mcp::daemon::build_id_of)); `env_set` is `--env`. It carries
/// the person's whole environment, secrets included ([`person_env`]): their own commands
/// get it as it is. It is sent only to a daemon checked to be theirs (its socket's
/// directory, the listener's uid: `client::connect`, and the front's `greet`).
///
/// [`person_env`]: uexec_mcp::daemon::client::person_env
pub fn person_hello(build: String, env_set: Vec<(String, String)>) -> anyhow::Result<Hello> {
    let settings = Settings {
        env_set,
        extended: true,
        // The CLI reads the facts, not the text.
        structured: true,
        deterministic_ids: std::env::var("UEXEC_DETERMINISTIC_IDS").is_ok_and(|v| v == "1"),
        ..Settings::default()
    };
    let mut hello = Hello::here_for(build, PERSON.to_owned(), settings)?;
    hello.env = uexec_mcp::daemon::client::person_env(std::env::vars_os());
    Ok(hello)
}

/// The MCP handshake's two messages, sent with the hello.
pub fn handshake_lines() -> anyhow::Result<Vec<u8>> {
    let mut lines = Vec::new();
    for message in [
        json!({"jsonrpc": "2.0", "id": INITIALIZE_ID, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "uexec-cli", "version": VERSION}
        }}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ] {
        serde_json::to_writer(&mut lines, &message)?;
        lines.push(b'\n');
    }
    Ok(lines)
}

/// One request as a line.
pub fn request_line(id: u64, method: &str, params: &Value) -> anyhow::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
    )?;
    line.push(b'\n');
    Ok(line)
}

/// A line from the daemon: the result of request `id` (a `method`), or None when it
/// answers something else (a notification, the `initialize`).
pub fn answer(line: &[u8], id: u64, method: &str) -> anyhow::Result<Option<Value>> {
    let message: Value = serde_json::from_slice(line).with_context(|| {
        format!(
            "the daemon sent something else than JSON: {:?}",
            String::from_utf8_lossy(line)
        )
    })?;
    let answers = message.get("id").and_then(Value::as_u64);
    if answers == Some(INITIALIZE_ID) {
        if let Some(error) = message.get("error") {
            anyhow::bail!(
                "the daemon did not complete the MCP handshake: {}",
                error["message"].as_str().unwrap_or("unknown error")
            );
        }
    }
    if answers != Some(id) {
        return Ok(None);
    }
    if let Some(error) = message.get("error") {
        anyhow::bail!(
            "{method} failed: {}",
            error["message"].as_str().unwrap_or("unknown error")
        );
    }
    Ok(Some(message.get("result").cloned().unwrap_or(Value::Null)))
}

/// A daemon of this user that runs elsewhere than the one this CLI reaches: a client that
/// passes few variables (no `XDG_RUNTIME_DIR`) starts its own in another runtime directory,
/// and its sessions are there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtherDaemon {
    pub socket: PathBuf,
    pub pid: u32,
}

impl OtherDaemon {
    /// What `ls` and `daemon --status` say of it.
    pub fn sentence(&self) -> String {
        format!(
            "another uexec daemon of yours runs at {} (pid {}), for clients without \
             XDG_RUNTIME_DIR: its sessions are there (`uexec ls --socket {}`)",
            self.socket.display(),
            self.pid,
            self.socket.display()
        )
    }
}

/// The first daemon of this user found running in another runtime directory than `ours`
/// (`$XDG_RUNTIME_DIR/uexec`, `/run/user/<uid>/uexec`, `<temp dir>/uexec-<uid>`,
/// `/tmp/uexec-<uid>`): its directory this user's, its pid file naming a live process.
pub fn other_daemon(ours: &std::path::Path) -> Option<OtherDaemon> {
    use std::os::unix::fs::MetadataExt as _;
    let uid = uexec_sys::effective_uid();
    let ours = ours.parent().map(std::path::Path::to_path_buf);
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(xdg) = std::env::var_os("XDG_RUNTIME_DIR").filter(|x| !x.is_empty()) {
        dirs.push(PathBuf::from(xdg).join("uexec"));
    }
    dirs.push(PathBuf::from(format!("/run/user/{uid}/uexec")));
    dirs.push(std::env::temp_dir().join(format!("uexec-{uid}")));
    dirs.push(PathBuf::from(format!("/tmp/uexec-{uid}")));
    let same = |a: &std::path::Path, b: &std::path::Path| {
        a == b || std::fs::canonicalize(a).ok() == std::fs::canonicalize(b).ok()
    };
    dirs.into_iter()
        .filter(|d| ours.as_deref().is_none_or(|o| !same(d, o)))
        .filter(|d| std::fs::metadata(d).is_ok_and(|m| m.is_dir() && m.uid() == uid))
        .find_map(|dir| {
            let socket = dir.join("daemon.sock");
            let pid: u32 = std::fs::read_to_string(dir.join("daemon.pid"))
                .ok()?
                .trim()
                .parse()
                .ok()?;
            let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
            (alive && socket.exists()).then_some(OtherDaemon { socket, pid })
        })
}
