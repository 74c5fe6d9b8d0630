//! A person's terminal: raw mode and back, its modes, the controlling terminal.

use std::io;
use std::os::fd::RawFd;

use crate::*;

/// A terminal's settings, to put back.
pub struct SavedTerminal(libc::termios);

/// Puts the terminal `fd` in raw mode (no echo, no line editing, no signals from keys);
/// returns what to restore.
pub fn make_raw(fd: RawFd) -> io::Result<SavedTerminal> {
    // SAFETY: termios is plain data; tcgetattr fills it or fails.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `t` is a valid, writable termios.
    if unsafe { libc::tcgetattr(fd, &mut t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let saved = SavedTerminal(t);
    // SAFETY: cfmakeraw only edits the struct.
    unsafe { libc::cfmakeraw(&mut t) };
    // SAFETY: `t` is a valid termios.
    if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(saved)
}

/// Puts back what [`make_raw`] changed.
pub fn restore_terminal(fd: RawFd, saved: &SavedTerminal) {
    // SAFETY: `saved.0` is the valid termios tcgetattr returned.
    unsafe {
        libc::tcsetattr(fd, libc::TCSANOW, &saved.0);
    }
}

/// The terminal's echo and canonical-mode flags (`tcgetattr`; on Linux a PTY master reports
/// its slave's settings): `(echo, canonical)`.
pub fn terminal_modes(fd: RawFd) -> io::Result<(bool, bool)> {
    // SAFETY: termios is plain data; tcgetattr fills it or fails.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `t` is a valid, writable termios.
    if unsafe { libc::tcgetattr(fd, &mut t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((t.c_lflag & libc::ECHO != 0, t.c_lflag & libc::ICANON != 0))
}

/// Makes stdin (a PTY slave) the controlling terminal of this session's leader.
pub fn take_stdin_as_controlling_terminal() -> io::Result<()> {
    // SAFETY: an ioctl without arguments on fd 0.
    check(unsafe { libc::ioctl(0, libc::TIOCSCTTY as _, 0) })
}
