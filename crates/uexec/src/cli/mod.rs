//! The CLI for people: short verbs over the daemon, `--json` on everything that prints,
//! errors on stderr, and exit codes that mean something:
//!
//! - `run` and `wait` exit with the command's own code;
//! - 0 for success otherwise; 2 for bad usage (clap);
//! - 3 when the session does not exist (any more);
//! - 125 when uexec itself failed (the daemon unreachable or refusing).
//!
//! Nothing is coloured, so `NO_COLOR` has nothing to turn off.

pub mod attach;
pub mod conn;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use std::io::Write as _;

use serde_json::{json, Value};

use conn::{Conn, Target, ToolResult};
use uexec_core::limits::{
    MAX_EMPTY_POLL_YIELD_TIME_MS, MAX_TIMEOUT_MS, MIN_EMPTY_POLL_YIELD_TIME_MS, MIN_TIMEOUT_MS,
};
use uexec_core::until::{MAX_IDLE_MS, MIN_IDLE_MS};

/// The session does not exist (any more).
pub const EXIT_NO_SESSION: u8 = 3;
/// uexec itself failed.
pub const EXIT_UEXEC: u8 = 125;
/// `uexec run --yield`: its default and its bounds, in ms.
pub const RUN_YIELD_DEFAULT_MS: i64 = 10_000;
pub const RUN_YIELD_MIN_MS: i64 = 250;
pub const RUN_YIELD_MAX_MS: i64 = 30_000;

/// `uexec run`.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct RunArgs {
    /// Run in a pseudo-terminal (24x80), so it can be typed into (`uexec send`).
    #[arg(long)]
    pub tty: bool,
    /// How long to watch before returning, in ms (250 to 30000; default 10000). A command
    /// still running then stays in the daemon as a session.
    #[arg(long = "yield", value_name = "MS", default_value_t = RUN_YIELD_DEFAULT_MS, value_parser = clap::value_parser!(i64).range(RUN_YIELD_MIN_MS..=RUN_YIELD_MAX_MS))]
    pub yield_ms: i64,
    /// Working directory (default: the current one).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    /// Set NAME=VALUE for the command. Repeatable.
    #[arg(long = "env", value_name = "NAME=VALUE", value_parser = parse_assignment)]
    pub env: Vec<(String, String)>,
    /// Run the shell without a login (`-c`, no profiles) instead of `-lc`.
    #[arg(long)]
    pub no_login: bool,
    #[command(flatten)]
    pub until: UntilArgs,
    /// Hard timeout in ms (100 to 86400000): SIGTERM, then SIGKILL 2 s later; exit code 124.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(i64).range(MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS))]
    pub timeout: Option<i64>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    /// The command and its arguments (one argument is taken as a shell command line). A
    /// word before it that starts with `-` is a flag of `run` (a mistyped one is an error):
    /// put `--` before a command that starts with `-`.
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Wait conditions of `run` and `poll` (the window stays the cap).
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct UntilArgs {
    /// Return as soon as the output matches this regex.
    #[arg(long, value_name = "REGEX")]
    pub until_pattern: Option<String>,
    /// Return once the output has been quiet this many ms (10 to 300000; after some output).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(i64).range(MIN_IDLE_MS..=MAX_IDLE_MS))]
    pub until_idle: Option<i64>,
    /// Return when the command waits for input (a prompt).
    #[arg(long)]
    pub until_prompt: bool,
}

impl UntilArgs {
    fn json(&self) -> Option<Value> {
        if self.until_pattern.is_none() && self.until_idle.is_none() && !self.until_prompt {
            return None;
        }
        let mut until = json!({});
        if let Some(p) = &self.until_pattern {
            until["pattern"] = json!(p);
        }
        if let Some(ms) = self.until_idle {
            until["idle_ms"] = json!(ms);
        }
        if self.until_prompt {
            until["prompt"] = json!(true);
        }
        Some(until)
    }
}

/// `uexec ls`.
#[derive(Debug, Clone, clap::Args)]
pub struct LsArgs {
    /// Print the sessions as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `uexec logs`.
#[derive(Debug, Clone, clap::Args)]
pub struct LogsArgs {
    /// The session (running, or recently exited).
    pub id: i32,
    /// Keep printing what it prints until it exits.
    #[arg(short, long)]
    pub follow: bool,
    /// Only the last N lines (1 to 10000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..=10_000))]
    pub tail: Option<i64>,
    /// Print pages as JSON lines (offset, text) instead of raw output.
    #[arg(long)]
    pub json: bool,
    /// Print the transcript as an asciicast v2 recording (with its timing), for players
    /// such as `asciinema play`.
    #[arg(long, conflicts_with_all = ["follow", "tail", "json"])]
    pub asciicast: bool,
}

/// `uexec send`.
#[derive(Debug, Clone, clap::Args)]
pub struct SendArgs {
    /// The session.
    pub id: i32,
    /// Text to type; a newline (Enter) is added unless --no-newline.
    #[arg(required_unless_present_any = ["ctrl_c", "eof"])]
    pub text: Option<String>,
    /// Do not add the newline.
    #[arg(short = 'n', long)]
    pub no_newline: bool,
    /// Send Ctrl-C (an interrupt) instead of text.
    #[arg(long, conflicts_with_all = ["text", "eof"])]
    pub ctrl_c: bool,
    /// End the input (after the text, if any): close the stdin pipe, or on a terminal
    /// type Ctrl-D, which ends input at the start of a line.
    #[arg(long)]
    pub eof: bool,
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `uexec poll`.
#[derive(Debug, Clone, clap::Args)]
pub struct PollArgs {
    /// The session.
    pub id: i32,
    /// How long to wait for output, in ms (5000 to 300000; returns early at the exit).
    #[arg(long = "yield", value_name = "MS", default_value_t = 5_000, value_parser = clap::value_parser!(i64).range(MIN_EMPTY_POLL_YIELD_TIME_MS as i64..=MAX_EMPTY_POLL_YIELD_TIME_MS as i64))]
    pub yield_ms: i64,
    #[command(flatten)]
    pub until: UntilArgs,
    /// Print the result as JSON (output, exit_code or session_id, reason).
    #[arg(long)]
    pub json: bool,
}

/// `uexec wait`.
#[derive(Debug, Clone, clap::Args)]
pub struct WaitArgs {
    /// The session.
    pub id: i32,
    /// Give up after this many seconds (exit 124); default: wait as long as it runs.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u64>,
    /// Print the session's end as JSON (exit_code, exited, exit_notices).
    #[arg(long)]
    pub json: bool,
}

/// `uexec kill`.
#[derive(Debug, Clone, clap::Args)]
pub struct KillArgs {
    /// The session.
    pub id: i32,
    /// Print the answer as JSON ({session_id, terminated}).
    #[arg(long)]
    pub json: bool,
}

/// `--env NAME=VALUE`.
pub fn parse_assignment(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected NAME=VALUE, got {s:?}")),
    }
}

/// A failure, with the exit code it means.
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Self {
            code: EXIT_UEXEC,
            message: format!("{e:#}"),
        }
    }
}

/// A tool error as a failure: an unknown session is [`EXIT_NO_SESSION`], a bad argument a
/// usage error (2).
fn tool_failure(result: &ToolResult) -> Failure {
    let code = if result.text.contains("Unknown process id") {
        EXIT_NO_SESSION
    } else if result.text.contains("invalid arguments: ") {
        2
    } else {
        EXIT_UEXEC
    };
    Failure {
        code,
        message: result.text.clone(),
    }
}

async fn call(conn: &mut Conn, tool: &str, args: Value) -> Result<ToolResult, Failure> {
    let result = conn.call(tool, args).await?;
    if result.is_error {
        return Err(tool_failure(&result));
    }
    Ok(result)
}

fn print_json(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// Quotes `args` into one shell command line (one argument is a command line already).
fn command_line(args: &[String]) -> String {
    if let [one] = args {
        return one.clone();
    }
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub async fn run(target: &Target, args: RunArgs) -> Result<ExitCode, Failure> {
    let mut conn = Conn::open(target, args.env.clone())?;
    let result = conn.call("exec_command", run_call_args(&args)).await?;
    finish_run(&args, &result).map(ExitCode::from)
}

/// `uexec run [FLAGS] [--] CMD...` (`args` with argv[0]) read as clap reads it for the
/// engine, or None when the front should not decide (an unknown or repeated flag, a value
/// out of range, help, a missing command, an argument that is not UTF-8...). Returns the
/// `--socket` and the run.
pub fn plain_run(args: &[OsString]) -> Option<(Option<PathBuf>, RunArgs)> {
    let mut words = args.iter().skip(1).map(|a| a.to_str());
    if words.next()?? != "run" {
        return None;
    }
    let mut run = RunArgs {
        tty: false,
        yield_ms: RUN_YIELD_DEFAULT_MS,
        cwd: None,
        env: Vec::new(),
        no_login: false,
        until: UntilArgs::default(),
        timeout: None,
        json: false,
        command: Vec::new(),
    };
    let mut socket = None;
    let mut seen: Vec<&str> = Vec::new();
    while let Some(word) = words.next() {
        let word = word?;
        if word == "--" || !word.starts_with('-') {
            // The command: this word (unless `--`) and every word after it.
            if word != "--" {
                run.command.push(word.to_owned());
            }
            for word in words.by_ref() {
                run.command.push(word?.to_owned());
            }
            break;
        }
        let (name, inline) = match word.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (word, None),
        };
        if seen.contains(&name) && name != "--env" {
            return None;
        }
        seen.push(name);
        let flag = match name {
            "--tty" => &mut run.tty,
            "--no-login" => &mut run.no_login,
            "--json" => &mut run.json,
            "--until-prompt" => &mut run.until.until_prompt,
            _ => {
                let value = match inline {
                    Some(value) => value,
                    None => words.next()??,
                };
                if value.is_empty() || value.starts_with('-') {
                    return None;
                }
                match name {
                    "--yield" => run.yield_ms = ms_in(value, RUN_YIELD_MIN_MS..=RUN_YIELD_MAX_MS)?,
                    "--cwd" => run.cwd = Some(value.to_owned()),
                    "--env" => run.env.push(parse_assignment(value).ok()?),
                    "--timeout" => {
                        run.timeout = Some(ms_in(value, MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS)?)
                    }
                    "--until-pattern" => run.until.until_pattern = Some(value.to_owned()),
                    "--until-idle" => {
                        run.until.until_idle = Some(ms_in(value, MIN_IDLE_MS..=MAX_IDLE_MS)?)
                    }
                    "--socket" => socket = Some(PathBuf::from(value)),
                    _ => return None,
                }
                continue;
            }
        };
        if inline.is_some() {
            return None;
        }
        *flag = true;
    }
    if run.command.is_empty() {
        return None;
    }
    Some((socket, run))
}

/// `value` in ms if it is within `range`, as clap checks it for the engine (None: the
/// engine says why).
fn ms_in(value: &str, range: std::ops::RangeInclusive<i64>) -> Option<i64> {
    let ms = value.parse().ok()?;
    range.contains(&ms).then_some(ms)
}

/// The `exec_command` arguments of a `uexec run`.
pub fn run_call_args(args: &RunArgs) -> Value {
    let mut call_args = json!({
        "cmd": command_line(&args.command),
        "tty": args.tty,
        "yield_time_ms": args.yield_ms,
        "login": !args.no_login,
    });
    if let Some(cwd) = &args.cwd {
        call_args["workdir"] = json!(cwd);
    }
    if let Some(until) = args.until.json() {
        call_args["until"] = until;
    }
    if let Some(ms) = args.timeout {
        call_args["timeout_ms"] = json!(ms);
    }
    call_args
}

/// Prints what a `uexec run` got and says what to exit with: the command's own code, or 0
/// when it still runs as a session.
pub fn finish_run(args: &RunArgs, result: &ToolResult) -> Result<u8, Failure> {
    if result.is_error {
        return Err(tool_failure(result));
    }
    let s = &result.structured;
    if args.json {
        print_json(s);
    } else {
        print!("{}", s["output"].as_str().unwrap_or_default());
    }
    if let Some(id) = s["session_id"].as_i64() {
        if !args.json {
            eprintln!("uexec: still running as session {id}: `uexec logs -f {id}` follows it, `uexec wait {id}` waits for it, `uexec kill {id}` stops it");
        }
        return Ok(0);
    }
    Ok(exit_code_of(s["exit_code"].as_i64()))
}

fn exit_code_of(code: Option<i64>) -> u8 {
    match code {
        Some(c) => u8::try_from(c.clamp(0, 255)).unwrap_or(1),
        None => 1,
    }
}

pub async fn ls(target: &Target, args: LsArgs) -> Result<ExitCode, Failure> {
    let mut conn = Conn::open(target, Vec::new())?;
    let result = call(&mut conn, "list_sessions", json!({})).await?;
    let sessions = result.structured["sessions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
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

pub async fn logs(target: &Target, args: LogsArgs) -> Result<ExitCode, Failure> {
    let mut conn = Conn::open(target, Vec::new())?;
    if args.asciicast {
        let page = call(
            &mut conn,
            "read_output",
            json!({"session_id": args.id, "limit": 1}),
        )
        .await?;
        let dir = page.structured["transcript"].as_str().unwrap_or_default();
        let cast = asciicast(std::path::Path::new(dir)).map_err(|e| Failure {
            code: EXIT_UEXEC,
            message: format!("cannot read the transcript {dir}: {e}"),
        })?;
        std::io::stdout()
            .write_all(&cast)
            .map_err(anyhow::Error::from)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut offset = match args.tail {
        Some(n) => {
            let page = call(
                &mut conn,
                "read_output",
                json!({"session_id": args.id, "tail_lines": n}),
            )
            .await?;
            emit_page(&page.structured, args.json);
            page.structured["next_offset"].as_u64().unwrap_or(0)
        }
        None => 0,
    };
    let mut quiet_since = tokio::time::Instant::now();
    loop {
        let page = call(
            &mut conn,
            "read_output",
            json!({"session_id": args.id, "offset": offset, "limit": 262_144}),
        )
        .await?;
        let next = page.structured["next_offset"].as_u64().unwrap_or(offset);
        if next > offset {
            emit_page(&page.structured, args.json);
            let _ = std::io::stdout().flush();
            offset = next;
            quiet_since = tokio::time::Instant::now();
            continue;
        }
        if !args.follow {
            return Ok(ExitCode::SUCCESS);
        }
        // Caught up: stop once the session is over, else look again shortly (as `tail -f`).
        if quiet_since.elapsed() >= Duration::from_millis(500) {
            let listed = call(&mut conn, "list_sessions", json!({})).await?;
            let alive = listed.structured["sessions"].as_array().is_some_and(|all| {
                all.iter().any(|s| {
                    s["session_id"].as_i64() == Some(i64::from(args.id)) && s["state"] == "running"
                })
            });
            if !alive {
                // One last read: what it printed before the exit.
                let last = call(
                    &mut conn,
                    "read_output",
                    json!({"session_id": args.id, "offset": offset, "limit": 262_144}),
                )
                .await?;
                if last.structured["next_offset"].as_u64().unwrap_or(offset) > offset {
                    emit_page(&last.structured, args.json);
                }
                return Ok(ExitCode::SUCCESS);
            }
            quiet_since = tokio::time::Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A transcript directory as an asciicast v2 recording: a header, then one output event per
/// timing line; bytes that rotated away are left out, and a character split between two
/// writes is kept whole.
fn asciicast(dir: &std::path::Path) -> std::io::Result<Vec<u8>> {
    let meta = std::fs::read_to_string(dir.join("meta")).unwrap_or_default();
    let field = |name: &str| {
        meta.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_default()
            .to_owned()
    };
    let mut segments: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(dir)?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let index = name.strip_prefix("output.")?.parse().ok()?;
            Some((index, e.path()))
        })
        .collect();
    segments.sort();
    let segment_len = segments
        .first()
        .map(|(_, p)| std::fs::metadata(p).map(|m| m.len()))
        .transpose()?
        .unwrap_or(0);
    let first_index = segments.first().map_or(0, |(i, _)| *i);
    // Segments are all full but the last: the first kept one's length is the segment size
    // unless it is also the last.
    let first_kept = if segments.len() > 1 {
        first_index * segment_len
    } else {
        0
    };
    let mut data = Vec::new();
    for (_, path) in &segments {
        data.extend(std::fs::read(path)?);
    }
    let mut out = serde_json::to_vec(&json!({
        "version": 2,
        "width": 80,
        "height": 24,
        "timestamp": field("started_unix").parse::<u64>().unwrap_or(0),
        "title": field("command"),
    }))
    .map_err(std::io::Error::other)?;
    out.push(b'\n');
    let timing = std::fs::read_to_string(dir.join("timing")).unwrap_or_default();
    let mut at = 0u64;
    let mut carry: Vec<u8> = Vec::new();
    for line in timing.lines() {
        let mut words = line.split_whitespace();
        let (Some(t), Some(n)) = (
            words.next().and_then(|w| w.parse::<f64>().ok()),
            words.next().and_then(|w| w.parse::<u64>().ok()),
        ) else {
            continue;
        };
        let (start, end) = (at, at + n);
        at = end;
        if end <= first_kept {
            continue;
        }
        let from = usize::try_from(start.max(first_kept) - first_kept).unwrap_or(usize::MAX);
        let to = usize::try_from(end - first_kept)
            .unwrap_or(usize::MAX)
            .min(data.len());
        if from >= to {
            continue;
        }
        carry.extend_from_slice(&data[from..to]);
        let whole = carry.len() - uexec_core::utf8::incomplete_suffix_len(&carry);
        let text = String::from_utf8_lossy(&carry[..whole]).into_owned();
        carry.drain(..whole);
        out.extend(serde_json::to_vec(&json!([t, "o", text])).map_err(std::io::Error::other)?);
        out.push(b'\n');
    }
    Ok(out)
}

fn emit_page(page: &Value, json: bool) {
    if json {
        println!(
            "{}",
            json!({"offset": page["offset"], "next_offset": page["next_offset"], "text": page["text"]})
        );
    } else {
        print!("{}", page["text"].as_str().unwrap_or_default());
    }
}

pub async fn send(target: &Target, args: SendArgs) -> Result<ExitCode, Failure> {
    let mut conn = Conn::open(target, Vec::new())?;
    let mut eof = args.eof;
    let chars = if args.ctrl_c {
        "\u{3}".to_owned()
    } else {
        let mut text = args.text.clone().unwrap_or_default();
        let enter = !args.no_newline && args.text.is_some();
        if enter || eof {
            // Enter is a carriage return on a terminal, a newline on a pipe; the end of
            // input is Ctrl-D on a terminal, closing the pipe otherwise.
            let listed = call(&mut conn, "list_sessions", json!({})).await?;
            let tty = listed.structured["sessions"].as_array().is_some_and(|all| {
                all.iter().any(|s| {
                    s["session_id"].as_i64() == Some(i64::from(args.id)) && s["tty"] == true
                })
            });
            if enter {
                text.push(if tty { '\r' } else { '\n' });
            }
            if eof && tty {
                text.push('\u{4}');
                eof = false;
            }
        }
        text
    };
    let result = call(
        &mut conn,
        "send_input",
        json!({"session_id": args.id, "chars": chars, "eof": eof}),
    )
    .await?;
    if args.json {
        print_json(&result.structured);
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn poll(target: &Target, args: PollArgs) -> Result<ExitCode, Failure> {
    let mut conn = Conn::open(target, Vec::new())?;
    let mut poll_args = json!({"session_id": args.id, "yield_time_ms": args.yield_ms});
    if let Some(until) = args.until.json() {
        poll_args["until"] = until;
    }
    let result = call(&mut conn, "write_stdin", poll_args).await?;
    let s = &result.structured;
    if args.json {
        print_json(s);
    } else {
        print!("{}", s["output"].as_str().unwrap_or_default());
    }
    if s.get("exit_code").is_some() {
        return Ok(ExitCode::from(exit_code_of(s["exit_code"].as_i64())));
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn wait(target: &Target, args: WaitArgs) -> Result<ExitCode, Failure> {
    let mut conn = Conn::open(target, Vec::new())?;
    let deadline = args
        .timeout
        .map(|s| tokio::time::Instant::now() + Duration::from_secs(s));
    loop {
        let chunk = match deadline {
            Some(d) => d
                .saturating_duration_since(tokio::time::Instant::now())
                .min(Duration::from_secs(300)),
            None => Duration::from_secs(300),
        };
        let result = call(
            &mut conn,
            "await_exit",
            json!({"session_id": args.id, "yield_time_ms": chunk.as_millis() as u64}),
        )
        .await?;
        let s = &result.structured;
        if s["exited"] == true {
            if args.json {
                print_json(s);
            }
            return Ok(ExitCode::from(exit_code_of(s["exit_code"].as_i64())));
        }
        if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            if args.json {
                print_json(s);
            } else {
                eprintln!(
                    "uexec: session {} still runs after {} s",
                    args.id,
                    args.timeout.unwrap_or(0)
                );
            }
            return Ok(ExitCode::from(124));
        }
    }
}

pub async fn kill(target: &Target, args: KillArgs) -> Result<ExitCode, Failure> {
    let mut conn = Conn::open(target, Vec::new())?;
    let result = call(
        &mut conn,
        "terminate_session",
        json!({"session_id": args.id}),
    )
    .await?;
    if args.json {
        print_json(&json!({"session_id": args.id, "terminated": true}));
    } else {
        println!("{}", result.text);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `uexec run` as the engine parses it.
    #[derive(Debug, clap::Parser)]
    #[command(name = "uexec")]
    struct Cli {
        #[command(subcommand)]
        verb: Verb,
    }

    #[derive(Debug, clap::Subcommand)]
    enum Verb {
        Run {
            #[command(flatten)]
            target: Target,
            #[command(flatten)]
            args: RunArgs,
        },
    }

    fn argv(words: &[&str]) -> Vec<OsString> {
        ["uexec", "run"]
            .iter()
            .chain(words)
            .map(OsString::from)
            .collect()
    }

    fn by_clap(argv: &[OsString]) -> Option<(Option<PathBuf>, RunArgs)> {
        let Cli {
            verb: Verb::Run { target, args },
        } = <Cli as clap::Parser>::try_parse_from(argv).ok()?;
        Some((target.socket, args))
    }

    /// Every reading the front makes is the engine's, for every sequence of up to three
    /// words from a pool of flags, values and commands (the engine may take more).
    #[test]
    fn the_front_reads_a_run_as_the_engine_does_or_leaves_it_to_the_engine() {
        let pool = [
            "--tty",
            "--no-login",
            "--json",
            "--until-prompt",
            "--yield",
            "300",
            "--yield=250",
            "30001",
            "--env",
            "A=1",
            "--env=B=",
            "=x",
            "--cwd",
            "/tmp",
            "--cwd=",
            "--timeout",
            "-5",
            "--until-idle",
            "x",
            "--until-pattern",
            "--socket=/s",
            "--",
            "echo",
            "-n",
            "--tty=1",
            "-h",
            "--help",
            "--log-file",
            "--ttyy",
        ];
        let mut sequences: Vec<Vec<&str>> = vec![vec![]];
        for _ in 0..3 {
            let longer: Vec<Vec<&str>> = sequences
                .iter()
                .filter(|s| s.len() == sequences.last().map_or(0, Vec::len))
                .flat_map(|s| {
                    pool.iter().map(move |w| {
                        let mut s = s.clone();
                        s.push(w);
                        s
                    })
                })
                .collect();
            sequences.extend(longer);
        }
        let mut made = 0;
        for words in &sequences {
            let argv = argv(words);
            if let Some(ours) = plain_run(&argv) {
                made += 1;
                assert_eq!(Some(ours), by_clap(&argv), "{words:?}");
            }
        }
        assert!(made > 1_000, "the front made only {made} of the runs");
    }

    #[test]
    fn the_usual_runs_are_made_by_the_front() {
        for words in [
            &["--", "true"][..],
            &["make", "test"],
            &["--tty", "--yield", "2000", "--", "python3"],
            &[
                "--json", "--env", "A=1", "--cwd=/", "--", "sh", "-c", "echo $A",
            ],
            &[
                "--until-pattern",
                "ready",
                "--timeout",
                "600000",
                "--",
                "npm run dev",
            ],
            &[
                "--no-login",
                "--until-idle",
                "500",
                "--until-prompt",
                "--socket",
                "/s",
                "x",
            ],
        ] {
            let argv = argv(words);
            assert!(plain_run(&argv).is_some(), "{words:?}");
            assert_eq!(plain_run(&argv), by_clap(&argv), "{words:?}");
        }
    }

    #[test]
    fn help_bad_values_and_anything_unknown_are_the_engines() {
        for words in [
            &[][..],
            &["--help"],
            &["--yield", "10", "--", "true"],
            &["--yield", "x", "--", "true"],
            &["--env", "novalue", "--", "true"],
            &["--tty", "--tty", "--", "true"],
            &["--cwd", "--", "true"],
            &["--log-file", "l", "--", "true"],
            &["--frobnicate", "--", "true"],
            &["--"],
        ] {
            assert_eq!(plain_run(&argv(words)), None, "{words:?}");
        }
        // Not a run at all, or not UTF-8.
        assert_eq!(
            plain_run(&[OsString::from("uexec"), OsString::from("ls")]),
            None
        );
        use std::os::unix::ffi::OsStringExt;
        let mut bad = argv(&["--", "echo"]);
        bad.push(OsString::from_vec(vec![0xff]));
        assert_eq!(plain_run(&bad), None);
    }
}
