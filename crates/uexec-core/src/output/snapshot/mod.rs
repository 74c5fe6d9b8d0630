//! What one call hands back: the snapshot (SPEC §4), as text for a model and as data.
//!
//! The body is built in three steps:
//! 1. decode the drained bytes lossily (head and tail together when nothing was omitted;
//!    otherwise each side on its own, with `[… N bytes omitted …]` at the cut);
//! 2. count: `len` = decoded bytes + omitted bytes, `original_token_count = ceil(len / 4)`;
//! 3. truncate when `len` exceeds the budget `B = max_output_tokens * 4`: keep the first
//!    `B/2` and last `B - B/2` bytes of the text, cut on UTF-8 boundaries, and say how many
//!    tokens fell out;
//! 4. locate what the body left out in what the command printed, and count its lines
//!    ([`Omitted`]): Codex's warning counts the lines of the text it kept, uexec's dialect
//!    every line printed ([`Snapshot::annotated_output`]).

use std::borrow::Cow;
use std::time::Duration;

use crate::limits::approx_tokens;
use crate::output::buffer::Drained;
use crate::output::omitted::Layout;
pub use crate::output::omitted::Omitted;
use crate::output::until::{Match, Reason};
use crate::output::Hygiene;
use crate::utf8::{boundary_at_or_after, incomplete_suffix_len};

/// One observation of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Six lowercase hex digits naming this chunk of output.
    pub chunk_id: String,
    /// How long the call watched: from the spawn for a first call, its window for a poll.
    pub wall_time: Duration,
    /// Running with an id to poll, or exited (it is then gone from the store) with its code.
    pub status: Status,
    /// `ceil(bytes / 4)` of everything this call collected, including omitted bytes.
    pub original_token_count: u64,
    /// The body, possibly truncated.
    pub output: String,
    /// Why the call returned.
    pub reason: Reason,
    /// What the call's `until.pattern` matched.
    pub matched: Option<Match>,
    /// The hard timeout (`timeout_ms`) killed the command after this many ms.
    pub timed_out_ms: Option<u64>,
    /// A PTY session waits for input with echo off (a password prompt).
    pub awaiting_secret: bool,
    /// A running pipe session that has printed nothing at all yet (it may hold its output
    /// back: see `to_text_annotated`).
    pub silent_pipe: bool,
    /// The session's transcript: every byte it printed (`read_output` pages through it).
    pub transcript: Option<std::path::PathBuf>,
    /// What this call's output left out (`[… N bytes omitted …]`, `…N tokens truncated…`):
    /// where, in session offsets, and how many lines the command printed. Whoever rewrites
    /// `output` sets it to `None`.
    pub omitted_range: Option<Omitted>,
    /// Which part of `omitted_range` the transcript has (when the session has one).
    pub omitted_coverage: Option<crate::transcript::OmittedCoverage>,
    /// Where and why the session's transcript stopped, if it did (at byte 0: none could be
    /// made).
    pub transcript_stop: Option<crate::transcript::TranscriptStop>,
    /// The session's sandbox and whether this output shows a denial.
    pub sandbox: Option<crate::policy::SandboxReport>,
    /// What an exited session's processes used, where its backend counts (a cgroup).
    pub usage: Option<crate::usage::Usage>,
    /// What an exited session's command left running (killed with it) and the limits its
    /// processes ran into, where its backend can tell.
    pub ending: crate::usage::Ending,
    /// What the session's monitors said since the last result (an exec the rules refused),
    /// one line each.
    pub notices: Vec<String>,
}

/// A result says one thing about its process: running (with the id to poll), or exited
/// (with its code, when known).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Running { session_id: i32 },
    Exited { exit_code: Option<i32> },
}

/// Everything a call observed besides the output itself, fixed before its snapshot is built:
/// the snapshot is made whole, once, from this and the drained output.
#[derive(Debug, Clone)]
pub struct Observed {
    pub status: Status,
    /// How long the call watched: from the spawn for a first call, its window for a poll.
    pub wall_time: Duration,
    /// Why the call returned (an exited process always says `exited` or what matched).
    pub reason: Reason,
    pub matched: Option<Match>,
    pub timed_out_ms: Option<u64>,
    pub awaiting_secret: bool,
    /// A pipe session that has printed nothing at all yet.
    pub silent_pipe: bool,
    pub transcript: Option<std::path::PathBuf>,
    /// The session offset of the first byte drained: where the output starts.
    pub output_at: u64,
    /// What the session's transcript holds, to say which bytes the output left out are on
    /// disk.
    pub transcript_holds: Option<crate::transcript::TranscriptInfo>,
    pub transcript_stop: Option<crate::transcript::TranscriptStop>,
    /// What the exited session's processes used (its outcome's figures).
    pub usage: Option<crate::usage::Usage>,
    /// What its command left running, and the limits it ran into (its outcome's).
    pub ending: crate::usage::Ending,
}

impl Observed {
    /// A window that ended on its own, with nothing else to say.
    pub fn plain(status: Status, wall_time: Duration) -> Self {
        Self {
            status,
            wall_time,
            reason: match status {
                Status::Exited { .. } => Reason::Exited,
                Status::Running { .. } => Reason::Window,
            },
            matched: None,
            timed_out_ms: None,
            awaiting_secret: false,
            silent_pipe: false,
            transcript: None,
            output_at: 0,
            transcript_holds: None,
            transcript_stop: None,
            usage: None,
            ending: crate::usage::Ending::default(),
        }
    }
}

impl Snapshot {
    /// Builds a snapshot from drained output under a token budget.
    pub fn new(
        drained: &Drained,
        max_output_tokens: u64,
        wall_time: Duration,
        status: Status,
    ) -> Self {
        Self::build(
            drained,
            max_output_tokens,
            Hygiene::default(),
            Observed::plain(status, wall_time),
            |_| None,
        )
    }

    /// The snapshot of a call: the body cleaned as `hygiene` says, then counted and
    /// truncated; what the call `observed`; and the sandbox's report, which `judge` makes
    /// from the body as the model will read it.
    pub fn build(
        drained: &Drained,
        max_output_tokens: u64,
        hygiene: Hygiene,
        observed: Observed,
        judge: impl FnOnce(&str) -> Option<crate::policy::SandboxReport>,
    ) -> Self {
        let body = Body::cleaned(drained, max_output_tokens, hygiene);
        let sandbox = judge(&body.text);
        let at = observed.output_at;
        let omitted = body.omitted.map(|o| Omitted {
            range: o.range.start + at..o.range.end + at,
            ..o
        });
        let omitted_coverage = observed
            .transcript_holds
            .as_ref()
            .zip(omitted.as_ref())
            .map(|(info, o)| crate::transcript::coverage(&o.range, info));
        Self {
            chunk_id: new_chunk_id(),
            wall_time: observed.wall_time,
            status: observed.status,
            original_token_count: body.original_token_count,
            output: body.text,
            reason: observed.reason,
            matched: observed.matched,
            timed_out_ms: observed.timed_out_ms,
            awaiting_secret: observed.awaiting_secret,
            silent_pipe: observed.silent_pipe,
            transcript: observed.transcript,
            omitted_range: omitted,
            omitted_coverage,
            transcript_stop: observed.transcript_stop,
            sandbox,
            usage: observed.usage,
            ending: observed.ending,
            notices: Vec::new(),
        }
    }

    /// The exit code, when the process exited and its code is known.
    pub fn exit_code(&self) -> Option<i32> {
        match self.status {
            Status::Exited { exit_code } => exit_code,
            Status::Running { .. } => None,
        }
    }

    /// The id to poll, while the process runs.
    pub fn session_id(&self) -> Option<i32> {
        match self.status {
            Status::Running { session_id } => Some(session_id),
            Status::Exited { .. } => None,
        }
    }

    /// Wall time in seconds with exactly four decimals, as printed.
    pub fn wall_time_text(&self) -> String {
        format!("{:.4}", self.wall_time.as_secs_f64())
    }

    /// The text form a model reads, as Codex writes it.
    pub fn to_text(&self) -> String {
        self.to_text_with(Head::CODEX)
    }

    /// The text form, with the first lines `head` asks for.
    pub fn to_text_with(&self, head: Head) -> String {
        self.text_of(head, &self.output)
    }

    /// The output as uexec's dialect has it: where the token budget cut it, its warning
    /// counts every line the command printed, where Codex's counts the lines of the text it
    /// kept (the pending buffer's head and tail, and the marker between them).
    pub fn annotated_output(&self) -> Cow<'_, str> {
        let Some(o) = self.omitted_range.as_ref().filter(|o| o.warning_len > 0) else {
            return Cow::Borrowed(&self.output);
        };
        match self.output.get(o.warning_len..) {
            Some(rest) => Cow::Owned(format!(
                "{}{rest}",
                truncation_warning(self.original_token_count, o.lines)
            )),
            None => Cow::Borrowed(&self.output),
        }
    }

    /// The text form of `output`, with the first lines `head` asks for.
    pub(super) fn text_of(&self, head: Head, output: &str) -> String {
        let mut s = String::with_capacity(output.len() + 128);
        if head.chunk_id {
            s.push_str(&format!("Chunk ID: {}\n", self.chunk_id));
        }
        if head.wall_time {
            s.push_str(&format!("Wall time: {} seconds\n", self.wall_time_text()));
        }
        match self.status {
            Status::Exited {
                exit_code: Some(code),
            } => s.push_str(&format!("Process exited with code {code}\n")),
            Status::Exited { exit_code: None } => {}
            Status::Running { session_id } => {
                s.push_str(&format!("Process running with session ID {session_id}\n"))
            }
        }
        s.push_str(&format!(
            "Original token count: {}\n",
            self.original_token_count
        ));
        s.push_str("Output:\n");
        s.push_str(output);
        s
    }
}

/// Which of Codex's first lines a text form has: Codex's own has both; a face whose client
/// shows the window's length itself, or that no tool reads a chunk id in, leaves them out,
/// so that the model reads each fact once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// `Chunk ID: 1a2b3c`.
    pub chunk_id: bool,
    /// `Wall time: 0.5012 seconds`.
    pub wall_time: bool,
}

impl Head {
    /// Codex's text: both lines.
    pub const CODEX: Self = Self {
        chunk_id: true,
        wall_time: true,
    };
}

/// A snapshot body, its token count, and what it left out (offsets from the first byte
/// drained).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Body {
    pub text: String,
    pub original_token_count: u64,
    pub omitted: Option<Omitted>,
}

impl Body {
    pub fn from_drained(drained: &Drained, max_output_tokens: u64) -> Self {
        Self::cleaned(drained, max_output_tokens, Hygiene::default())
    }

    /// The body with `hygiene` applied to the text before it is counted and truncated.
    pub fn cleaned(drained: &Drained, max_output_tokens: u64, hygiene: Hygiene) -> Self {
        let all;
        let (text, len, layout) = if drained.omitted_bytes == 0 {
            all = [&drained.head[..], &drained.tail[..]].concat();
            let text = hygiene.apply(String::from_utf8_lossy(&all).into_owned());
            let len = text.len() as u64;
            (text, len, Layout::Whole(&all))
        } else {
            // Both sides of the cut end mid-stream: a character split by the cut counts as
            // omitted rather than turning into U+FFFD.
            let head_end = drained.head.len() - incomplete_suffix_len(&drained.head);
            let tail_start = boundary_at_or_after(&drained.tail, 0);
            let omitted =
                drained.omitted_bytes + (drained.head.len() - head_end + tail_start) as u64;
            let head = hygiene.apply(String::from_utf8_lossy(&drained.head[..head_end]).into());
            let tail = hygiene.apply(String::from_utf8_lossy(&drained.tail[tail_start..]).into());
            let len = (head.len() + tail.len()) as u64 + omitted;
            let marker = omitted_marker(omitted);
            let layout = Layout::Cut {
                head: &drained.head[..head_end],
                head_len: head.len(),
                marker_len: marker.len(),
                gap: head_end as u64..head_end as u64 + omitted,
                tail: &drained.tail[tail_start..],
            };
            (format!("{head}{marker}{tail}"), len, layout)
        };
        let original_token_count = approx_tokens(len as usize);
        let kept = truncation(&text, len, max_output_tokens);
        let left_out = layout.left_out(kept, hygiene);
        let (text, warning_len) = match kept {
            None => (text, 0),
            Some(kept) => {
                // Codex's count: the lines of the text it has.
                let warning = truncation_warning(original_token_count, text.lines().count() as u64);
                let body = truncated(&text, len, max_output_tokens, &warning, kept);
                (body, warning.len())
            }
        };
        Self {
            text,
            original_token_count,
            omitted: left_out.map(|range| Omitted {
                range,
                lines: drained.lines(),
                warning_len,
            }),
        }
    }
}

/// The marker that stands where the pending buffer dropped bytes between calls.
pub fn omitted_marker(omitted_bytes: u64) -> String {
    format!("[\u{2026} {omitted_bytes} bytes omitted \u{2026}]")
}

/// SPEC §4 truncation of `text`, whose accounted length is `len` bytes (the text plus any
/// bytes omitted before it was built).
pub fn truncate(text: &str, len: u64, max_output_tokens: u64) -> String {
    match truncation(text, len, max_output_tokens) {
        None => text.to_owned(),
        Some(kept) => {
            let warning =
                truncation_warning(approx_tokens(len as usize), text.lines().count() as u64);
            truncated(text, len, max_output_tokens, &warning, kept)
        }
    }
}

/// The warning that leads a truncated body: `Warning: truncated output (original token
/// count: N)`, then `Total output lines: L` and an empty line.
pub fn truncation_warning(original_token_count: u64, lines: u64) -> String {
    format!(
        "Warning: truncated output (original token count: {original_token_count})\nTotal output lines: {lines}\n\n"
    )
}

/// `text` truncated to its kept head and tail (`kept`: the end of one and the start of the
/// other), after `warning`, with the count of the tokens that fell out between them.
fn truncated(
    text: &str,
    len: u64,
    max_output_tokens: u64,
    warning: &str,
    (head_end, tail_start): (usize, usize),
) -> String {
    let removed_tokens = (len - max_output_tokens.saturating_mul(4)).div_ceil(4);
    format!(
        "{warning}{}\u{2026}{removed_tokens} tokens truncated\u{2026}{}",
        &text[..head_end],
        &text[tail_start..],
    )
}

/// Where SPEC §4 truncation cuts `text` (accounted length `len`): the end of the head it
/// keeps and the start of the tail, on character boundaries; `None` within the budget.
fn truncation(text: &str, len: u64, max_output_tokens: u64) -> Option<(usize, usize)> {
    let budget = max_output_tokens.saturating_mul(4);
    if len <= budget {
        return None;
    }
    let bytes = text.as_bytes();
    let budget = budget.min(bytes.len() as u64) as usize;
    let head_n = budget / 2;
    let tail_n = budget - head_n;
    let mut head_end = head_n;
    while head_end > 0 && !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = bytes.len() - tail_n;
    while tail_start < bytes.len() && !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    Some((head_end, tail_start))
}

fn new_chunk_id() -> String {
    format!("{:06x}", rand::random::<u32>() & 0x00ff_ffff)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod body_tests;
