//! A table for people that fits their terminal, as `ps` and `docker ps` fit theirs: each
//! column says how much it matters; when the width runs out the least important go, a
//! column that can be narrowed is (an owner keeps its end), and the flexible ones (a command,
//! a last line) take what is left. Without a width (a pipe) every column is printed whole
//! up to its cap.
//!
//! Cells are one line: control characters (newlines, escape sequences from a command or its
//! output) are shown as spaces.

/// How a narrowed cell is cut to `n` characters.
type Narrow = fn(&str, usize) -> String;

/// One column: its heading, its cells, and how it gives way.
pub struct Column {
    head: &'static str,
    cells: Vec<String>,
    /// Widest it is ever printed (0: no cap).
    cap: usize,
    right: bool,
    /// Lower goes first; `u8::MAX` never goes.
    priority: u8,
    /// How narrow it may be cut, and how.
    narrow: Option<(usize, Narrow)>,
    /// A flexible column: this narrow at least, wider with room.
    flex: Option<usize>,
    /// Spaces before it.
    gap: usize,
}

impl Column {
    pub fn left(head: &'static str, cap: usize, cells: Vec<String>) -> Self {
        Self {
            head,
            cells: cells.iter().map(|c| one_line(c)).collect(),
            cap,
            right: false,
            priority: 0,
            narrow: None,
            flex: None,
            gap: 1,
        }
    }

    pub fn right(head: &'static str, cap: usize, cells: Vec<String>) -> Self {
        Self {
            right: true,
            ..Self::left(head, cap, cells)
        }
    }

    pub fn essential(self) -> Self {
        self.priority(u8::MAX)
    }

    pub fn priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    pub fn narrow(mut self, width: usize, how: Narrow) -> Self {
        self.narrow = Some((width, how));
        self
    }

    pub fn flex(mut self, min: usize) -> Self {
        self.flex = Some(min);
        self
    }

    pub fn gap(mut self, gap: usize) -> Self {
        self.gap = gap;
        self
    }

    /// Its width with all the room it wants.
    fn ideal(&self) -> usize {
        let widest = self
            .cells
            .iter()
            .map(|c| c.chars().count())
            .chain([self.head.len()])
            .max()
            .unwrap_or(0);
        match self.cap {
            0 => widest,
            cap => widest.min(cap.max(self.head.len())),
        }
    }

    /// The least width it may have.
    fn least(&self) -> usize {
        let ideal = self.ideal();
        match (self.flex, self.narrow) {
            (Some(min), _) | (None, Some((min, _))) => ideal.min(min.max(self.head.len())),
            (None, None) => ideal,
        }
    }

    /// Cell `i` in `width` characters (the last column is not padded).
    fn cell(&self, i: usize, width: usize, last: bool) -> String {
        let text = if i == usize::MAX {
            self.head.to_owned()
        } else {
            self.cells[i].clone()
        };
        let cut = match self.narrow {
            Some((_, how)) if i != usize::MAX => how(&text, width),
            _ => clip(&text, width),
        };
        match (last, self.right) {
            (true, _) => cut,
            (false, true) => format!("{cut:>width$}"),
            (false, false) => format!("{cut:<width$}"),
        }
    }
}

/// Columns, left to right.
#[derive(Default)]
pub struct Table {
    columns: Vec<Column>,
}

impl Table {
    pub fn push(&mut self, column: Column) {
        self.columns.push(column);
    }

    /// The table, every line at most `width` characters when one is given.
    pub fn render(mut self, width: Option<usize>) -> String {
        let widths: Vec<usize> = match width {
            None => self.columns.iter().map(Column::ideal).collect(),
            Some(width) => self.fit(width),
        };
        let rows = self.columns.first().map_or(0, |c| c.cells.len());
        let mut out = String::new();
        for i in std::iter::once(usize::MAX).chain(0..rows) {
            let mut line = String::new();
            for (n, (column, w)) in self.columns.iter().zip(&widths).enumerate() {
                if n > 0 {
                    line.push_str(&" ".repeat(column.gap));
                }
                line.push_str(&column.cell(i, *w, n + 1 == widths.len()));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    /// Drops the least important columns until the rest fit in `width`, and shares the room
    /// left.
    fn fit(&mut self, width: usize) -> Vec<usize> {
        let needed = |columns: &[Column]| -> usize {
            columns
                .iter()
                .enumerate()
                .map(|(n, c)| c.least() + if n > 0 { c.gap } else { 0 })
                .sum()
        };
        while needed(&self.columns) > width {
            let Some(drop) = self
                .columns
                .iter()
                .enumerate()
                .filter(|(_, c)| c.priority != u8::MAX)
                .min_by_key(|(n, c)| (c.priority, std::cmp::Reverse(*n)))
                .map(|(n, _)| n)
            else {
                break;
            };
            self.columns.remove(drop);
        }
        let mut widths: Vec<usize> = self.columns.iter().map(Column::least).collect();
        let mut spare = width.saturating_sub(needed(&self.columns));
        // The room left goes to an essential flexible column (the command), then to the
        // narrowed ones (an owner), then to the other flexible ones (the last line).
        let mut order: Vec<usize> = (0..self.columns.len()).collect();
        order.sort_by_key(|n| {
            let c = &self.columns[*n];
            match (c.flex.is_some(), c.priority == u8::MAX, c.narrow.is_some()) {
                (true, true, _) => 0,
                (false, _, true) => 1,
                (true, false, _) => 2,
                (false, _, false) => 3,
            }
        });
        for n in order {
            let more = self.columns[n].ideal().saturating_sub(widths[n]).min(spare);
            widths[n] += more;
            spare -= more;
        }
        if let Some(last) = widths.last_mut() {
            *last += spare;
        }
        widths
    }
}

/// `s` on one line: control characters shown as spaces.
pub(super) fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// `s` on one line of at most `n` characters, its end cut to `…`. Control characters
/// (newlines, and escape sequences that would recolour or retitle the person's terminal)
/// are shown as spaces.
pub fn clip(s: &str, n: usize) -> String {
    let one_line = one_line(s);
    if one_line.chars().count() <= n {
        return one_line;
    }
    let mut out: String = one_line.chars().take(n.saturating_sub(1)).collect();
    if n > 0 {
        out.push('\u{2026}');
    }
    out
}

/// `clip`, cutting the start instead: a path's end is where paths differ.
pub fn clip_start(s: &str, n: usize) -> String {
    let one_line = one_line(s);
    let len = one_line.chars().count();
    if len <= n {
        return one_line;
    }
    let mut out = String::new();
    if n > 0 {
        out.push('\u{2026}');
    }
    out.extend(one_line.chars().skip(len - n.saturating_sub(1)));
    out
}

/// An owner in `n` characters: whole, else its end from a `/` (`…/app-a` for
/// `mcp:/home/me/src/app-a`), else its last characters.
pub fn clip_owner(s: &str, n: usize) -> String {
    let one_line = one_line(s);
    if one_line.chars().count() <= n {
        return one_line;
    }
    let chars: Vec<char> = one_line.chars().collect();
    let fits = |from: usize| chars.len() - from < n;
    let from_slash = (1..chars.len()).find(|i| chars[*i] == '/' && fits(*i));
    match from_slash {
        Some(from) => std::iter::once('\u{2026}')
            .chain(chars[from..].iter().copied())
            .collect(),
        None => clip_start(&one_line, n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_keeps_its_end_from_a_slash() {
        assert_eq!(clip_owner("mcp:/home/me/src/app-a", 16), "…/me/src/app-a");
        assert_eq!(clip_owner("mcp:/home/me/src/app-a", 8), "…/app-a");
        assert_eq!(clip_owner("@person", 16), "@person");
        assert_eq!(clip_owner("mcp:averyveryverylongname", 8), "…ongname");
    }

    #[test]
    fn cells_are_one_line_and_clipped() {
        assert_eq!(clip("a\nb\x1b]0;t\x07", 20), "a b ]0;t ");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip_start("/a/b/c/d", 4), "…c/d");
    }

    #[test]
    fn the_least_important_columns_go_first() {
        let mut t = Table::default();
        t.push(Column::left("ID", 0, vec!["1".into()]).essential());
        t.push(Column::left("CWD", 0, vec!["/a/long/directory/path".into()]).priority(1));
        t.push(Column::left("AGE", 0, vec!["1s".into()]).priority(5));
        t.push(
            Column::left("COMMAND", 0, vec!["sleep 100000000".into()])
                .essential()
                .flex(8),
        );
        let text = t.render(Some(20));
        assert_eq!(text, "ID AGE COMMAND\n1  1s  sleep 100000…\n");
    }
}
