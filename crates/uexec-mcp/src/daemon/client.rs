//! The client side of the daemon: connect (starting a daemon if none runs), say hello, then
//! carry bytes. Its users are in the binary: `uexec mcp --daemon` (this plus a copy of stdin
//! and stdout), the CLI verbs, `uexec attach` and the front (which checks the socket alike).
//!
//! A client trusts a socket before it says anything to it, since its hello carries the
//! client's directory and environment and what follows is the commands it wants run:
//! 1. the socket's directory must be this user's and private ([`check_socket_dir`]): in a
//!    directory others may write, another user could have put a socket of theirs (and a
//!    daemon started there would be theirs to swap);
//! 2. the listener at the other end must run as this user ([`check_listener`],
//!    `SO_PEERCRED`), wherever the socket lies;
//! 3. only then the hello. An agent's carries no secret-looking variable
//!    ([`LocalHello::here`], [`hello_env`]); a person's (the CLI's) carries their whole
//!    environment ([`person_env`]), for their own commands, and these checks are what
//!    keeps it from any daemon but theirs.
//!
//! A refusal names the socket and says that nothing was sent.

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use std::{fmt, io};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use base64::Engine as _;
use uexec_core::env::EnvPolicy;
use uexec_protocol::daemon::{Hello, Reply, Settings, PROTOCOL, VERSION};

use super::build_id;
use crate::error_chain::Chain;

/// How long a started daemon has to open its socket.
const START_DEADLINE: Duration = Duration::from_secs(10);

/// Why a client could not reach, trust or be served by the daemon. Its `Display` is the
/// first line; `{:#}` adds the causes, `: `-joined, as anyhow's does, for a caller that
/// prints it whole without anyhow (`uexec attach`).
#[derive(Debug)]
pub struct ClientError(ClientErrorKind);

/// What went wrong, with the socket it concerns; a refusal says that nothing was sent.
#[derive(Debug, thiserror::Error)]
pub enum ClientErrorKind {
    #[error(
        "will not use the uexec daemon socket {}: {error}; a socket there may be another \
         user's (nothing was sent to it)",
        socket.display()
    )]
    SocketDir { socket: PathBuf, error: io::Error },
    #[error("cannot reach the uexec daemon at {}", socket.display())]
    Unreachable {
        socket: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "will not use the uexec daemon socket {}: cannot tell who listens on it \
         (nothing was sent to it)",
        socket.display()
    )]
    ListenerUnknown {
        socket: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "will not use the uexec daemon socket {}: it is served by uid {uid}, not by this \
         user (uid {ours}); a socket planted by another user? (nothing was sent to it)",
        socket.display()
    )]
    ListenerNotOurs {
        socket: PathBuf,
        uid: u32,
        ours: u32,
    },
    #[error("the uexec daemon did not answer the hello within 10 s")]
    NoReply(#[source] tokio::time::error::Elapsed),
    #[error("cannot send the hello to the uexec daemon: {error}")]
    HelloNotSent { error: io::Error },
    #[error("the uexec daemon answered something else than a reply: {text:?}")]
    NotAReply {
        text: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("the uexec daemon (version {version}) refused: {error}")]
    Refused { version: String, error: String },
    #[error("cannot find the uexec executable")]
    NoExecutable(#[source] io::Error),
    #[error("cannot start the uexec daemon")]
    Start(#[source] io::Error),
    #[error("the uexec daemon could not start ({status}): {said} (its log: {log})")]
    ExitedAtStart {
        status: ExitStatus,
        /// What it said on stderr.
        said: String,
        log: String,
    },
    #[error("the uexec daemon did not open its socket within 10 s")]
    StartTimeout(#[source] io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl ClientError {
    pub fn kind(&self) -> &ClientErrorKind {
        &self.0
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            write!(f, "{}", Chain(&self.0))
        } else {
            write!(f, "{}", self.0)
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.0)
    }
}

impl From<ClientErrorKind> for ClientError {
    fn from(kind: ClientErrorKind) -> Self {
        Self(kind)
    }
}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        Self(e.into())
    }
}

impl From<serde_json::Error> for ClientError {
    fn from(e: serde_json::Error) -> Self {
        Self(e.into())
    }
}

/// The hello of this process: its working directory and environment.
pub trait LocalHello: Sized {
    /// This process as a client: its cwd and environment.
    fn here(owner: String, settings: Settings) -> std::io::Result<Self>;
    /// This process as a client of the engine build `build` (see [`build_id_of`]).
    ///
    /// [`build_id_of`]: super::build_id_of
    fn here_for(build: String, owner: String, settings: Settings) -> std::io::Result<Self>;
}

impl LocalHello for Hello {
    fn here(owner: String, settings: Settings) -> std::io::Result<Self> {
        Self::here_for(build_id(), owner, settings)
    }

    fn here_for(build: String, owner: String, settings: Settings) -> std::io::Result<Self> {
        Ok(Self {
            protocol: PROTOCOL.to_owned(),
            version: VERSION.to_owned(),
            build,
            owner,
            cwd: std::env::current_dir()?,
            attach: None,
            status: false,
            metrics: false,
            run: None,
            env: hello_env(std::env::vars_os(), &settings.env_keep),
            settings,
        })
    }
}

/// The `env` of a hello: `vars` as base64 pairs, without the secret-looking names that
/// commands would not get either ([`uexec_core::env::looks_secret`]), unless `keep` names
/// them (`--env-keep`).
pub fn hello_env(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    keep: &[String],
) -> Vec<(String, String)> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let policy = EnvPolicy {
        keep: keep.to_vec(),
        ..EnvPolicy::default()
    };
    policy
        .inherited(vars)
        .into_iter()
        .map(|(k, v)| (b64.encode(k.as_bytes()), b64.encode(v.as_bytes())))
        .collect()
}

/// The `env` of a person's hello (the CLI's): `vars` as base64 pairs, all of them, secrets
/// included. A person's own commands get their environment as it is; sent only past the
/// checks of the module docs, to a daemon of theirs.
pub fn person_env(vars: impl IntoIterator<Item = (OsString, OsString)>) -> Vec<(String, String)> {
    let b64 = base64::engine::general_purpose::STANDARD;
    vars.into_iter()
        .map(|(k, v)| (b64.encode(k.as_bytes()), b64.encode(v.as_bytes())))
        .collect()
}

/// A connection past its hello.
pub struct Connected {
    pub stream: UnixStream,
    /// What the daemon sent after its reply, read with it: the start of the conversation.
    pub after: Vec<u8>,
}

/// Connects and says hello, followed at once by `early` (the first words of the
/// conversation, so that they need not wait for the reply); with `start`, starts a daemon
/// when none answers. Nothing is sent, nor a daemon started, before the checks of the
/// module docs pass.
pub async fn connect(
    socket: &Path,
    hello: &Hello,
    start: bool,
    early: &[u8],
) -> Result<Connected, ClientError> {
    if start {
        // The daemon we may start makes it anyway: a missing directory is made ours (0700).
        make_socket_dir(socket)?;
    } else {
        check_socket_dir(socket)?;
    }
    let stream = match UnixStream::connect(socket).await {
        Ok(stream) => stream,
        Err(e)
            if start
                && matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) =>
        {
            start_daemon(socket).await?
        }
        Err(source) => {
            return Err(ClientErrorKind::Unreachable {
                socket: socket.to_path_buf(),
                source,
            }
            .into())
        }
    };
    check_listener(socket, stream.as_fd())?;
    say_hello(stream, hello, early).await
}

/// Step 1 of the module docs: the directory of `socket` is this user's, 0700, and not a
/// symlink ([`uexec_core::fs::check_private_dir`]).
pub fn check_socket_dir(socket: &Path) -> Result<(), ClientError> {
    socket_dir_check(socket, uexec_core::fs::check_private_dir)
}

/// [`check_socket_dir`], making the directory (0700, ours) when it does not exist yet.
fn make_socket_dir(socket: &Path) -> Result<(), ClientError> {
    socket_dir_check(socket, uexec_core::fs::private_dir)
}

fn socket_dir_check(
    socket: &Path,
    check: fn(&Path) -> std::io::Result<()>,
) -> Result<(), ClientError> {
    let dir = match socket.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    check(dir).map_err(|error| {
        ClientErrorKind::SocketDir {
            socket: socket.to_path_buf(),
            error,
        }
        .into()
    })
}

/// Step 2 of the module docs: the process listening on `socket` (connected as `stream`)
/// runs as this user.
pub fn check_listener(socket: &Path, stream: BorrowedFd<'_>) -> Result<(), ClientError> {
    let ours = uexec_sys::effective_uid();
    let (_, uid) = uexec_sys::peer_credentials(stream.as_raw_fd()).map_err(|source| {
        ClientErrorKind::ListenerUnknown {
            socket: socket.to_path_buf(),
            source,
        }
    })?;
    if uid != ours {
        return Err(ClientErrorKind::ListenerNotOurs {
            socket: socket.to_path_buf(),
            uid,
            ours,
        }
        .into());
    }
    Ok(())
}

/// Longest hello reply read.
const MAX_REPLY_BYTES: usize = 64 * 1024;

async fn say_hello(
    mut stream: UnixStream,
    hello: &Hello,
    early: &[u8],
) -> Result<Connected, ClientError> {
    let mut line = serde_json::to_vec(hello)?;
    line.push(b'\n');
    line.extend_from_slice(early);
    // A daemon that refuses answers before it reads: if it hung up meanwhile, its reply
    // says why better than the failed write.
    let written = stream.write_all(&line).await;
    // The reply is one line; what came with it is handed over, not dropped.
    let mut reply = Vec::new();
    let read_line = async {
        let mut buf = [0u8; 8192];
        loop {
            if let Some(end) = reply.iter().position(|b| *b == b'\n') {
                return Ok::<_, std::io::Error>(Some(end));
            }
            if reply.len() >= MAX_REPLY_BYTES {
                return Ok(None);
            }
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Ok(None);
            }
            reply.extend_from_slice(&buf[..n]);
        }
    };
    let end = tokio::time::timeout(Duration::from_secs(10), read_line)
        .await
        .map_err(ClientErrorKind::NoReply)??;
    if let (Err(error), None) = (written, end) {
        return Err(ClientErrorKind::HelloNotSent { error }.into());
    }
    let after = match end {
        Some(end) => {
            let after = reply.split_off(end + 1);
            reply.pop();
            after
        }
        None => Vec::new(),
    };
    let reply: Reply =
        serde_json::from_slice(&reply).map_err(|source| ClientErrorKind::NotAReply {
            text: String::from_utf8_lossy(&reply).into_owned(),
            source,
        })?;
    if !reply.ok {
        return Err(ClientErrorKind::Refused {
            version: reply.version,
            error: reply.error.unwrap_or_default(),
        }
        .into());
    }
    Ok(Connected { stream, after })
}

/// Starts `uexec daemon` in its own session, logging to the state directory, and waits for
/// it to say it listens (its socket's path on stdout). One that exits first is asked why:
/// its stderr (the last [`MAX_START_ERROR_BYTES`]) is the error, so a daemon that cannot
/// start (a full disk, a directory it may not write) says so in the client's words, not
/// in a log it may not have been able to write.
async fn start_daemon(socket: &Path) -> Result<UnixStream, ClientError> {
    let exe = std::env::current_exe().map_err(ClientErrorKind::NoExecutable)?;
    let log = log_path();
    // The running binary, not whatever its path holds now; `argv[0]` keeps the path.
    let mut cmd = tokio::process::Command::new("/proc/self/exe");
    cmd.arg0(exe).arg("daemon").arg("--socket").arg(socket);
    if let Some(log) = &log {
        cmd.arg("--log-file").arg(log);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(false);
    let mut child = cmd.spawn().map_err(ClientErrorKind::Start)?;
    let (Some(stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(ClientErrorKind::Start(io::Error::other("no pipe to the daemon")).into());
    };
    // Its one line once it listens, or the end of its stdout when it exits before.
    let mut line = String::new();
    let mut stdout = tokio::io::BufReader::new(stdout);
    let ready = tokio::io::AsyncBufReadExt::read_line(&mut stdout, &mut line);
    let read = tokio::time::timeout(START_DEADLINE, ready).await;
    drop(stdout);
    // Reaped by a task: the daemon outlives us, its exit status is not ours. Its pipes
    // are closed here: it prints nothing more (it logs to its file).
    let status = match read {
        Ok(Ok(n)) if n > 0 => None,
        Ok(_) => Some(child.wait().await?),
        Err(_) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(
                ClientErrorKind::StartTimeout(io::Error::from(io::ErrorKind::TimedOut)).into(),
            );
        }
    };
    let Some(status) = status else {
        tokio::spawn(async move { child.wait().await });
        return UnixStream::connect(socket).await.map_err(|source| {
            ClientErrorKind::Unreachable {
                socket: socket.to_path_buf(),
                source,
            }
            .into()
        });
    };
    // Another client may have started one at the same time: it won the lock.
    if let Ok(stream) = UnixStream::connect(socket).await {
        return Ok(stream);
    }
    let mut said = Vec::new();
    let _ = (&mut stderr)
        .take(MAX_START_ERROR_BYTES as u64 * 4)
        .read_to_end(&mut said)
        .await;
    Err(ClientErrorKind::ExitedAtStart {
        status,
        said: start_error(&said),
        log: log.map_or("its log".to_owned(), |l| l.display().to_string()),
    }
    .into())
}

/// Most bytes of a daemon's stderr a failed start shows.
const MAX_START_ERROR_BYTES: usize = 2048;

/// What a daemon that failed at start said: its last [`MAX_START_ERROR_BYTES`], without
/// the backtrace anyhow may add, on one line.
fn start_error(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let said: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("Stack backtrace:"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let said = said.join(" ");
    let cut = said.len().saturating_sub(MAX_START_ERROR_BYTES);
    let cut = (cut..=said.len())
        .find(|i| said.is_char_boundary(*i))
        .unwrap_or(said.len());
    said[cut..].to_owned()
}

/// `daemon.log` in uexec's state directory, made 0700 if it is new: the audit record
/// (audit.rs) goes there too, and refuses a directory others can read.
fn log_path() -> Option<PathBuf> {
    let state = uexec_core::transcript::state_dir()?;
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(&state)
        .ok()?;
    Some(state.join("daemon.log"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hello_env_drops_secret_looking_names_unless_kept() {
        let b64 = base64::engine::general_purpose::STANDARD;
        let vars = [
            ("PATH", "/bin"),
            ("OPENAI_API_KEY", "sk-1"),
            ("GH_TOKEN", "t"),
            ("NPM_AUTH", "a"),
            ("KEPT_SECRET", "k"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let env = hello_env(vars, &["KEPT_SECRET".to_owned()]);
        let names: Vec<String> = env
            .iter()
            .map(|(k, _)| String::from_utf8(b64.decode(k).expect("b64")).expect("utf-8"))
            .collect();
        assert_eq!(names, ["KEPT_SECRET", "PATH"]);
    }

    #[test]
    fn a_client_error_shows_its_causes_in_the_alternate_form_only() {
        let e = ClientError::from(ClientErrorKind::Unreachable {
            socket: PathBuf::from("/run/u/daemon.sock"),
            source: io::Error::other("refused"),
        });
        assert_eq!(
            e.to_string(),
            "cannot reach the uexec daemon at /run/u/daemon.sock"
        );
        assert_eq!(
            format!("{e:#}"),
            "cannot reach the uexec daemon at /run/u/daemon.sock: refused"
        );
    }
}
