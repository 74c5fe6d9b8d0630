//! What an attached person's terminal is not handed from another owner's session, as tmux
//! does by default: a program's output is where a model's words meet a real terminal, and
//! some sequences act on that terminal rather than draw on it:
//!
//! - OSC 52 writes the person's clipboard, and OSC 0/1/2 retitle their window (tmux:
//!   `set-clipboard external`, `set-titles off`); every OSC but 8 (a hyperlink) is dropped;
//! - DCS, APC, PM and SOS strings (`ESC P`, `ESC _`, `ESC ^`, `ESC X`) may be queries the
//!   terminal answers into the person's input (tmux: `allow-passthrough off`): dropped.
//!
//! Everything else (text, CSI, the screen's colours) passes. The filter keeps a few bytes of
//! state across chunks, never the content of what it drops (bounded, whatever the output).
//! `uexec attach --raw` passes everything.

/// Where the filter is in the byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ground,
    /// After an ESC.
    Escape,
    /// In an OSC, reading its number (`digits` of it so far, at most 5 kept).
    OscNumber {
        number: u32,
        digits: u8,
    },
    /// In a string being passed (an OSC 8), until its terminator.
    Passing,
    /// In a string being dropped, until its terminator.
    Dropping,
    /// After an ESC inside a string: `\` ends it.
    StringEscape {
        passing: bool,
    },
}

/// Drops the sequences that act on the person's terminal (see the module's doc).
#[derive(Debug)]
pub struct EscapeFilter {
    state: State,
    raw: bool,
}

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;

impl EscapeFilter {
    /// A filter; `raw`: one that passes everything.
    pub fn new(raw: bool) -> Self {
        Self {
            state: State::Ground,
            raw,
        }
    }

    /// The next chunk, filtered.
    pub fn pass(&mut self, bytes: &[u8]) -> Vec<u8> {
        if self.raw {
            return bytes.to_vec();
        }
        let mut out = Vec::with_capacity(bytes.len());
        for &b in bytes {
            self.state = match self.state {
                State::Ground if b == ESC => State::Escape,
                State::Ground => {
                    out.push(b);
                    State::Ground
                }
                State::Escape => match b {
                    b']' => State::OscNumber {
                        number: 0,
                        digits: 0,
                    },
                    b'P' | b'_' | b'^' | b'X' => State::Dropping,
                    ESC => {
                        out.push(ESC);
                        State::Escape
                    }
                    _ => {
                        out.extend_from_slice(&[ESC, b]);
                        State::Ground
                    }
                },
                State::OscNumber { number, digits } => match b {
                    b'0'..=b'9' if digits < 5 => State::OscNumber {
                        number: number * 10 + u32::from(b - b'0'),
                        digits: digits + 1,
                    },
                    b';' if number == 8 && digits == 1 => {
                        out.extend_from_slice(b"\x1b]8;");
                        State::Passing
                    }
                    BEL => State::Ground,
                    ESC => State::StringEscape { passing: false },
                    _ => State::Dropping,
                },
                State::Passing => match b {
                    BEL => {
                        out.push(BEL);
                        State::Ground
                    }
                    ESC => State::StringEscape { passing: true },
                    _ => {
                        out.push(b);
                        State::Passing
                    }
                },
                State::Dropping => match b {
                    BEL => State::Ground,
                    ESC => State::StringEscape { passing: false },
                    _ => State::Dropping,
                },
                State::StringEscape { passing } => {
                    if passing {
                        out.push(ESC);
                        out.push(b);
                    }
                    match (b, passing) {
                        (b'\\', _) => State::Ground,
                        (ESC, p) => State::StringEscape { passing: p },
                        (_, true) => State::Passing,
                        (_, false) => State::Dropping,
                    }
                }
            };
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filtered(chunks: &[&[u8]]) -> Vec<u8> {
        let mut f = EscapeFilter::new(false);
        chunks.iter().flat_map(|c| f.pass(c)).collect()
    }

    #[test]
    fn clipboard_titles_and_device_strings_are_dropped() {
        assert_eq!(filtered(&[b"a\x1b]52;c;aGVsbG8=\x07b"]), b"ab");
        assert_eq!(filtered(&[b"a\x1b]0;pwned\x1b\\b"]), b"ab");
        assert_eq!(filtered(&[b"a\x1b]2;t\x07\x1bP+q544e\x1b\\b"]), b"ab");
        assert_eq!(filtered(&[b"\x1b_apc\x1b\\\x1b^pm\x07x"]), b"x");
    }

    #[test]
    fn sequences_split_across_chunks_are_dropped_too() {
        assert_eq!(
            filtered(&[b"a\x1b", b"]5", b"2;c;", b"aGk=\x1b", b"\\b"]),
            b"ab"
        );
        assert_eq!(filtered(&[b"a\x1bP", b"$q", b"m\x1b", b"\\b"]), b"ab");
    }

    #[test]
    fn drawing_and_hyperlinks_pass() {
        let screen: &[u8] = b"\x1b[?1049h\x1b[1;31mred\x1b[0m\x1b[2J\x1b=\x1b7\x1b8\r\n";
        assert_eq!(filtered(&[screen]), screen);
        let link: &[u8] = b"\x1b]8;;https://x\x1b\\x\x1b]8;;\x07";
        assert_eq!(filtered(&[link]), link);
    }

    #[test]
    fn raw_passes_everything() {
        let mut f = EscapeFilter::new(true);
        assert_eq!(f.pass(b"\x1b]52;c;x\x07"), b"\x1b]52;c;x\x07");
    }
}
