//! `uexec-engine`: every face over one engine (`mcp`, `serve`, `daemon`, the CLI verbs).
//! People and agents call `uexec`, the small front beside it, which execs this binary for
//! all but a plain `uexec run`.

#![forbid(unsafe_code)]

mod args;
mod last_will;
mod relay;

use uexec_cli::cli;

use std::os::unix::fs::OpenOptionsExt as _;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "uexec",
    version,
    about = "Run shell commands for AI agents: start, observe, poll, type into and stop long-running commands without orphans or lost output.",
    after_help = CLI_AFTER_HELP
)]
struct Cli {
    /// Write logs to this file instead of stderr (the level comes from UEXEC_LOG, e.g.
    /// `UEXEC_LOG=debug`; default `warn`). Logs never go to stdout.
    #[arg(long, global = true, value_name = "PATH")]
    log_file: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

// Parsed once and consumed at once: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the MCP tools (exec_command, write_stdin, list_sessions, terminate_session)
    /// over stdio, or over streamable HTTP with --http.
    #[command(after_help = "Examples:
  uexec mcp                                     stdio, for Codex, Claude Code, Cursor...
  claude mcp add uexec -- /path/to/uexec mcp    register it with Claude Code
  uexec mcp --http 127.0.0.1:8765               streamable HTTP at http://127.0.0.1:8765/mcp (this user only)
  uexec mcp --http 0.0.0.0:8765 --token-file TOKEN --tls-cert cert.pem --tls-key key.pem
                                                https://HOST:8765/mcp for clients with the token
  uexec mcp --environment box=wss://box:9000 --environment-token-file box=BOXTOKEN --remote-ca ca.pem
                                                also run commands on an exec server (environment_id: \"box\")
  uexec mcp --environments ~/.codex/environments.toml --remote-ca ca.pem
                                                the exec servers of Codex's environments file (reloaded on change)

Every session is killed when the client goes away (stdin EOF), on SIGTERM/SIGINT, and, through
a watchdog, even when uexec itself is killed.")]
    Mcp(args::mcp::McpArgs),
    /// Serve the exec server wire dialect (Codex-compatible) over WebSocket or stdio.
    #[command(after_help = "Examples:
  uexec serve                                          ws://127.0.0.1:<free port>, printed on stdout (this user only)
  uexec serve --listen wss://0.0.0.0:9000 --token-file TOKEN --tls-cert cert.pem --tls-key key.pem
                                                       reachable from other hosts (token and TLS required)
  uexec serve --listen stdio                           newline-delimited JSON on stdin/stdout
  CODEX_EXEC_SERVER_URL=wss://host:9000 codex          let Codex run its commands here

Without a token, only this server's own user may connect (checked over loopback). A
non-loopback address needs a token, and TLS unless --insecure-plaintext is given.")]
    Serve(args::serve::ServeArgs),
    /// Own this user's sessions in the background, where people see them and where they may
    /// outlive the MCP servers that started them (`uexec mcp` starts it when needed).
    #[command(
        after_help = "The daemon listens on a Unix socket in a private directory ($XDG_RUNTIME_DIR/uexec/,
else /run/user/<uid>/uexec/ when logind made /run/user/<uid>, else <temp dir>/uexec-<uid>/;
it must be this user's, mode 0700) and answers only this user. It exits after --idle-timeout seconds with no running session and no client, or on
SIGTERM/SIGINT, killing what is left; if it is killed, its watchdog kills every session.

Examples:
  uexec daemon                          run in the foreground (logs on stderr)
  uexec daemon --status                 is one running? pid, build, uptime, sessions (exit 3: none)
  uexec mcp --daemon                    an MCP server whose sessions live in the daemon"
    )]
    Daemon(args::daemon::DaemonArgs),
    /// Run a command in the daemon, as in a shell: its output as it comes (stdout and stderr
    /// in the order it wrote them), stdin passed on, Ctrl-C to interrupt it, and its exit
    /// code. It is a session meanwhile (`uexec ls`, `uexec attach`).
    #[command(
        after_help = "Exit codes: the command's own (130 after Ctrl-C, 124 after --timeout); 4 when it
was left running (--detach, or Ctrl-C twice within a second); 2 bad usage; 125 uexec failed.

Examples:
  uexec run -- make test                 make's output, live, and its exit code
  printf 'b\\na\\n' | uexec run -- sort   stdin goes through
  uexec run --tty -- python3             a REPL in this terminal (Ctrl-\\ leaves it running)
  uexec run -d --until-pattern ready -- npm run dev
                                         returns once it printed `ready`; the server runs on (exit 4)"
    )]
    Run {
        #[command(flatten)]
        target: cli::conn::Target,
        #[command(flatten)]
        args: cli::RunArgs,
    },
    /// List every session in the daemon: id, name, owner (an MCP client, or @person), state
    /// (running, paused, or exited with its code), when it ended, tty, age, CPU time (`-`
    /// without a cgroup), cwd, command and last output line. Ended sessions stay listed until someone is told of their exit; with -a,
    /// until `uexec rm` or `uexec prune` removes them or their transcript is pruned.
    Ls {
        #[command(flatten)]
        target: cli::conn::Target,
        #[command(flatten)]
        args: cli::LsArgs,
    },
    /// Print a session's output from its transcript (all of it, not only what calls kept),
    /// and with -f follow it until it exits. Takes nothing from the session's owner.
    Logs {
        #[command(flatten)]
        target: cli::conn::Target,
        #[command(flatten)]
        args: cli::LogsArgs,
    },
    /// Type into a session (a line, Ctrl-C, or EOF) without taking its output.
    Send {
        #[command(flatten)]
        target: cli::conn::Target,
        #[command(flatten)]
        args: cli::SendArgs,
    },
    /// Take a session's new output, as the agent's write_stdin would (use `logs` to watch
    /// an agent's session without taking its output).
    Poll {
        #[command(flatten)]
        target: cli::conn::Target,
        #[command(flatten)]
        args: cli::PollArgs,
    },
    /// Wait for a session to exit and exit with its code (124 after --timeout), taking
    /// nothing from its owner.
    Wait {
        #[command(flatten)]
        target: cli::conn::Target,
        #[command(flatten)]
        args: cli::WaitArgs,
    },
    /// Kill sessions (by id or name, or --all of them) and every process they started, or
    /// only send them a signal (--signal TERM). Exit codes: 0 every one done; else that of
    /// the first that was not (the others are still done): 3 no such session (with
    /// --signal: or it has exited already), 125 uexec failed; 2 bad usage.
    #[command(after_help = "Examples:
  uexec kill 48213 devserver            kill two sessions (SIGKILL to each process group)
  uexec kill --signal TERM devserver    ask it to stop; `uexec ls` then shows how it exited
  uexec kill --all --owner @person      every running session you started")]
    Kill {
        #[command(flatten)]
        target: cli::conn::Target,
        #[command(flatten)]
        args: cli::KillArgs,
    },
    /// Freeze a running session and every process it started (cgroup.freeze), until
    /// `uexec resume`; `uexec ls` shows it paused. Needs a cgroup per session (`uexec
    /// doctor`). Exit codes: 0 paused; 3 no such session (or it has exited); 125 it cannot be
    /// frozen (no cgroup v2 here) or uexec failed.
    Pause {
        #[command(flatten)]
        target: cli::conn::Target,
        #[command(flatten)]
        args: cli::PauseArgs,
    },
    /// Thaw a session `uexec pause` froze. Exit codes: 0 resumed; 3 no such session (or it
    /// has exited); 125 it cannot be (no cgroup v2 here) or uexec failed.
    Resume {
        #[command(flatten)]
        target: cli::conn::Target,
        #[command(flatten)]
        args: cli::PauseArgs,
    },
    /// Keep an agent's session running after the agent's last client has gone (its sessions
    /// otherwise end then, after its `uexec mcp --linger`, 0 s by default); `uexec ls`
    /// shows it kept. --undo lets it end with them again. Exit codes: 0 done; 3 no such
    /// session (or it has exited); 125 uexec failed.
    Keep {
        #[command(flatten)]
        target: cli::conn::Target,
        #[command(flatten)]
        args: cli::KeepArgs,
    },
    /// Remove ended sessions (`uexec ls -a` lists them) and their transcripts. A running
    /// one is refused unless --force, which kills it. Exit codes: 0 every one removed; else
    /// that of the first that was not: 4 still running (left alone), 3 no such session.
    Rm {
        #[command(flatten)]
        target: cli::conn::Target,
        #[command(flatten)]
        args: cli::RmArgs,
    },
    /// Remove every ended session of every owner and their transcripts; running ones stay.
    Prune {
        #[command(flatten)]
        target: cli::conn::Target,
        #[command(flatten)]
        args: cli::PruneArgs,
    },
    /// Join this terminal to a session: its screen is redrawn, then followed live. Read-only
    /// unless --write (then the model's writes are refused until you detach, and the
    /// session's size follows this terminal). Ctrl-\ detaches; the session keeps running.
    Attach {
        #[command(flatten)]
        target: cli::conn::Target,
        #[command(flatten)]
        args: cli::attach::AttachArgs,
    },
    /// Print the daemon's figures as Prometheus text: sessions by state, spawns, exits and
    /// spawn failures by cause, bytes printed, transcript bytes on disk, CPU time and
    /// memory, and the latency of each tool's calls (no session id nor command in any
    /// label). Starts no daemon. Exit codes: 0 printed; 3 no daemon runs; 125 uexec failed.
    #[command(after_help = "Example (node_exporter's textfile collector, from cron):
  uexec metrics > /var/lib/node_exporter/textfile/uexec.prom.$$ && mv /var/lib/node_exporter/textfile/uexec.prom.$$ /var/lib/node_exporter/textfile/uexec.prom")]
    Metrics {
        #[command(flatten)]
        target: cli::conn::Target,
    },
    /// Print a shell completion script (e.g. `uexec completions bash > /etc/bash_completion.d/uexec`).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print what this machine supports of the sandbox (Landlock, user, pid, mount and
    /// network namespaces, seccomp) and whether sessions get a cgroup v2 each; exit 0.
    Doctor {
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write the man pages (uexec.1, and one per verb: uexec-mcp.1, uexec-run.1...) into DIR,
    /// from the same tree as --help; exit 125 when they cannot be written. For packagers.
    #[command(hide = true)]
    Man {
        /// The directory (made if missing).
        dir: std::path::PathBuf,
    },
}

const CLI_AFTER_HELP: &str = "Exit codes:
  run, wait        the command's own code (124 after --timeout; run: 130 after Ctrl-C)
  4                run left the command running (--detach, or Ctrl-C twice within a second);
                   rm found a session running (without --force)
  0                success
  2                bad usage (a flag or value; the message names it)
  3                no such session (daemon --status: no daemon runs)
  125              uexec itself failed (the daemon unreachable or refusing, stdout unwritable)
  mcp, serve, daemon: 0 once stopped (stdin EOF, SIGTERM/SIGINT, --idle-timeout), 1 if they cannot start

Units: durations in milliseconds (MS) unless a flag says SECONDS; sizes in BYTES; output budgets in
TOKENS (4 bytes each). Output is never coloured.

`uexec` is a small front: it makes a plain `uexec run` itself and runs `uexec-engine`, installed beside it, for everything else (the daemon runs as `uexec-engine daemon`).";

fn main() -> std::process::ExitCode {
    // The sandbox launcher first: single-threaded and dumpable (its uid map is written
    // through /proc/self, which an undumpable process does not own).
    if std::env::args_os().nth(1).as_deref() == Some(uexec_sandbox::LAUNCHER_SUBCOMMAND.as_ref()) {
        std::process::exit(uexec_sandbox::launcher::run(std::env::args_os().skip(2)));
    }
    harden_process();
    if std::env::args().nth(1).as_deref() == Some(last_will::SUBCOMMAND) {
        last_will::run();
        return std::process::ExitCode::SUCCESS;
    }
    let cli = parse_cli();
    if let Command::Doctor { json } = cli.command {
        // Before any thread exists: the probes fork and enter namespaces.
        let facilities = uexec_sandbox::doctor::check();
        return print_whole(uexec_sandbox::doctor::render(&facilities, json).as_bytes());
    }
    if let Command::Man { dir } = &cli.command {
        return write_man_pages(dir);
    }
    if let Command::Completions { shell } = &cli.command {
        let mut command = <Cli as clap::CommandFactory>::command();
        let mut script = Vec::new();
        clap_complete::generate(*shell, &mut command, "uexec", &mut script);
        return print_whole(&script);
    }
    match run_face(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("Error: {e:?}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `text` on stdout, as a Unix tool prints: a reader that goes away (`| head -1`) ends the
/// process quietly (SIGPIPE), and another failure to write is said, exit 125, never a panic.
fn print_whole(text: &[u8]) -> std::process::ExitCode {
    use std::io::Write as _;
    uexec_sys::default_sigpipe();
    let mut out = std::io::stdout().lock();
    match out.write_all(text).and_then(|()| out.flush()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("uexec: cannot write to stdout: {e}");
            std::process::ExitCode::from(cli::EXIT_UEXEC)
        }
    }
}

/// `uexec man DIR`: the pages of the clap tree, with the plain version (a page is the same on
/// every machine; `--version` adds this one's build).
fn write_man_pages(dir: &std::path::Path) -> std::process::ExitCode {
    /// `cmd`'s page and its visible verbs' (`uexec-mcp.1`), as `clap_mangen::generate_to`
    /// writes them, each saying which uexec it documents.
    fn write(cmd: clap::Command, dir: &std::path::Path) -> std::io::Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            write(sub.clone(), dir)?;
        }
        let source = format!("uexec {}", env!("CARGO_PKG_VERSION"));
        clap_mangen::Man::new(cmd).source(source).generate_to(dir)?;
        Ok(())
    }
    let mut cmd = <Cli as clap::CommandFactory>::command().disable_help_subcommand(true);
    // Built, the verbs are named `uexec-mcp`..., and their pages so.
    cmd.build();
    let written = std::fs::create_dir_all(dir).and_then(|()| write(cmd, dir));
    match written {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "uexec: cannot write the man pages into {}: {e}",
                dir.display()
            );
            std::process::ExitCode::from(cli::EXIT_UEXEC)
        }
    }
}

/// The command line; `--version` names the build too (the engine's, as its hellos say it:
/// which of two builds of one version runs).
fn parse_cli() -> Cli {
    let version = format!(
        "{} (build {})",
        env!("CARGO_PKG_VERSION"),
        uexec_mcp::daemon::build_id()
    );
    // clap keeps a `&'static str` (without its `string` feature): one line, once a process.
    let version: &'static str = Box::leak(version.into_boxed_str());
    let mut command = Cli::command().version(version);
    let matches = command.get_matches_mut();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // A conflict clap's attributes cannot explain, reported as clap reports one (exit 2).
    if let Command::Mcp(args) = &cli.command {
        if let Some(why) = args.conflict() {
            if let Some(mcp) = command.find_subcommand_mut("mcp") {
                mcp.error(clap::error::ErrorKind::ArgumentConflict, why)
                    .exit();
            }
        }
    }
    cli
}

/// See `run_face`: tungstenite's client handshake logs its request at trace.
const TUNGSTENITE_CLIENT_HANDSHAKE_AT_MOST_DEBUG: &str = "tungstenite::handshake::client=debug";

fn run_face(cli: Cli) -> anyhow::Result<std::process::ExitCode> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("UEXEC_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"))
        // At trace, tungstenite logs each client handshake's request whole, the bearer
        // token of an environment's `Authorization` header with it: never a log's to hold.
        .add_directive(TUNGSTENITE_CLIENT_HANDSHAKE_AT_MOST_DEBUG.parse()?);
    let logs = tracing_subscriber::fmt().with_env_filter(filter);
    match &cli.log_file {
        Some(path) => {
            // 0600: logs name commands, paths and clients; they are for this user alone.
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(path)
                .map_err(|e| anyhow::anyhow!("cannot open the log file {}: {e}", path.display()))?;
            logs.with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))
                .init();
        }
        None => logs.with_writer(std::io::stderr).init(),
    }
    // The faces that own processes get a last will; the CLI verbs own none (the daemon does),
    // and a person's short command should not pay for a watchdog, nor for a second thread.
    let owns_sessions = match &cli.command {
        Command::Mcp(_) | Command::Serve(_) => true,
        Command::Daemon(args) => !args.status,
        _ => false,
    };
    let log_file = cli.log_file.clone();
    let runtime = if owns_sessions {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    };
    if owns_sessions {
        last_will::install();
        // A file size limit must stop a transcript, not the face and its sessions.
        uexec_sys::ignore_sigxfsz();
    } else {
        // A person's verbs print to pipes (`uexec ls | head -1`): like any Unix tool, they end
        // quietly when the reader goes away, instead of failing on EPIPE mid-print. The
        // faces that own sessions keep SIGPIPE ignored: a client gone is no reason to die.
        uexec_sys::default_sigpipe();
    }
    let result = runtime.block_on(async move {
        let verb = match cli.command {
            Command::Mcp(args) => {
                let (mut options, place) = args.into_options();
                options.confinement = confinement();
                let served = match place {
                    args::mcp::Place::Daemon { target, asked } => {
                        match relay::run(target, options.clone()).await? {
                            relay::Relayed::Done => Ok(()),
                            relay::Relayed::NoDaemon(e) if asked => Err(e.into()),
                            relay::Relayed::NoDaemon(e) => {
                                eprintln!(
                                    "uexec mcp: {e:#}; this server keeps its sessions itself, \
                                     as with --in-process (`uexec ls` does not see them)"
                                );
                                uexec_mcp::run(options).await.map_err(Into::into)
                            }
                        }
                    }
                    args::mcp::Place::InProcess => {
                        uexec_mcp::run(options).await.map_err(Into::into)
                    }
                };
                return served.map(|()| std::process::ExitCode::SUCCESS);
            }
            Command::Serve(args) => {
                return uexec_server::serve(args.into())
                    .await
                    .map(|()| std::process::ExitCode::SUCCESS)
                    .map_err(anyhow::Error::from)
            }
            Command::Daemon(args) if args.status => {
                cli::daemon_status(args.socket, args.json).await
            }
            Command::Daemon(args) => {
                // Started from /proc/self/exe (`start_daemon`): named after its path again.
                uexec_sys::name_after_argv0();
                let mut options: uexec_mcp::daemon::DaemonOptions = args.into();
                options.confinement = confinement();
                options.log_file = log_file;
                return uexec_mcp::daemon::run(options)
                    .await
                    .map(|()| std::process::ExitCode::SUCCESS)
                    .map_err(Into::into);
            }
            Command::Completions { .. } | Command::Doctor { .. } | Command::Man { .. } => {
                return Ok(std::process::ExitCode::SUCCESS)
            }
            Command::Run { target, args } => cli::run(&target, args).await,
            Command::Ls { target, args } => cli::ls(&target, args).await,
            Command::Logs { target, args } => cli::logs(&target, args).await,
            Command::Send { target, args } => cli::send(&target, args).await,
            Command::Poll { target, args } => cli::poll(&target, args).await,
            Command::Wait { target, args } => cli::wait(&target, args).await,
            Command::Kill { target, args } => cli::kill(&target, args).await,
            Command::Pause { target, args } => cli::pause(&target, args, true).await,
            Command::Resume { target, args } => cli::pause(&target, args, false).await,
            Command::Keep { target, args } => cli::keep(&target, args).await,
            Command::Metrics { target } => cli::metrics(&target).await,
            Command::Rm { target, args } => cli::rm(&target, args).await,
            Command::Prune { target, args } => cli::prune(&target, args).await,
            Command::Attach { target, args } => cli::attach::attach(&target, args).await,
        };
        Ok(verb.unwrap_or_else(|f| {
            eprintln!("uexec: {}", f.message);
            std::process::ExitCode::from(f.code)
        }))
    });
    // A blocking read of stdin (the stdio transports) cannot be cancelled: do not wait for
    // it once the face is done.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    result
}

/// Start-up hardening, before anything else runs (the watchdog included: it holds the same
/// environment):
/// 1. undumpable: the commands we run, of the same user, can no longer read our
///    `/proc/PID/environ` (a token in UEXEC_TOKEN) or memory, nor ptrace us;
/// 2. SIGCHLD back to SIG_DFL: inherited as SIG_IGN, children would be reaped by the kernel
///    and no session could ever learn its exit status;
/// 3. the soft fd limit raised to the hard one, so sessions and connections do not meet
///    EMFILE at 1024.
///
/// Logging is not set up yet: failures go to stderr.
fn harden_process() {
    if let Err(e) = uexec_sys::set_undumpable() {
        eprintln!("uexec: warning: cannot make the process undumpable: {e}");
    }
    uexec_sys::reset_ignored_sigchld();
    if let Err(e) = uexec_sys::raise_nofile_limit() {
        eprintln!("uexec: warning: cannot raise the open-file limit: {e}");
    }
}

/// The sandbox of the faces that own sessions: this binary is its own launcher
/// (`uexec __sandbox-exec`), and one is kept started ahead for every store of the process.
fn confinement() -> Option<std::sync::Arc<dyn uexec_core::confine::Confinement>> {
    let sandbox = uexec_sandbox::Sandbox::current_exe().ok()?;
    Some(sandbox)
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every verb, flag and argument says what it is for in `--help`.
    #[test]
    fn every_verb_flag_and_argument_has_its_line_in_help() {
        let mut missing = Vec::new();
        let mut stack = vec![(String::from("uexec"), Cli::command())];
        while let Some((path, cmd)) = stack.pop() {
            for arg in cmd.get_arguments() {
                let builtin = ["help", "version"].contains(&arg.get_id().as_str());
                if !builtin && arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.get_about().is_none() && sub.get_name() != "help" {
                    missing.push(format!("{path} {}", sub.get_name()));
                }
                stack.push((format!("{path} {}", sub.get_name()), sub.clone()));
            }
        }
        assert!(missing.is_empty(), "no help for: {missing:?}");
    }

    /// `uexec mcp --help` groups every flag under a heading, and the README lists the same
    /// flags under the same headings, in the same order.
    #[test]
    fn the_readme_lists_the_mcp_flags_as_help_groups_them() {
        let cmd = Cli::command();
        let mcp = cmd.find_subcommand("mcp").unwrap();
        let mut help: Vec<(String, Vec<String>)> = Vec::new();
        for arg in mcp.get_arguments() {
            let (Some(long), false) = (arg.get_long(), arg.is_hide_set()) else {
                continue;
            };
            let Some(heading) = arg.get_help_heading() else {
                // Only the global ones stay under "Options".
                assert!(
                    arg.is_global_set() || long == "help",
                    "--{long} has no heading"
                );
                continue;
            };
            match help.last_mut() {
                Some((h, flags)) if h == heading => flags.push(format!("--{long}")),
                _ => help.push((heading.to_owned(), vec![format!("--{long}")])),
            }
        }
        let readme =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
                .unwrap();
        let start = readme
            .find("`uexec mcp --help` says what each flag does")
            .unwrap();
        let mut listed: Vec<(String, Vec<String>)> = Vec::new();
        let lines = readme[start..].lines();
        for line in lines.skip_while(|l| !l.starts_with("- **")) {
            if let Some(rest) = line.strip_prefix("- **") {
                let (heading, rest) = rest.split_once("**").unwrap();
                listed.push((heading.to_owned(), Vec::new()));
                listed.last_mut().unwrap().1.extend(flags_in(rest));
            } else if line.starts_with("  ") {
                listed.last_mut().unwrap().1.extend(flags_in(line));
            } else {
                break;
            }
        }
        assert_eq!(listed, help);
    }

    /// `uexec --help` states the exit codes the CLI's code gives, and the units.
    #[test]
    fn the_top_level_help_states_exit_codes_and_units() {
        let help = Cli::command().render_help().to_string();
        use uexec_cli::cli::{EXIT_NO_SESSION, EXIT_STILL_RUNNING, EXIT_UEXEC};
        for code in [EXIT_NO_SESSION, EXIT_STILL_RUNNING, EXIT_UEXEC, 2, 124, 130] {
            assert!(
                help.contains(&format!(" {code} ")) || help.contains(&format!("({code} ")),
                "{code}: {help}"
            );
        }
        assert!(help.contains("Units: durations in milliseconds (MS) unless a flag says SECONDS"));
    }

    fn flags_in(text: &str) -> Vec<String> {
        text.split('`')
            .filter(|w| w.starts_with("--"))
            .map(str::to_owned)
            .collect()
    }
}
