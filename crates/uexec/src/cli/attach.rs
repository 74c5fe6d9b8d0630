//! `uexec attach ID [--write]`: the session's screen in this terminal, live.
//!
//! Read-only unless `--write`, which takes the session's input lease (the model's writes are
//! refused until this detaches) and makes the session's terminal follow this one's size.
//! The detach key (Ctrl-\ unless `--detach-key`) leaves the session running. A one-line
//! banner on stderr says which of these apply. With a stdin that is not a terminal (a pipe,
//! `/dev/null`) it follows read-only, reads no keys, and ends when the session does.
//!
//! On leaving (detached, or the session ended) the person's terminal is put back as tmux
//! leaves it: alternate screen off, keypad and cursor keys normal, cursor shown, mouse and
//! bracketed paste off, attributes reset ([`RESTORE`]): a full-screen program (vim, top)
//! would otherwise leave the prompt drawn over its lines. A key typed read-only is not lost
//! in silence: the bottom line says so. Another owner's output comes filtered of clipboard
//! writes, titles and device strings (`--raw` passes them; `uexec_mcp::daemon::escapes`).
//!
//! What it prints is for a terminal: a PTY session's screen as it is, a pipe session's log
//! with `\r\n` line ends (the daemon adds the `\r`s; see `uexec_mcp::daemon::attach`), as
//! `tail -f` would show it. `uexec logs` gives a transcript's bytes as they are.

use std::io::{IsTerminal, Write};
use std::os::fd::AsRawFd;
use std::process::ExitCode;

use base64::Engine as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uexec_mcp::daemon::client::LocalHello as _;
use uexec_protocol::daemon::{AttachFrame, AttachRequest, Hello, Settings, PERSON};

use super::common::{parse_session_ref, SessionRef};
use super::conn::{Conn, Target};
use super::Failure;

/// `uexec attach`.
#[derive(Debug, Clone, clap::Args)]
pub struct AttachArgs {
    /// The session: its id, or its name.
    #[arg(value_name = "SESSION", value_parser = parse_session_ref)]
    pub id: SessionRef,
    /// Type into the session (takes its input lease; a tty session only).
    #[arg(long)]
    pub write: bool,
    /// Pass another owner's output as it is: clipboard writes (OSC 52), window titles and
    /// device strings (DCS) reach this terminal (by default they are dropped, as tmux does).
    #[arg(long)]
    pub raw: bool,
    /// The key that detaches: ^X (Ctrl-X) for X one of A-Z, \, ], ^, _ (default ^\).
    #[arg(long, value_name = "KEY", default_value = "^\\", value_parser = parse_key)]
    pub detach_key: u8,
}

fn parse_key(s: &str) -> Result<u8, String> {
    let rest = s
        .strip_prefix('^')
        .or_else(|| s.strip_prefix("ctrl-"))
        .or_else(|| s.strip_prefix("C-"))
        .ok_or_else(|| format!("{s:?}: give a control key as ^X, e.g. ^\\ or ^]"))?;
    match rest.as_bytes() {
        [c] if c.is_ascii_alphabetic() || b"\\]^_@[".contains(c) => {
            Ok(c.to_ascii_uppercase() & 0x1f)
        }
        _ => Err(format!("{s:?}: give a control key as ^X, e.g. ^\\ or ^]")),
    }
}

/// A control key as people write it: 0x1c is `Ctrl-\`.
fn key_name(key: u8) -> String {
    format!("Ctrl-{}", char::from(key | 0x40))
}

/// The line said on attaching: which session, and what the keys do.
fn banner(id: i32, write: bool, interactive: bool, detach_key: u8) -> String {
    let key = key_name(detach_key);
    match (interactive, write) {
        (false, _) => {
            format!("attached to {id} (read-only; stdin is not a terminal: until the session ends)")
        }
        (true, false) => format!("attached to {id} (read-only; {key} detaches)"),
        (true, true) => {
            format!("attached to {id} (--write: keys go to the session; {key} detaches)")
        }
    }
}

/// What puts the person's terminal back as tmux leaves it on detach: the main screen (a
/// full-screen program's alternate one off), cursor keys and keypad normal, the cursor
/// shown, mouse reporting, focus events and bracketed paste off, attributes reset.
const RESTORE: &[u8] = b"\x1b[?1049l\x1b[?1l\x1b>\x1b[?25h\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1004l\x1b[?2004l\x1b[0m";

/// The one-line status a key typed read-only draws on the bottom row (the cursor saved
/// and put back), for a terminal of `rows` rows.
fn read_only_status(rows: u16, detach_key: u8) -> Vec<u8> {
    format!(
        "\x1b7\x1b[{rows};1H\x1b[2K\x1b[7mread-only: {} detaches; --write to type\x1b[0m\x1b8",
        key_name(detach_key)
    )
    .into_bytes()
}

/// Puts the terminal back when dropped.
struct RawGuard(Option<uexec_sys::SavedTerminal>);

impl Drop for RawGuard {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            uexec_sys::restore_terminal(std::io::stdin().as_raw_fd(), saved);
        }
    }
}

pub async fn attach(target: &Target, args: AttachArgs) -> Result<ExitCode, Failure> {
    let interactive = std::io::stdin().is_terminal();
    if args.write && !interactive {
        return Err(Failure {
            code: 2,
            message: "--write needs a terminal on stdin".to_owned(),
        });
    }
    let (rows, cols) = uexec_sys::window_size(std::io::stdout().as_raw_fd())
        .ok()
        .filter(|(r, c)| *r > 0 && *c > 0)
        .unwrap_or((24, 80));
    let socket = match &target.socket {
        Some(path) => path.clone(),
        None => uexec_mcp::daemon::default_socket().map_err(anyhow::Error::from)?,
    };
    let id = match &args.id {
        SessionRef::Id(id) => *id,
        named => named.resolve(&mut Conn::open(target, Vec::new())?).await?,
    };
    let mut hello =
        Hello::here(PERSON.to_owned(), Settings::default()).map_err(anyhow::Error::from)?;
    hello.attach = Some(AttachRequest {
        session_id: id,
        write: args.write,
        rows,
        cols,
        raw: args.raw,
    });
    let connected = uexec_mcp::daemon::client::connect(&socket, &hello, false, &[])
        .await
        .map_err(|e| {
            let message = super::common::cli_words(&format!("{e:#}"));
            let code = if message.contains("Unknown session") {
                super::EXIT_NO_SESSION
            } else {
                super::EXIT_UEXEC
            };
            Failure { code, message }
        })?;
    let (mut from_daemon, mut to_daemon) = connected.stream.into_split();
    {
        let mut err = std::io::stderr();
        let _ = writeln!(
            err,
            "{}",
            banner(id, args.write, interactive, args.detach_key)
        );
        let _ = err.flush();
    }
    let _raw = RawGuard(if interactive {
        uexec_sys::make_raw(std::io::stdin().as_raw_fd()).ok()
    } else {
        None
    });
    let mut winch = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
        .map_err(anyhow::Error::from)?;
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();
    // The screen's first bytes may have come with the reply.
    stdout
        .write_all(&connected.after)
        .await
        .map_err(anyhow::Error::from)?;
    stdout.flush().await.map_err(anyhow::Error::from)?;
    let mut from_buf = vec![0u8; 64 * 1024];
    let mut key_buf = vec![0u8; 4096];
    let mut stdin_open = interactive;
    let detached = loop {
        tokio::select! {
            n = from_daemon.read(&mut from_buf) => {
                let n = n.map_err(anyhow::Error::from)?;
                if n == 0 {
                    break false;
                }
                stdout.write_all(&from_buf[..n]).await.map_err(anyhow::Error::from)?;
                stdout.flush().await.map_err(anyhow::Error::from)?;
            }
            n = stdin.read(&mut key_buf), if stdin_open => {
                let n = n.map_err(anyhow::Error::from)?;
                if n == 0 {
                    stdin_open = false;
                    continue;
                }
                let keys = &key_buf[..n];
                let (before, detach) = match keys.iter().position(|k| *k == args.detach_key) {
                    Some(at) => (&keys[..at], true),
                    None => (keys, false),
                };
                if !args.write && !before.is_empty() {
                    let rows = uexec_sys::window_size(std::io::stdout().as_raw_fd())
                        .map_or(rows, |(r, _)| r.max(1));
                    stdout.write_all(&read_only_status(rows, args.detach_key)).await.map_err(anyhow::Error::from)?;
                    stdout.flush().await.map_err(anyhow::Error::from)?;
                }
                if args.write && !before.is_empty() {
                    send(&mut to_daemon, &AttachFrame::Input(
                        base64::engine::general_purpose::STANDARD.encode(before),
                    )).await?;
                }
                if detach {
                    break true;
                }
            }
            _ = winch.recv() => {
                if let Ok((r, c)) = uexec_sys::window_size(std::io::stdout().as_raw_fd()) {
                    send(&mut to_daemon, &AttachFrame::Resize(r, c)).await?;
                }
            }
        }
    };
    if std::io::stdout().is_terminal() {
        let _ = stdout.write_all(RESTORE).await;
        let _ = stdout.flush().await;
    }
    drop(_raw);
    let _ = to_daemon.shutdown().await;
    let mut err = std::io::stderr();
    if detached {
        let _ = writeln!(
            err,
            "\r\n[detached from session {}: it keeps running]\r",
            id
        );
    }
    let _ = err.flush();
    // Detached: 0; else the session ended, and this exits with its code, as `wait` does.
    let code = if detached {
        0
    } else {
        match ended_code(target, id).await {
            Ok(code) => code,
            Err(f) => {
                let _ = writeln!(err, "uexec: {}", f.message);
                f.code
            }
        }
    };
    // The blocking read of stdin cannot be cancelled: leave without waiting for a key.
    std::process::exit(i32::from(code));
}

/// The exit code of session `id`, which has ended (`await_exit` gives a stored one).
async fn ended_code(target: &Target, id: i32) -> Result<u8, Failure> {
    let mut conn = Conn::open(target, Vec::new())?;
    let args = serde_json::json!({"session_id": id, "yield_time_ms": 5_000});
    let end = super::common::call(&mut conn, "await_exit", args).await?;
    Ok(super::common::exit_code_of(
        end.structured["exit_code"].as_i64(),
    ))
}

async fn send(
    to: &mut tokio::net::unix::OwnedWriteHalf,
    frame: &AttachFrame,
) -> Result<(), Failure> {
    let mut line = serde_json::to_vec(frame).map_err(anyhow::Error::from)?;
    line.push(b'\n');
    to.write_all(&line)
        .await
        .map_err(|e| anyhow::anyhow!("the uexec daemon closed the connection: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{banner, key_name, parse_key};

    #[test]
    fn detach_keys() {
        assert_eq!(parse_key("^\\"), Ok(0x1c));
        assert_eq!(parse_key("^]"), Ok(0x1d));
        assert_eq!(parse_key("ctrl-a"), Ok(0x01));
        assert!(parse_key("q").is_err());
        assert!(parse_key("^ab").is_err());
    }

    #[test]
    fn the_banner_names_the_mode_and_the_detach_key() {
        assert_eq!(key_name(0x1c), "Ctrl-\\");
        assert_eq!(key_name(parse_key("^a").unwrap_or(0)), "Ctrl-A");
        assert_eq!(
            banner(1234, false, true, 0x1c),
            "attached to 1234 (read-only; Ctrl-\\ detaches)"
        );
        assert_eq!(
            banner(7, true, true, 0x1d),
            "attached to 7 (--write: keys go to the session; Ctrl-] detaches)"
        );
        assert!(banner(7, false, false, 0x1c).contains("stdin is not a terminal"));
    }
}
