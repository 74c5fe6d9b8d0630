//! The command line's tree: `uexec`'s verbs, each with its flags (or the face's, from the
//! files beside this one) and its help, the exit codes and units `--help` states. The
//! engine parses it and runs the verb (`engine.rs`).

use clap::{Parser, Subcommand};

use super::{daemon, mcp, serve};
use uexec_cli::cli;

#[derive(Debug, Parser)]
#[command(
    name = "uexec",
    version,
    about = "Run shell commands for AI agents: start, observe, poll, type into and stop long-running commands without orphans or lost output.",
    after_help = CLI_AFTER_HELP
)]
pub struct Cli {
    /// Write logs to this file instead of stderr (the level comes from UEXEC_LOG, e.g.
    /// `UEXEC_LOG=debug`; default `warn`). Logs never go to stdout.
    // Shown after each verb's own flags: it matters less than they do.
    #[arg(long, global = true, value_name = "PATH", display_order = 900)]
    pub log_file: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once and consumed at once: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the MCP tools (exec_command, write_stdin, list_sessions, terminate_session,
    /// read_output, wait) over stdio, or over streamable HTTP with --http.
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
    Mcp(mcp::McpArgs),
    /// Serve the exec server wire dialect (Codex-compatible) over WebSocket or stdio.
    #[command(after_help = "Examples:
  uexec serve                                          ws://127.0.0.1:<free port>, printed on stdout (this user only)
  uexec serve --listen wss://0.0.0.0:9000 --token-file TOKEN --tls-cert cert.pem --tls-key key.pem
                                                       reachable from other hosts (token and TLS required)
  uexec serve --listen stdio                           newline-delimited JSON on stdin/stdout
  CODEX_EXEC_SERVER_URL=wss://host:9000 codex          let Codex run its commands here

Without a token, only this server's own user may connect (checked over loopback). A
non-loopback address needs a token, and TLS unless --insecure-plaintext is given.")]
    Serve(serve::ServeArgs),
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
    Daemon(daemon::DaemonArgs),
    /// Run a command in the daemon, as in a shell: its output as it comes (stdout and stderr
    /// in the order it wrote them), stdin passed on, Ctrl-C to interrupt it, and its exit
    /// code. It is a session meanwhile (`uexec ls`, `uexec attach`).
    #[command(
        after_help = "Ctrl-C interrupts the command; if it has not stopped, a second Ctrl-C kills it.
Ctrl-\\ leaves it running as a session, as -d does from the start. If this uexec is killed
(its terminal closed, SIGKILL), the command ends too.

The command gets your environment as it is: your tokens (GH_TOKEN, AWS_*), colours, pager,
locale and TERM, and your PATH even where a login profile resets it (your entries in your
order, what the profile adds where it puts it). It goes only to your own daemon (its
socket's directory and its uid are checked first). The hygiene is for agents' commands
(`uexec mcp`): secret-looking variables dropped, NO_COLOR=1, PAGER=cat, TERM=dumb.

Exit codes: the command's own (130 after Ctrl-C, 124 after --timeout); with -d, 0 once it
started; 4 when it was left running otherwise (Ctrl-\\, a window that ran out before its
--until-* condition); 2 bad usage; 125 uexec failed.

Examples:
  uexec run -- make test                 make's output, live, and its exit code
  printf 'b\\na\\n' | uexec run -- sort   stdin goes through
  uexec run --tty -- python3             a REPL in this terminal (Ctrl-\\ leaves it running)
  id=$(uexec run -d -- make test)        started; its id on stdout (exit 0); `uexec wait $id` later
  uexec run -d --until-pattern ready -- npm run dev
                                         returns once it printed `ready` (exit 0; 4 if it did not
                                         within the window, 10s unless --yield); the server runs on",
        mut_arg("socket", |a| a.help(RUN_SOCKET_HELP))
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
    /// the first that was not (the others are still done): 3 no such session, 5 it had
    /// already exited (nothing done; `uexec wait` gives its code), 125 uexec failed; 2 bad
    /// usage.
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
    /// The commands the command rules hold for your yes because the agent's client cannot
    /// ask you (`uexec mcp --rules` with a `prompt` rule, in a headless agent): id, owner,
    /// command, the rule and why, since when. Starts no daemon. Exit codes: 0 listed; 3 no
    /// daemon runs; 125 uexec failed.
    Approvals {
        #[command(flatten)]
        target: cli::conn::Target,
        #[command(flatten)]
        args: cli::ApprovalsArgs,
    },
    /// Run a command the rules hold (`uexec approvals` gives its id); --always also runs the
    /// commands that start the same way for that agent's connection. Exit codes: 0 done; 3
    /// no such held command (answered, timed out); 125 uexec failed.
    Approve {
        #[command(flatten)]
        target: cli::conn::Target,
        #[command(flatten)]
        args: cli::ApproveArgs,
    },
    /// Refuse a command the rules hold; --reason is what the agent reads. Exit codes: 0
    /// done; 3 no such held command; 125 uexec failed.
    Deny {
        #[command(flatten)]
        target: cli::conn::Target,
        #[command(flatten)]
        args: cli::DenyArgs,
    },
    /// The command rules' decisions, as every face of yours wrote them down (`uexec mcp`,
    /// the daemon, `uexec serve`): when, whose, the command (secrets masked), the decision,
    /// admitted or refused, who decided (the rules, a hook, a person, no one) and by which
    /// rule. A person's own `uexec run` is recorded, never judged. Reads
    /// ~/.local/state/uexec/audit/audit.jsonl (8 MiB, then one older file); starts no daemon.
    /// Exit codes: 0 printed; 2 bad input; 125 uexec failed.
    #[command(after_help = "Examples:
  uexec audit --since 1h
  uexec audit --json | jq 'select(.outcome == \"refused\")'")]
    Audit(cli::AuditArgs),
    /// Rules files: `uexec policy check` judges a command by them without running it, as
    /// `uexec mcp --rules` would (Codex `.rules` or Claude Code settings JSON).
    Policy {
        #[command(subcommand)]
        command: cli::PolicyCommand,
    },
    /// Print a shell completion script (e.g. `uexec completions bash > /etc/bash_completion.d/uexec`).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print what this machine supports of the sandbox (Landlock, user, pid, mount and
    /// network namespaces, seccomp), whether sessions get a cgroup v2 each, and this user's
    /// daemon: running or not, of this build or another, its log, and where transcripts go
    /// (starts no daemon); exit 0.
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

/// `uexec run --socket`'s line: the one verb that starts a daemon when none runs.
const RUN_SOCKET_HELP: &str = "The daemon's socket (default: $XDG_RUNTIME_DIR/uexec/daemon.sock, else /run/user/<uid>/uexec/daemon.sock when logind made /run/user/<uid>, else a per-user directory under the temp dir). A daemon is started there if none runs";

const CLI_AFTER_HELP: &str = "Exit codes:
  run, wait,      the command's own code (124 after --timeout; run: 130 after Ctrl-C)
  attach
  4                run left the command running (Ctrl-\\, or a window without -d, or one
                   whose --until-* condition was not met); rm found a session running
                   (without --force)
  5                kill found the session had already exited (nothing done)
  0                success
  2                bad usage (a flag or value; the message names it)
  3                no such session (daemon --status: no daemon runs)
  125              uexec itself failed (the daemon unreachable or refusing, stdout unwritable)
  mcp, serve, daemon: 0 once stopped (stdin EOF, SIGTERM/SIGINT, --idle-timeout), 1 if they cannot start

Units: durations in milliseconds (MS) unless a flag says SECONDS, for a bare number; every
DURATION takes a unit too (500ms, 10s, 5m, 1h); sizes in BYTES; output budgets in TOKENS (4
bytes each). Output is never coloured.

`uexec` is a small front: it makes a plain `uexec run` itself and runs `uexec-engine`, installed beside it, for everything else (the daemon runs as `uexec-engine daemon`).";
