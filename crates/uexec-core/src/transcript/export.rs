//! A transcript as a recording a player replays (`uexec logs --asciicast`): what was printed
//! and when, from the segments and the `timing` file, beside the writer that lays them out.
//!
//! In order:
//! 1. the segments still on disk, oldest first: all full but the last, so the first one's
//!    length (unless it is the only one) is the segment size, and the bytes before it
//!    rotated away;
//! 2. each timing line `<seconds> <bytes>` is one event: the bytes it covers that are still
//!    kept (a line wholly rotated away is skipped), with a character split between two
//!    writes carried whole into the next event.
//!
//! It reads the whole kept output into memory: at most the per-session cap.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::utf8::incomplete_suffix_len;

/// A session's output as timed events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recording {
    /// When the session started (`meta`'s `started_unix`; 0 when unknown).
    pub started_unix: u64,
    /// The command line (`meta`'s `command`).
    pub command: String,
    /// `(seconds since the start, text)` per write, in order.
    pub events: Vec<(f64, String)>,
}

/// A `meta` field of the transcript in `dir` (empty when absent).
fn meta_fields(dir: &Path) -> impl Fn(&str) -> String {
    let meta = std::fs::read_to_string(dir.join("meta")).unwrap_or_default();
    move |name: &str| {
        meta.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_default()
            .to_owned()
    }
}

/// The `timing` lines of the transcript in `dir`: (seconds since the start, bytes).
fn timing_lines(dir: &Path) -> Vec<(f64, u64)> {
    let timing = std::fs::read_to_string(dir.join("timing")).unwrap_or_default();
    timing
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            Some((words.next()?.parse().ok()?, words.next()?.parse().ok()?))
        })
        .collect()
}

/// The session offset of the first byte the session in `dir` printed at or after `since`
/// (a line of writes merged within 10 ms counts from its last write): what
/// `uexec logs --since` starts at. The bytes not in `timing` yet were printed last.
pub fn offset_written_since(dir: &Path, since: SystemTime) -> std::io::Result<u64> {
    let field = meta_fields(dir);
    let started = match field("started_unix_ms").parse::<u64>() {
        Ok(ms) => UNIX_EPOCH + Duration::from_millis(ms),
        Err(_) => match field("started_unix").parse::<u64>() {
            Ok(secs) => UNIX_EPOCH + Duration::from_secs(secs),
            Err(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "the transcript's meta says no start time",
                ))
            }
        },
    };
    let Ok(after_start) = since.duration_since(started) else {
        return Ok(0);
    };
    let cutoff = after_start.as_secs_f64();
    Ok(timing_lines(dir)
        .into_iter()
        .take_while(|(t, _)| *t < cutoff)
        .map(|(_, n)| n)
        .sum())
}

/// The recording of the transcript in `dir`.
pub fn recording(dir: &Path) -> std::io::Result<Recording> {
    let field = meta_fields(dir);
    let mut segments: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let index = name.strip_prefix("output.")?.parse().ok()?;
            Some((index, e.path()))
        })
        .collect();
    segments.sort();
    let segment_len = segments
        .first()
        .map(|(_, p)| std::fs::metadata(p).map(|m| m.len()))
        .transpose()?
        .unwrap_or(0);
    let first_index = segments.first().map_or(0, |(i, _)| *i);
    // Segments are all full but the last: the first kept one's length is the segment size
    // unless it is also the last.
    let first_kept = if segments.len() > 1 {
        first_index * segment_len
    } else {
        0
    };
    let mut data = Vec::new();
    for (_, path) in &segments {
        data.extend(std::fs::read(path)?);
    }
    let mut recording = Recording {
        started_unix: field("started_unix").parse::<u64>().unwrap_or(0),
        command: field("command"),
        events: Vec::new(),
    };
    let mut at = 0u64;
    let mut carry: Vec<u8> = Vec::new();
    for (t, n) in timing_lines(dir) {
        let (start, end) = (at, at + n);
        at = end;
        if end <= first_kept {
            continue;
        }
        let from = usize::try_from(start.max(first_kept) - first_kept).unwrap_or(usize::MAX);
        let to = usize::try_from(end - first_kept)
            .unwrap_or(usize::MAX)
            .min(data.len());
        if from >= to {
            continue;
        }
        carry.extend_from_slice(&data[from..to]);
        let whole = carry.len() - incomplete_suffix_len(&carry);
        let text = String::from_utf8_lossy(&carry[..whole]).into_owned();
        carry.drain(..whole);
        recording.events.push((t, text));
    }
    Ok(recording)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "uexec-recording-{name}-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir
    }

    #[test]
    fn each_write_is_an_event_and_a_split_character_is_kept_whole() {
        let d = dir("split");
        std::fs::write(
            d.join("meta"),
            "id=1\ncommand=echo é\nstarted_unix=1700000000\n",
        )
        .expect("meta");
        // "é" is 0xC3 0xA9: the first write ends between its two bytes.
        std::fs::write(d.join("output.000000"), b"a\xC3\xA9b").expect("segment");
        std::fs::write(d.join("timing"), "0.5 2\n1.25 2\n").expect("timing");
        let r = recording(&d).expect("recording");
        assert_eq!(r.started_unix, 1_700_000_000);
        assert_eq!(r.command, "echo é");
        assert_eq!(r.events, [(0.5, "a".to_owned()), (1.25, "éb".to_owned())]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_offset_since_a_time_counts_the_writes_before_it() {
        let d = dir("since");
        std::fs::write(
            d.join("meta"),
            "started_unix=1700000000\nstarted_unix_ms=1700000000250\n",
        )
        .expect("meta");
        std::fs::write(d.join("timing"), "0.5 2\n1.25 3\n60.0 4\n").expect("timing");
        let at = |ms: u64| UNIX_EPOCH + Duration::from_millis(1_700_000_000_000 + ms);
        for (ms, offset) in [
            (0, 0),
            (700, 0),
            (760, 2),
            (1_500, 2),
            (1_510, 5),
            (70_000, 9),
        ] {
            assert_eq!(
                offset_written_since(&d, at(ms)).expect("offset"),
                offset,
                "{ms}"
            );
        }
        // Before the start, and with only the second of the start known.
        assert_eq!(offset_written_since(&d, UNIX_EPOCH).expect("offset"), 0);
        std::fs::write(d.join("meta"), "started_unix=1700000000\n").expect("meta");
        assert_eq!(offset_written_since(&d, at(600)).expect("offset"), 2);
        std::fs::write(d.join("meta"), "command=x\n").expect("meta");
        assert!(offset_written_since(&d, at(600)).is_err());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn writes_that_rotated_away_are_left_out() {
        let d = dir("rotated");
        // Segments of 4 bytes; segment 0 rotated away, 1 and 2 kept (offsets 4..10).
        std::fs::write(d.join("output.000001"), b"efgh").expect("segment 1");
        std::fs::write(d.join("output.000002"), b"ij").expect("segment 2");
        std::fs::write(d.join("timing"), "0.1 3\n0.2 3\n0.3 4\n").expect("timing");
        let r = recording(&d).expect("recording");
        // Bytes 0..3 are gone; 3..6 is kept from 4; 6..10 whole.
        assert_eq!(r.events, [(0.2, "ef".to_owned()), (0.3, "ghij".to_owned())]);
        let _ = std::fs::remove_dir_all(&d);
    }
}
