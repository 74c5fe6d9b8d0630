//! `uexec run [FLAGS] [--] CMD...`: a command in the daemon, as a person runs one in a
//! shell: its output as it comes, Ctrl-C to interrupt it, stdin passed on, and its own exit
//! code (see [`follow`]). Its [`Mode`]: with `--detach` alone it is started as the
//! foreground run is and left at once (its id on stdout, exit 0, as `docker run -d`); with
//! a window (`--yield`, `--until-*`, `--json`) it is one `exec_command`: what the window
//! saw, and its exit code, or its session when it runs on ([`left_running`] says with what
//! code).
//!
//! The front (`uexec`, without the engine linked in) makes a plain run itself, so this file
//! holds the run in the two readings that must agree:
//!
//! 1. clap reads [`RunArgs`] for the engine;
//! 2. [`plain_run`] reads the same words by hand for the front, or gives up (None) where
//!    the engine should decide (help, an unknown flag, a value out of range...);
//! 3. both build the call with [`run_call_args`] and print its answer with [`finish_run`].
//!
//! The tests check that every reading [`plain_run`] makes is clap's.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{json, Value};

pub mod follow;

use super::common::{
    exit_code_of, parse_session_name, print_json, text_failure, tool_failure, until_idle, Failure,
    UntilArgs, EXIT_STILL_RUNNING, EXIT_UEXEC,
};
use super::conn::{Conn, Target, ToolResult};
use follow::Joined;
use uexec_core::limits::{MAX_TIMEOUT_MS, MIN_TIMEOUT_MS};

/// `uexec run --yield`: its default and its bounds, in ms.
pub const RUN_YIELD_DEFAULT_MS: i64 = 10_000;
pub const RUN_YIELD_MIN_MS: i64 = 250;
pub const RUN_YIELD_MAX_MS: i64 = 30_000;

/// `uexec run`.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct RunArgs {
    /// Run in a pseudo-terminal: this terminal is joined to it (raw mode, its size followed;
    /// Ctrl-\ detaches), as `uexec attach --write` is.
    #[arg(long)]
    pub tty: bool,
    /// Start the command and return at once, leaving it running as a session (`uexec ls`):
    /// print its id and exit 0, as `docker run -d` does. With --yield or --until-*, return
    /// after that window instead.
    #[arg(short = 'd', long)]
    pub detach: bool,
    /// Watch the command this long, then return what it printed and its exit code, or, if it
    /// still runs, leave it running (exit 0 with --detach, else 4): 250ms to 30s; a bare
    /// number is ms.
    #[arg(long = "yield", value_name = "DURATION", value_parser = run_yield)]
    pub yield_ms: Option<i64>,
    /// Name the session (1 to 32 of A-Z a-z 0-9 . _ -, not all digits; unique among your
    /// running sessions): `attach`, `logs`, `send`, `kill`, `wait` then take it for the id.
    #[arg(long, value_name = "NAME", value_parser = parse_session_name)]
    pub name: Option<String>,
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
    /// Hard timeout (100ms to 24h; a bare number is ms): SIGTERM, then SIGKILL 2 s later;
    /// exit code 124.
    #[arg(long, value_name = "DURATION", value_parser = run_timeout)]
    pub timeout: Option<i64>,
    /// Print the result as JSON: {output, exit_code} or {output, session_id} after a window
    /// (10s unless --yield); with --detach alone, {session_id} at once.
    #[arg(long)]
    pub json: bool,
    /// The command and its arguments (one argument is taken as a shell command line). A
    /// word before it that starts with `-` is a flag of `run` (a mistyped one is an error):
    /// put `--` before a command that starts with `-`.
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `--yield`, in ms.
pub fn run_yield(text: &str) -> Result<i64, String> {
    super::duration::ms_within(text, "ms", RUN_YIELD_MIN_MS..=RUN_YIELD_MAX_MS)
}

/// `--timeout`, in ms.
pub fn run_timeout(text: &str) -> Result<i64, String> {
    super::duration::ms_within(text, "ms", MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS)
}

/// `--env NAME=VALUE`.
pub fn parse_assignment(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected NAME=VALUE, got {s:?}")),
    }
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

/// How a `uexec run` goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Followed to its end, in the foreground: its output, Ctrl-C, its exit code.
    Follow,
    /// `--detach`: started, its id said, left running (exit 0).
    Detach,
    /// A window (`--yield`, `--until-*`, `--json`): what it printed by then, and its exit
    /// code or its session.
    Window,
}

impl RunArgs {
    /// How this run goes: a window when a flag asks for one, else detached at the spawn
    /// (`--detach`), else followed.
    pub fn mode(&self) -> Mode {
        if self.yield_ms.is_some() || self.until.json().is_some() {
            Mode::Window
        } else if self.detach {
            Mode::Detach
        } else if self.json {
            Mode::Window
        } else {
            Mode::Follow
        }
    }
}

pub async fn run(target: &Target, args: RunArgs) -> Result<ExitCode, Failure> {
    match args.mode() {
        Mode::Follow => foreground(target, args).await.map(ExitCode::from),
        Mode::Detach => detached(target, args).await.map(ExitCode::from),
        Mode::Window => {
            let mut conn = Conn::open(target, args.env.clone())?;
            let result = conn.call("exec_command", run_call_args(&args)).await?;
            finish_run(&args, &result).map(ExitCode::from)
        }
    }
}

/// `uexec run -d`: the run's hello, without stdin; the id once it started.
async fn detached(target: &Target, args: RunArgs) -> Result<u8, Failure> {
    let hello = run_hello(uexec_mcp::daemon::build_id(), &args, Joined::NONE)?;
    let (down, stream) = connect_run(target, &hello).await?;
    tokio::task::spawn_blocking(move || follow::leave_at_spawn(down, &stream, args.json))
        .await
        .map_err(|e| Failure {
            code: EXIT_UEXEC,
            message: format!("the run's follower failed: {e}"),
        })?
}

/// The connection of a run's `hello` (the daemon started if none runs), as a blocking
/// stream and what came after the reply.
async fn connect_run(
    target: &Target,
    hello: &uexec_protocol::daemon::Hello,
) -> Result<(follow::Down, std::os::unix::net::UnixStream), Failure> {
    let socket = match &target.socket {
        Some(path) => path.clone(),
        None => uexec_mcp::daemon::default_socket().map_err(anyhow::Error::from)?,
    };
    let connected = uexec_mcp::daemon::client::connect(&socket, hello, true, &[])
        .await
        .map_err(|e| match e.kind() {
            uexec_mcp::daemon::client::ClientErrorKind::Refused { error, .. } => {
                text_failure(error)
            }
            _ => Failure::from(anyhow::Error::from(e)),
        })?;
    let stream = connected
        .stream
        .into_std()
        .and_then(|s| s.set_nonblocking(false).map(|()| s))
        .map_err(anyhow::Error::from)?;
    let down = std::io::BufReader::new(std::io::Read::chain(
        std::io::Cursor::new(connected.after),
        stream.try_clone().map_err(anyhow::Error::from)?,
    ));
    Ok((down, stream))
}

/// The hello of a foreground run: the person's, with the command (see [`run_hello`]).
async fn foreground(target: &Target, args: RunArgs) -> Result<u8, Failure> {
    let joined = Joined::here(args.tty);
    let hello = run_hello(uexec_mcp::daemon::build_id(), &args, joined)?;
    let signals = follow::catch_signals(joined)?;
    let (down, stream) = connect_run(target, &hello).await?;
    tokio::task::spawn_blocking(move || follow::follow(down, &stream, joined, signals))
        .await
        .map_err(|e| Failure {
            code: EXIT_UEXEC,
            message: format!("the run's follower failed: {e}"),
        })?
}

/// A person's hello that starts `args` in the foreground, for the engine build `build`.
pub fn run_hello(
    build: String,
    args: &RunArgs,
    joined: Joined,
) -> anyhow::Result<uexec_protocol::daemon::Hello> {
    let mut hello = super::conn::person_hello(build, args.env.clone())?;
    let (rows, cols) = uexec_sys::window_size(std::os::fd::AsRawFd::as_raw_fd(&std::io::stdout()))
        .ok()
        .filter(|(r, c)| *r > 0 && *c > 0)
        .unwrap_or((24, 80));
    let mut arguments = run_call_args(args);
    if let Some(fields) = arguments.as_object_mut() {
        fields.remove("yield_time_ms");
        if joined.stdin && !args.tty {
            fields.insert("stdin".to_owned(), json!("pipe"));
        }
    }
    hello.run = Some(uexec_protocol::daemon::RunRequest {
        arguments,
        rows,
        cols,
        detach: args.mode() == Mode::Detach,
    });
    Ok(hello)
}

/// `uexec run [FLAGS] [--] CMD...` (`args` with `argv[0]`) read as clap reads it for the
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
        detach: false,
        name: None,
        yield_ms: None,
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
        let name = if name == "-d" { "--detach" } else { name };
        if seen.contains(&name) && name != "--env" {
            return None;
        }
        seen.push(name);
        let flag = match name {
            "--tty" => &mut run.tty,
            "--detach" => &mut run.detach,
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
                    "--yield" => run.yield_ms = Some(run_yield(value).ok()?),
                    "--cwd" => run.cwd = Some(value.to_owned()),
                    "--name" => run.name = Some(parse_session_name(value).ok()?),
                    "--env" => run.env.push(parse_assignment(value).ok()?),
                    "--timeout" => run.timeout = Some(run_timeout(value).ok()?),
                    "--until-pattern" => run.until.until_pattern = Some(value.to_owned()),
                    "--until-idle" => run.until.until_idle = Some(until_idle(value).ok()?),
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

/// The `exec_command` arguments of a `uexec run`.
pub fn run_call_args(args: &RunArgs) -> Value {
    let mut call_args = json!({
        "cmd": command_line(&args.command),
        "tty": args.tty,
        "yield_time_ms": args.yield_ms.unwrap_or(RUN_YIELD_DEFAULT_MS),
        "login": !args.no_login,
    });
    if let Some(cwd) = &args.cwd {
        call_args["workdir"] = json!(cwd);
    }
    if let Some(name) = &args.name {
        call_args["name"] = json!(name);
    }
    if let Some(until) = args.until.json() {
        call_args["until"] = until;
    }
    if let Some(ms) = args.timeout {
        call_args["timeout_ms"] = json!(ms);
    }
    call_args
}

/// Prints what a windowed `uexec run` got and says what to exit with: the command's own
/// code, or [`EXIT_STILL_RUNNING`] when it still runs as a session.
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
        return Ok(left_running(args, s["reason"].as_str()));
    }
    Ok(exit_code_of(s["exit_code"].as_i64()))
}

/// What a window that left its command running exits with: 0 when that was asked for (an
/// `--until-*` condition met; without one, `--detach`), else [`EXIT_STILL_RUNNING`] (the
/// window ran out before the condition, or nobody asked to leave it running).
fn left_running(args: &RunArgs, reason: Option<&str>) -> u8 {
    let met = matches!(reason, Some("matched" | "idle" | "prompt"));
    let asked = if args.until.json().is_some() {
        met
    } else {
        args.detach
    };
    if asked {
        0
    } else {
        EXIT_STILL_RUNNING
    }
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
            "-d",
            "--detach",
            "--no-login",
            "--json",
            "--until-prompt",
            "--yield",
            "300",
            "--yield=250",
            "30001",
            "2s",
            "500ms",
            "5parsecs",
            "--env",
            "A=1",
            "--env=B=",
            "=x",
            "--cwd",
            "/tmp",
            "--name",
            "web.1",
            "123",
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
                "--yield",
                "2s",
                "--timeout=10m",
                "--until-idle",
                "500ms",
                "--",
                "make",
            ],
            &["-d", "--name", "web", "--", "npm run dev"],
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
