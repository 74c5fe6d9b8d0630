//! Newline framing for stdio, bounded: one JSON message per line.
//!
//! Pure, so it is property-tested: bytes arrive in arbitrary pieces; [`LineFramer::push`]
//! emits every complete line (without its `\n` or a trailing `\r`), in order. A line longer
//! than the limit is reported once as [`Frame::Oversized`] and its bytes are dropped up to
//! the next newline, so one huge line costs bounded memory and the stream goes on.

/// What the framer found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Line(Vec<u8>),
    /// A line longer than the limit (dropped).
    Oversized,
}

/// Splits a byte stream into bounded lines.
#[derive(Debug)]
pub struct LineFramer {
    buf: Vec<u8>,
    max_line_bytes: usize,
    discarding: bool,
}

impl LineFramer {
    pub fn new(max_line_bytes: usize) -> Self {
        Self {
            buf: Vec::new(),
            max_line_bytes,
            discarding: false,
        }
    }

    /// Feeds bytes; appends every frame completed by them to `out`.
    pub fn push(&mut self, mut data: &[u8], out: &mut Vec<Frame>) {
        while !data.is_empty() {
            let newline = data.iter().position(|&b| b == b'\n');
            let (piece, rest) = match newline {
                Some(i) => (&data[..i], Some(&data[i + 1..])),
                None => (data, None),
            };
            if !self.discarding {
                if self.buf.len() + piece.len() > self.max_line_bytes {
                    self.buf.clear();
                    self.discarding = true;
                    out.push(Frame::Oversized);
                } else {
                    self.buf.extend_from_slice(piece);
                }
            }
            match rest {
                Some(rest) => {
                    if !self.discarding {
                        out.push(Frame::Line(take_line(&mut self.buf)));
                    }
                    self.discarding = false;
                    data = rest;
                }
                None => data = &[],
            }
        }
    }

    /// At end of input: the last line if it had no newline.
    pub fn finish(&mut self) -> Option<Frame> {
        if self.discarding || self.buf.is_empty() {
            self.buf.clear();
            return None;
        }
        Some(Frame::Line(take_line(&mut self.buf)))
    }
}

fn take_line(buf: &mut Vec<u8>) -> Vec<u8> {
    let mut line = std::mem::take(buf);
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(max: usize, pieces: &[&[u8]]) -> Vec<Frame> {
        let mut framer = LineFramer::new(max);
        let mut out = Vec::new();
        for p in pieces {
            framer.push(p, &mut out);
        }
        out.extend(framer.finish());
        out
    }

    #[test]
    fn lines_across_pieces() {
        assert_eq!(
            frames(100, &[b"ab", b"c\r\nde", b"f\n\ng"]),
            vec![
                Frame::Line(b"abc".to_vec()),
                Frame::Line(b"def".to_vec()),
                Frame::Line(vec![]),
                Frame::Line(b"g".to_vec()),
            ]
        );
    }

    #[test]
    fn an_oversized_line_is_reported_once_and_skipped() {
        assert_eq!(
            frames(3, &[b"abcd", b"efg\nok\n"]),
            vec![Frame::Oversized, Frame::Line(b"ok".to_vec())]
        );
    }
}
