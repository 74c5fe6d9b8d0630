//! `uexec __sandbox-exec`: the single-threaded launcher that applies the layers and runs the
//! command (see the module docs of [`super`] for why it exists). Started with `--warm`, it
//! first waits for the rest of its arguments, its stdio, directory and environment from the
//! engine ([`super::warm`]), then goes on as below.
//!
//! Processes, when the namespaces layer applies:
//! 1. the *launcher* (the process uexec started: the session's process-group leader, and
//!    its PTY's session leader) enters the namespaces, restricts itself (Landlock, seccomp:
//!    inherited by everything below); with an allowlist, it binds the proxy's port in the
//!    network namespace and hands the listener to uexec on the socket it inherited as
//!    `--proxy-fd` (a socket pair's end, fd 3, see [`super::proxy`]); it empties its
//!    capability bounding set, so that nothing it execs holds a capability in the user
//!    namespace (root there would keep them all, `CAP_SYS_ADMIN` among them); then it forks;
//! 2. the *init*, pid 1 of the new pid namespace, dies with the launcher
//!    (`PR_SET_PDEATHSIG`), spawns the command and reaps every orphan; when the command
//!    exits, it exits with the command's status and the kernel kills whatever is left in
//!    the namespace (`setsid` and double-forked processes too);
//! 3. the *command* (pid 2) is the argv.
//!
//! Signals: uexec signals the whole process group, which holds the command too, so the
//! launcher and the init only survive SIGINT, SIGTERM, SIGQUIT and SIGHUP (a handler that
//! does nothing: a Ctrl-C the command catches must not end the session). SIGKILL of the
//! launcher (terminate) kills the init, hence the namespace. Without the namespaces layer
//! (best effort), the launcher execs the command itself.

use std::collections::HashSet;
use std::ffi::OsString;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use super::protect::{Mount, READ_ONLY_FLAG, WRITABLE_FLAG};
use uexec_core::policy::Layer;

use super::{namespaces, EXEC_NOTIFY_FLAG, FAULT_ENV, LAUNCHER_FAILED_EXIT_CODE};

/// Exit code when the command cannot be executed (as a shell says for "not found").
const EXEC_FAILED_EXIT_CODE: i32 = 127;

/// What the launcher was asked to do.
#[derive(Debug, Default)]
struct Launch {
    layers: Vec<Layer>,
    writable: Vec<PathBuf>,
    /// Bound over themselves, in order ([`super::protect`]).
    mounts: Vec<Mount>,
    network_off: bool,
    /// uexec's end of the proxy hand-over (`--proxy-fd`, inherited): where the listener of
    /// 127.0.0.1:PROXY_PORT in the namespace goes.
    proxy: Option<OwnedFd>,
    /// uexec's end of the exec hand-over (`--exec-notify-fd`, inherited): where the listener
    /// of the exec-notify filter goes (every exec below is then judged by uexec's rules).
    exec_notify: Option<OwnedFd>,
    arg0: Option<OsString>,
    argv: Vec<OsString>,
}

/// Runs the launcher with its arguments (after the subcommand); returns the exit code.
pub fn run(args: impl Iterator<Item = OsString>) -> i32 {
    // Exec'd through a descriptor (see `super::exe`): that one, and anything else inherited,
    // goes no further than this process.
    if uexec_sys::close_inherited_on_exec().is_err() {
        return LAUNCHER_FAILED_EXIT_CODE;
    }
    uexec_sys::name_after_argv0();
    let mut args: Vec<OsString> = args.collect();
    if args.first().is_some_and(|a| a == super::warm::WARM_FLAG) {
        args = match super::warm::receive() {
            Ok(Some(launch)) => launch.args,
            Ok(None) => return 0,
            Err(code) => return code,
        };
    }
    if args.first().is_some_and(|a| a == "--probe") {
        let mut out = String::new();
        for (layer, verdict) in probe() {
            match verdict {
                Ok(()) => out.push_str(&format!("{} ok\n", layer.as_str())),
                Err(why) => out.push_str(&format!("{} unavailable: {why}\n", layer.as_str())),
            }
        }
        let _ = std::io::stdout().write_all(out.as_bytes());
        return 0;
    }
    let mut launch = match parse(args) {
        Ok(launch) => launch,
        Err(e) => {
            eprintln!("uexec {}: {e}", super::LAUNCHER_SUBCOMMAND);
            return LAUNCHER_FAILED_EXIT_CODE;
        }
    };
    match apply(&mut launch) {
        Ok(code) => code,
        Err((layer, e)) => {
            eprintln!(
                "uexec: sandbox layer {} could not be applied: {e}",
                layer.as_str()
            );
            LAUNCHER_FAILED_EXIT_CODE
        }
    }
}

fn parse(args: Vec<OsString>) -> Result<Launch, String> {
    let mut launch = Launch::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.to_str() {
            Some("--layers") => {
                let list = value("--layers")?;
                for name in list.to_string_lossy().split(',').filter(|n| !n.is_empty()) {
                    launch
                        .layers
                        .push(Layer::parse(name).ok_or_else(|| format!("unknown layer {name}"))?);
                }
            }
            Some("--write") => launch.writable.push(value("--write")?.into()),
            Some(READ_ONLY_FLAG) => launch
                .mounts
                .push(Mount::ReadOnly(value(READ_ONLY_FLAG)?.into())),
            Some(WRITABLE_FLAG) => launch
                .mounts
                .push(Mount::Writable(value(WRITABLE_FLAG)?.into())),
            Some("--arg0") => launch.arg0 = Some(value("--arg0")?),
            Some("--proxy-fd") => {
                let fd = value("--proxy-fd")?;
                if launch.proxy.is_some() {
                    return Err("--proxy-fd given twice".to_owned());
                }
                launch.proxy = Some(inherited_socket("--proxy-fd", &fd)?);
            }
            Some(EXEC_NOTIFY_FLAG) => {
                let fd = value(EXEC_NOTIFY_FLAG)?;
                if launch.exec_notify.is_some() {
                    return Err(format!("{EXEC_NOTIFY_FLAG} given twice"));
                }
                launch.exec_notify = Some(inherited_socket(EXEC_NOTIFY_FLAG, &fd)?);
            }
            Some("--network-off") => launch.network_off = true,
            Some("--") => {
                launch.argv = args.collect();
                break;
            }
            _ => return Err(format!("unexpected argument {arg:?}")),
        }
    }
    if launch.argv.is_empty() {
        return Err("no command after --".to_owned());
    }
    Ok(launch)
}

/// The Unix stream socket inherited at descriptor `fd` (a number above 2), for `flag`.
fn inherited_socket(flag: &str, fd: &OsString) -> Result<OwnedFd, String> {
    let fd = fd
        .to_str()
        .and_then(|n| n.parse::<RawFd>().ok())
        .filter(|n| *n > 2)
        .ok_or_else(|| format!("{flag} takes a descriptor above 2, not {fd:?}"))?;
    uexec_sys::adopt_inherited_unix_socket(fd).map_err(|e| format!("{flag} {fd}: {e}"))
}

/// Layers whose set-up is made to fail (tests of refusal and fallback).
fn faults() -> HashSet<Layer> {
    std::env::var_os(FAULT_ENV)
        .map(|v| {
            v.to_string_lossy()
                .split(',')
                .filter_map(Layer::parse)
                .collect()
        })
        .unwrap_or_default()
}

fn injected(layer: Layer) -> std::io::Result<()> {
    if faults().contains(&layer) {
        return Err(std::io::Error::from_raw_os_error(libc::EPERM));
    }
    Ok(())
}

fn apply(launch: &mut Launch) -> Result<i32, (Layer, String)> {
    let has = |layer| launch.layers.contains(&layer);
    let fault = faults();
    let namespaced = has(Layer::Namespaces);
    if namespaced {
        namespaces::enter(
            &launch.mounts,
            namespaces::Mounts::AsNeeded,
            fault.contains(&Layer::Namespaces),
        )
        .map_err(|e| (Layer::Namespaces, e.to_string()))?;
    }
    if has(Layer::NetworkNamespace) {
        if !namespaced {
            return Err((
                Layer::NetworkNamespace,
                "needs the namespaces layer".to_owned(),
            ));
        }
        namespaces::isolate_network(fault.contains(&Layer::NetworkNamespace))
            .map_err(|e| (Layer::NetworkNamespace, e.to_string()))?;
    }
    // Bound before the command starts, so its first connection finds the proxy. The
    // hand-over's socket closes here either way: uexec hears the end of it, and nothing
    // forked below holds a copy.
    match launch.proxy.take() {
        Some(socket) if has(Layer::NetworkNamespace) => {
            hand_over_proxy_port(socket).map_err(|e| (Layer::NetworkNamespace, e))?
        }
        // Best effort without the network namespace: nothing to confine (the report says so).
        _ => {}
    }
    if has(Layer::Landlock) {
        injected(Layer::Landlock).map_err(|e| (Layer::Landlock, e.to_string()))?;
        super::landlock::restrict(&launch.writable).map_err(|e| (Layer::Landlock, e))?;
    }
    if has(Layer::Seccomp) {
        injected(Layer::Seccomp).map_err(|e| (Layer::Seccomp, e.to_string()))?;
        super::seccomp::install(launch.network_off, has(Layer::Landlock))
            .map_err(|e| (Layer::Seccomp, e))?;
    }
    // Last of the filters: one installed before it that refused `seccomp` itself would make
    // this fail. From here on every exec below (the command's first) waits for uexec.
    if let Some(socket) = launch.exec_notify.take() {
        hand_over_exec_listener(socket).map_err(|e| (Layer::Seccomp, e))?;
    }
    if !namespaced {
        return Ok(exec(launch));
    }
    // Root of the user namespace keeps its capabilities across exec: the command would
    // hold CAP_SYS_ADMIN there, enough to clone a mount tree and lift the read-only binds.
    uexec_sys::drop_capabilities_on_exec().map_err(|e| (Layer::Namespaces, e.to_string()))?;
    uexec_sys::catch_and_ignore(&[libc::SIGINT, libc::SIGTERM, libc::SIGQUIT, libc::SIGHUP]);
    // The init learns of a launcher that died before its death signal was set: the write
    // end, held only by the launcher, hangs up.
    let (alive_read, alive_write) =
        uexec_sys::pipe_cloexec().map_err(|e| (Layer::Namespaces, e.to_string()))?;
    match uexec_sys::fork_process() {
        Err(e) => Err((Layer::Namespaces, e.to_string())),
        Ok(None) => {
            drop(alive_write);
            if uexec_sys::set_parent_death_signal(libc::SIGKILL).is_err()
                || uexec_sys::pipe_hung_up(alive_read.as_raw_fd())
            {
                uexec_sys::exit_now(LAUNCHER_FAILED_EXIT_CODE);
            }
            drop(alive_read);
            uexec_sys::exit_now(init(launch))
        }
        Ok(Some(init)) => {
            drop(alive_read);
            let code = match uexec_sys::wait_child(Some(init)) {
                Ok((_, status)) => uexec_core::backend::local::exit_code_of(status)
                    .unwrap_or(LAUNCHER_FAILED_EXIT_CODE),
                Err(_) => LAUNCHER_FAILED_EXIT_CODE,
            };
            drop(alive_write);
            Ok(code)
        }
    }
}

/// Pid 1: runs the command, reaps orphans, and ends with the command's status. The command
/// is started as `posix_spawn` starts one (std's spawn: the child shares memory until its
/// exec), not with a fork that copies page tables for an exec to throw away.
fn init(launch: &Launch) -> i32 {
    let mut command = std::process::Command::new(&launch.argv[0]);
    command.args(&launch.argv[1..]);
    if let Some(arg0) = &launch.arg0 {
        command.arg0(arg0);
    }
    let command = match command.spawn() {
        Ok(child) => child.id(),
        Err(e) => {
            eprintln!(
                "uexec: sandbox: cannot execute {}: {e}",
                launch.argv[0].to_string_lossy()
            );
            return EXEC_FAILED_EXIT_CODE;
        }
    };
    loop {
        match uexec_sys::wait_child(None) {
            Ok((pid, status)) if pid == command => {
                return uexec_core::backend::local::exit_code_of(status)
                    .unwrap_or(LAUNCHER_FAILED_EXIT_CODE)
            }
            Ok(_) => {}
            Err(_) => return LAUNCHER_FAILED_EXIT_CODE,
        }
    }
}

/// Replaces this process with the command; returns only on failure (with its exit code).
fn exec(launch: &Launch) -> i32 {
    let mut command = std::process::Command::new(&launch.argv[0]);
    command.args(&launch.argv[1..]);
    if let Some(arg0) = &launch.arg0 {
        command.arg0(arg0);
    }
    let e = command.exec();
    eprintln!(
        "uexec: sandbox: cannot execute {}: {e}",
        launch.argv[0].to_string_lossy()
    );
    EXEC_FAILED_EXIT_CODE
}

/// What this machine supports, layer by layer (each tried for real in a throwaway child,
/// except Landlock, whose ABI version says it all).
pub fn probe() -> Vec<(Layer, Result<(), String>)> {
    let landlock = injected(Layer::Landlock)
        .and_then(|()| uexec_sys::landlock_abi())
        .map(|_| ())
        .map_err(|e| e.to_string());
    let fault = faults();
    vec![
        (
            Layer::Namespaces,
            in_child(|| {
                namespaces::enter(
                    &[],
                    namespaces::Mounts::Always,
                    fault.contains(&Layer::Namespaces),
                )
            }),
        ),
        (
            Layer::NetworkNamespace,
            in_child(|| {
                namespaces::enter(
                    &[],
                    namespaces::Mounts::Always,
                    fault.contains(&Layer::Namespaces),
                )?;
                namespaces::isolate_network(fault.contains(&Layer::NetworkNamespace))
            }),
        ),
        (Layer::Landlock, landlock),
        (
            Layer::Seccomp,
            in_child(|| {
                injected(Layer::Seccomp)?;
                super::seccomp::install(true, true).map_err(std::io::Error::other)
            }),
        ),
    ]
}

/// Runs `f` in a forked child; its error comes back as an errno (other errors as EINVAL).
pub(super) fn in_child(f: impl FnOnce() -> std::io::Result<()>) -> Result<(), String> {
    match uexec_sys::fork_process() {
        Err(e) => Err(e.to_string()),
        Ok(None) => {
            let code = match f() {
                Ok(()) => 0,
                Err(e) => e.raw_os_error().unwrap_or(libc::EINVAL),
            };
            uexec_sys::exit_now(code)
        }
        Ok(Some(pid)) => match uexec_sys::wait_child(Some(pid)) {
            Ok((_, status)) => match status.code() {
                Some(0) => Ok(()),
                Some(errno) => Err(std::io::Error::from_raw_os_error(errno).to_string()),
                None => Err(format!("the probe died ({status})")),
            },
            Err(e) => Err(e.to_string()),
        },
    }
}

/// Listens on 127.0.0.1:PROXY_PORT of the namespace and hands the listening socket to
/// uexec over the inherited end of its socket pair (`SCM_RIGHTS`): a socket keeps its
/// network namespace, so uexec accepts the command's connections itself and relays each
/// once, with no bridge in here. No path names the pair: nobody else can take its place.
fn hand_over_proxy_port(uexec: OwnedFd) -> Result<(), String> {
    let listener =
        std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, super::proxy::PROXY_PORT))
            .map_err(|e| format!("the proxy's port: {e}"))?;
    uexec_sys::send_fd(uexec.as_raw_fd(), listener.as_raw_fd())
        .map_err(|e| format!("handing the proxy's port to uexec: {e}"))
}

/// Installs the exec-notify filter ([`uexec_sys::ExecListener`]) and hands its listener to
/// uexec over the inherited end of its socket pair; this process keeps no copy, so when
/// uexec's copy closes, every exec below fails (`ENOSYS`) rather than going unjudged.
fn hand_over_exec_listener(uexec: OwnedFd) -> Result<(), String> {
    let listener = uexec_sys::ExecListener::install()
        .map_err(|e| format!("the exec-notify filter (seccomp user notification): {e}"))?;
    uexec_sys::send_fd(uexec.as_raw_fd(), listener.as_raw_fd())
        .map_err(|e| format!("handing the exec listener to uexec: {e}"))
}
