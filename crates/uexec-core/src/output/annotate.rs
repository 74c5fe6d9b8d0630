//! uexec's own lines in a result's text (not with `--codex-compat`), after the status line:
//! the hard timeout, what an exited command left running (killed then) and the limits it
//! reached, why the call returned, where a cut part of the output is, a secret prompt, a
//! sandbox's denial, and why a pipe session may seem silent. Codex's dialect has none of
//! them ([`Snapshot::to_text`]).

use super::snapshot::{Head, Snapshot};
use super::until::Reason;

/// The start of the line of an exit that left processes running.
pub const LEFT_RUNNING_LEAD: &str = "The command exited and left running";

/// What the line of an exit that left processes running says of them, and what helps.
pub const LEFT_RUNNING_ADVICE: &str = "killed now, as a session ends with its command. To keep a server running, start it as a command of its own, without `&`: its session keeps it";

/// Why a running pipe session may have printed nothing yet, and what helps.
pub const SILENT_PIPE_LINE: &str = "No output yet: on a pipe many programs hold their output back until a buffer fills or they exit (Python is told not to); tty: true runs it on a terminal, where they write line by line";

impl Snapshot {
    /// One line saying why the call returned: `Reason: matched "ready" at output byte 120`.
    pub fn reason_text(&self) -> String {
        match (self.reason, &self.matched) {
            (Reason::Matched, Some(m)) => {
                format!("Reason: matched {:?} at output byte {}", m.text, m.offset)
            }
            (Reason::Prompt, _) if self.awaiting_secret => {
                "Reason: prompt (secret input, echo off)".to_owned()
            }
            (Reason::Prompt, _) => "Reason: prompt (waiting for input)".to_owned(),
            (reason, _) => format!("Reason: {}", reason.as_str()),
        }
    }

    /// [`Self::to_text`] with uexec's extra lines after the status line: the timeout, why
    /// the call returned, and a secret prompt.
    pub fn to_text_annotated(&self) -> String {
        self.to_text_annotated_with(Head::CODEX)
    }

    /// [`Self::to_text_annotated`], with the first lines `head` asks for.
    pub fn to_text_annotated_with(&self, head: Head) -> String {
        let mut extra = String::new();
        if let Some(ms) = self.timed_out_ms {
            extra.push_str(&format!(
                "Process timed out after {ms} ms (SIGTERM, then SIGKILL); reported as exit code {}\n",
                crate::limits::TIMEOUT_EXIT_CODE
            ));
        }
        if let Some(left) = self.ending.tree.as_ref().and_then(|t| t.left_text()) {
            extra.push_str(&format!(
                "{LEFT_RUNNING_LEAD} {left}: {LEFT_RUNNING_ADVICE}\n"
            ));
        }
        for hit in &self.ending.limits_hit {
            extra.push_str(&hit.text());
            extra.push('\n');
        }
        extra.push_str(&self.reason_text());
        extra.push('\n');
        // Where the rest is, when this result left bytes out (the structured form always
        // names the transcript): a line the model needs then, and only then.
        if let Some(line) = self.transcript_line() {
            extra.push_str(&line);
            extra.push('\n');
        }
        if self.awaiting_secret && self.session_id().is_some() {
            extra.push_str(
                "A password prompt waits (echo off): ask the person to answer it; do not send secrets yourself\n",
            );
        }
        if self.silent_pipe && self.session_id().is_some() {
            extra.push_str(SILENT_PIPE_LINE);
            extra.push('\n');
        }
        for notice in &self.notices {
            extra.push_str(notice);
            extra.push('\n');
        }
        if let Some(denial) = self.sandbox.as_ref().and_then(|s| s.denial_text()) {
            extra.push_str(&denial);
            extra.push('\n');
        }
        let text = self.text_of(head, &self.annotated_output());
        let at = text.find("Original token count:").unwrap_or(0);
        format!("{}{extra}{}", &text[..at], &text[at..])
    }

    /// `Transcript: PATH (bytes A..B left out here; read_output has them)`, when this result
    /// left bytes out (all of them: the pending buffer's cut and the token budget's); it
    /// promises only what is on disk: what rotated away, is still being written or is lost
    /// (and where and why the transcript stopped) it says so.
    pub fn transcript_line(&self) -> Option<String> {
        let cut = &self.omitted_range.as_ref()?.range;
        let stop = self.transcript_stop.as_ref();
        let Some(dir) = &self.transcript else {
            // A session whose transcript could not be made names none.
            return stop.map(|stop| {
                format!(
                    "Transcript: none (bytes {}..{} left out here are lost: no transcript could be made: {})",
                    cut.start, cut.end, stop.error
                )
            });
        };
        let mut line = format!(
            "Transcript: {} (bytes {}..{} left out here",
            dir.display(),
            cut.start,
            cut.end
        );
        let coverage = self.omitted_coverage.as_ref();
        match coverage.and_then(|c| c.readable.as_ref()) {
            _ if coverage.is_none_or(|c| c.complete()) => line.push_str("; read_output has them"),
            Some(r) => line.push_str(&format!("; read_output has {}..{}", r.start, r.end)),
            None => line.push_str("; read_output has none of them"),
        }
        if let Some(r) = coverage.and_then(|c| c.rotated.as_ref()) {
            line.push_str(&format!("; {}..{} rotated away", r.start, r.end));
        }
        let unwritten = coverage.and_then(|c| c.unwritten.as_ref());
        match (unwritten, stop) {
            (Some(r), Some(stop)) => line.push_str(&format!(
                "; {}..{} are lost: {}",
                r.start,
                r.end,
                stop.text()
            )),
            (Some(r), None) => {
                line.push_str(&format!("; {}..{} are still being written", r.start, r.end))
            }
            (None, Some(stop)) => line.push_str(&format!("; {}", stop.text())),
            (None, None) => {}
        }
        line.push(')');
        Some(line)
    }
}
