//! `uexec audit [--json] [--since DURATION|TIME]`: the front door's decisions as this user's
//! faces wrote them down (`uexec mcp`, the daemon, `uexec serve`; see
//! [`uexec_mcp::audit`]): when, whose, the command (secrets masked), the rules' decision,
//! admitted or refused, who decided (the rules, a hook, a person and how, no one), the rule
//! and why. Reads the record itself: starts no daemon, needs none.

use std::io::Write as _;
use std::process::ExitCode;

use super::common::{Failure, EXIT_UEXEC};
use super::logs::{parse_since, Since};
use super::table::one_line as one;

/// `uexec audit`.
#[derive(Debug, Clone, clap::Args)]
pub struct AuditArgs {
    /// Only decisions since then: a duration ago (90s, 10m, 2h, 1d) or an RFC 3339 time
    /// (2026-12-03T11:35:00Z).
    #[arg(long, value_name = "DURATION|TIME", value_parser = parse_since)]
    pub since: Option<Since>,
    /// One JSON object per decision (JSON Lines): time, owner, command, cwd, decision,
    /// outcome, by, and rule, justification, part, reason when there is one.
    #[arg(long)]
    pub json: bool,
}

pub fn audit(args: AuditArgs) -> Result<ExitCode, Failure> {
    let Some(path) = uexec_mcp::audit::AuditFile::default_path() else {
        return Err(Failure {
            code: EXIT_UEXEC,
            message: "no record to read: neither XDG_STATE_HOME nor HOME is set".to_owned(),
        });
    };
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    let mut shown = 0usize;
    let failed = |e: std::io::Error| Failure {
        code: EXIT_UEXEC,
        message: format!("reading {}: {e}", path.display()),
    };
    let skipped = uexec_mcp::audit::read(&path, args.since.map(Since::time), |entry| {
        shown += 1;
        if args.json {
            serde_json::to_writer(&mut out, &entry).map_err(std::io::Error::other)?;
            writeln!(out)
        } else {
            writeln!(out, "{}", line(&entry))
        }
    })
    .map_err(failed)?;
    out.flush().map_err(failed)?;
    drop(out);
    if skipped > 0 {
        eprintln!(
            "uexec audit: {skipped} line(s) of {} could not be read (another uexec version?)",
            path.display()
        );
    }
    if shown == 0 && !args.json {
        let when = if args.since.is_some() {
            " in that time"
        } else {
            ""
        };
        eprintln!(
            "no decisions recorded{when} (the record: {})",
            path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// One decision on one line: `TIME  OUTCOME  DECISION  OWNER  COMMAND  — by BY (RULE: WHY)`.
fn line(e: &uexec_mcp::audit::Entry) -> String {
    let mut text = format!(
        "{}  {:<8}  {:<9}  {}  {}  — by {}",
        e.time,
        e.outcome,
        e.decision,
        one(&e.owner),
        one(&e.command),
        one(&e.by)
    );
    if let Some(rule) = &e.rule {
        text.push_str(&format!(" ({}", one(rule)));
        if let Some(why) = &e.justification {
            text.push_str(&format!(": {}", one(why)));
        }
        text.push(')');
    }
    if let (Some(reason), "refused") = (&e.reason, e.outcome.as_str()) {
        text.push_str(&format!("; {}", one(reason)));
    }
    text
}
