//! `uexec ls`: every session in the daemon, as a table for people or as JSON.
//!
//! A table cell is one line: control characters in it (newlines, and escape sequences from a
//! command or its output that could recolour or retitle the terminal) are shown as spaces,
//! and a long cell is clipped: at its end, or at its start for a path.

use std::process::ExitCode;

use serde_json::json;

use super::common::{call, print_json, Failure};
use super::conn::{Conn, Target};

/// `uexec ls`.
#[derive(Debug, Clone, clap::Args)]
pub struct LsArgs {
    /// Print the sessions as JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn ls(target: &Target, args: LsArgs) -> Result<ExitCode, Failure> {
    let mut conn = Conn::open(target, Vec::new())?;
    // No daemon, no sessions: none is started only to say so.
    let sessions = if conn.daemon_may_run() {
        let result = call(&mut conn, "list_sessions", json!({})).await?;
        result.structured["sessions"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    if args.json {
        print_json(&json!({ "sessions": sessions }));
        return Ok(ExitCode::SUCCESS);
    }
    if sessions.is_empty() {
        println!("no sessions");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<7} {:<24} {:<8} {:<5} {:>8}  {:<24} {:<32} LAST LINE",
        "ID", "OWNER", "STATE", "TTY", "AGE", "CWD", "COMMAND"
    );
    for s in &sessions {
        println!(
            "{:<7} {:<24} {:<8} {:<5} {:>8}  {:<24} {:<32} {}",
            s["session_id"].as_i64().unwrap_or_default(),
            clip(s["owner"].as_str().unwrap_or(""), 24),
            s["state"].as_str().unwrap_or(""),
            if s["tty"].as_bool().unwrap_or(false) {
                "yes"
            } else {
                "no"
            },
            age(s["running_seconds"].as_f64().unwrap_or(0.0)),
            clip_start(s["cwd"].as_str().unwrap_or(""), 24),
            clip(s["command"].as_str().unwrap_or(""), 32),
            clip(s["last_line"].as_str().unwrap_or(""), 60),
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `s` on one line of at most `n` characters, its end cut to `…`. Control characters
/// (newlines, and escape sequences that would recolour or retitle the person's terminal)
/// are shown as spaces.
fn clip(s: &str, n: usize) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= n {
        return one_line;
    }
    let mut out: String = one_line.chars().take(n.saturating_sub(1)).collect();
    out.push('\u{2026}');
    out
}

/// `clip`, cutting the start instead: a path's end is where paths differ.
fn clip_start(s: &str, n: usize) -> String {
    let one_line = clip(s, usize::MAX);
    let len = one_line.chars().count();
    if len <= n {
        return one_line;
    }
    let mut out = String::from('\u{2026}');
    out.extend(one_line.chars().skip(len - n.saturating_sub(1)));
    out
}

fn age(secs: f64) -> String {
    let s = secs as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}
