//! uexec-rules' tests: one binary (STYLE: linking happens once).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bad_files;
mod bypasses;
mod claude_settings;
mod codex_json;
mod codex_rules;
mod exec_words;
mod helpers;
