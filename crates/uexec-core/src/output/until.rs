//! Wait conditions: what ends a call's window before the window does.
//!
//! A call returns at the first of: the process exited (and its output closed), the
//! condition held, or the window ended. The window stays the cap. Conditions:
//! - `pattern`: a regex over the output this call returns (pending output from before the
//!   call included), with escape sequences removed, across reads;
//! - `idle_ms`: the output has been quiet that long, *after* at least one byte of output
//!   for this call (a session that prints nothing never counts as idle: that wait is the
//!   window's);
//! - `exit`: nothing but the exit (the default behaviour, said explicitly);
//! - `prompt`: the session waits for input: its terminal reads a line with echo off (a
//!   password prompt), or a process of the session sleeps reading its stdin or in
//!   `select`/`poll` (checked [`PROMPT_FIRST_CHECK_MS`] after the output went quiet, then
//!   at growing intervals up to 1 s); where the backend cannot see processes (a remote one,
//!   a setuid program), [`PROMPT_QUIET_MS`] of quiet after an unfinished last line (a
//!   shell, REPL or `[y/N]` prompt).

use std::time::Duration;

use regex::bytes::{Regex, RegexBuilder};

use crate::error::ExecError;
use crate::output::text::AnsiStripper;

/// Longest pattern accepted, in bytes.
pub const MAX_PATTERN_BYTES: usize = 4096;
/// Cap on the compiled size of a pattern (the `regex` crate's size limit).
pub const PATTERN_SIZE_LIMIT: usize = 1 << 20;
pub const MIN_IDLE_MS: i64 = 10;
pub const MAX_IDLE_MS: i64 = 300_000;
/// Quiet time before the first look at whether a session waits for input.
pub const PROMPT_FIRST_CHECK_MS: u64 = 10;
/// Quiet time after which an unfinished last line counts as a prompt, where the backend
/// cannot see whether a process waits for input.
pub const PROMPT_QUIET_MS: u64 = 300;
/// Output kept from earlier reads so a match can span reads: at least the current line, up
/// to this many bytes.
pub const MATCH_CARRY_BYTES: usize = 16 * 1024;
/// A reported match's text is cut to this many bytes.
pub const MATCH_TEXT_MAX_BYTES: usize = 1024;

/// A wait condition as asked for (`until`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Until {
    pub pattern: Option<String>,
    pub idle_ms: Option<i64>,
    pub exit: bool,
    pub prompt: bool,
}

/// A checked [`Until`].
#[derive(Debug, Clone)]
pub struct Condition {
    pub(crate) regex: Option<Regex>,
    pub(crate) idle: Option<Duration>,
    pub(crate) prompt: bool,
}

impl Condition {
    /// Checks `until`; errors name the field (`until.pattern`, `until.idle_ms`, ...).
    pub fn new(until: &Until) -> Result<Self, ExecError> {
        let others = until.pattern.is_some() || until.idle_ms.is_some() || until.prompt;
        if !others && !until.exit {
            return Err(ExecError::invalid(
                "until",
                "give at least one of pattern, idle_ms, exit, prompt",
            ));
        }
        if until.exit && others {
            return Err(ExecError::invalid(
                "until.exit",
                "exit: true waits for the exit alone; it cannot be combined with pattern, idle_ms or prompt",
            ));
        }
        let regex = match &until.pattern {
            None => None,
            Some(p) => Some(compile(p)?),
        };
        let idle = match until.idle_ms {
            None => None,
            Some(ms) if (MIN_IDLE_MS..=MAX_IDLE_MS).contains(&ms) => {
                Some(Duration::from_millis(ms as u64))
            }
            Some(ms) => {
                return Err(ExecError::invalid(
                    "until.idle_ms",
                    format!("{ms} is out of range ({MIN_IDLE_MS}..={MAX_IDLE_MS} ms)"),
                ))
            }
        };
        Ok(Self {
            regex,
            idle,
            prompt: until.prompt,
        })
    }

    /// Whether anything but the exit can end the wait early.
    pub(crate) fn watches_output(&self) -> bool {
        self.regex.is_some() || self.idle.is_some() || self.prompt
    }
}

fn compile(pattern: &str) -> Result<Regex, ExecError> {
    if pattern.is_empty() {
        return Err(ExecError::invalid("until.pattern", "empty pattern"));
    }
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(ExecError::invalid(
            "until.pattern",
            format!(
                "{} bytes is longer than the {MAX_PATTERN_BYTES} accepted",
                pattern.len()
            ),
        ));
    }
    RegexBuilder::new(pattern)
        .multi_line(true)
        .crlf(true)
        .size_limit(PATTERN_SIZE_LIMIT)
        .dfa_size_limit(PATTERN_SIZE_LIMIT)
        .build()
        .map_err(|e| {
            let why = match e {
                regex::Error::CompiledTooBig(limit) => {
                    format!("the pattern compiles to more than the {limit} bytes allowed")
                }
                other => format!("not a valid regex: {other}"),
            };
            ExecError::invalid("until.pattern", why)
        })
}

/// Why a call returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    Exited,
    Matched,
    Idle,
    Prompt,
    Window,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exited => "exited",
            Self::Matched => "matched",
            Self::Idle => "idle",
            Self::Prompt => "prompt",
            Self::Window => "window",
        }
    }
}

/// What a pattern matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// The matched text (escape sequences removed), at most [`MATCH_TEXT_MAX_BYTES`].
    pub text: String,
    /// Byte offset of the match's first byte in everything the session printed.
    pub offset: u64,
}

/// Runs a pattern over output as it arrives. Bytes kept from earlier reads are bounded by
/// [`MATCH_CARRY_BYTES`], so memory stays bounded whatever the output.
#[derive(Debug)]
pub(crate) struct Matcher {
    regex: Regex,
    stripper: AnsiStripper,
    /// Escape-free text not yet ruled out, and the session offset of each of its bytes.
    window: Vec<u8>,
    offsets: Vec<u64>,
}

impl Matcher {
    pub fn new(regex: Regex) -> Self {
        Self {
            regex,
            stripper: AnsiStripper::default(),
            window: Vec::new(),
            offsets: Vec::new(),
        }
    }

    /// Feeds output that starts at session offset `offset`; the first match, if any.
    pub fn feed(&mut self, bytes: &[u8], offset: u64) -> Option<Match> {
        let (window, offsets) = (&mut self.window, &mut self.offsets);
        self.stripper.feed(bytes, |i, b| {
            window.push(b);
            offsets.push(offset + i as u64);
        });
        if let Some(m) = self.regex.find(&self.window) {
            let mut end = m.end().min(m.start() + MATCH_TEXT_MAX_BYTES);
            while end > m.start() && end < m.end() && (self.window[end] & 0xc0) == 0x80 {
                end -= 1;
            }
            return Some(Match {
                text: String::from_utf8_lossy(&self.window[m.start()..end]).into_owned(),
                offset: self.offsets.get(m.start()).copied().unwrap_or(offset),
            });
        }
        self.trim();
        None
    }

    /// Bytes were lost between two feeds (the pending buffer dropped a middle): no match
    /// may span the gap.
    pub fn gap(&mut self) {
        self.window.clear();
        self.offsets.clear();
    }

    /// Keeps the current line, at most [`MATCH_CARRY_BYTES`].
    fn trim(&mut self) {
        let len = self.window.len();
        let floor = len.saturating_sub(MATCH_CARRY_BYTES);
        let line_start = self.window[floor..]
            .iter()
            .rposition(|&b| b == b'\n')
            .map(|p| floor + p + 1);
        let cut = line_start.unwrap_or(floor);
        if cut > 0 {
            self.window.drain(..cut);
            self.offsets.drain(..cut);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(until: Until) -> Result<Condition, String> {
        Condition::new(&until).map_err(|e| e.to_string())
    }

    fn matcher(p: &str) -> Matcher {
        Matcher::new(compile(p).expect("valid"))
    }

    #[test]
    fn bad_conditions_name_their_field() {
        let cases = [
            (Until::default(), "until:"),
            (
                Until {
                    pattern: Some("(".into()),
                    ..Until::default()
                },
                "until.pattern: not a valid regex",
            ),
            (
                Until {
                    pattern: Some("a{1000}{1000}".into()),
                    ..Until::default()
                },
                "until.pattern: the pattern compiles to more than",
            ),
            (
                Until {
                    pattern: Some("x".repeat(MAX_PATTERN_BYTES + 1)),
                    ..Until::default()
                },
                "until.pattern: 4097 bytes",
            ),
            (
                Until {
                    idle_ms: Some(0),
                    ..Until::default()
                },
                "until.idle_ms: 0 is out of range",
            ),
            (
                Until {
                    idle_ms: Some(MAX_IDLE_MS + 1),
                    ..Until::default()
                },
                "until.idle_ms: 300001 is out of range",
            ),
            (
                Until {
                    exit: true,
                    prompt: true,
                    ..Until::default()
                },
                "until.exit:",
            ),
        ];
        for (until, want) in cases {
            let got = condition(until.clone()).expect_err("must fail");
            assert!(got.contains(want), "{until:?}: {got}");
        }
    }

    #[test]
    fn a_match_spans_reads_and_skips_escapes() {
        let mut m = matcher(r"ready on :\d+");
        assert_eq!(m.feed(b"booting\nrea", 0), None);
        assert_eq!(m.feed(b"dy \x1b[1mon\x1b[0m :", 11), None);
        let found = m.feed(b"3000\n", 27).expect("matched");
        assert_eq!(found.text, "ready on :3000");
        assert_eq!(found.offset, 8);
    }

    #[test]
    fn anchors_are_per_line() {
        let mut m = matcher(r"^\$ $");
        assert_eq!(m.feed(b"echo $ \n", 0), None);
        assert!(m.feed(b"$ ", 8).is_some());
        let mut m = matcher(r"done$");
        assert!(m.feed(b"all done\r\nnext", 0).is_some());
    }

    #[test]
    fn memory_is_bounded_by_the_carry() {
        let mut m = matcher("never-printed");
        let line = vec![b'x'; 100_000];
        for i in 0..50 {
            assert_eq!(m.feed(&line, i * 100_000), None);
            assert!(m.window.len() <= MATCH_CARRY_BYTES);
        }
    }

    #[test]
    fn a_gap_forgets_the_carry() {
        let mut m = matcher("ab");
        assert_eq!(m.feed(b"a", 0), None);
        m.gap();
        assert_eq!(m.feed(b"b", 100), None);
    }
}
