//! Reading a transcript back: a slice of the session's bytes from any offset still on disk,
//! what the directory holds (`info_of`), and the stop `meta` recorded.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use super::*;

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
    Some(TranscriptStop {
        at,
        error,
        deleted: false,
    })
}

/// Opens a transcript's file to read it, never through a symlink.
fn open_to_read(path: &Path) -> io::Result<File> {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}
