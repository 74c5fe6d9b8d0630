//! `uexec`: the executable people and agents call. It makes a plain `uexec run` itself,
//! and execs `uexec-engine` (installed beside it) for everything else: the other verbs,
//! `mcp`, `serve`, `daemon`, `--help`, and any `run` it does not read exactly as the engine
//! would.
//!
//! Why two files: a process start costs what its executable costs to load. The engine is
//! ~20 MiB whose start-up (the loader's relocations, page faults, the argument parser, the
//! async runtime) takes about 1 ms before any work; `uexec run true` would pay it on every
//! call. This front links none of that: no runtime, no argument-parsing library, not even
//! Rust's own `main` set-up (`no_main`), and where the C library allows it no loader either
//! (a static PIE: see build.rs), so it starts in about the time of an empty static program,
//! and speaks to the daemon with blocking calls.
//!
//! It gives the engine's answers, not its own: it parses only the flags of
//! `uexec run --help`, exactly, and hands anything else over untouched; it prints and exits
//! through the engine's own code (`uexec_cli::cli`); and until its request is sent (no
//! daemon yet, a daemon of another build, a bad socket directory, a listener of another
//! user) it hands over too, so the engine starts the daemon or says what is wrong. It
//! checks the socket as the engine does before sending anything (its directory this user's
//! and private, its listener this user's: `uexec_mcp::daemon::client`). Only once the
//! command may run does the front report failures itself, as the engine would.

#![no_main]
// The C `main` below is this crate's only unsafe code (its `#[no_mangle]`, and the read of
// its arguments, which `uexec_sys` does).
#![deny(unsafe_code)]

use std::ffi::{c_char, c_int, OsString};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use uexec_cli::cli::{self, conn, Failure, RunArgs};
use uexec_mcp::daemon::build_id_of;
use uexec_mcp::daemon::client::{check_listener, check_socket_dir};
use uexec_protocol::daemon::Reply;

/// The engine's file name; it is looked for beside this executable.
const ENGINE: &str = "uexec-engine";

/// C's `main`: Rust's start-up (stack guard probing, signal handlers) is not needed here,
/// and what the engine needs it does itself once exec'd.
#[allow(unsafe_code)]
#[no_mangle]
extern "C" fn main(argc: c_int, argv: *const *const c_char) -> c_int {
    // From `main`'s own arguments: without Rust's start-up, `std::env::args` is empty where
    // the C library does not hand them to initialisers too (musl, the static build).
    // SAFETY: the C runtime passes `argc` valid NUL-terminated strings in `argv`.
    let args = unsafe { uexec_sys::c_main_args(argc, argv) };
    let engine = std::env::current_exe().map(|exe| exe.with_file_name(ENGINE));
    if let (Ok(engine), Some((socket, run))) = (&engine, cli::plain_run(&args)) {
        if let Some(code) = run_here(engine, socket, &run) {
            return code;
        }
    }
    hand_over(engine, &args)
}

/// Execs the engine with the same arguments (and `argv[0]`, so its messages name `uexec`).
fn hand_over(engine: std::io::Result<PathBuf>, args: &[OsString]) -> c_int {
    let error = match &engine {
        Ok(engine) => {
            let mut cmd = std::process::Command::new(engine);
            if let Some(arg0) = args.first() {
                cmd.arg0(arg0);
            }
            let e = cmd.args(args.iter().skip(1)).exec();
            format!("cannot run {}: {e}", engine.display())
        }
        Err(e) => format!("cannot find this executable's path: {e}"),
    };
    eprintln!(
        "uexec: {error} (uexec runs {ENGINE}, installed beside it: `cargo install --path crates/uexec` installs both)"
    );
    c_int::from(cli::EXIT_UEXEC)
}

/// Makes the run; None to hand it to the engine (nothing was sent that could run it).
fn run_here(engine: &Path, socket: Option<PathBuf>, run: &RunArgs) -> Option<c_int> {
    // As the engine's CLI verbs: quiet on a closed pipe, and our environment unreadable by
    // the commands of the same user.
    uexec_sys::default_sigpipe();
    let _ = uexec_sys::set_undumpable();
    let socket = match socket {
        Some(socket) => socket,
        None => uexec_mcp::daemon::default_socket().ok()?,
    };
    match run.mode() {
        cli::Mode::Follow => return foreground_here(engine, &socket, run),
        cli::Mode::Detach => return detached_here(engine, &socket, run),
        cli::Mode::Window => {}
    }
    let hello = conn::person_hello(build_id_of(engine), run.env.clone()).ok()?;
    let call = json!({"name": "exec_command", "arguments": cli::run_call_args(run)});
    let mut first = serde_json::to_vec(&hello).ok()?;
    first.push(b'\n');
    first.extend(conn::handshake_lines().ok()?);
    first.extend(conn::request_line(conn::FIRST_CALL_ID, "tools/call", &call).ok()?);
    let (stream, mut from_daemon) = greet(&socket, &first)?;
    // The command may run from here on: failures are ours to tell.
    let code = answer(&mut from_daemon)
        .map_err(Failure::from)
        .and_then(|result| cli::finish_run(run, &conn::ToolResult::of(&result)));
    drop(stream);
    Some(exit_with(code))
}

/// A foreground run ([`cli::follow`]); None to hand it to the engine (nothing ran).
fn foreground_here(engine: &Path, socket: &Path, run: &RunArgs) -> Option<c_int> {
    let joined = cli::Joined::here(run.tty);
    let hello = cli::run_hello(build_id_of(engine), run, joined).ok()?;
    let mut line = serde_json::to_vec(&hello).ok()?;
    line.push(b'\n');
    // From the hello on, Ctrl-C is the command's.
    let signals = cli::catch_signals(joined).ok()?;
    let (stream, down) = greet(socket, &line)?;
    Some(exit_with(cli::follow(down, &stream, joined, signals)))
}

/// `uexec run -d` ([`cli::leave_at_spawn`]); None to hand it to the engine (nothing ran).
fn detached_here(engine: &Path, socket: &Path, run: &RunArgs) -> Option<c_int> {
    let hello = cli::run_hello(build_id_of(engine), run, cli::Joined::NONE).ok()?;
    let mut line = serde_json::to_vec(&hello).ok()?;
    line.push(b'\n');
    let (stream, down) = greet(socket, &line)?;
    Some(exit_with(cli::leave_at_spawn(down, &stream, run.json)))
}

/// Sends `first` (the hello, and what may follow it) to the daemon at `socket` and reads its
/// reply; None when nothing may run (a socket that may not be ours, or no daemon yet: the
/// engine refuses it, or starts one; a refused hello, which ran nothing: the engine says
/// why).
fn greet(socket: &Path, first: &[u8]) -> Option<(UnixStream, BufReader<UnixStream>)> {
    check_socket_dir(socket).ok()?;
    let stream = UnixStream::connect(socket).ok()?;
    check_listener(socket, stream.as_fd()).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    // The daemon answers the hello before it reads anything after it.
    (&stream).write_all(first).ok()?;
    let mut from_daemon = BufReader::new(stream.try_clone().ok()?);
    let mut reply = Vec::new();
    (&mut from_daemon)
        .take(64 * 1024)
        .read_until(b'\n', &mut reply)
        .ok()?;
    let reply: Reply = serde_json::from_slice(&reply).ok()?;
    if !reply.ok {
        return None;
    }
    // What runs now may take its time.
    stream.set_read_timeout(None).ok()?;
    Some((stream, from_daemon))
}

/// Exits as the engine would: the code, or the failure said on stderr.
fn exit_with(code: Result<u8, Failure>) -> c_int {
    let _ = std::io::stdout().flush();
    match code {
        Ok(code) => c_int::from(code),
        Err(failure) => {
            eprintln!("uexec: {}", failure.message);
            c_int::from(failure.code)
        }
    }
}

/// Reads until the answer to the call.
fn answer(from_daemon: &mut BufReader<UnixStream>) -> anyhow::Result<serde_json::Value> {
    loop {
        let mut line = Vec::new();
        let n = from_daemon
            .take(conn::MAX_LINE_BYTES as u64)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            anyhow::bail!("the uexec daemon closed the connection");
        }
        if let Some(result) = conn::answer(&line, conn::FIRST_CALL_ID, "tools/call")? {
            return Ok(result);
        }
    }
}
