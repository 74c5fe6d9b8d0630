//! What a task's result holds of its sessions: their output over every window it saw,
//! bounded ([`Kept`]), and how each ended ([`ended_line`]), so that a model woken by a task's
//! end reads the session id and name, the exit, the run's whole time, the output it has not
//! read and where every byte is, never only the last chunk.

use std::time::Duration;

use uexec_core::snapshot::omitted_marker;
use uexec_core::{ExecError, SessionStore, Snapshot};

/// One session's output over every window, bounded: its first and last `budget / 2` bytes,
/// and the count of those between.
pub(super) struct Kept {
    half: usize,
    head: String,
    tail: String,
    omitted: u64,
    tokens: u64,
    wall: Duration,
    last: Option<Result<Snapshot, ExecError>>,
}

impl Kept {
    pub(super) fn new(budget: u64) -> Self {
        Self {
            half: usize::try_from(budget / 2).unwrap_or(usize::MAX),
            head: String::new(),
            tail: String::new(),
            omitted: 0,
            tokens: 0,
            wall: Duration::ZERO,
            last: None,
        }
    }

    pub(super) fn add(&mut self, result: Result<Snapshot, ExecError>) {
        if let Ok(s) = &result {
            self.tokens += s.original_token_count;
            self.wall += s.wall_time;
            let mut text = s.output.as_str();
            if self.head.len() < self.half {
                let mut room = (self.half - self.head.len()).min(text.len());
                while !text.is_char_boundary(room) {
                    room -= 1;
                }
                self.head.push_str(&text[..room]);
                text = &text[room..];
            }
            self.tail.push_str(text);
            if self.tail.len() > self.half {
                let mut cut = self.tail.len() - self.half;
                while !self.tail.is_char_boundary(cut) {
                    cut += 1;
                }
                self.omitted += cut as u64;
                self.tail.drain(..cut);
            }
        }
        self.last = Some(result);
    }

    /// The last window's snapshot, with the output of every window.
    pub(super) fn into_result(self) -> Option<Result<Snapshot, ExecError>> {
        let mut last = self.last?;
        if let Ok(s) = &mut last {
            s.output = if self.omitted == 0 {
                format!("{}{}", self.head, self.tail)
            } else {
                format!("{}{}{}", self.head, omitted_marker(self.omitted), self.tail)
            };
            s.original_token_count = self.tokens;
            s.wall_time = self.wall;
            s.omitted_range = None;
            s.omitted_coverage = None;
        }
        Some(last)
    }
}

/// `Session 7 "web" (npm test) exited with code 0 after 12.3 s. Transcript: PATH (every
/// byte it printed; read_output pages through it)`: how session `id` ended, once its end was
/// reported (`None` before, or when the store forgot it), and how long it ran. The transcript
/// is promised only as far as it is on disk (`stopped`: where and why it stopped).
pub fn ended_line(
    store: &SessionStore,
    id: i32,
    stopped: Option<&uexec_core::transcript::TranscriptStop>,
) -> Option<(String, Duration)> {
    let info = store
        .list_ended()
        .into_iter()
        .rev()
        .find(|s| s.session_id == id)?;
    let end = info.end.as_ref()?;
    let name = info
        .name
        .as_ref()
        .map(|n| format!(" \"{n}\""))
        .unwrap_or_default();
    let how = match (&end.failure, end.exit_code) {
        (Some(failure), _) => format!("failed ({failure})"),
        (None, Some(code)) => format!("exited with code {code}"),
        (None, None) => "exited".to_owned(),
    };
    let mut line = format!(
        "Session {id}{name} ({}) {how} after {:.1} s.",
        info.command,
        info.running_time.as_secs_f64()
    );
    match (&info.transcript, stopped) {
        (Some(dir), None) => line.push_str(&format!(
            " Transcript: {} (every byte it printed; read_output pages through it)",
            dir.display()
        )),
        (Some(dir), Some(stop)) => line.push_str(&format!(
            " Transcript: {} ({}; what came after is lost)",
            dir.display(),
            stop.text()
        )),
        (None, _) => line.push_str(" It has no transcript."),
    }
    Some((line, info.running_time))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_output_is_bounded_and_counts_what_it_left_out() {
        let mut kept = Kept::new(8);
        let snapshot = |text: &str| {
            Ok(Snapshot {
                chunk_id: "000000".into(),
                wall_time: Duration::from_secs(1),
                status: uexec_core::Status::Running { session_id: 1000 },
                original_token_count: 2,
                output: text.into(),
                reason: uexec_core::Reason::Window,
                matched: None,
                timed_out_ms: None,
                awaiting_secret: false,
                silent_pipe: false,
                transcript: None,
                omitted_range: None,
                omitted_coverage: None,
                transcript_stop: None,
                sandbox: None,
                usage: None,
                ending: Default::default(),
                notices: Vec::new(),
            })
        };
        kept.add(snapshot("abcdef"));
        kept.add(snapshot("ghijkl"));
        let Some(Ok(s)) = kept.into_result() else {
            panic!("a snapshot");
        };
        assert_eq!(s.output, format!("abcd{}ijkl", omitted_marker(4)));
        assert_eq!(
            (s.original_token_count, s.wall_time),
            (4, Duration::from_secs(2))
        );
    }
}
