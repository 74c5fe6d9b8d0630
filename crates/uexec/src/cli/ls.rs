//! `uexec ls`: every session in the daemon, as a table for people or as JSON: running ones,
//! ended ones nobody was told of yet (with their exit code and when they ended), and with
//! `-a` those whose exit was reported too, as `docker ps -a` shows stopped containers.
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
    /// Also the ended sessions whose exit was already reported (to their owner, or by
    /// `uexec run` and `wait`), until their transcript is pruned or `uexec rm` removes them.
    #[arg(short, long)]
    pub all: bool,
    /// Print the sessions as JSON ({sessions: [{session_id, owner, state, exit_code?,
    /// started_at, ended_at?, cpu_seconds?, memory_bytes?, ...}]}; times in RFC 3339;
    /// state running, paused or exited, kept: true when a person kept it; the figures only
    /// where the session has a cgroup).
    #[arg(long)]
    pub json: bool,
}

pub async fn ls(target: &Target, args: LsArgs) -> Result<ExitCode, Failure> {
    let mut conn = Conn::open(target, Vec::new())?;
    // No daemon, no sessions: none is started only to say so.
    let sessions = if conn.daemon_may_run() {
        let result = call(&mut conn, "list_sessions", json!({"all": args.all})).await?;
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
    let now = std::time::SystemTime::now();
    println!(
        "{:<7} {:<16} {:<24} {:<10} {:>11} {:<5} {:>8} {:>8}  {:<24} {:<32} LAST LINE",
        "ID", "NAME", "OWNER", "STATE", "ENDED", "TTY", "AGE", "CPU", "CWD", "COMMAND"
    );
    for s in &sessions {
        println!(
            "{:<7} {:<16} {:<24} {:<10} {:>11} {:<5} {:>8} {:>8}  {:<24} {:<32} {}",
            s["session_id"].as_i64().unwrap_or_default(),
            clip(s["name"].as_str().unwrap_or("-"), 16),
            clip(s["owner"].as_str().unwrap_or(""), 24),
            state(s),
            ended(s, now),
            if s["tty"].as_bool().unwrap_or(false) {
                "yes"
            } else {
                "no"
            },
            age(s["running_seconds"].as_f64().unwrap_or(0.0)),
            cpu(s),
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

/// `running`, `kept` (running, kept after its owner's clients go: `uexec keep`), `paused`,
/// or how it ended: `exited 0`, `exited 137` (killed by signal 9), `failed` (a policy or its
/// backend failed it), `exited` (no code known).
fn state(s: &serde_json::Value) -> String {
    if s["state"] == "running" && s["kept"] == true {
        return "kept".to_owned();
    }
    if s["state"] != "exited" {
        return clip(s["state"].as_str().unwrap_or(""), 10);
    }
    if s.get("failure").is_some() {
        return "failed".to_owned();
    }
    match s["exit_code"].as_i64() {
        Some(code) => format!("exited {code}"),
        None => "exited".to_owned(),
    }
}

/// How long ago it ended (`12s ago`), or `-` while it runs.
fn ended(s: &serde_json::Value, now: std::time::SystemTime) -> String {
    let Some(at) = s["ended_at"]
        .as_str()
        .and_then(|t| uexec_core::rfc3339::parse(t).ok())
    else {
        return "-".to_owned();
    };
    let ago = now.duration_since(at).unwrap_or_default();
    format!("{} ago", age(ago.as_secs_f64()))
}

/// The CPU time its processes used (`0.42s`, `3m07s`), or `-` where it has no cgroup.
fn cpu(s: &serde_json::Value) -> String {
    match s["cpu_seconds"].as_f64() {
        Some(secs) if secs < 60.0 => format!("{secs:.2}s"),
        Some(secs) => age(secs),
        None => "-".to_owned(),
    }
}

fn age(secs: f64) -> String {
    let s = secs as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}
