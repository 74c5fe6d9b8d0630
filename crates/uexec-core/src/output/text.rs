//! Output hygiene: terminal escape sequences out, carriage returns rendered as a terminal
//! would show them. Both only ever drop or move ASCII bytes, so valid UTF-8 stays valid.

/// Where an escape sequence has got to; sequences may be split across reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum State {
    #[default]
    Ground,
    /// After ESC.
    Escape,
    /// ESC followed by intermediates (e.g. `ESC ( B`): one final byte ends it.
    EscIntermediate,
    /// `ESC [` … final byte in 0x40..=0x7e.
    Csi,
    /// `ESC ]` … BEL or ST.
    Osc,
    /// `ESC P`, `ESC X`, `ESC ^`, `ESC _` … ST.
    Str,
    /// ESC inside an OSC or string: `\` ends it (ST).
    StrEscape,
}

/// A streaming ANSI/VT escape-sequence remover: CSI (colours, cursor moves, `ESC [ K`),
/// OSC (titles, hyperlinks), DCS/SOS/PM/APC strings, two- and three-byte escapes, and BEL.
/// A byte of 0x80 or more ends any sequence and is kept, so UTF-8 is never cut.
#[derive(Debug, Clone, Default)]
pub struct AnsiStripper {
    state: State,
}

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;

impl AnsiStripper {
    /// Feeds `input`; every kept byte goes to `keep` with its index in `input`.
    pub fn feed(&mut self, input: &[u8], mut keep: impl FnMut(usize, u8)) {
        for (i, &b) in input.iter().enumerate() {
            if b >= 0x80 && self.state != State::Ground {
                self.state = State::Ground;
            }
            self.state = match (self.state, b) {
                (State::Ground, ESC) => State::Escape,
                (State::Ground, BEL) => State::Ground,
                (State::Ground, _) => {
                    keep(i, b);
                    State::Ground
                }
                (State::Escape, b'[') => State::Csi,
                (State::Escape, b']') => State::Osc,
                (State::Escape, b'P' | b'X' | b'^' | b'_') => State::Str,
                (State::Escape, 0x20..=0x2f) => State::EscIntermediate,
                (State::Escape, ESC) => State::Escape,
                (State::Escape, _) => State::Ground,
                (State::EscIntermediate, 0x20..=0x2f) => State::EscIntermediate,
                (State::EscIntermediate, _) => State::Ground,
                (State::Csi, 0x40..=0x7e) => State::Ground,
                (State::Csi, ESC) => State::Escape,
                (State::Csi, _) => State::Csi,
                (State::Osc, BEL) => State::Ground,
                (State::Osc | State::Str, ESC) => State::StrEscape,
                (State::Osc, _) => State::Osc,
                (State::Str, _) => State::Str,
                (State::StrEscape, b'\\') => State::Ground,
                (State::StrEscape, _) => State::Str,
            };
        }
    }
}

/// `s` without terminal escape sequences.
pub fn strip_ansi(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len());
    AnsiStripper::default().feed(s.as_bytes(), |_, b| out.push(b));
    // Only ASCII bytes were dropped: what is left is still UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// `s` as a terminal would show it after carriage returns: within each line, text after a
/// `\r` overwrites the line from its first column, so `10%\r20%\r30%` reads `30%`. A `\r`
/// right before the line's `\n` (a CRLF line end) is kept as it is.
pub fn collapse_cr(s: &str) -> String {
    if !s.contains('\r') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    for line in s.split_inclusive('\n') {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        let trimmed = body.trim_end_matches('\r');
        let crlf = &body[trimmed.len()..];
        if !trimmed.contains('\r') {
            out.push_str(line);
            continue;
        }
        let mut shown: Vec<char> = Vec::new();
        for segment in trimmed.split('\r') {
            for (col, c) in segment.chars().enumerate() {
                match shown.get_mut(col) {
                    Some(slot) => *slot = c,
                    None => shown.push(c),
                }
            }
        }
        out.extend(shown);
        out.push_str(crlf);
        out.push_str(newline);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_go_and_text_stays() {
        let cases = [
            ("\x1b[1;32mok\x1b[0m done", "ok done"),
            ("a\x1b]0;title\x07b", "ab"),
            ("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b", "alinkb"),
            ("\x1b(Bplain\x1b=", "plain"),
            ("bell\x07!", "bell!"),
            ("\x1bPq#0;2;0;0;0\x1b\\after", "after"),
            ("héllo \x1b[Kwörld", "héllo wörld"),
            ("\x1b\u{e9}", "\u{e9}"),
        ];
        for (input, want) in cases {
            assert_eq!(strip_ansi(input), want, "{input:?}");
        }
    }

    #[test]
    fn a_sequence_split_across_reads_is_still_removed() {
        let mut s = AnsiStripper::default();
        let mut out = Vec::new();
        for part in [&b"red:\x1b["[..], b"31", b"mX\x1b", b"[0m!"] {
            s.feed(part, |_, b| out.push(b));
        }
        assert_eq!(out, b"red:X!");
    }

    #[test]
    fn kept_bytes_carry_their_index() {
        let mut kept = Vec::new();
        AnsiStripper::default().feed(b"\x1b[2Jab", |i, b| kept.push((i, b)));
        assert_eq!(kept, [(4, b'a'), (5, b'b')]);
    }

    #[test]
    fn carriage_returns_render_like_a_terminal() {
        let cases = [
            ("10%\r20%\r30%\n", "30%\n"),
            ("abcdef\rXY", "XYcdef"),
            ("line\r\nnext\r\n", "line\r\nnext\r\n"),
            ("a\rb\r\nc", "b\r\nc"),
            ("no returns\n", "no returns\n"),
            ("ünï\rU", "Unï"),
        ];
        for (input, want) in cases {
            assert_eq!(collapse_cr(input), want, "{input:?}");
        }
    }
}
