//! `uexec logs ID`: a session's transcript, from the start, its last lines or what it
//! printed since a time (`--since`, found in the transcript's timing), once or followed
//! until the session ends (as `tail -f`), as raw output, JSON pages or an asciicast
//! recording.
//!
//! Following:
//!
//! 1. read pages of `read_output` from the offset reached, printing each;
//! 2. once caught up and quiet for a while, ask `list_sessions` whether it still runs;
//! 3. when it no longer does, read one last page (what it printed before the exit) and stop.
//!
//! The asciicast export reads the transcript directory (`uexec_core::transcript::recording`)
//! and only writes it out as JSON lines here.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{json, Value};

use super::common::{call, parse_session_ref, Failure, SessionRef, EXIT_UEXEC};
use super::conn::{Conn, Target};

/// The most one `read_output` page carries, in bytes.
const PAGE_LIMIT_BYTES: u64 = 262_144;
/// How long a followed session stays quiet before `logs -f` asks whether it still runs, in ms.
const QUIET_BEFORE_CHECK_MS: u64 = 500;
/// How often `logs -f` looks for more output once caught up, in ms.
const FOLLOW_INTERVAL_MS: u64 = 100;

/// `uexec logs`.
#[derive(Debug, Clone, clap::Args)]
pub struct LogsArgs {
    /// The session (running, or ended: `uexec ls -a` lists them): its id, or its name.
    #[arg(value_name = "SESSION", value_parser = parse_session_ref)]
    pub id: SessionRef,
    /// Keep printing what it prints until it exits.
    #[arg(short, long)]
    pub follow: bool,
    /// Only the last N lines (1 to 10000), as `tail -n` prints them.
    #[arg(short = 'n', long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..=10_000))]
    pub tail: Option<i64>,
    /// Only what it printed since then: a duration ago (90s, 10m, 2h, 1d, 1h30m) or an RFC
    /// 3339 time (2026-12-03T11:35:00Z, or with an offset: +01:00). Writes are timed to
    /// within 10 ms.
    #[arg(long, value_name = "DURATION|TIME", value_parser = parse_since, conflicts_with = "tail")]
    pub since: Option<Since>,
    /// Print pages as JSON lines (offset, text) instead of raw output.
    #[arg(long)]
    pub json: bool,
    /// Print the transcript as an asciicast v2 recording (with its timing), for players
    /// such as `asciinema play`.
    #[arg(long, conflicts_with_all = ["follow", "tail", "json", "since"])]
    pub asciicast: bool,
}

/// `--since`: how long ago, or when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    Ago(Duration),
    At(std::time::SystemTime),
}

impl Since {
    pub(super) fn time(self) -> std::time::SystemTime {
        match self {
            Since::At(t) => t,
            Since::Ago(d) => std::time::SystemTime::now()
                .checked_sub(d)
                .unwrap_or(std::time::UNIX_EPOCH),
        }
    }
}

/// `--since`: a duration of numbers with units (`1h30m`, `90s`, `2d`), or an RFC 3339 time.
pub(super) fn parse_since(s: &str) -> Result<Since, String> {
    if s.contains(['-', ':']) {
        return uexec_core::rfc3339::parse(s).map(Since::At);
    }
    let bad = || {
        format!("{s:?} is neither a duration (90s, 10m, 2h, 1d, 1h30m) nor an RFC 3339 time (2026-12-03T11:35:00Z)")
    };
    let mut secs: u64 = 0;
    let mut digits = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3_600,
            'd' => 86_400,
            _ => return Err(bad()),
        };
        let n: u64 = digits.parse().map_err(|_| bad())?;
        secs = n
            .checked_mul(unit)
            .and_then(|v| secs.checked_add(v))
            .ok_or_else(bad)?;
        digits.clear();
    }
    if s.is_empty() || !digits.is_empty() {
        return Err(bad());
    }
    Ok(Since::Ago(Duration::from_secs(secs)))
}

pub async fn logs(target: &Target, args: LogsArgs) -> Result<ExitCode, Failure> {
    let mut conn = Conn::open(target, Vec::new())?;
    if !conn.daemon_may_run() {
        return Err(args.id.no_daemon());
    }
    let id = args.id.resolve(&mut conn).await?;
    if args.asciicast {
        let page = call(
            &mut conn,
            "read_output",
            json!({"session_id": id, "limit": 1}),
        )
        .await?;
        let dir = page.structured["transcript"].as_str().unwrap_or_default();
        let cast = asciicast(std::path::Path::new(dir)).map_err(|e| Failure {
            code: EXIT_UEXEC,
            message: format!("cannot read the transcript {dir}: {e}"),
        })?;
        std::io::stdout()
            .write_all(&cast)
            .map_err(anyhow::Error::from)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut offset = match (args.tail, args.since) {
        (_, Some(since)) => start_since(&mut conn, id, since.time()).await?,
        (Some(n), None) => {
            let page = call(
                &mut conn,
                "read_output",
                json!({"session_id": id, "tail_lines": n}),
            )
            .await?;
            emit_page(&page.structured, args.json);
            page.structured["next_offset"].as_u64().unwrap_or(0)
        }
        (None, None) => 0,
    };
    let mut quiet_since = tokio::time::Instant::now();
    loop {
        let page = call(
            &mut conn,
            "read_output",
            json!({"session_id": id, "offset": offset, "limit": PAGE_LIMIT_BYTES}),
        )
        .await?;
        let next = page.structured["next_offset"].as_u64().unwrap_or(offset);
        if next > offset {
            emit_page(&page.structured, args.json);
            let _ = std::io::stdout().flush();
            offset = next;
            quiet_since = tokio::time::Instant::now();
            continue;
        }
        if !args.follow {
            return Ok(ExitCode::SUCCESS);
        }
        // Caught up: stop once the session is over, else look again shortly (as `tail -f`).
        if quiet_since.elapsed() >= Duration::from_millis(QUIET_BEFORE_CHECK_MS) {
            let listed = call(&mut conn, "list_sessions", json!({})).await?;
            let alive = listed.structured["sessions"].as_array().is_some_and(|all| {
                all.iter().any(|s| {
                    s["session_id"].as_i64() == Some(i64::from(id)) && s["state"] != "exited"
                })
            });
            if !alive {
                // One last read: what it printed before the exit.
                let last = call(
                    &mut conn,
                    "read_output",
                    json!({"session_id": id, "offset": offset, "limit": PAGE_LIMIT_BYTES}),
                )
                .await?;
                if last.structured["next_offset"].as_u64().unwrap_or(offset) > offset {
                    emit_page(&last.structured, args.json);
                }
                return Ok(ExitCode::SUCCESS);
            }
            quiet_since = tokio::time::Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(FOLLOW_INTERVAL_MS)).await;
    }
}

/// The session offset of what session `id` printed since `since`, from its transcript's
/// timing (core reads the layout).
async fn start_since(
    conn: &mut Conn,
    id: i32,
    since: std::time::SystemTime,
) -> Result<u64, Failure> {
    let page = call(conn, "read_output", json!({"session_id": id, "limit": 1})).await?;
    let Some(dir) = page.structured["transcript"]
        .as_str()
        .filter(|dir| std::path::Path::new(dir).exists())
    else {
        // It printed nothing yet: everything it prints is since.
        return Ok(0);
    };
    uexec_core::transcript::offset_written_since(std::path::Path::new(dir), since).map_err(|e| {
        Failure {
            code: EXIT_UEXEC,
            message: format!("cannot read the transcript {dir}: {e}"),
        }
    })
}

/// One page as asked: its text as it was printed, or a JSON line with its offsets.
fn emit_page(page: &Value, json: bool) {
    if json {
        println!(
            "{}",
            json!({"offset": page["offset"], "next_offset": page["next_offset"], "text": page["text"]})
        );
    } else {
        print!("{}", page["text"].as_str().unwrap_or_default());
    }
}

/// A transcript directory as an asciicast v2 recording: a header, then one output event per
/// write (the recording is read by core, which knows the transcript's layout).
fn asciicast(dir: &std::path::Path) -> std::io::Result<Vec<u8>> {
    let recording = uexec_core::transcript::recording(dir)?;
    let mut out = serde_json::to_vec(&json!({
        "version": 2,
        "width": 80,
        "height": 24,
        "timestamp": recording.started_unix,
        "title": recording.command,
    }))
    .map_err(std::io::Error::other)?;
    out.push(b'\n');
    for (t, text) in recording.events {
        out.extend(serde_json::to_vec(&json!([t, "o", text])).map_err(std::io::Error::other)?);
        out.push(b'\n');
    }
    Ok(out)
}
