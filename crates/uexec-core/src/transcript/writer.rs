//! The writer: one thread per transcript that appends what the pump hands it to the current
//! segment, rotates segments past the per-session cap, merges timing lines, and stops for
//! good, saying where and why, at the first failed write (see the room's docs). The total
//! cap across sessions is enforced here too, in the background.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use super::*;

/// Appends a session's output to its transcript.
#[derive(Debug)]
pub(crate) struct TranscriptWriter {
    pub(super) dir: PathBuf,
    pub(super) segment_bytes: u64,
    pub(super) segment: File,
    pub(super) segment_index: u64,
    pub(super) written: u64,
    pub(super) first_kept: u64,
    pub(super) timing: File,
    /// Kept open to say where the transcript stopped, if it does.
    pub(super) meta: File,
    pub(super) started: Instant,
    pub(super) timing_at: Option<Instant>,
    pub(super) timing_pending: u64,
    /// When the last of the pending bytes was written (a line says that time).
    pub(super) pending_at: Option<Instant>,
    pub(super) stop: Option<TranscriptStop>,
}

impl TranscriptWriter {
    #[cfg(test)]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What is on disk; a transcript whose files were deleted under it (its `meta` has no
    /// name left) has nothing, whatever it wrote.
    pub fn info(&self) -> TranscriptInfo {
        let stop = match &self.stop {
            None if self.deleted() => Some(TranscriptStop::deleted(self.written)),
            stop => stop.clone(),
        };
        TranscriptInfo {
            dir: self.dir.clone(),
            total: self.written,
            first_kept: self.first_kept,
            stop,
        }
    }

    /// Whether its files were deleted under it (an fstat of the open `meta`: no path is
    /// looked up).
    fn deleted(&self) -> bool {
        use std::os::unix::fs::MetadataExt as _;
        self.meta.metadata().is_ok_and(|m| m.nlink() == 0)
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
        // Deleted under it: writing on would fill the disk with files nobody can open
        // (their space comes back only when they are closed). An fstat, no path lookup.
        let written = match self.deleted() {
            true => Err(io::Error::other("its files were deleted")),
            false => self.try_append(bytes),
        };
        if let Err(e) = written {
            let stop = match self.deleted() {
                true => TranscriptStop::deleted(self.written),
                false => TranscriptStop::new(self.written, &e),
            };
            tracing::warn!(dir = %self.dir.display(), "transcript stopped at byte {}: {e}", stop.at);
            // The timing file accounts for every byte on disk, and `meta` says why the rest
            // is missing; both may fail on the same full disk, and neither is needed to read.
            let _ = self.flush_timing(self.pending_at.unwrap_or_else(Instant::now));
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
        // Bytes held for merging whose writes ended a while ago get their own line, at their
        // time: not this write's, which may come minutes later.
        if let Some(at) = self
            .pending_at
            .filter(|at| now.duration_since(*at) >= TIMING_MERGE)
        {
            self.flush_timing(at)?;
        }
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
            self.pending_at = Some(now);
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
        self.pending_at = None;
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

    /// Writes the last timing line (the session ended), at the time of its last write.
    pub fn finish(&mut self) {
        if self.stop.is_none() {
            let at = self.pending_at.unwrap_or_else(Instant::now);
            if let Err(e) = self.flush_timing(at) {
                tracing::debug!("transcript timing: {e}");
            }
        }
    }
}

/// Enforces the total cap in the background, at most once a minute per process: scanning
/// every session directory is not something a spawn should wait for.
pub(super) fn enforce_total_cap_soon(root: &Path, max: u64) {
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
pub(super) fn enforce_total_cap(root: &Path, max: u64) {
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
pub(super) fn footprint(dir: &Path) -> (u64, SystemTime) {
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
