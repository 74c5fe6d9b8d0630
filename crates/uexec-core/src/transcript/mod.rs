//! Transcripts on disk: every byte a session prints, not just the 1 MiB head and tail a call
//! returns, so a model (`read_output`) or a person can go back to what was cut.
//!
//! Layout, one directory per session under the root (0700; files 0600):
//! - `output.000000`, `output.000001`, …: the raw bytes, in segments of a quarter of the
//!   per-session cap; segment `k` holds session offsets `[k·S, (k+1)·S)`;
//! - `timing`: `<seconds since start> <bytes>` per write, merged within 10 ms, each line at
//!   the time of its last write (the format `scriptreplay` reads, what an asciicast export
//!   needs, and how `uexec logs --since` finds where a time falls);
//! - `meta`: the session id, command, working directory, whether it has a terminal and
//!   when it started (`started_unix`, and `started_unix_ms` to the millisecond).
//!
//! Rotation: a session keeps at most its cap (four segments); when a fifth starts, the
//! oldest is deleted and its range is reported as rotated away. Across sessions, when a new
//! transcript starts and the root holds more than the total cap, whole session directories
//! are deleted, least recently written first, sparing any written in the last minute.
//! Input is never recorded (what a terminal echoes is output; with echo off, a typed
//! password is not echoed, hence never written).
//!
//! A transcript never fails its session, and never says it holds more than it does. When a
//! write fails (a full disk: ENOSPC, EDQUOT, EFBIG, EIO, …):
//! 1. the writer counts the bytes that did reach the segment (a short write counts), and that
//!    offset is where the transcript stops, for good (a later write would leave a hole);
//! 2. the stop (offset and error) is published to readers at once, and appended to `meta`
//!    (`stopped_at=`, `stopped_because=`): best effort, but that append fits in the block
//!    `meta` already holds, so it usually succeeds on a full disk too;
//! 3. the writer thread ends: the pump's next send fails and it feeds the transcript no more,
//!    so the command neither waits for the disk nor has its output buffered;
//! 4. results and `read_output` pages say where it stopped and why, and which part of what a
//!    result left out is on disk ([`coverage`]).
//!
//! A transcript whose files cannot even be made stops at byte 0 the same way.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};
mod coverage;
mod export;
mod feed;
mod read;
#[cfg(test)]
mod tests;
mod writer;
pub use coverage::{coverage, OmittedCoverage};
pub use export::{offset_written_since, recording, Recording};
pub use feed::RESULT_WAITS_FOR_TRANSCRIPT_MS;
pub(crate) use feed::{Transcript, TranscriptFeed};
pub use read::{info_of, read_slice, TranscriptSlice};
use writer::enforce_total_cap_soon;
pub(crate) use writer::TranscriptWriter;

/// Segments a session keeps (its cap is split into this many).
const SEGMENTS: u64 = 4;

/// Timing lines closer than this are merged.
const TIMING_MERGE: Duration = Duration::from_millis(10);

/// Session directories written this recently are never deleted by the total cap.
const RECENT: Duration = Duration::from_secs(60);

/// uexec's state directory: `$XDG_STATE_HOME/uexec`, else `~/.local/state/uexec`.
pub fn state_dir() -> Option<PathBuf> {
    crate::fs::state_dir()
}

/// Where transcripts go and how much they may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptConfig {
    /// One directory per session goes here.
    pub root: PathBuf,
    /// Most bytes kept per session (the newest; older ones rotate away).
    pub session_max_bytes: u64,
    /// Most bytes of disk under `root`, all sessions together (see `footprint`).
    pub total_max_bytes: u64,
}

impl TranscriptConfig {
    /// Default cap per session: 256 MiB.
    pub const DEFAULT_SESSION_MAX_BYTES: u64 = 256 << 20;
    /// Default cap for all sessions: 2 GiB.
    pub const DEFAULT_TOTAL_MAX_BYTES: u64 = 2 << 30;

    /// `$XDG_STATE_HOME/uexec/sessions`, else `~/.local/state/uexec/sessions`.
    pub fn default_root() -> Option<PathBuf> {
        state_dir().map(|d| d.join("sessions"))
    }

    pub fn at(root: PathBuf) -> Self {
        Self {
            root,
            session_max_bytes: Self::DEFAULT_SESSION_MAX_BYTES,
            total_max_bytes: Self::DEFAULT_TOTAL_MAX_BYTES,
        }
    }

    /// What the transcripts take on disk now, all sessions together (as the total cap
    /// counts it: each session directory's files and the directory itself).
    pub fn disk_bytes(&self) -> u64 {
        std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| writer::footprint(&entry.path()).0)
            .sum()
    }

    fn segment_bytes(&self) -> u64 {
        (self.session_max_bytes / SEGMENTS).max(4096)
    }
}

/// What a session's transcript holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptInfo {
    pub dir: PathBuf,
    /// Bytes on disk so far (the session offset of the next byte written).
    pub total: u64,
    /// Bytes before this offset were rotated away.
    pub first_kept: u64,
    /// Where and why the transcript stopped, if a write failed: bytes from `stop.at`
    /// (= `total`) on are not on disk, and never will be.
    pub stop: Option<TranscriptStop>,
}

impl TranscriptInfo {
    /// The transcript of a session that printed nothing (nothing to read).
    pub fn empty(dir: PathBuf) -> Self {
        Self {
            dir,
            total: 0,
            first_kept: 0,
            stop: None,
        }
    }
}

/// Where a transcript stopped and why: the session printed on, the disk took no more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptStop {
    /// Session offset of the first byte not on disk.
    pub at: u64,
    /// The error, as the OS says it (`No space left on device`).
    pub error: String,
    /// Its files were deleted (by someone else than uexec, while it wrote them): none of
    /// it is on disk, the bytes before `at` no more than those after.
    pub deleted: bool,
}

impl TranscriptStop {
    fn new(at: u64, error: &io::Error) -> Self {
        // "No space left on device (os error 28)": the number says nothing to a reader.
        let mut error = error.to_string();
        if let Some(at) = error.rfind(" (os error ") {
            if error.ends_with(')') {
                error.truncate(at);
            }
        }
        Self {
            at,
            error,
            deleted: false,
        }
    }

    /// The files of a transcript `at` bytes long were deleted under it.
    pub(crate) fn deleted(at: u64) -> Self {
        Self {
            at,
            error: "its files were deleted".to_owned(),
            deleted: true,
        }
    }

    /// `the transcript stopped at byte 1048576: No space left on device`.
    pub fn text(&self) -> String {
        format!("the transcript stopped at byte {}: {}", self.at, self.error)
    }
}

/// A transcript decided but not yet on disk: [`Transcript::start`] makes its directory and
/// files in the background.
#[derive(Debug)]
pub(crate) struct TranscriptPlan {
    root: PathBuf,
    id: i32,
    /// Where it will be (another name is taken if this one exists by then).
    dir: PathBuf,
    meta: String,
    segment_bytes: u64,
    /// The session's start: timing lines count from here.
    started: Instant,
}

impl TranscriptPlan {
    /// Plans the transcript of session `id`: the root is checked (made 0700 if missing,
    /// refused if others may enter it) and the total cap enforced soon; nothing else is
    /// written.
    pub fn new(
        config: &TranscriptConfig,
        id: i32,
        command: &str,
        cwd: &Path,
        tty: bool,
    ) -> io::Result<Self> {
        private_dir(&config.root)?;
        enforce_total_cap_soon(&config.root, config.total_max_bytes);
        // Read together, so that a timing line's wall time is the start's plus its seconds;
        // rounded up, so that a write is never placed before the time it was made.
        let started = Instant::now();
        let since_epoch = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let started_unix = since_epoch.as_secs();
        let started_unix_ms = since_epoch.as_millis()
            + u128::from(!since_epoch.subsec_nanos().is_multiple_of(1_000_000));
        Ok(Self {
            root: config.root.clone(),
            id,
            dir: session_dir(&config.root, id),
            meta: format!(
                "session_id={id}\ntty={tty}\nstarted_unix={started_unix}\nstarted_unix_ms={started_unix_ms}\ncwd={}\ncommand={}\n",
                cwd.display().to_string().replace('\n', "\\n"),
                command.replace('\n', "\\n")
            ),
            segment_bytes: config.segment_bytes(),
            started,
        })
    }

    /// Makes the directory and its files.
    fn open(mut self) -> io::Result<TranscriptWriter> {
        loop {
            match fs::DirBuilder::new().mode(0o700).create(&self.dir) {
                Ok(()) => break,
                // Ids repeat across restarts; the random part makes this rare.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    self.dir = session_dir(&self.root, self.id);
                }
                Err(e) => return Err(e),
            }
        }
        // One write: a File is unbuffered, and `writeln!` writes piece by piece.
        let mut meta = private_file(&self.dir.join("meta"))?;
        meta.write_all(self.meta.as_bytes())?;
        Ok(TranscriptWriter {
            segment: private_file(&segment_path(&self.dir, 0))?,
            timing: private_file(&self.dir.join("timing"))?,
            meta,
            dir: self.dir,
            segment_bytes: self.segment_bytes,
            segment_index: 0,
            written: 0,
            first_kept: 0,
            started: self.started,
            timing_at: None,
            timing_pending: 0,
            pending_at: None,
            stop: None,
        })
    }
}

fn session_dir(root: &Path, id: i32) -> PathBuf {
    root.join(format!("{id}-{:06x}", rand::random::<u32>() & 0xff_ffff))
}

/// Segment `index` of a session directory.
pub(super) fn segment_path(dir: &Path, index: u64) -> PathBuf {
    dir.join(format!("output.{index:06}"))
}

pub(super) fn private_file(path: &Path) -> io::Result<File> {
    crate::fs::private_append_file(path)
}

/// Makes sure transcripts can go under `root` (created 0700 if missing; refused if another
/// user owns it or others may enter it: [`crate::fs::private_dir`]).
pub fn prepare_root(root: &Path) -> io::Result<()> {
    private_dir(root)
}

fn private_dir(dir: &Path) -> io::Result<()> {
    crate::fs::private_dir(dir)
}

/// Segment size for a configuration (what [`read_slice`] needs).
pub fn segment_bytes(config: &TranscriptConfig) -> u64 {
    config.segment_bytes()
}
