//! `uexec audit [--json] [--since DURATION|TIME]`: the front door's decisions as this user's
//! faces wrote them down (`uexec mcp`, the daemon, `uexec serve`; see
//! [`uexec_mcp::audit`]): when, whose, the command (secrets masked), the rules' decision,
//! admitted or refused, who decided (the rules, a hook, a person and how, no one), the rule
//! and why. Reads the record itself: starts no daemon, needs none.
//!
//! The execs judged in a session (`--rules-at exec`) are shown as a tree at the place of the
//! session's first one (its command): each exec indented under the exec of its nearest
//! recorded ancestor ([`exec_tree`]). `--json` prints each line as it is written.

use std::collections::HashMap;
use std::io::Write as _;
use std::process::ExitCode;

use uexec_mcp::audit::Entry;

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
    /// outcome, by, and rule, justification, part, reason when there is one; session, pid
    /// and ppid for an exec judged in a session (--rules-at exec). Without it, a session's
    /// execs are shown as a tree under its command.
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
    let since = args.since.map(Since::time);
    let skipped = if args.json {
        uexec_mcp::audit::read(&path, since, |entry| {
            shown += 1;
            serde_json::to_writer(&mut out, &entry).map_err(std::io::Error::other)?;
            writeln!(out)
        })
    } else {
        // The trees need each session's execs together: the record is read whole (it is
        // bounded: two files of at most ROTATE_BYTES).
        let mut entries = Vec::new();
        let skipped = uexec_mcp::audit::read(&path, since, |entry| {
            entries.push(entry);
            Ok(())
        });
        shown = entries.len();
        skipped.and_then(|skipped| print_with_trees(&mut out, &entries).map(|()| skipped))
    }
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

/// A session, by its owner and id.
type SessionOf<'a> = (&'a str, i32);

/// A session's judged exec: its session and its process and parent.
fn exec_of(e: &Entry) -> Option<(SessionOf<'_>, (u32, u32))> {
    match (e.session, e.pid, e.ppid) {
        (Some(session), Some(pid), Some(ppid)) => Some(((e.owner.as_str(), session), (pid, ppid))),
        _ => None,
    }
}

/// `entries` in order, one a line, each session's execs as one tree where its first is.
fn print_with_trees(out: &mut impl std::io::Write, entries: &[Entry]) -> std::io::Result<()> {
    let mut sessions: HashMap<SessionOf<'_>, Vec<usize>> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        if let Some((session, _)) = exec_of(e) {
            sessions.entry(session).or_default().push(i);
        }
    }
    for (i, e) in entries.iter().enumerate() {
        let Some((session, _)) = exec_of(e) else {
            writeln!(out, "{}", line(e, 0))?;
            continue;
        };
        // Printed whole at its first exec.
        let Some(execs) = sessions.remove(&session).filter(|execs| execs[0] == i) else {
            continue;
        };
        let places: Vec<(u32, u32)> = execs
            .iter()
            .filter_map(|&i| exec_of(&entries[i]).map(|(_, place)| place))
            .collect();
        for (at, depth) in exec_tree(&places) {
            writeln!(out, "{}", line(&entries[execs[at]], depth))?;
        }
    }
    Ok(())
}

/// The tree of one session's execs, given in record order as (pid, ppid): each exec's index
/// with its depth, in the order to show them (each process's execs in order, then its
/// children's subtrees, in the order they came).
///
/// A process is a node: an exec of a pid already seen with the same parent is that process
/// exec'ing again. Any other exec is a new process (a pid may have been reused): its parent
/// is the latest process of its ppid recorded before it, else the root (the session's first
/// exec, its command).
pub(crate) fn exec_tree(execs: &[(u32, u32)]) -> Vec<(usize, usize)> {
    struct Node {
        ppid: u32,
        execs: Vec<usize>,
        children: Vec<usize>,
    }
    let mut nodes: Vec<Node> = Vec::new();
    let mut latest: HashMap<u32, usize> = HashMap::new();
    for (i, &(pid, ppid)) in execs.iter().enumerate() {
        if let Some(&n) = latest.get(&pid) {
            if nodes[n].ppid == ppid {
                nodes[n].execs.push(i);
                continue;
            }
        }
        let k = nodes.len();
        let parent = latest.get(&ppid).copied().or((k > 0).then_some(0));
        if let Some(parent) = parent {
            nodes[parent].children.push(k);
        }
        nodes.push(Node {
            ppid,
            execs: vec![i],
            children: Vec::new(),
        });
        latest.insert(pid, k);
    }
    let mut shown = Vec::with_capacity(execs.len());
    let mut stack = if nodes.is_empty() {
        Vec::new()
    } else {
        vec![(0usize, 0usize)]
    };
    while let Some((n, depth)) = stack.pop() {
        shown.extend(nodes[n].execs.iter().map(|&i| (i, depth)));
        stack.extend(nodes[n].children.iter().rev().map(|&c| (c, depth + 1)));
    }
    shown
}

/// One decision on one line: `TIME  OUTCOME  DECISION  OWNER  COMMAND  — by BY (RULE: WHY)`;
/// an exec `depth` deep in its session's tree has its command indented under its parent's.
fn line(e: &Entry, depth: usize) -> String {
    let indent = match depth {
        0 => String::new(),
        d => format!("{}└ ", "  ".repeat(d - 1)),
    };
    let mut text = format!(
        "{}  {:<8}  {:<9}  {}  {indent}{}  — by {}",
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

#[cfg(test)]
mod tests {
    use super::exec_tree;

    /// The depths of `execs` in the order shown, as (index, depth).
    fn tree(execs: &[(u32, u32)]) -> Vec<(usize, usize)> {
        let shown = exec_tree(execs);
        let mut seen: Vec<usize> = shown.iter().map(|(i, _)| *i).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..execs.len()).collect::<Vec<_>>(), "each once");
        shown
    }

    #[test]
    fn children_go_under_their_parent_and_a_process_that_execs_again_is_one_node() {
        // 10 (the command) forks 11 and 12; 11 execs twice and forks 13; 12's line came
        // before 13's, yet 13 is shown under 11.
        let execs = [(10, 1), (11, 10), (12, 10), (11, 10), (13, 11)];
        assert_eq!(tree(&execs), [(0, 0), (1, 1), (3, 1), (4, 2), (2, 1)]);
    }

    #[test]
    fn a_reused_pid_is_a_new_process_and_a_missing_parent_falls_back_to_the_root() {
        // 11 exits and its pid is reused by a child of 12: a new node under 12, and what
        // 11 forks after that goes under the new one. 99 was never recorded (a fork that
        // did not exec): its child 14 goes under the root.
        let execs = [(10, 1), (11, 10), (12, 10), (11, 12), (15, 11), (14, 99)];
        assert_eq!(
            tree(&execs),
            [(0, 0), (1, 1), (2, 1), (3, 2), (4, 3), (5, 1)]
        );
        // A child cannot come before its parent: a ppid recorded only later is missing.
        assert_eq!(
            tree(&[(10, 1), (12, 11), (11, 10)]),
            [(0, 0), (1, 1), (2, 1)]
        );
        assert!(exec_tree(&[]).is_empty());
    }
}
