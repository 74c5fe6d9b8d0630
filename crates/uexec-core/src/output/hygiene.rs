//! Output hygiene: what a snapshot body may have cleaned before the model reads it. Both
//! off by default, so Codex's output comes through byte for byte.

/// Output hygiene of a snapshot body.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hygiene {
    /// Terminal escape sequences removed.
    pub strip_ansi: bool,
    /// Carriage returns rendered as a terminal shows them.
    pub collapse_cr: bool,
}

impl Hygiene {
    /// `asked` over these defaults.
    pub fn with(self, asked: HygieneRequest) -> Self {
        Self {
            strip_ansi: asked.strip_ansi.unwrap_or(self.strip_ansi),
            collapse_cr: asked.collapse_cr.unwrap_or(self.collapse_cr),
        }
    }

    /// `text` cleaned as asked.
    pub fn apply(self, text: String) -> String {
        let text = if self.strip_ansi {
            super::text::strip_ansi(&text)
        } else {
            text
        };
        if self.collapse_cr {
            super::text::collapse_cr(&text)
        } else {
            text
        }
    }
}

/// Output hygiene asked for by a call; `None` means the store's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HygieneRequest {
    /// Remove terminal escape sequences from the returned output.
    pub strip_ansi: Option<bool>,
    /// Render carriage returns as a terminal shows them (progress bars collapse).
    pub collapse_cr: Option<bool>,
}
