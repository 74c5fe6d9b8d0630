//! `read_output`: a page of a session's transcript, live or gone, by id or by the path a
//! result named, within what the caller may reach ([`Reach`]); paging from an offset, the
//! tail, or the lines matching a pattern, each bounded in bytes read and returned.

use std::path::Path;
use std::sync::Arc;

use super::{FinishedTranscript, SessionStore, FINISHED_TRANSCRIPTS};
use crate::error::ExecError;
use crate::events::lock;
use crate::request::{OutputPage, ReadOutputRequest};
use crate::session::Session;
use crate::transcript::{self, TranscriptInfo};

/// Most bytes one `read_output` page returns, and the default.
pub const READ_OUTPUT_MAX_BYTES: u64 = 256 * 1024;

pub const READ_OUTPUT_DEFAULT_BYTES: u64 = 16 * 1024;

/// Most bytes one `grep` scans.
const GREP_SCAN_MAX_BYTES: u64 = 64 << 20;

/// Bytes read from the end for `tail_lines`.
const TAIL_SCAN_BYTES: usize = 1 << 20;

impl SessionStore {
    /// A page of a session's transcript (`read_output`), live or gone (the last
    /// [`FINISHED_TRANSCRIPTS`] gone sessions, until the transcript caps remove them), by
    /// session id or by the path a result named: this store's sessions only.
    pub fn read_output(&self, req: ReadOutputRequest) -> Result<OutputPage, ExecError> {
        self.read_output_within(req, Reach::Own)
    }

    /// [`Self::read_output`] for a person at the daemon: by path, also a session directory
    /// that no store remembers (an earlier daemon's), if it lies right under the root.
    pub fn read_any_output(&self, req: ReadOutputRequest) -> Result<OutputPage, ExecError> {
        self.read_output_within(req, Reach::AnyUnderRoot)
    }

    /// Whether `path` is the transcript of one of this store's sessions (live, or among
    /// the gone ones it remembers).
    pub fn owns_transcript(&self, path: &Path) -> bool {
        self.find_transcript(path).is_some()
    }

    fn read_output_within(
        &self,
        req: ReadOutputRequest,
        reach: Reach,
    ) -> Result<OutputPage, ExecError> {
        let Some(config) = self.config.transcripts.as_ref() else {
            return Err(ExecError::invalid(
                "session_id",
                "this server keeps no transcripts (started with --no-transcripts)",
            ));
        };
        let segment = transcript::segment_bytes(config);
        let (id, info) = match (req.session_id, &req.transcript) {
            (Some(id), None) => (Some(id), self.transcript_of(id, segment)?),
            (None, Some(path)) => match self.find_transcript(path) {
                Some((id, found)) => (Some(id), found.info(id, segment)?),
                None if reach == Reach::AnyUnderRoot => {
                    (None, transcript_under_root(&config.root, path, segment)?)
                }
                None => return Err(unknown_transcript(path)),
            },
            _ => {
                return Err(ExecError::invalid(
                    "session_id",
                    "give session_id or transcript (one of them)",
                ))
            }
        };
        read_page(&info, segment, id, &req)
    }

    fn transcript_of(&self, id: i32, segment: u64) -> Result<TranscriptInfo, ExecError> {
        let found = {
            let inner = lock(&self.inner);
            match inner.sessions.get(&id) {
                Some(e) => Some(FoundTranscript::Live(e.session.clone())),
                None => inner
                    .finished
                    .iter()
                    .rev()
                    .find(|(fid, _)| *fid == id)
                    .map(|(_, gone)| FoundTranscript::Gone(gone.clone())),
            }
        };
        found
            .ok_or(ExecError::UnknownProcess(id))?
            .info(id, segment)
    }

    /// This store's session whose transcript is at `path`: the same directory as one it
    /// made, written the same way or resolving to it. Only a directory this store made is
    /// ever read, whatever `path` names.
    fn find_transcript(&self, path: &Path) -> Option<(i32, FoundTranscript)> {
        let candidates: Vec<(i32, FoundTranscript)> = {
            let inner = lock(&self.inner);
            let live = inner
                .sessions
                .iter()
                .map(|(id, e)| (*id, FoundTranscript::Live(e.session.clone())));
            let gone = inner
                .finished
                .iter()
                .rev()
                .map(|(id, gone)| (*id, FoundTranscript::Gone(gone.clone())));
            live.chain(gone).collect()
        };
        let dirs: Vec<(i32, std::path::PathBuf, FoundTranscript)> = candidates
            .into_iter()
            .filter_map(|(id, found)| Some((id, found.dir()?, found)))
            .collect();
        if let Some(i) = dirs
            .iter()
            .position(|(_, dir, _)| dir.components().eq(path.components()))
        {
            let (id, _, found) = dirs.into_iter().nth(i)?;
            return Some((id, found));
        }
        // Another spelling of the same directory (relative, through a symlinked parent).
        let real = path.canonicalize().ok()?;
        dirs.into_iter()
            .filter(|(_, dir, _)| dir.file_name() == real.file_name())
            .find(|(_, dir, _)| dir.canonicalize().is_ok_and(|d| d == real))
            .map(|(id, _, found)| (id, found))
    }
}

/// How far `read_output {transcript}` may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// This store's sessions (an agent, an HTTP token's client).
    Own,
    /// Also any session directory right under the root (a person at the daemon).
    AnyUnderRoot,
}

/// A session's transcript as a store knows it.
enum FoundTranscript {
    Live(Arc<Session>),
    Gone(FinishedTranscript),
}

impl FoundTranscript {
    /// Where it is, once it is on disk.
    fn dir(&self) -> Option<std::path::PathBuf> {
        match self {
            Self::Live(session) => session.transcript().map(|t| t.dir),
            Self::Gone(gone) => Some(gone.dir.clone()),
        }
    }

    fn info(self, id: i32, segment: u64) -> Result<TranscriptInfo, ExecError> {
        match self {
            Self::Live(session) => session.transcript().ok_or(ExecError::UnknownProcess(id)),
            Self::Gone(gone) if !gone.written => Ok(TranscriptInfo {
                stop: gone.stop,
                ..TranscriptInfo::empty(gone.dir)
            }),
            Self::Gone(gone) => {
                let mut info = transcript::info_of(&gone.dir, segment).map_err(|e| {
                    ExecError::invalid(
                        "session_id",
                        format!("session {id}'s transcript is gone: {e}"),
                    )
                })?;
                // What the writer knew beats what `meta` could hold on a full disk.
                if gone.stop.is_some() {
                    info.stop = gone.stop;
                }
                Ok(info)
            }
        }
    }
}

/// The refusal for a transcript path that is not one of the caller's sessions: the same
/// for every other path (another client's, made up, outside the root), so it tells nothing.
fn unknown_transcript(path: &Path) -> ExecError {
    ExecError::invalid(
        "transcript",
        format!(
            "unknown transcript {}: not one of this client's sessions (running, or among the last {FINISHED_TRANSCRIPTS} that ended)",
            path.display()
        ),
    )
}

/// The session directory at `path` for a person: it must resolve (symlinks and `..`
/// followed) to a directory right under the root, and be a private directory itself (not a
/// symlink); it is then read as the root's own entry of that name.
fn transcript_under_root(
    root: &Path,
    path: &Path,
    segment: u64,
) -> Result<TranscriptInfo, ExecError> {
    let refuse = || unknown_transcript(path);
    let real = path.canonicalize().map_err(|_| refuse())?;
    let real_root = root.canonicalize().map_err(|_| refuse())?;
    let name = real
        .file_name()
        .filter(|_| real.parent() == Some(real_root.as_path()))
        .ok_or_else(refuse)?;
    let dir = root.join(name);
    crate::fs::check_private_dir(&dir).map_err(|_| refuse())?;
    transcript::info_of(&dir, segment)
        .map_err(|e| ExecError::invalid("transcript", format!("{}: {e}", dir.display())))
}

fn read_page(
    info: &TranscriptInfo,
    segment: u64,
    id: Option<i32>,
    req: &ReadOutputRequest,
) -> Result<OutputPage, ExecError> {
    let io = |e: std::io::Error| {
        ExecError::invalid(
            "transcript",
            format!("reading {} failed: {e}", info.dir.display()),
        )
    };
    let limit = match req.limit {
        None => READ_OUTPUT_DEFAULT_BYTES,
        Some(n) if (1..=READ_OUTPUT_MAX_BYTES as i64).contains(&n) => n as u64,
        Some(n) => {
            return Err(ExecError::invalid(
                "limit",
                format!("{n} is out of range (1..={READ_OUTPUT_MAX_BYTES})"),
            ))
        }
    };
    let offset = match req.offset {
        None => info.first_kept,
        Some(n) if n >= 0 => n as u64,
        Some(n) => {
            return Err(ExecError::invalid(
                "offset",
                format!("must not be negative (got {n})"),
            ))
        }
    };
    // Never through a symlink, never another user's directory.
    if info.total > 0 {
        crate::fs::check_private_dir(&info.dir)
            .map_err(|e| ExecError::invalid("transcript", e.to_string()))?;
    }
    let page = |offset: u64, next: u64, text: String, matches: Option<u64>| OutputPage {
        session_id: id,
        transcript: info.dir.clone(),
        offset,
        next_offset: next,
        total: info.total,
        first_kept: info.first_kept,
        stop: info.stop.clone(),
        text,
        matches,
    };
    if let Some(n) = req.tail_lines {
        if req.grep.is_some() || req.offset.is_some() {
            return Err(ExecError::invalid(
                "tail_lines",
                "give tail_lines alone, without offset or grep",
            ));
        }
        if !(1..=10_000).contains(&n) {
            return Err(ExecError::invalid(
                "tail_lines",
                format!("{n} is out of range (1..=10000)"),
            ));
        }
        let from = info.total.saturating_sub(TAIL_SCAN_BYTES as u64);
        let slice = transcript::read_slice(info, segment, from, TAIL_SCAN_BYTES).map_err(io)?;
        let bytes = &slice.bytes;
        // The last n lines: a trailing newline ends the last line, it does not start one.
        let body_end = bytes.len() - usize::from(bytes.last() == Some(&b'\n'));
        let mut start = body_end;
        let mut lines = 0;
        while start > 0 {
            if bytes[start - 1] == b'\n' {
                lines += 1;
                if lines == n {
                    break;
                }
            }
            start -= 1;
        }
        let mut text = &bytes[start..];
        if text.len() as u64 > limit {
            text = &text[text.len() - limit as usize..];
        }
        let at = slice.offset + (bytes.len() - text.len()) as u64;
        return Ok(page(
            at,
            slice.offset + bytes.len() as u64,
            String::from_utf8_lossy(text).into_owned(),
            None,
        ));
    }
    if let Some(pattern) = &req.grep {
        let regex = regex::bytes::RegexBuilder::new(pattern)
            .multi_line(true)
            .crlf(true)
            .size_limit(crate::output::until::PATTERN_SIZE_LIMIT)
            .build()
            .map_err(|e| ExecError::invalid("grep", format!("not a valid regex: {e}")))?;
        let mut out = String::new();
        let mut matches = 0;
        let mut at = offset.max(info.first_kept);
        let stop = at.saturating_add(GREP_SCAN_MAX_BYTES).min(info.total);
        let start = at;
        let mut carry: Vec<u8> = Vec::new();
        let mut carry_at = at;
        while at < stop && (out.len() as u64) < limit {
            let slice = transcript::read_slice(info, segment, at, 1 << 20).map_err(io)?;
            if slice.bytes.is_empty() {
                break;
            }
            at = slice.offset + slice.bytes.len() as u64;
            carry.extend_from_slice(&slice.bytes);
            // Whole lines only; the unfinished last one waits for the next block.
            let whole = match carry.iter().rposition(|&b| b == b'\n') {
                Some(p) => p + 1,
                None if at >= stop || carry.len() >= 1 << 20 => carry.len(),
                None => continue,
            };
            let mut line_at = carry_at;
            for line in carry[..whole].split_inclusive(|&b| b == b'\n') {
                if regex.is_match(line) && (out.len() as u64) < limit {
                    matches += 1;
                    out.push_str(&format!("{line_at}: {}", String::from_utf8_lossy(line)));
                    if !out.ends_with('\n') {
                        out.push('\n');
                    }
                }
                line_at += line.len() as u64;
            }
            carry.drain(..whole);
            carry_at = line_at;
        }
        let next = carry_at;
        return Ok(page(start, next, out, Some(matches)));
    }
    let slice = transcript::read_slice(info, segment, offset, limit as usize).map_err(io)?;
    let mut bytes = slice.bytes;
    // End on a character boundary; the rest starts the next page.
    let keep = bytes.len() - crate::utf8::incomplete_suffix_len(&bytes);
    if keep > 0 {
        bytes.truncate(keep);
    }
    let next = slice.offset + bytes.len() as u64;
    Ok(page(
        slice.offset,
        next,
        String::from_utf8_lossy(&bytes).into_owned(),
        None,
    ))
}
