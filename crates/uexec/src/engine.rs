//! `uexec-engine`: every face over one engine (`mcp`, `serve`, `daemon`, the CLI verbs).
//! People and agents call `uexec`, the small front beside it, which execs this binary for
//! all but a plain `uexec run`.

#![forbid(unsafe_code)]

mod args;
mod complete;
mod last_will;
mod relay;

use uexec_cli::cli;

use std::os::unix::fs::OpenOptionsExt as _;

use clap::{CommandFactory, FromArgMatches};

use args::verbs::{Cli, Command};

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
        let sandbox = uexec_sandbox::doctor::render(&facilities, json);
        // Then the daemon: asked on a runtime of its own, which starts no daemon.
        let daemon = cli::doctor::daemon_facts(None);
        return print_whole(cli::doctor::doctor(&sandbox, json, &daemon).as_bytes());
    }
    if matches!(cli.command, Command::Policy { .. }) {
        // Needs no daemon, no runtime: files and a string in, a verdict out.
        return match cli.command {
            Command::Policy { command } => cli::policy(command),
            _ => std::process::ExitCode::FAILURE,
        };
    }
    if let Command::Man { dir } = &cli.command {
        return write_man_pages(dir);
    }
    if let Command::Completions { shell } = &cli.command {
        let mut command = <Cli as clap::CommandFactory>::command();
        return print_whole(&complete::script(*shell, &mut command, "uexec"));
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

/// The controllers the server's limit flags need, enabled for its sessions' cgroups, or
/// why they cannot be, naming the flag (`uexec mcp` sends its own to the daemon, and
/// prepares them itself only if it falls back to keeping its sessions: `limits_here`).
fn prepare_limits(command: &Command) -> anyhow::Result<()> {
    let limits: uexec_core::policy::Limits = match command {
        Command::Mcp(args) if !args.in_daemon() => args.limits.clone().into(),
        Command::Daemon(args) if !args.stop => args.limits.clone().into(),
        Command::Serve(args) => args.limits.clone().into(),
        _ => return Ok(()),
    };
    limits_here(&limits)
}

/// `limits` enabled for the cgroups of the sessions this process keeps.
fn limits_here(limits: &uexec_core::policy::Limits) -> anyhow::Result<()> {
    uexec_core::backend::local::prepare_limits(limits).map_err(|e| {
        anyhow::anyhow!(
            "--{}: {e} (`uexec doctor` says what this machine supports)",
            e.controller.limit().replace('_', "-")
        )
    })
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
        // Before the last will: its watchdog would be one more process in uexec's cgroup,
        // which must hold none of its own to pass controllers down.
        prepare_limits(&cli.command)?;
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
                if options.rules_at == Some(uexec_core::policy::exec_rules::RulesAt::Exec) {
                    if let Err(why) = uexec_core::policy::exec_rules::exec_support() {
                        eprintln!(
                            "uexec mcp: --rules-at exec: {why}; the rules judge each script's \
                             text only, not each exec (see `uexec doctor`)"
                        );
                    }
                }
                let served = match place {
                    args::mcp::Place::Daemon { target, asked } => {
                        match relay::run(target, options.clone()).await? {
                            relay::Relayed::Done => Ok(()),
                            relay::Relayed::NoDaemon(e) if asked => Err(e),
                            relay::Relayed::NoDaemon(e) => {
                                eprintln!(
                                    "uexec mcp: {e:#}; this server keeps its sessions itself, \
                                     as with --in-process (`uexec ls` does not see them)"
                                );
                                limits_here(&options.limits)?;
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
                let mut options: uexec_server::ServeOptions = args.into();
                if options.rules_at == uexec_core::policy::exec_rules::RulesAt::Exec {
                    options.confinement = confinement();
                    if let Err(why) = uexec_core::policy::exec_rules::exec_support() {
                        eprintln!(
                            "uexec serve: --rules-at exec: {why}; the rules judge each \
                             process/start's text only, not each exec (see `uexec doctor`)"
                        );
                    }
                }
                return uexec_server::serve(options)
                    .await
                    .map(|()| std::process::ExitCode::SUCCESS)
                    .map_err(anyhow::Error::from);
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
            Command::Completions { .. }
            | Command::Doctor { .. }
            | Command::Man { .. }
            | Command::Policy { .. } => return Ok(std::process::ExitCode::SUCCESS),
            Command::Audit(args) => cli::audit(args),
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
            Command::Approvals { target, args } => cli::approvals(&target, args).await,
            Command::Approve { target, args } => cli::approve(&target, args).await,
            Command::Deny { target, args } => cli::deny(&target, args).await,
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

    /// `uexec mcp --help` groups every flag under a heading, and the book's page on `uexec
    /// mcp` (docs/src/mcp.md) lists the same flags under the same headings, in the same order.
    #[test]
    fn the_book_lists_the_mcp_flags_as_help_groups_them() {
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
        let page = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/src/mcp.md");
        let readme = std::fs::read_to_string(page).unwrap();
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
