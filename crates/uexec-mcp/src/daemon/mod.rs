//! `uexec daemon`: one per user, owning the sessions so that people see them (`uexec ls`,
//! `logs`, `attach`) and that they may outlive the MCP servers and terminals that started
//! them.
//!
//! - **Where**: a Unix socket (0600) in a private runtime directory,
//!   `$XDG_RUNTIME_DIR/uexec/`, else `/run/user/<uid>/uexec/`, else `<temp dir>/uexec-<uid>/`
//!   ([`uexec_core::fs::runtime_dir`]). The directory must be 0700 and
//!   this user's, or the daemon refuses to start; a peer of another uid is refused
//!   (`SO_PEERCRED`), and so is a sandboxed command of this uid: a peer whose process lives
//!   in another user namespace than the daemon's (every uexec sandbox has its own; see
//!   `uexec_net::peer`), which would otherwise run through the daemon, unsandboxed, what its
//!   sandbox forbids. One daemon per directory: it holds `daemon.lock`.
//! - **Protocol**: one JSON line each way ([`uexec_protocol::daemon`]: protocol, version,
//!   build, owner, the client's cwd, environment and settings, its exec servers among them),
//!   then MCP on the same stream: the daemon serves the same tools as `uexec mcp`, on the
//!   owner's store, with that connection's settings and environments.
//! - **Owners**: each owner has its own store (an agent sees only its sessions); the stores
//!   share one id space, so a person can name any session by its id alone. An agent's
//!   running sessions end when its last connection has been gone for its linger (0 s by
//!   default), unless a person kept them ([`lease`]); a person's run until they end.
//! - **HTTP**: `uexec mcp --daemon --http ADDR` serves streamable HTTP in its own process
//!   and relays each MCP session to a connection here ([`http`]).
//! - **Lifetime**: started on demand by `uexec mcp` (and the CLI verbs that run commands);
//!   exits after `--idle-timeout` with no running session and no client, or on
//!   SIGTERM/SIGINT, killing whatever is left. If it is SIGKILLed, its last-will watchdog
//!   kills every session's process group.

pub mod attach;
mod build_id;
pub mod client;
mod escapes;
pub mod http;
mod lease;
pub mod metrics;
mod options;
mod relay;
pub mod run;
pub mod status;

pub use build_id::{build_id, build_id_of};
pub use options::{DaemonError, DaemonOptions, DEFAULT_IDLE_TIMEOUT_S, DEFAULT_PERSON_SESSIONS};

use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use uexec_core::store::IdSpace;
use uexec_core::{LocalBackend, SessionStore, StoreConfig};
use uexec_net::peer::Standing;
use uexec_net::shutdown_signal;

use crate::environments;
use crate::error_chain::Chain;
use crate::server::{Options, UexecServer};
use crate::settings;
use crate::stores::{OwnerTable, Stores};
use uexec_protocol::daemon::{AttachRequest, Hello, Reply, MAX_HELLO_BYTES, PERSON, PROTOCOL};

/// Why a connection ended before its client was done (logged, never sent).
#[derive(Debug, thiserror::Error)]
enum ConnectionError {
    /// Refused, as the reply said, or a client that broke the protocol.
    #[error("{0}")]
    Refused(String),
    #[error("no hello within 10 s")]
    NoHello(#[source] tokio::time::error::Elapsed),
    #[error("MCP handshake failed")]
    Handshake(#[source] Box<rmcp::service::ServerInitializeError>),
    #[error(transparent)]
    Exec(#[from] uexec_core::ExecError),
    #[error(transparent)]
    Attach(#[from] attach::AttachError),
    #[error(transparent)]
    Run(#[from] run::RunError),
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// The default socket path.
pub fn default_socket() -> io::Result<PathBuf> {
    Ok(runtime_dir()?.join("daemon.sock"))
}

/// This user's private runtime directory, made if missing; refused when it is not this
/// user's or others may enter it ([`uexec_core::fs::private_dir`]).
pub fn runtime_dir() -> io::Result<PathBuf> {
    uexec_core::fs::runtime_dir()
}

/// Makes `dir` (0700) if it does not exist, and checks it: a real directory, this user's,
/// closed to others.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    uexec_core::fs::private_dir(dir)
}

/// The sessions of every owner.
struct Daemon {
    ids: Arc<IdSpace>,
    base: StoreConfig,
    owners: Arc<OwnerTable>,
    /// Each agent's connections, so its sessions end when the last is gone ([`lease`]).
    leases: Arc<lease::Leases>,
    clients: AtomicUsize,
    facts: status::Facts,
    /// What every owner's sessions did, for `uexec metrics` (the stores feed it).
    metrics: Arc<uexec_core::metrics::Metrics>,
    /// Commands held for a person's yes at the daemon (`uexec approvals`).
    held: Arc<crate::approve::held::Held>,
    /// The most running sessions of a person (`--person-sessions`).
    person_sessions: usize,
}

impl Daemon {
    /// The store of `owner`, made with `config` (its first connection's) if it has none.
    /// A person's store never prunes a running session: past `--person-sessions` running, a
    /// new one is refused; an agent's prunes at Codex's 64.
    fn store_of(&self, owner: &str, config: &StoreConfig) -> Result<Arc<SessionStore>, String> {
        self.owners.get_or_make(owner, || {
            let mut config = config.clone();
            if owner == PERSON {
                config.when_full = uexec_core::WhenFull::Refuse;
                config.max_sessions = self.person_sessions;
            }
            Ok(SessionStore::with_id_space(
                Arc::new(LocalBackend),
                config,
                Default::default(),
                self.ids.clone(),
            ))
        })
    }

    /// Sessions still running: one that ended (listed until someone reports or removes
    /// it) keeps no daemon alive past its idle timeout.
    fn sessions(&self) -> usize {
        self.owners
            .all()
            .iter()
            .map(|(_, s)| s.list_sessions().iter().filter(|i| !i.exited).count())
            .sum()
    }

    fn shutdown(&self) {
        for (_, store) in self.owners.all() {
            store.shutdown();
        }
    }
}

/// Longest wait for a refused client to hang up (see `serve_client`).
const REFUSED_DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// Runs the daemon until it is idle for `--idle-timeout`, or a signal.
pub async fn run(args: DaemonOptions) -> Result<(), DaemonError> {
    if args.stop {
        return stop(&args).await;
    }
    args.transcripts.check()?;
    let rules = uexec_rules::from_flags(&args.rules, args.unmatched)?.map(|rules| {
        for warning in rules.warnings() {
            tracing::warn!("--rules: {warning}");
        }
        Arc::new(rules) as Arc<dyn uexec_core::policy::rules::CommandRules>
    });
    let socket = match &args.socket {
        Some(path) => {
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .ok_or(DaemonError::SocketWithoutDirectory)?;
            private_dir(dir)?;
            path.clone()
        }
        None => default_socket()?,
    };
    let dir = socket.parent().map(Path::to_path_buf).unwrap_or_default();
    let lock_path = dir.join("daemon.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&lock_path)
        .map_err(|source| DaemonError::OpenLock {
            path: lock_path.clone(),
            source,
        })?;
    if lock.try_lock().is_err() {
        return Err(DaemonError::AlreadyRuns {
            socket,
            lock: lock_path,
        });
    }
    // The lock is ours: a socket file left there is a dead daemon's.
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).map_err(|source| DaemonError::Listen {
        socket: socket.clone(),
        source,
    })?;
    // From here on, however it ends (a full disk refusing the pid file, a signal), no
    // socket nor pid file is left behind for a client to stumble on.
    let _files = OwnFiles(vec![socket.clone(), dir.join("daemon.pid")]);
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
    let pid_file = dir.join("daemon.pid");
    (|| {
        use std::io::Write as _;
        let mut pid = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&pid_file)?;
        writeln!(pid, "{}", std::process::id())
    })()
    .map_err(|source| DaemonError::PidFile {
        path: pid_file.clone(),
        source,
    })?;
    let mut base = StoreConfig::from_env();
    base.transcripts = args.transcripts.config();
    base.screens = Some(attach::screens());
    base.sandbox.confinement = args.confinement.clone();
    base.limits = args.limits;
    base.rules = rules;
    let figures = Arc::new(uexec_core::metrics::Metrics::default());
    base.metrics = Some(figures.clone());
    let daemon_transcripts = base
        .transcripts
        .as_ref()
        .map(|t| std::path::absolute(&t.root))
        .transpose()?;
    let daemon = Arc::new(Daemon {
        ids: Arc::default(),
        base,
        owners: Arc::default(),
        leases: Arc::default(),
        clients: AtomicUsize::new(0),
        metrics: figures,
        held: Arc::default(),
        person_sessions: args.person_sessions,
        facts: status::Facts {
            started: std::time::Instant::now(),
            socket: std::path::absolute(&socket)?,
            log_file: args
                .log_file
                .as_deref()
                .map(std::path::absolute)
                .transpose()?,
            transcripts: daemon_transcripts,
        },
    });
    tracing::info!(socket = %socket.display(), "uexec daemon listening");
    println!("{}", socket.display());
    let idle_limit = Duration::from_secs(args.idle_timeout);
    let check = Duration::from_secs(args.idle_timeout.clamp(1, 5));
    let mut idle_since = tokio::time::Instant::now();
    let mut ticks = tokio::time::interval(check);
    // Accepted on a worker: the runtime's main thread is woken only through another thread
    // (it does not poll the reactor), a hop that each connection would wait for.
    let acceptor = tokio::spawn(accept_clients(listener, daemon.clone()));
    let result = loop {
        tokio::select! {
            _ = ticks.tick() => {
                let busy = daemon.clients.load(Ordering::SeqCst) > 0 || daemon.sessions() > 0;
                if busy {
                    idle_since = tokio::time::Instant::now();
                } else if args.idle_timeout > 0 && idle_since.elapsed() >= idle_limit {
                    tracing::info!("idle for {} s: exiting", args.idle_timeout);
                    break Ok(());
                }
            }
            signal = shutdown_signal() => break signal.map_err(DaemonError::from),
        }
    };
    acceptor.abort();
    daemon.shutdown();
    drop(_files);
    drop(lock);
    result
}

/// Files of the running daemon, removed when it stops (while it still holds the lock).
struct OwnFiles(Vec<PathBuf>);

impl Drop for OwnFiles {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Serves each connection in a task of its own.
async fn accept_clients(listener: UnixListener, daemon: Arc<Daemon>) {
    let mut backoff = uexec_net::backoff::AcceptBackoff::new("the daemon socket");
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                backoff.succeeded();
                let daemon = daemon.clone();
                // Counted from the accept: the idle check never sees a client in between.
                daemon.clients.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Err(e) = serve_client(&daemon, stream).await {
                        tracing::info!("client: {}", Chain(&e));
                    }
                    daemon.clients.fetch_sub(1, Ordering::SeqCst);
                });
            }
            // EMFILE and friends: back off instead of spinning, and say so once a minute.
            Err(e) => tokio::time::sleep(backoff.failed(&e)).await,
        }
    }
}

/// `uexec daemon --stop`: SIGTERM to the daemon that holds the lock, then wait for its lock.
async fn stop(args: &DaemonOptions) -> Result<(), DaemonError> {
    let socket = match &args.socket {
        Some(path) => path.clone(),
        None => default_socket()?,
    };
    let dir = socket.parent().map(Path::to_path_buf).unwrap_or_default();
    let lock_path = dir.join("daemon.lock");
    let lock = match std::fs::File::open(&lock_path) {
        Ok(lock) => lock,
        Err(_) => {
            println!("no uexec daemon runs for {}", socket.display());
            return Ok(());
        }
    };
    if lock.try_lock_shared().is_ok() {
        println!("no uexec daemon runs for {}", socket.display());
        return Ok(());
    }
    let pid: u32 = std::fs::read_to_string(dir.join("daemon.pid"))
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .ok_or(DaemonError::NoPidFile)?;
    uexec_sys::kill_process(pid, uexec_sys::SIGTERM);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while lock.try_lock_shared().is_err() {
        if tokio::time::Instant::now() >= deadline {
            return Err(DaemonError::StillRunning { pid });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("stopped the uexec daemon (pid {pid})");
    Ok(())
}

/// One client: peer checks (its uid, then its user namespace), hello, then MCP on the
/// owner's store. A refused peer is answered before anything it sent is read.
async fn serve_client(daemon: &Daemon, stream: UnixStream) -> Result<(), ConnectionError> {
    let uid = uexec_sys::effective_uid();
    let peer = stream.peer_cred()?.uid();
    let standing = (peer == uid).then(|| uexec_net::peer::unix_peer_standing(stream.as_fd()));
    let (read, mut write) = stream.into_split();
    let refusal = match standing {
        None => Some((
            format!("uid {peer} may not use the uexec daemon of uid {uid}"),
            format!("refused a peer of uid {peer}"),
        )),
        Some(Standing::Ours) => None,
        Some(Standing::Sandboxed) => Some((
            "a sandboxed command may not use the uexec daemon: it would run there, outside \
             the sandbox, what the sandbox forbids"
                .to_owned(),
            "refused a sandboxed command (a peer in another user namespace)".to_owned(),
        )),
        Some(Standing::Unknown(why)) => Some((
            format!("the uexec daemon cannot tell who connected ({why}), so it serves nothing"),
            format!("refused a peer it cannot place: {why}"),
        )),
    };
    if let Some((reply, log)) = refusal {
        write_reply(&mut write, &Reply::refuse(reply)).await?;
        // What the client sends with its hello is read and dropped until it hangs up: closed
        // at once, its write could fail (EPIPE, or SIGPIPE for the front) before it reads why.
        let _ = write.shutdown().await;
        let mut unread = read.take(MAX_HELLO_BYTES as u64);
        let mut sink = tokio::io::sink();
        let drain = tokio::io::copy(&mut unread, &mut sink);
        let _ = tokio::time::timeout(REFUSED_DRAIN_TIMEOUT, drain).await;
        return Err(ConnectionError::Refused(log));
    }
    let mut read = BufReader::new(read);
    let mut line = Vec::new();
    let got = tokio::time::timeout(
        Duration::from_secs(10),
        (&mut read)
            .take(MAX_HELLO_BYTES as u64)
            .read_until(b'\n', &mut line),
    )
    .await
    .map_err(ConnectionError::NoHello)??;
    if got == 0 || line.last() != Some(&b'\n') {
        write_reply(
            &mut write,
            &Reply::refuse("the hello line is missing or too long"),
        )
        .await?;
        return Err(ConnectionError::Refused("bad hello".to_owned()));
    }
    let hello: Hello = match serde_json::from_slice(&line) {
        Ok(hello) => hello,
        Err(e) => {
            let reply = Reply::refuse(format!(
                "not a {} hello ({e}): is this client another uexec version?",
                PROTOCOL
            ));
            write_reply(&mut write, &reply).await?;
            return Err(ConnectionError::Refused(format!("bad hello: {e}")));
        }
    };
    if hello.status && hello.protocol == PROTOCOL {
        // Before the builds are compared (see `status`).
        let status = daemon.facts.status(&daemon.owners, &daemon.leases);
        return Ok(status::answer(&status, &mut write).await?);
    }
    if hello.metrics && hello.protocol == PROTOCOL {
        // As a status: whatever the client's build.
        let now = metrics::now(&daemon.owners, daemon.base.transcripts.as_ref());
        return Ok(metrics::answer(&daemon.metrics, &now, &mut write).await?);
    }
    if let Some(why) = hello.incompatibility(&build_id()) {
        write_reply(&mut write, &Reply::refuse(why.clone())).await?;
        return Err(ConnectionError::Refused(why));
    }
    if let Some(req) = hello.attach.clone() {
        return attach_client(daemon, &hello, req, read, write).await;
    }
    if let Some(req) = hello.run.clone() {
        return run::client(daemon, &hello, req, read, write).await;
    }
    // The owner's store may be older than this connection: this client's directory,
    // environment, settings and environments are its commands' defaults, not the first
    // client's. The environments live as long as the connection (its file is watched until
    // then); a session started there keeps its server after.
    let store = settings::store_config(&hello, &daemon.base).and_then(|mut config| {
        let store = daemon.store_of(&hello.owner, &config)?;
        let environments =
            environments::start::start(&hello.settings.environments).map_err(|e| e.to_string())?;
        config.environments = Some(environments.environments());
        // The client's hooks files, read here as the same user (checked at its start too).
        let hooks = crate::hooks::Hooks::load(&hello.settings.hooks)?;
        Ok((store, config, environments, hooks))
    });
    let (store, config, environments, hooks) = match store {
        Ok(all) => all,
        Err(why) => {
            write_reply(&mut write, &Reply::refuse(why.clone())).await?;
            return Err(ConnectionError::Refused(why));
        }
    };
    // Held while the conversation lasts: the owner's sessions end after its linger once its
    // last connection is gone. A person's sessions are theirs: they end as they would.
    let _lease = (hello.owner != PERSON).then(|| {
        daemon
            .leases
            .hold(&hello.owner, hello.settings.linger, store.clone())
    });
    write_reply(&mut write, &Reply::ok()).await?;
    let options = Options {
        codex_tools_only: hello.settings.codex_tools_only,
        extended: hello.settings.extended,
        structured: hello.settings.structured,
        tasks: !hello.settings.no_tasks,
        approval_timeout: hello.settings.approval_timeout_ms.map_or(
            crate::approve::DEFAULT_APPROVAL_TIMEOUT,
            std::time::Duration::from_millis,
        ),
        hooks,
        config,
    };
    let stores = if hello.owner == PERSON {
        Stores::Person {
            own: store,
            owners: daemon.owners.clone(),
        }
    } else {
        Stores::Single(store)
    };
    // A client that is done (gone, or its stdin closed) cancels its calls at once, losing
    // nothing ([`crate::hangup`]).
    let gone = tokio_util::sync::CancellationToken::new();
    let server = UexecServer::new(
        stores,
        environments.environments(),
        environments.any_configured(),
        options,
    )
    .cancelled_by(gone.clone(), gone.clone())
    .holding(daemon.held.clone(), hello.owner.clone());
    let read = crate::hangup::Watched::new(read, gone.clone());
    // The wire additions (tools' `execution`, listen's `taskIds`) for its clients, which
    // `uexec mcp` relays byte for byte.
    let wire = crate::wire::Wire::new(hello.settings.extended && !hello.settings.no_tasks);
    let running = server
        .serve(crate::wire::lines::transport(read, write, wire, gone))
        .await
        .map_err(|e| ConnectionError::Handshake(Box::new(e)))?;
    let quit = running.waiting().await;
    tracing::debug!(owner = %hello.owner, ?quit, "client went away");
    drop(environments);
    Ok(())
}

/// `uexec attach`: a person only; the session is found in any owner's store.
async fn attach_client(
    daemon: &Daemon,
    hello: &Hello,
    req: AttachRequest,
    read: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut write: tokio::net::unix::OwnedWriteHalf,
) -> Result<(), ConnectionError> {
    let refuse = |why: String| Reply::refuse(why);
    if hello.owner != PERSON {
        write_reply(
            &mut write,
            &refuse("only people attach (owner @person)".into()),
        )
        .await?;
        return Err(ConnectionError::Refused("attach by an agent".to_owned()));
    }
    let Some((owner, store)) = daemon.owners.find(req.session_id) else {
        let why = format!("Unknown process id {}", req.session_id);
        write_reply(&mut write, &refuse(why.clone())).await?;
        return Err(ConnectionError::Refused(why));
    };
    // With the lease the session takes the person's size; a reader sees it as it is.
    let size = req.write.then_some((req.rows.max(1), req.cols.max(1)));
    let attachment = match store
        .attach(req.session_id, req.write, attach::SEED_BYTES, size)
        .await
    {
        Ok(a) => a,
        Err(e) => {
            write_reply(&mut write, &refuse(e.to_string())).await?;
            return Err(e.into());
        }
    };
    if req.write {
        attachment.resize(req.rows.max(1), req.cols.max(1))?;
    }
    write_reply(&mut write, &Reply::ok()).await?;
    // Another owner's output reaches the person's terminal filtered, as tmux does: no
    // clipboard writes, titles or device strings (`--raw` passes them).
    let filter = escapes::EscapeFilter::new(req.raw || owner == PERSON);
    let size = (req.rows.max(1), req.cols.max(1));
    Ok(attach::serve(attachment, read, write, size, filter).await?)
}

async fn write_reply(write: &mut (impl AsyncWriteExt + Unpin), reply: &Reply) -> io::Result<()> {
    let mut line = serde_json::to_vec(reply).map_err(io::Error::other)?;
    line.push(b'\n');
    write.write_all(&line).await?;
    write.flush().await
}
