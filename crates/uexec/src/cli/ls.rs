//! `uexec ls`: every session in the daemon, as a table for people or as JSON: running ones,
//! ended ones nobody was told of yet (with their exit code and when they ended), and with
//! `-a` those whose exit was reported too, as `docker ps -a` shows stopped containers.
//!
//! The table fits the terminal, as `ps` does: on a terminal (or with `COLUMNS`) the columns
//! that matter least go first (the last line, the directory, the terminal, the CPU time...),
//! and what is left is cut; into a pipe every column is printed. The state says what needs
//! the person (`waiting (password)`) and why uexec ended a session (`pruned`).
//!
//! A table cell is one line: control characters in it (newlines, and escape sequences from a
//! command or its output that could recolour or retitle the terminal) are shown as spaces,
//! and a long cell is clipped: at its end, or at its start for a path and an owner.

use std::process::ExitCode;

use serde_json::{json, Value};

use super::common::{call, print_json, Failure};
use super::conn::{Conn, Target};
use super::table::{clip, clip_owner, clip_start, one_line, Column, Table};

/// `uexec ls`.
#[derive(Debug, Clone, clap::Args)]
pub struct LsArgs {
    /// Also the ended sessions whose exit was already reported (to their owner, or by
    /// `uexec run` and `wait`), until their transcript is pruned or `uexec rm` removes them.
    #[arg(short, long)]
    pub all: bool,
    /// Print the sessions as JSON ({sessions: [{session_id, owner, state, exit_code?,
    /// started_at, ended_at?, cpu_seconds?, memory_bytes?, ...}]}; times in RFC 3339;
    /// state running, paused or exited, kept: true when a person kept it; waiting: password,
    /// input or approval when it waits for a person; stopped: pruned, client_gone or by
    /// when uexec ended it; the figures only where the session has a cgroup), and the
    /// commands held for a person's yes ({approvals: [{id, owner, command, cwd, why,
    /// since}]}, as `uexec approvals --json`).
    #[arg(long, conflicts_with = "quiet")]
    pub json: bool,
    /// Only the ids, one a line (for scripts and shell completion).
    #[arg(short, long)]
    pub quiet: bool,
    /// Only the sessions still running (paused and waiting ones too).
    #[arg(long, conflicts_with = "all")]
    pub running: bool,
    /// Only the sessions of this owner: its full name (`@person`, `mcp:/home/me/src/app`),
    /// or the end of it after a `/` or a `:` (`app`).
    #[arg(long, value_name = "OWNER", value_parser = parse_owner)]
    pub owner: Option<String>,
}

fn parse_owner(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("give an owner (e.g. @person, or the end of mcp:/path/app: app)".into());
    }
    Ok(s.to_owned())
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
    let sessions: Vec<Value> = sessions
        .into_iter()
        .filter(|s| !args.running || s["state"] != "exited")
        .filter(|s| args.owner.as_deref().is_none_or(|o| owner_is(s, o)))
        .collect();
    // Commands held for a person's yes have no session yet: they are listed after them.
    let approvals: Vec<Value> = if conn.daemon_may_run() && !args.quiet {
        // A daemon that holds no question (another build) lists the sessions all the same.
        let result = call(&mut conn, "list_approvals", json!({})).await.ok();
        result
            .and_then(|r| r.structured["approvals"].as_array().cloned())
            .unwrap_or_default()
            .into_iter()
            .filter(|a| args.owner.as_deref().is_none_or(|o| owner_is(a, o)))
            .collect()
    } else {
        Vec::new()
    };
    if args.json {
        print_json(&json!({ "sessions": sessions, "approvals": approvals }));
        return Ok(ExitCode::SUCCESS);
    }
    if args.quiet {
        for s in &sessions {
            println!("{}", s["session_id"].as_i64().unwrap_or_default());
        }
        return Ok(ExitCode::SUCCESS);
    }
    if sessions.is_empty() {
        println!("no sessions");
        print!("{}", waiting_for_approval(&approvals));
        if target.socket.is_none() {
            if let Some(other) = super::conn::other_daemon(conn.socket()) {
                println!("{}", other.sentence());
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    print!(
        "{}",
        table(&sessions, std::time::SystemTime::now(), width())
    );
    print!("{}", waiting_for_approval(&approvals));
    Ok(ExitCode::SUCCESS)
}

/// The commands held for a person's yes, a line each (no session yet: the approval's id),
/// with the verbs that answer them.
fn waiting_for_approval(approvals: &[Value]) -> String {
    let mut out = String::new();
    for a in approvals {
        let id = a["id"].as_u64().unwrap_or_default();
        out.push_str(&format!(
            "approval {id}  {}  waiting for approval: {}  (uexec approve {id} | uexec deny {id})\n",
            clip_owner(a["owner"].as_str().unwrap_or("-"), 24),
            clip(&one_line(a["command"].as_str().unwrap_or("")), 60),
        ));
    }
    out
}

/// Whether session `s` is `owner`'s: its full name, or the end of it after `/` or `:`.
fn owner_is(s: &Value, owner: &str) -> bool {
    let Some(full) = s["owner"].as_str() else {
        return false;
    };
    full == owner
        || full
            .strip_suffix(owner)
            .is_some_and(|head| head.ends_with('/') || head.ends_with(':'))
}

/// How wide the table may be: `COLUMNS`, else the terminal's width, else (a pipe) no bound.
fn width() -> Option<usize> {
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        return Some(n);
    }
    use std::io::IsTerminal as _;
    let stdout = std::io::stdout();
    if !stdout.is_terminal() {
        return None;
    }
    uexec_sys::window_size(std::os::fd::AsRawFd::as_raw_fd(&stdout))
        .ok()
        .map(|(_, cols)| usize::from(cols))
        .filter(|c| *c > 0)
}

/// The table of `sessions`, `width` columns at most (`None`: every column, full).
fn table(sessions: &[Value], now: std::time::SystemTime, width: Option<usize>) -> String {
    let named = sessions.iter().any(|s| s["name"].is_string());
    let cells = |f: &dyn Fn(&Value) -> String| sessions.iter().map(f).collect::<Vec<_>>();
    let mut t = Table::default();
    t.push(Column::left("ID", 0, cells(&|s| s["session_id"].to_string())).essential());
    t.push(
        Column::left(
            "NAME",
            16,
            cells(&|s| clip(s["name"].as_str().unwrap_or("-"), 16)),
        )
        .priority(if named { 5 } else { 1 }),
    );
    t.push(
        Column::left(
            "OWNER",
            24,
            cells(&|s| s["owner"].as_str().unwrap_or("").to_owned()),
        )
        .essential()
        .narrow(12, clip_owner),
    );
    t.push(Column::left("STATE", 30, cells(&|s| state(s))).essential());
    t.push(Column::right("ENDED", 11, cells(&|s| ended(s, now))).priority(3));
    t.push(Column::left("TTY", 5, cells(&tty)).priority(1));
    t.push(
        Column::right(
            "AGE",
            8,
            cells(&|s| age(s["running_seconds"].as_f64().unwrap_or(0.0))),
        )
        .priority(6),
    );
    t.push(Column::right("CPU", 8, cells(&cpu)).priority(2));
    t.push(
        Column::left(
            "CWD",
            24,
            cells(&|s| clip_start(s["cwd"].as_str().unwrap_or(""), 24)),
        )
        .priority(1)
        .gap(2),
    );
    t.push(
        Column::left(
            "COMMAND",
            32,
            cells(&|s| s["command"].as_str().unwrap_or("").to_owned()),
        )
        .essential()
        .flex(12),
    );
    t.push(
        Column::left(
            "LAST LINE",
            60,
            // `-` for none, as every other column says it: a row never ends short.
            cells(&|s| {
                let line = s["last_line"].as_str().unwrap_or("");
                if line.trim().is_empty() { "-" } else { line }.to_owned()
            }),
        )
        .priority(0)
        .flex(16),
    );
    t.render(width)
}

fn tty(s: &Value) -> String {
    match s["tty"].as_bool().unwrap_or(false) {
        true => "yes",
        false => "no",
    }
    .to_owned()
}

/// `running`, `kept` (running, kept after its owner's clients go: `uexec keep`), `paused`,
/// what it waits for from a person (`waiting (password)`, `waiting (input)`, `waiting for
/// approval`), or how it ended: `exited 0`, `exited 137` (killed by signal 9), `failed` (a
/// policy or its backend failed it), `pruned` or `stopped: its client went away` (uexec ended
/// it), `exited` (no code known).
fn state(s: &Value) -> String {
    if s["state"] != "exited" {
        match s["waiting"].as_str() {
            Some("approval") => return "waiting for approval".to_owned(),
            Some(what) if s["state"] == "running" => return clip(&format!("waiting ({what})"), 30),
            _ => {}
        }
    }
    if s["state"] == "running" && s["kept"] == true {
        return "kept".to_owned();
    }
    if s["state"] != "exited" {
        return clip(s["state"].as_str().unwrap_or(""), 30);
    }
    match s["stopped"].as_str() {
        Some("pruned") => return "pruned".to_owned(),
        Some("client_gone") => return "stopped: its client went away".to_owned(),
        _ => {}
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
fn ended(s: &Value, now: std::time::SystemTime) -> String {
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
fn cpu(s: &Value) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: i64, owner: &str, state: &str, extra: Value) -> Value {
        let mut r = json!({
            "session_id": id, "owner": owner, "state": state, "tty": true,
            "running_seconds": 75.0, "cwd": "/home/me/src/app-a", "command": "npm run dev -- --port 3000",
            "last_line": "ready in 312 ms", "name": "web",
        });
        if let (Some(r), Some(extra)) = (r.as_object_mut(), extra.as_object()) {
            r.extend(extra.clone());
        }
        r
    }

    #[test]
    fn in_80_columns_owners_are_cut_from_the_left_and_states_are_whole() {
        let rows = [
            row(
                41234,
                "mcp:/home/me/src/app-a",
                "running",
                json!({"waiting": "password"}),
            ),
            row(
                51234,
                "mcp:/home/me/src/app-b",
                "exited",
                json!({"stopped": "client_gone", "exit_code": 143}),
            ),
            row(1000, "@person", "exited", json!({"stopped": "pruned"})),
        ];
        let text = table(&rows, std::time::SystemTime::now(), Some(80));
        for line in text.lines() {
            assert!(line.chars().count() <= 80, "{line:?} in\n{text}");
        }
        assert!(text.contains(" …/src/app-a "), "{text}");
        assert!(text.contains(" …/src/app-b "), "{text}");
        assert!(text.contains("waiting (password)"), "{text}");
        assert!(text.contains("stopped: its client went away"), "{text}");
        assert!(text.contains(" pruned "), "{text}");
        assert!(text.contains("npm run"), "{text}");
        // Unbounded (a pipe): every column.
        let wide = table(&rows, std::time::SystemTime::now(), None);
        let head = wide.lines().next().unwrap_or_default();
        for column in ["CWD", "CPU", "TTY", "ENDED", "LAST LINE"] {
            assert!(head.contains(column), "{head}");
        }
    }

    #[test]
    fn owners_match_whole_or_by_their_end() {
        let s = row(1, "mcp:/home/me/src/app-a", "running", json!({}));
        assert!(owner_is(&s, "mcp:/home/me/src/app-a"));
        assert!(owner_is(&s, "app-a"));
        assert!(owner_is(&s, "src/app-a"));
        assert!(!owner_is(&s, "pp-a"));
        assert!(owner_is(
            &row(2, "@person", "running", json!({})),
            "@person"
        ));
    }

    #[test]
    fn waiting_states_say_what_the_session_needs() {
        let w = |what: &str| state(&row(1, "a", "running", json!({"waiting": what})));
        assert_eq!(w("password"), "waiting (password)");
        assert_eq!(w("input"), "waiting (input)");
        assert_eq!(w("approval"), "waiting for approval");
        assert_eq!(
            state(&row(1, "a", "running", json!({"kept": true}))),
            "kept"
        );
    }
}
