//! Warm launchers: the sandbox launcher started before the command that will use it.
//!
//! A cold sandboxed spawn execs the 20 MB `uexec` binary before any layer applies: about 1 ms
//! of page faults and relocations (`uexec --version` costs the same), paid on every command.
//! Instead the engine keeps one launcher started and waiting:
//! `uexec __sandbox-exec --warm`, spawned exactly as a command is (the engine's own child,
//! leader of its session and process group, dying with the spawning thread), with a Unix
//! socket to the engine as stdin, `/dev/null` as stdout and stderr, `/` as its directory and
//! an empty environment; and born in a cgroup made ahead for its session
//! ([`SpareCgroup`]), which the session adopts: moving it into the session's own would wait
//! on the kernel's cgroup lock, milliseconds after an idle pause.
//!
//! A sandboxed spawn then:
//! 1. takes the waiting launcher and sends it the rest of the launch: the launcher's
//!    arguments, the command's environment and working directory, and its stdio
//!    descriptors (`SCM_RIGHTS`: the three pipe ends, or the PTY slave), then the passed
//!    ones in order (the hand-overs' sockets, the allowlist proxy's and the exec listener's:
//!    fds 3, 4, ... of a cold spawn);
//! 2. the launcher moves the descriptors onto 0, 1 and 2 (and 3, 4, ...), makes a PTY its controlling
//!    terminal, changes directory, takes the environment and answers with the 8-byte report
//!    a spawning child gives (`(stage, errno)`, zero when all is well), so a bad working
//!    directory fails the spawn exactly as it does cold;
//! 3. the launcher goes on as a cold one does; the engine starts the next warm one in the
//!    background.
//!
//! A launcher that died while waiting (or whose socket fails, or that has not answered within
//! 2 s: it is killed with its group) is reaped and the spawn goes
//! cold. One whose engine went away reads the end of its socket and exits. Nothing here
//! changes what runs: the same binary (exec'd from the file this process holds, never by
//! path: [`super::exe`]), the same arguments, the same process tree; only the moment of the
//! exec moves off the command's path. Cold starts come through here too ([`Pool::launch`]), so
//! that a held launcher keeps its descriptor across the exec. The pool is a value its
//! [`Sandbox`](crate::Sandbox) holds: two sandboxes (two tests, two launchers) never take
//! each other's launcher, and dropping one kills the launcher it kept waiting.

use std::ffi::{CString, OsString};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use uexec_core::backend::local::SpareCgroup;
use uexec_core::backend::Started;

use super::Launcher;

/// The launcher's first argument in warm mode.
pub const WARM_FLAG: &str = "--warm";
/// First bytes of a launch message (and its version).
const MAGIC: [u8; 4] = *b"UXW2";
/// How long the engine waits for a launcher to take a launch and answer.
const HAND_OVER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);
/// The first descriptor past every passed one's place: where the launcher keeps its own.
const PASSED_END: RawFd = uexec_sys::PASSED_FD + uexec_sys::MAX_PASSED_FDS as RawFd;
/// Largest message body accepted (arguments and environment; the kernel's own limit on an
/// exec's strings is lower).
const MAX_BODY: usize = 16 << 20;

/// What a warm launcher is handed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The launcher's arguments (after the subcommand).
    pub args: Vec<OsString>,
    /// `NAME=value` strings.
    pub env: Vec<OsString>,
    pub cwd: OsString,
    /// One descriptor (the PTY slave) instead of three.
    pub tty: bool,
    /// How many descriptors follow stdio, for fds [`uexec_sys::PASSED_FD`], +1, ... in order
    /// (at most [`uexec_sys::MAX_PASSED_FDS`]).
    pub passed: usize,
}

/// Bits of a message's flags byte.
const FLAG_TTY: u8 = 1;

/// The message: magic, body length (u32 LE), then the body: flags (u8: [`FLAG_TTY`]), the
/// count of passed descriptors (u8), the counts of arguments and environment strings (u32 LE
/// each), and NUL-terminated strings: the working directory, the arguments, the environment
/// (none can hold a NUL: they are C strings).
fn encode(args: &[&[u8]], env: &[&[u8]], cwd: &[u8], tty: bool, passed: u8) -> Vec<u8> {
    let flags = if tty { FLAG_TTY } else { 0 };
    let mut body = vec![flags, passed];
    body.extend((args.len() as u32).to_le_bytes());
    body.extend((env.len() as u32).to_le_bytes());
    for s in std::iter::once(&cwd).chain(args).chain(env) {
        body.extend_from_slice(s);
        body.push(0);
    }
    let mut message = MAGIC.to_vec();
    message.extend((body.len() as u32).to_le_bytes());
    message.extend(body);
    message
}

fn decode(body: &[u8]) -> Result<Launch, String> {
    let count = |at: usize| -> Result<usize, String> {
        let bytes = body.get(at..at + 4).ok_or("a truncated launch message")?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize)
    };
    let tty = match body.first() {
        Some(&flags) if flags & !FLAG_TTY == 0 => flags & FLAG_TTY != 0,
        _ => return Err("a launch message without its flags".to_owned()),
    };
    let passed = match body.get(1) {
        Some(&n) if usize::from(n) <= uexec_sys::MAX_PASSED_FDS => usize::from(n),
        _ => return Err("a launch message with too many descriptors passed".to_owned()),
    };
    let (nargs, nenv) = (count(2)?, count(6)?);
    let strings = &body[10..];
    // Every string is NUL-terminated: as many NULs as strings, the last byte one of them.
    let terminated = strings.last() == Some(&0);
    let found = strings.iter().filter(|b| **b == 0).count();
    if !terminated || Some(found) != nargs.checked_add(nenv).and_then(|n| n.checked_add(1)) {
        return Err("a launch message whose strings do not match its counts".to_owned());
    }
    let mut strings = strings[..strings.len() - 1]
        .split(|b| *b == 0)
        .map(|s| OsString::from_vec(s.to_vec()));
    let cwd = strings.next().unwrap_or_default();
    let args = strings.by_ref().take(nargs).collect();
    let env = strings.collect();
    Ok(Launch {
        args,
        env,
        cwd,
        tty,
        passed,
    })
}

// ---------------------------------------------------------------------------------------------
// The launcher's side (single-threaded: it may allocate).
// ---------------------------------------------------------------------------------------------

/// Waits on stdin for the launch, takes its descriptors, directory and environment, and
/// acknowledges. `Ok(None)`: the engine went away before sending one (exit quietly).
/// `Err(code)`: the launch failed and was reported; exit with `code`.
pub fn receive() -> Result<Option<Launch>, i32> {
    const FAILED: i32 = super::LAUNCHER_FAILED_EXIT_CODE;
    // Our own copy of stdin (close-on-exec), which the launch's stdio will replace, clear of
    // the passed descriptors' places.
    let Ok(control) = uexec_sys::dup_at_least(std::io::stdin().as_raw_fd(), PASSED_END) else {
        return Err(FAILED);
    };
    let control = UnixStream::from(control);
    let fd = control.as_raw_fd();
    let mut header = [0u8; 8];
    let mut got = 0;
    let mut fds = Vec::new();
    while got < header.len() {
        match uexec_sys::recv_with_fds(fd, &mut header[got..]) {
            Ok((0, _)) if got == 0 => return Ok(None),
            Ok((0, _)) => return Err(FAILED),
            Ok((n, more)) => {
                got += n;
                fds.extend(more);
            }
            Err(_) => return Err(FAILED),
        }
    }
    let reply = |stage: u32, errno: i32| {
        let _ = (&control).write_all(&uexec_sys::stage_report(stage, errno));
    };
    let len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
    if header[..4] != MAGIC || len > MAX_BODY {
        reply(uexec_sys::STAGE_SETUP, libc::EPROTO);
        return Err(FAILED);
    }
    let mut body = vec![0u8; len];
    if (&control).read_exact(&mut body).is_err() {
        return Err(FAILED);
    }
    let stdio_fds = |launch: &Launch| if launch.tty { 1 } else { 3 };
    let launch = match decode(&body) {
        Ok(launch) if fds.len() == stdio_fds(&launch) + launch.passed => launch,
        _ => {
            reply(uexec_sys::STAGE_SETUP, libc::EPROTO);
            return Err(FAILED);
        }
    };
    let stdio: [RawFd; 3] = if launch.tty {
        [fds[0].as_raw_fd(); 3]
    } else {
        [fds[0].as_raw_fd(), fds[1].as_raw_fd(), fds[2].as_raw_fd()]
    };
    let passed: Vec<RawFd> = fds[stdio_fds(&launch)..]
        .iter()
        .map(AsRawFd::as_raw_fd)
        .collect();
    if let Err((stage, errno)) = take(&launch, stdio, &passed) {
        reply(stage, errno);
        return Err(FAILED);
    }
    let places = uexec_sys::PASSED_FD..uexec_sys::PASSED_FD + passed.len() as RawFd;
    for fd in fds {
        // What now sits at the passed descriptors' places is the launcher's to adopt (see
        // `launcher`): not closed here. The rest were copied where they belong.
        if places.contains(&fd.as_raw_fd()) {
            let _ = fd.into_raw_fd();
        }
    }
    for pair in &launch.env {
        let bytes = pair.as_encoded_bytes();
        // A string without a name (`=x`, or no `=`) is no variable: exec would pass it on, but
        // the command's start (std's spawn) only sees named ones.
        if let Some(eq) = bytes.iter().position(|b| *b == b'=').filter(|at| *at > 0) {
            let name = OsString::from_vec(bytes[..eq].to_vec());
            let value = OsString::from_vec(bytes[eq + 1..].to_vec());
            // The launcher is single-threaded: nothing reads the environment meanwhile.
            std::env::set_var(name, value);
        }
    }
    reply(0, 0);
    Ok(Some(launch))
}

/// Steps of [`receive`] as a spawning child makes them: stdio, the passed descriptors (onto
/// fds 3, 4, ... in order, once stdio no longer needs what sat there), controlling terminal,
/// working directory. `Err((stage, errno))`.
fn take(launch: &Launch, stdio: [RawFd; 3], passed: &[RawFd]) -> Result<(), (u32, i32)> {
    let errno = |e: io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    let setup = |e| (uexec_sys::STAGE_SETUP, errno(e));
    for (target, source) in stdio.into_iter().enumerate() {
        uexec_sys::dup_onto(source, target as RawFd).map_err(setup)?;
    }
    // The received descriptors sit wherever the kernel put them, some on another's place:
    // each is copied clear of those places first, then onto its own. Close-on-exec (as they
    // came): only the launcher's flags (`--proxy-fd`, `--exec-notify-fd`) adopt them,
    // nothing it runs inherits them.
    let clear: Vec<OwnedFd> = passed
        .iter()
        .map(|fd| uexec_sys::dup_at_least(*fd, PASSED_END))
        .collect::<io::Result<_>>()
        .map_err(setup)?;
    for (i, source) in clear.iter().enumerate() {
        let target = uexec_sys::PASSED_FD + i as RawFd;
        uexec_sys::dup_onto_cloexec(source.as_raw_fd(), target).map_err(setup)?;
    }
    if launch.tty {
        uexec_sys::take_stdin_as_controlling_terminal().map_err(setup)?;
    }
    let cwd = CString::new(launch.cwd.clone().into_vec())
        .map_err(|_| (uexec_sys::STAGE_CHDIR, libc::EINVAL))?;
    uexec_sys::change_dir(&cwd).map_err(|e| (uexec_sys::STAGE_CHDIR, errno(e)))
}

// ---------------------------------------------------------------------------------------------
// The engine's side.
// ---------------------------------------------------------------------------------------------

/// A launcher started and waiting for its launch.
struct Waiting {
    child: uexec_sys::SpawnedChild,
    control: UnixStream,
    /// Which start this is (a pid can come back; a start cannot).
    generation: u64,
    /// The cgroup it was born in, for the session that takes it.
    cgroup: Option<SpareCgroup>,
}

impl Waiting {
    /// Kills and reaps it (its launch never came, or failed), and removes its cgroup.
    fn discard(self) {
        uexec_sys::pidfd_kill(&self.child.pidfd, uexec_sys::SIGKILL);
        uexec_sys::kill_and_reap(self.child.pid);
        drop(self.cgroup);
    }
}

/// The launcher started ahead for one [`Sandbox`](crate::Sandbox): a value its owner holds
/// (dropped, it kills the one waiting), not a process-wide slot.
#[derive(Debug)]
pub(crate) struct Pool {
    /// Keep one started ahead; otherwise every start is cold.
    warm: bool,
    /// The first sandboxed command has been planned: from then on one waits.
    started: AtomicBool,
    /// The waiting launcher (one: sandboxed spawns come one at a time from a person or an
    /// agent; a second at the same moment goes cold).
    waiting: Mutex<Option<Waiting>>,
    starts: AtomicU64,
}

impl std::fmt::Debug for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiting")
            .field("pid", &self.child.pid)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl Pool {
    pub fn new(warm: bool) -> Arc<Self> {
        Arc::new(Self {
            warm,
            started: AtomicBool::new(false),
            waiting: Mutex::new(None),
            starts: AtomicU64::new(0),
        })
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, Option<Waiting>> {
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Called as each sandboxed command is planned (after the probe, which blocks for
    /// longer): the first time, when warm, starts one waiting, so that the first sandboxed
    /// command finds it.
    pub fn planned(self: &Arc<Self>, launcher: &Launcher) {
        if self.warm && !self.started.swap(true, Ordering::SeqCst) {
            self.fill(launcher);
        }
    }

    /// Starts a waiting launcher unless one is already there (on a worker thread of the
    /// runtime when there is one: the launcher dies with the thread that spawned it, see
    /// `uexec_sys`).
    fn refill(self: &Arc<Self>, launcher: &Launcher) {
        let launcher = launcher.clone();
        let pool = Arc::downgrade(self);
        let fill = move || {
            if let Some(pool) = pool.upgrade() {
                pool.fill(&launcher);
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(async move { fill() })),
            Err(_) => fill(),
        }
    }

    /// Starts a waiting launcher unless one is already there.
    fn fill(self: &Arc<Self>, launcher: &Launcher) {
        if self.waiting().is_some() {
            return;
        }
        // A spawn failure leaves the slot empty: the next command goes cold and tries again.
        let generation = self.starts.fetch_add(1, Ordering::Relaxed);
        let Ok(w) = start(launcher, generation) else {
            return;
        };
        let watch = w.child.pidfd.try_clone();
        if let Some(old) = self.waiting().replace(w) {
            old.discard();
        }
        if let Ok(watch) = watch {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                drop(runtime.spawn(reap_if_it_dies(Arc::downgrade(self), generation, watch)));
            }
        }
    }

    /// Starts `launcher` for a rendered spawn (`spec.argv` is the launcher's: `[display
    /// path, subcommand, args...]`): the waiting one when there is one (handed the launch),
    /// else a cold one. Starts the next waiting launcher either way.
    pub fn launch(
        self: &Arc<Self>,
        launcher: &Launcher,
        spec: &uexec_sys::ChildSpec,
    ) -> io::Result<Started> {
        // A list that cannot be passed fails here, warm or cold, before any hand-over.
        uexec_sys::check_passed_fds(&spec.passed_fds)?;
        if self.warm {
            if let Some(started) = self.launch_warm(launcher, spec)? {
                return Ok(started);
            }
        }
        // Cold, with the descriptor the program is reached through kept across the exec.
        let child = match launcher.program_fd() {
            None => uexec_sys::spawn_child(spec),
            Some(fd) => uexec_sys::spawn_child(&uexec_sys::ChildSpec {
                program_fd: Some(fd),
                ..spec.clone()
            }),
        }?;
        Ok(Started {
            child,
            cgroup: None,
        })
    }

    /// Hands the launch to the waiting launcher: `None` when there is none (or it died
    /// waiting): spawn cold.
    fn launch_warm(
        self: &Arc<Self>,
        launcher: &Launcher,
        spec: &uexec_sys::ChildSpec,
    ) -> io::Result<Option<Started>> {
        let taken = self.waiting().take();
        self.refill(launcher);
        let Some(w) = taken else {
            return Ok(None);
        };
        let args: Vec<&[u8]> = spec.argv.iter().skip(2).map(|a| a.as_bytes()).collect();
        let env: Vec<&[u8]> = spec.envp.iter().map(|e| e.as_bytes()).collect();
        let message = encode(
            &args,
            &env,
            spec.cwd.as_bytes(),
            spec.controlling_tty,
            spec.passed_fds.len() as u8,
        );
        let stdio: &[RawFd] = if spec.controlling_tty {
            &spec.stdio[..1]
        } else {
            &spec.stdio
        };
        let fds: Vec<RawFd> = stdio.iter().chain(&spec.passed_fds).copied().collect();
        match hand_over(&w.control, &message, &fds) {
            Ok(None) => Ok(Some(Started {
                child: w.child,
                cgroup: w.cgroup,
            })),
            Ok(Some(report)) => {
                w.discard();
                Err(uexec_sys::stage_error(report))
            }
            // It died waiting, its socket failed, or it did not answer in time: cold.
            Err(_) => {
                w.discard();
                Ok(None)
            }
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let waiting = self
            .waiting
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(w) = waiting {
            w.discard();
        }
    }
}

/// A waiting launcher that dies (killed, or a launcher that is not one) is reaped and its
/// place emptied, rather than left a zombie until the next sandboxed spawn. Once taken by a
/// launch, it is the session's to reap: the check under the slot's lock tells which.
async fn reap_if_it_dies(pool: Weak<Pool>, generation: u64, pidfd: OwnedFd) {
    let Ok(pidfd) = uexec_sys::async_fd(pidfd) else {
        return;
    };
    if pidfd.readable().await.is_err() {
        return;
    }
    let Some(pool) = pool.upgrade() else {
        return;
    };
    let mut slot = pool.waiting();
    if slot.as_ref().is_some_and(|w| w.generation == generation) {
        if let Some(dead) = slot.take() {
            drop(slot);
            dead.discard();
        }
    }
}

fn start(launcher: &Launcher, generation: u64) -> io::Result<Waiting> {
    let (ours, theirs) = UnixStream::pair()?;
    // A launcher that stops answering (stopped, starved) must not hold the spawning thread:
    // past this, the spawn goes cold and the launcher is killed with its group.
    ours.set_read_timeout(Some(HAND_OVER_TIMEOUT))?;
    ours.set_write_timeout(Some(HAND_OVER_TIMEOUT))?;
    let null = uexec_sys::dev_null()?;
    let cgroup = SpareCgroup::make();
    let c_path = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
    };
    let child = uexec_sys::spawn_child(&uexec_sys::ChildSpec {
        program: c_path(&launcher.program())?,
        argv: vec![
            c_path(launcher.display())?,
            CString::new(super::LAUNCHER_SUBCOMMAND).map_err(io::Error::other)?,
            CString::new(WARM_FLAG).map_err(io::Error::other)?,
        ],
        envp: Vec::new(),
        cwd: CString::new("/").map_err(io::Error::other)?,
        stdio: [theirs.as_raw_fd(), null.as_raw_fd(), null.as_raw_fd()],
        controlling_tty: false,
        passed_fds: Vec::new(),
        program_fd: launcher.program_fd(),
        cgroup: cgroup.as_ref().and_then(SpareCgroup::child_cgroup),
    })?;
    Ok(Waiting {
        child,
        control: ours,
        generation,
        cgroup,
    })
}

/// Sends the message with the descriptors and waits for the report: `None` when all is
/// well, `Some(report)` of a failure.
fn hand_over(control: &UnixStream, message: &[u8], fds: &[RawFd]) -> io::Result<Option<[u8; 8]>> {
    let sent = uexec_sys::send_with_fds(control.as_raw_fd(), message, fds)?;
    let mut control = control;
    control.write_all(&message[sent..])?;
    let mut report = [0u8; 8];
    control.read_exact(&mut report)?;
    Ok((report != [0; 8]).then_some(report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let message = encode(
            &[b"--layers", b"namespaces", b"--", b"/bin/sh"],
            &[b"A=1", b"EMPTY=", b"X=a=b"],
            b"/work dir",
            true,
            2,
        );
        assert_eq!(message[..4], MAGIC);
        let body = &message[8..];
        assert_eq!(
            u32::from_le_bytes([message[4], message[5], message[6], message[7]]) as usize,
            body.len()
        );
        let launch = decode(body).unwrap();
        assert_eq!(
            launch,
            Launch {
                args: ["--layers", "namespaces", "--", "/bin/sh"]
                    .map(OsString::from)
                    .to_vec(),
                env: ["A=1", "EMPTY=", "X=a=b"].map(OsString::from).to_vec(),
                cwd: "/work dir".into(),
                tty: true,
                passed: 2,
            }
        );
        let empty = encode(&[], &[], b"/", false, 0);
        assert_eq!(decode(&empty[8..]).unwrap().args, Vec::<OsString>::new());
    }

    #[test]
    fn malformed_messages_are_refused() {
        let good = encode(&[b"a", b"b"], &[b"E=1"], b"/", false, 1);
        let body = &good[8..];
        for (bad, why) in [
            (&body[..body.len() - 1], "last string unterminated"),
            (&body[..body.len() - 4], "a string missing"),
            (&body[..6], "counts truncated"),
            (&[][..], "empty"),
        ] {
            assert!(decode(bad).is_err(), "{why}");
        }
        let mut extra = body.to_vec();
        extra.extend(b"more\0");
        assert!(decode(&extra).is_err(), "a string too many");
        let mut flag = body.to_vec();
        flag[0] = 7;
        assert!(decode(&flag).is_err(), "an unknown flag");
        let mut many = body.to_vec();
        many[1] = uexec_sys::MAX_PASSED_FDS as u8 + 1;
        assert!(decode(&many).is_err(), "too many descriptors");
    }
}
