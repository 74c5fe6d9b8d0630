//! Transcripts on disk: every byte a session prints, not just the 1 MiB head and tail a call
//! returns, so a model (`read_output`) or a person can go back to what was cut.
//!
//! Layout, one directory per session under the root (0700; files 0600):
//! - `output.000000`, `output.000001`, …: the raw bytes, in segments of a quarter of the
//!   per-session cap; segment `k` holds session offsets `[k·S, (k+1)·S)`;
//! - `timing`: `<seconds since start> <bytes>` per write, merged within 10 ms (the format
//!   `scriptreplay` reads, and what an asciicast export needs);
//! - `meta`: the session id, command, working directory and whether it has a terminal.
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
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

mod coverage;
mod feed;

pub use coverage::{coverage, OmittedCoverage};
pub use feed::RESULT_WAITS_FOR_TRANSCRIPT_MS;
pub(crate) use feed::{Transcript, TranscriptFeed};

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
        Self { at, error }
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
        let started_unix = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        Ok(Self {
            root: config.root.clone(),
            id,
            dir: session_dir(&config.root, id),
            meta: format!(
                "session_id={id}\ntty={tty}\nstarted_unix={started_unix}\ncwd={}\ncommand={}\n",
                cwd.display().to_string().replace('\n', "\\n"),
                command.replace('\n', "\\n")
            ),
            segment_bytes: config.segment_bytes(),
            started: Instant::now(),
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
            stop: None,
        })
    }
}

fn session_dir(root: &Path, id: i32) -> PathBuf {
    root.join(format!("{id}-{:06x}", rand::random::<u32>() & 0xff_ffff))
}

/// Appends a session's output to its transcript.
#[derive(Debug)]
pub(crate) struct TranscriptWriter {
    dir: PathBuf,
    segment_bytes: u64,
    segment: File,
    segment_index: u64,
    written: u64,
    first_kept: u64,
    timing: File,
    /// Kept open to say where the transcript stopped, if it does.
    meta: File,
    started: Instant,
    timing_at: Option<Instant>,
    timing_pending: u64,
    stop: Option<TranscriptStop>,
}

impl TranscriptWriter {
    #[cfg(test)]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn info(&self) -> TranscriptInfo {
        TranscriptInfo {
            dir: self.dir.clone(),
            total: self.written,
            first_kept: self.first_kept,
            stop: self.stop.clone(),
        }
    }

    /// Whether a write failed: nothing more is written.
    pub fn stopped(&self) -> bool {
        self.stop.is_some()
    }

    /// Appends `bytes`; a failure stops the transcript where the bytes on disk end (steps 1
    /// and 2 of the module docs).
    pub fn append(&mut self, bytes: &[u8]) {
        if self.stop.is_some() || bytes.is_empty() {
            return;
        }
        if let Err(e) = self.try_append(bytes) {
            let stop = TranscriptStop::new(self.written, &e);
            tracing::warn!(dir = %self.dir.display(), "transcript stopped at byte {}: {e}", stop.at);
            // The timing file accounts for every byte on disk, and `meta` says why the rest
            // is missing; both may fail on the same full disk, and neither is needed to read.
            let _ = self.flush_timing(Instant::now());
            let said = format!(
                "stopped_at={}\nstopped_because={}\n",
                stop.at,
                stop.error.replace('\n', " ")
            );
            if let Err(e) = self.meta.write_all(said.as_bytes()) {
                tracing::debug!("transcript meta: {e}");
            }
            self.stop = Some(stop);
        }
    }

    fn try_append(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        let now = Instant::now();
        while !bytes.is_empty() {
            let end = (self.segment_index + 1) * self.segment_bytes;
            if self.written == end {
                self.rotate()?;
                continue;
            }
            let room = usize::try_from(end - self.written).unwrap_or(usize::MAX);
            let take = room.min(bytes.len());
            // Not `write_all`: a short write before the error is on disk, and counts.
            let wrote = match self.segment.write(&bytes[..take]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.written += wrote as u64;
            self.timing_pending += wrote as u64;
            bytes = &bytes[wrote..];
        }
        if self
            .timing_at
            .is_none_or(|at| now.duration_since(at) >= TIMING_MERGE)
        {
            self.flush_timing(now)?;
        }
        Ok(())
    }

    fn flush_timing(&mut self, now: Instant) -> io::Result<()> {
        if self.timing_pending == 0 {
            return Ok(());
        }
        let secs = now.duration_since(self.started).as_secs_f64();
        writeln!(self.timing, "{secs:.6} {}", self.timing_pending)?;
        self.timing_pending = 0;
        self.timing_at = Some(now);
        Ok(())
    }

    /// Starts the next segment, deleting the oldest beyond the cap.
    fn rotate(&mut self) -> io::Result<()> {
        self.segment_index += 1;
        self.segment = private_file(&segment_path(&self.dir, self.segment_index))?;
        if self.segment_index >= SEGMENTS {
            let gone = self.segment_index - SEGMENTS;
            fs::remove_file(segment_path(&self.dir, gone))?;
            self.first_kept = (gone + 1) * self.segment_bytes;
        }
        Ok(())
    }

    /// Writes the last timing line (the session ended).
    pub fn finish(&mut self) {
        if self.stop.is_none() {
            if let Err(e) = self.flush_timing(Instant::now()) {
                tracing::debug!("transcript timing: {e}");
            }
        }
    }
}

fn segment_path(dir: &Path, index: u64) -> PathBuf {
    dir.join(format!("output.{index:06}"))
}

fn private_file(path: &Path) -> io::Result<File> {
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

/// Enforces the total cap in the background, at most once a minute per process: scanning
/// every session directory is not something a spawn should wait for.
fn enforce_total_cap_soon(root: &Path, max: u64) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let last = LAST.load(Ordering::Relaxed);
    if last != 0 && now.saturating_sub(last) < RECENT.as_secs() {
        return;
    }
    if LAST
        .compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    let root = root.to_path_buf();
    let spawned = std::thread::Builder::new()
        .name("uexec-transcript-cap".into())
        .spawn(move || enforce_total_cap(&root, max));
    if let Err(e) = spawned {
        tracing::debug!("transcript cap not enforced now: {e}");
    }
}

/// Deletes whole session directories, least recently written first, until the root holds at
/// most `max` bytes of disk; never one written in the last minute.
fn enforce_total_cap(root: &Path, max: u64) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    let mut dirs: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
    let mut total = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        let (size, newest) = footprint(&path);
        total += size;
        dirs.push((newest, size, path));
    }
    if total <= max {
        return;
    }
    dirs.sort();
    for (written, size, path) in dirs {
        if total <= max {
            break;
        }
        if written.elapsed().is_ok_and(|age| age < RECENT) {
            continue;
        }
        if fs::remove_dir_all(&path).is_ok() {
            total = total.saturating_sub(size);
        }
    }
}

/// What a session directory takes on disk, and when it was last written: each file and the
/// directory itself count the larger of their length and the blocks they hold (a session
/// that printed nothing holds a directory and a block for its `meta`, whatever its bytes).
fn footprint(dir: &Path) -> (u64, SystemTime) {
    use std::os::unix::fs::MetadataExt;
    let size_of = |meta: &fs::Metadata| meta.len().max(meta.blocks() * 512);
    let mut size = fs::symlink_metadata(dir).map_or(0, |m| size_of(&m));
    let mut newest = SystemTime::UNIX_EPOCH;
    for file in fs::read_dir(dir).into_iter().flatten().flatten() {
        if let Ok(meta) = file.metadata() {
            size += size_of(&meta);
            newest = newest.max(meta.modified().unwrap_or(SystemTime::UNIX_EPOCH));
        }
    }
    (size, newest)
}

/// A slice of a transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptSlice {
    /// Session offset of the first byte returned.
    pub offset: u64,
    pub bytes: Vec<u8>,
    /// What the transcript held when read.
    pub total: u64,
    pub first_kept: u64,
}

/// Reads up to `limit` bytes from session offset `offset` (moved up to the first byte still
/// kept); `total` and `first_kept` say what exists.
pub fn read_slice(
    info: &TranscriptInfo,
    segment_bytes: u64,
    offset: u64,
    limit: usize,
) -> io::Result<TranscriptSlice> {
    let start = offset.max(info.first_kept).min(info.total);
    let end = start.saturating_add(limit as u64).min(info.total);
    let mut bytes = Vec::with_capacity(usize::try_from(end - start).unwrap_or(0));
    let mut at = start;
    while at < end {
        let index = at / segment_bytes;
        let within = at % segment_bytes;
        let take = (segment_bytes - within).min(end - at);
        let mut file = open_to_read(&segment_path(&info.dir, index))?;
        file.seek(SeekFrom::Start(within))?;
        let got = file.take(take).read_to_end(&mut bytes).map(|n| n as u64)?;
        if got == 0 {
            break;
        }
        at += got;
    }
    Ok(TranscriptSlice {
        offset: start,
        bytes,
        total: info.total,
        first_kept: info.first_kept,
    })
}

/// What a transcript directory holds, from its files (a session that is gone).
pub fn info_of(dir: &Path, segment_bytes: u64) -> io::Result<TranscriptInfo> {
    let mut indexes: Vec<u64> = fs::read_dir(dir)?
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("output."))
                .and_then(|n| n.parse().ok())
        })
        .collect();
    indexes.sort_unstable();
    let (Some(&first), Some(&last)) = (indexes.first(), indexes.last()) else {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "no output segments",
        ));
    };
    let last_len = fs::symlink_metadata(segment_path(dir, last))?.len();
    Ok(TranscriptInfo {
        dir: dir.to_path_buf(),
        total: last * segment_bytes + last_len,
        first_kept: first * segment_bytes,
        stop: stop_in_meta(dir),
    })
}

/// Most bytes of `meta` read back (it holds one command line, then perhaps the stop).
const META_READ_MAX_BYTES: u64 = 1 << 20;

/// The stop `meta` records (step 2 of the module docs), if any: its last `stopped_at=`.
fn stop_in_meta(dir: &Path) -> Option<TranscriptStop> {
    let mut meta = Vec::new();
    open_to_read(&dir.join("meta"))
        .and_then(|f| f.take(META_READ_MAX_BYTES).read_to_end(&mut meta))
        .ok()?;
    let meta = String::from_utf8_lossy(&meta);
    let mut lines = meta.lines().rev();
    let error = lines.next()?.strip_prefix("stopped_because=")?.to_owned();
    let at = lines.next()?.strip_prefix("stopped_at=")?.parse().ok()?;
    Some(TranscriptStop { at, error })
}

/// Opens a transcript's file to read it, never through a symlink.
fn open_to_read(path: &Path) -> io::Result<File> {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Segment size for a configuration (what [`read_slice`] needs).
pub fn segment_bytes(config: &TranscriptConfig) -> u64 {
    config.segment_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &Path, session_max: u64) -> TranscriptConfig {
        TranscriptConfig {
            root: dir.to_path_buf(),
            session_max_bytes: session_max,
            total_max_bytes: u64::MAX,
        }
    }

    fn temp() -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("uexec-transcript-{:08x}", rand::random::<u32>()));
        fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn every_byte_is_kept_and_read_back_across_segments() {
        let root = temp().join("sessions");
        let cfg = config(&root, 4 * 4096);
        let mut w = TranscriptPlan::new(&cfg, 1000, "cmd", Path::new("/"), false)
            .and_then(TranscriptPlan::open)
            .expect("create");
        let data: Vec<u8> = (0..12_000u32).map(|i| (i % 251) as u8).collect();
        for chunk in data.chunks(1000) {
            w.append(chunk);
        }
        let info = w.info();
        assert_eq!((info.total, info.first_kept), (12_000, 0));
        let all = read_slice(&info, cfg.segment_bytes(), 0, 1 << 20).expect("read");
        assert_eq!(all.bytes, data);
        let mid = read_slice(&info, cfg.segment_bytes(), 4000, 200).expect("read");
        assert_eq!(mid.bytes, data[4000..4200]);
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(w.dir().join("output.000000"))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn the_oldest_segment_rotates_away_past_the_cap() {
        let root = temp().join("sessions");
        let cfg = config(&root, 4 * 4096);
        let mut w = TranscriptPlan::new(&cfg, 1000, "cmd", Path::new("/"), false)
            .and_then(TranscriptPlan::open)
            .expect("create");
        let data: Vec<u8> = (0..4 * 4096 + 10).map(|i| (i % 7) as u8).collect();
        w.append(&data);
        let info = w.info();
        assert_eq!(info.first_kept, 4096);
        assert!(!w.dir().join("output.000000").exists());
        let slice = read_slice(&info, cfg.segment_bytes(), 0, 100).expect("read");
        assert_eq!(slice.offset, 4096, "moved up to what is kept");
        assert_eq!(slice.bytes, data[4096..4196]);
    }

    #[test]
    fn the_total_cap_deletes_the_least_recently_written_sessions_but_not_recent_ones() {
        let root = temp();
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        for (name, age_hours, bytes) in [("old", 3, 3000), ("older", 5, 3000), ("new", 0, 3000)] {
            let dir = root.join(name);
            fs::create_dir_all(&dir).expect("dir");
            let file = File::create(dir.join("output.000000")).expect("file");
            file.set_len(bytes).expect("size");
            if age_hours > 0 {
                let when = hour_ago - Duration::from_secs(3600 * (age_hours - 1));
                file.set_modified(when).expect("mtime");
            }
        }
        // Room for all but the least recently written one.
        let all: u64 = ["old", "older", "new"]
            .iter()
            .map(|name| footprint(&root.join(name)).0)
            .sum();
        enforce_total_cap(&root, all - footprint(&root.join("older")).0);
        assert!(
            !root.join("older").exists(),
            "least recently written goes first"
        );
        assert!(root.join("old").exists() && root.join("new").exists());
        enforce_total_cap(&root, 10);
        assert!(!root.join("old").exists());
        assert!(
            root.join("new").exists(),
            "written within the minute: spared"
        );
    }

    /// Sessions that print nothing hold a directory and a `meta` file each: a few bytes of
    /// content, but a directory and a block of disk each. The cap counts what the disk
    /// holds, so that a long day of `true`s is pruned too.
    #[test]
    fn the_total_cap_counts_the_disk_that_silent_sessions_hold() {
        let root = temp();
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        for i in 0..40u64 {
            let dir = root.join(format!("s{i:02}"));
            fs::create_dir_all(&dir).expect("dir");
            for (name, content) in [
                ("meta", &b"session_id=1\n"[..]),
                ("output.000000", b""),
                ("timing", b""),
            ] {
                let mut file = File::create(dir.join(name)).expect("file");
                file.write_all(content).expect("write");
                file.set_modified(hour_ago - Duration::from_secs(i))
                    .expect("mtime");
            }
        }
        let content: u64 = 40 * 13;
        enforce_total_cap(&root, 64 << 10);
        let left = fs::read_dir(&root).expect("root").count();
        assert!(
            left < 40,
            "{content} bytes of content, but 40 directories on disk: some must go ({left} left)"
        );
        assert!(root.join("s00").exists(), "the most recently written stay");
    }

    /// `/dev/full` answers every write with ENOSPC, as a full disk does.
    #[test]
    fn a_failed_write_stops_the_transcript_where_the_disk_ends_and_meta_says_why() {
        let root = temp().join("sessions");
        let cfg = config(&root, 4 * 4096);
        let mut w = TranscriptPlan::new(&cfg, 1000, "cmd", Path::new("/"), false)
            .and_then(TranscriptPlan::open)
            .expect("create");
        w.append(&[b'a'; 5000]);
        w.segment = fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        w.append(&[b'b'; 100]);
        let stop = TranscriptStop {
            at: 5000,
            error: "No space left on device".into(),
        };
        assert_eq!(w.info().stop.as_ref(), Some(&stop));
        assert!(w.stopped());
        // Nothing after the stop is written, not even once the disk has room again.
        w.segment = private_file(&segment_path(w.dir(), 0)).expect("reopen");
        w.append(b"later");
        assert_eq!(w.info().total, 5000);
        // A reader of the directory alone (the session is gone) learns the same.
        let read = info_of(w.dir(), cfg.segment_bytes()).expect("info");
        assert_eq!((read.total, read.stop), (5000, Some(stop)));
        let timing = fs::read_to_string(w.dir().join("timing")).expect("timing");
        let timed: u64 = timing
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        assert_eq!(timed, 5000, "the timing accounts for every byte on disk");
    }

    #[test]
    fn a_stop_reads_as_the_os_says_it_without_the_number() {
        let stop = TranscriptStop::new(7, &io::Error::from_raw_os_error(libc::EDQUOT));
        assert_eq!(
            stop.text(),
            "the transcript stopped at byte 7: Disk quota exceeded"
        );
    }

    #[test]
    fn a_root_open_to_others_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let root = temp();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o777)).expect("chmod");
        let err = TranscriptPlan::new(&config(&root, 1 << 20), 1, "x", Path::new("/"), false)
            .expect_err("refused");
        assert!(err.to_string().contains("mode 0700"), "{err}");
    }
}
