//! `uexec metrics`: the daemon's figures as Prometheus text, for a person's tools (a
//! node_exporter textfile, a cron job) — the daemon has no HTTP listener to scrape.
//!
//! 1. The client says a hello with `metrics` (a person's, without an environment), never
//!    starting a daemon: no socket, or nobody listening, is "none runs".
//! 2. The daemon answers it before it compares builds, as it answers a status.
//! 3. A reply, then the text ([`uexec_core::metrics::Metrics::render`]) with what is true
//!    now: every owner's sessions by state, their CPU time and memory, the transcripts'
//!    bytes on disk; then the daemon hangs up.

use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uexec_core::metrics::{Metrics, Now};
use uexec_core::transcript::TranscriptConfig;
use uexec_protocol::daemon::Reply;

use super::client::ClientError;
use super::status::ask_person;
use crate::stores::OwnerTable;

/// Longest text a client reads (the families are a fixed few).
const MAX_METRICS_BYTES: u64 = 1 << 20;

/// What is true now of every owner's sessions and of the transcripts.
pub(super) fn now(owners: &OwnerTable, transcripts: Option<&TranscriptConfig>) -> Now {
    let mut now = Now {
        transcript_bytes: transcripts.map(TranscriptConfig::disk_bytes),
        ..Now::default()
    };
    for (_, store) in owners.all() {
        for s in store.list_sessions() {
            match (s.exited, s.paused) {
                (true, _) => now.exited += 1,
                (false, true) => now.paused += 1,
                (false, false) => now.running += 1,
            }
            if s.exited {
                continue;
            }
            if let Some(usage) = s.usage {
                now.cpu_seconds += usage.cpu_seconds();
                if let Some(bytes) = usage.memory_bytes {
                    now.memory_bytes = Some(now.memory_bytes.unwrap_or(0) + bytes);
                }
            }
        }
    }
    now
}

/// Step 3 of the module docs, on the daemon's side.
pub(super) async fn answer(
    metrics: &Metrics,
    now: &Now,
    write: &mut (impl AsyncWriteExt + Unpin),
) -> std::io::Result<()> {
    let mut text = serde_json::to_vec(&Reply::ok()).map_err(std::io::Error::other)?;
    text.push(b'\n');
    text.extend(metrics.render(now).into_bytes());
    write.write_all(&text).await?;
    write.shutdown().await
}

/// The figures of the daemon at `socket`; `None` when none runs there. Starts nothing.
pub async fn ask(socket: &Path) -> Result<Option<String>, ClientError> {
    let Some(connected) = ask_person(socket, |hello| hello.metrics = true).await? else {
        return Ok(None);
    };
    let mut text = connected.after;
    connected
        .stream
        .take(MAX_METRICS_BYTES)
        .read_to_end(&mut text)
        .await?;
    Ok(Some(String::from_utf8_lossy(&text).into_owned()))
}
