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
mod tests {
    use super::*;

    fn drained(bytes: &[u8]) -> Drained {
        Drained {
            head: bytes.to_vec(),
            ..Drained::default()
        }
    }

    #[test]
    fn exited_text_layout() {
        let s = Snapshot::new(
            &drained(b"abcdefghij"),
            10_000,
            Duration::ZERO,
            Status::Exited { exit_code: Some(0) },
        );
        assert_eq!(
            s.to_text(),
            format!(
                "Chunk ID: {}\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 3\nOutput:\nabcdefghij",
                s.chunk_id
            )
        );
        assert_eq!(s.chunk_id.len(), 6);
        assert!(s
            .chunk_id
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }

    #[test]
    fn annotated_text_puts_uexecs_lines_before_the_count() {
        let mut s = Snapshot::new(
            &drained(b"ok\n"),
            10_000,
            Duration::ZERO,
            Status::Exited {
                exit_code: Some(124),
            },
        );
        s.timed_out_ms = Some(500);
        assert_eq!(
            s.to_text_annotated(),
            format!(
                "Chunk ID: {}\nWall time: 0.0000 seconds\nProcess exited with code 124\nProcess timed out after 500 ms (SIGTERM, then SIGKILL); reported as exit code 124\nReason: exited\nOriginal token count: 1\nOutput:\nok\n",
                s.chunk_id
            )
        );
        let mut m = Snapshot::new(
            &drained(b"ready\n"),
            10_000,
            Duration::ZERO,
            Status::Running { session_id: 1000 },
        );
        m.reason = Reason::Matched;
        m.matched = Some(Match {
            text: "ready".into(),
            offset: 42,
        });
        assert!(m
            .to_text_annotated()
            .contains("Process running with session ID 1000\nReason: matched \"ready\" at output byte 42\nOriginal"));
    }

    #[test]
    fn running_text_layout() {
        let s = Snapshot::new(
            &drained(b"READY"),
            10_000,
            Duration::from_millis(2003),
            Status::Running { session_id: 1000 },
        );
        assert!(s.to_text().ends_with(
            "Wall time: 2.0030 seconds\nProcess running with session ID 1000\nOriginal token count: 2\nOutput:\nREADY"
        ));
    }

    #[test]
    fn truncation_of_999_lines_matches_the_contract() {
        let full: String = (1..1000)
            .map(|i| format!("EXEC-LINE-{i:04} {}\n", "x".repeat(20)))
            .collect();
        assert_eq!(full.len(), 35964);
        let body = Body::from_drained(&drained(full.as_bytes()), 50);
        assert_eq!(body.original_token_count, 8991);
        assert!(body.text.starts_with(
            "Warning: truncated output (original token count: 8991)\nTotal output lines: 999\n\n"
        ));
        assert!(body.text.contains("\u{2026}8941 tokens truncated\u{2026}"));
        let head = &full[..100];
        let tail = &full[full.len() - 100..];
        assert!(body.text.ends_with(&format!(
            "{head}\u{2026}8941 tokens truncated\u{2026}{tail}"
        )));
    }

    #[test]
    fn truncation_cuts_on_utf8_boundaries() {
        let s = format!("a{}b", "é".repeat(100));
        let body = Body::from_drained(&drained(s.as_bytes()), 5);
        assert_eq!(body.original_token_count, 51);
        assert_eq!(
            body.text,
            format!(
                "Warning: truncated output (original token count: 51)\nTotal output lines: 1\n\na{}\u{2026}46 tokens truncated\u{2026}{}b",
                "é".repeat(4),
                "é".repeat(4)
            )
        );
    }

    #[test]
    fn budget_boundary_is_inclusive() {
        let body = Body::from_drained(&drained(b"0123456789abcdefghij"), 5);
        assert_eq!(body.text, "0123456789abcdefghij");
        let body = Body::from_drained(&drained(b"0123456789abcdefghijk"), 5);
        assert_eq!(
            body.text,
            "Warning: truncated output (original token count: 6)\nTotal output lines: 1\n\n0123456789\u{2026}1 tokens truncated\u{2026}bcdefghijk"
        );
    }

    #[test]
    fn omitted_bytes_are_marked_and_counted() {
        let d = Drained {
            head: b"HEAD".to_vec(),
            tail: b"TAIL".to_vec(),
            omitted_bytes: 1000,
            omitted_newlines: 0,
        };
        let body = Body::from_drained(&d, 10_000);
        assert_eq!(body.original_token_count, 252); // (8 + 1000) / 4
        assert_eq!(body.text, "HEAD[\u{2026} 1000 bytes omitted \u{2026}]TAIL");
        let body = Body::from_drained(&d, 1);
        assert!(body
            .text
            .starts_with("Warning: truncated output (original token count: 252)\n"));
        assert!(body.text.contains("\u{2026}251 tokens truncated\u{2026}"));
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let body = Body::from_drained(&drained(&[b'a', 0xff, b'b']), 100);
        assert_eq!(body.text, "a\u{fffd}b");
        assert_eq!(body.original_token_count, 2); // 5 bytes as text
    }

    fn cut_snapshot(total: u64, first_kept: u64, stop_at: Option<u64>) -> Snapshot {
        use crate::transcript::{coverage, TranscriptInfo, TranscriptStop};
        let mut s = Snapshot::new(
            &drained(b"x"),
            100,
            Duration::ZERO,
            Status::Exited { exit_code: Some(0) },
        );
        let stop = stop_at.map(|at| TranscriptStop {
            at,
            error: "No space left on device".into(),
            deleted: false,
        });
        let info = TranscriptInfo {
            dir: "/t/1000-abcdef".into(),
            total,
            first_kept,
            stop: stop.clone(),
        };
        s.transcript = Some(info.dir.clone());
        s.omitted_range = Some(Omitted {
            range: 100..200,
            lines: 0,
            warning_len: 0,
        });
        s.omitted_coverage = Some(coverage(&(100..200), &info));
        s.transcript_stop = stop;
        s
    }

    #[test]
    fn the_transcript_line_promises_only_the_bytes_on_disk() {
        let line = |s: Snapshot| s.transcript_line().expect("a cut names the transcript");
        assert_eq!(
            line(cut_snapshot(1000, 0, None)),
            "Transcript: /t/1000-abcdef (bytes 100..200 left out here; read_output has them)"
        );
        assert_eq!(
            line(cut_snapshot(150, 0, Some(150))),
            "Transcript: /t/1000-abcdef (bytes 100..200 left out here; read_output has 100..150; \
             150..200 are lost: the transcript stopped at byte 150: No space left on device)"
        );
        assert_eq!(
            line(cut_snapshot(50, 0, Some(50))),
            "Transcript: /t/1000-abcdef (bytes 100..200 left out here; read_output has none of them; \
             100..200 are lost: the transcript stopped at byte 50: No space left on device)"
        );
        assert_eq!(
            line(cut_snapshot(900, 0, Some(900))),
            "Transcript: /t/1000-abcdef (bytes 100..200 left out here; read_output has them; \
             the transcript stopped at byte 900: No space left on device)"
        );
        assert_eq!(
            line(cut_snapshot(170, 120, None)),
            "Transcript: /t/1000-abcdef (bytes 100..200 left out here; read_output has 120..170; \
             100..120 rotated away; 170..200 are still being written)"
        );
    }

    #[test]
    fn a_transcript_that_could_not_be_made_says_the_cut_is_lost() {
        let mut s = cut_snapshot(0, 0, Some(0));
        s.transcript = None;
        assert_eq!(
            s.transcript_line().as_deref(),
            Some(
                "Transcript: none (bytes 100..200 left out here are lost: no transcript could be made: \
                 No space left on device)"
            )
        );
        s.transcript_stop = None;
        assert_eq!(
            s.transcript_line(),
            None,
            "no transcripts kept: nothing to say"
        );
    }
}
