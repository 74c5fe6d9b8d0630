//! `uexec daemon --status`: the daemon says who it is (pid, version and build, uptime, where
//! it listens and logs), how many sessions each owner has, and how many connections each
//! agent.
//!
//! 1. The client says a hello with `status` (a person's, without an environment: a status
//!    runs nothing), never starting a daemon: no socket, or nobody listening, is "none runs".
//! 2. The daemon answers it before it compares builds: a person who rebuilt or reinstalled
//!    uexec wants to see the old daemon that still runs, not be refused by it.
//! 3. A reply, then one JSON line of [`Status`], then the daemon hangs up.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use uexec_protocol::daemon::{Hello, Reply, Settings, Status, PERSON};

use super::build_id;
use super::client::{self, ClientError, ClientErrorKind, LocalHello as _};
use crate::stores::OwnerTable;

/// Longest status line a client reads (owners are few, their names short).
const MAX_STATUS_BYTES: u64 = 1 << 20;

/// What a daemon knows of itself from its start.
#[derive(Debug, Clone)]
pub(super) struct Facts {
    pub started: Instant,
    pub socket: PathBuf,
    pub log_file: Option<PathBuf>,
    /// Where it keeps transcripts; `None`: it keeps none.
    pub transcripts: Option<PathBuf>,
}

impl Facts {
    /// The status now, with the sessions of `owners` and the connections of `leases`.
    pub fn status(&self, owners: &OwnerTable, leases: &super::lease::Leases) -> Status {
        let sessions: BTreeMap<String, usize> = owners
            .all()
            .into_iter()
            .map(|(owner, store)| (owner, store.list_sessions().len()))
            .filter(|(_, n)| *n > 0)
            .collect();
        Status {
            pid: std::process::id(),
            version: uexec_protocol::daemon::VERSION.to_owned(),
            build: build_id(),
            uptime_seconds: self.started.elapsed().as_secs(),
            socket: self.socket.clone(),
            log_file: self.log_file.clone(),
            sessions,
            clients: leases.connections(),
            transcripts_kept: Some(self.transcripts.is_some()),
            transcripts_dir: self.transcripts.clone(),
        }
    }
}

/// Step 3 of the module docs, on the daemon's side.
pub(super) async fn answer(
    status: &Status,
    write: &mut (impl AsyncWriteExt + Unpin),
) -> std::io::Result<()> {
    let mut lines = serde_json::to_vec(&Reply::ok()).map_err(std::io::Error::other)?;
    lines.push(b'\n');
    lines.extend(serde_json::to_vec(status).map_err(std::io::Error::other)?);
    lines.push(b'\n');
    write.write_all(&lines).await?;
    write.shutdown().await
}

/// The status of the daemon at `socket`; `None` when none runs there. Starts nothing.
pub async fn ask(socket: &Path) -> Result<Option<Status>, ClientError> {
    let Some(connected) = ask_person(socket, |hello| hello.status = true).await? else {
        return Ok(None);
    };
    let mut reader = BufReader::new(
        std::io::Cursor::new(connected.after).chain(connected.stream.take(MAX_STATUS_BYTES)),
    );
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).await?;
    Ok(Some(serde_json::from_slice(&line)?))
}

/// A person's hello, without an environment (it runs nothing), made what `ask` asks for by
/// `mark`, sent to the daemon at `socket`; `None` when none runs there. Starts nothing.
pub(super) async fn ask_person(
    socket: &Path,
    mark: impl FnOnce(&mut Hello),
) -> Result<Option<client::Connected>, ClientError> {
    if !socket.exists() {
        return Ok(None);
    }
    let mut hello = Hello::here(PERSON.to_owned(), Settings::default())?;
    hello.env.clear();
    mark(&mut hello);
    match client::connect(socket, &hello, false, &[]).await {
        Ok(connected) => Ok(Some(connected)),
        // A socket file left by a daemon that died (SIGKILL): nobody listens.
        Err(e) => match e.kind() {
            ClientErrorKind::Unreachable { source, .. }
                if matches!(
                    source.kind(),
                    std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound
                ) =>
            {
                Ok(None)
            }
            _ => Err(e),
        },
    }
}
