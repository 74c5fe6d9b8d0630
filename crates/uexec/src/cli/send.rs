//! `uexec send ID [TEXT]`: types into a session, as a person at its terminal would.
//!
//! Enter is a carriage return on a terminal and a newline on a pipe, and the end of input
//! is Ctrl-D on a terminal but closing the pipe otherwise: so the session is looked up
//! first (`list_sessions`): its kind, and whether it has exited (then nothing takes input:
//! exit 3, as for a session that is not there).

use std::process::ExitCode;

use serde_json::json;

use super::common::{call, parse_session_ref, print_json, Failure, SessionRef, EXIT_NO_SESSION};
use super::conn::{Conn, Target};

/// `uexec send`.
#[derive(Debug, Clone, clap::Args)]
pub struct SendArgs {
    /// The session: its id, or its name.
    #[arg(value_name = "SESSION", value_parser = parse_session_ref)]
    pub id: SessionRef,
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

pub async fn send(target: &Target, args: SendArgs) -> Result<ExitCode, Failure> {
    let mut conn = Conn::open(target, Vec::new())?;
    if !conn.daemon_may_run() {
        return Err(args.id.no_daemon());
    }
    let id = args.id.resolve(&mut conn).await?;
    // Its kind (Enter is a carriage return on a terminal, a newline on a pipe; the end of
    // input is Ctrl-D on a terminal, closing the pipe otherwise), and whether it still runs.
    let listed = call(&mut conn, "list_sessions", json!({})).await?;
    let listed = listed.structured["sessions"]
        .as_array()
        .and_then(|all| {
            all.iter()
                .find(|s| s["session_id"].as_i64() == Some(i64::from(id)))
        })
        .cloned()
        .unwrap_or_default();
    if listed["state"] == "exited" {
        return Err(Failure {
            code: EXIT_NO_SESSION,
            message: format!(
                "session {id} has exited: nothing takes input (`uexec wait {id}` gives its code)"
            ),
        });
    }
    let tty = listed["tty"] == true;
    let mut eof = args.eof;
    let chars = if args.ctrl_c {
        "\u{3}".to_owned()
    } else {
        let mut text = args.text.clone().unwrap_or_default();
        let enter = !args.no_newline && args.text.is_some();
        if enter {
            text.push(if tty { '\r' } else { '\n' });
        }
        if eof && tty {
            text.push('\u{4}');
            eof = false;
        }
        text
    };
    let result = call(
        &mut conn,
        "send_input",
        json!({"session_id": id, "chars": chars, "eof": eof}),
    )
    .await?;
    if args.json {
        print_json(&result.structured);
    }
    Ok(ExitCode::SUCCESS)
}
