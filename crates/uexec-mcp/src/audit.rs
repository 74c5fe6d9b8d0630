//! The record of the front door's decisions, as `uexec audit` reads it: one JSON object per
//! line in `$XDG_STATE_HOME/uexec/audit/audit.jsonl` (else `~/.local/state/uexec/audit/`: a
//! directory of its own, 0700, whatever the state directory's mode), appended by
//! every face of this user (in-process `uexec mcp`, the daemon, `uexec serve`).
//!
//! - Bounded: a line keeps at most [`COMMAND_MAX_BYTES`] of its command; past
//!   [`ROTATE_BYTES`] the file becomes `audit.jsonl.1` (the one before is dropped), so the
//!   record never holds more than twice that.
//! - No secret: the command's secret-looking assignments and flags are masked by the door
//!   ([`uexec_core::spawn::masked`]); no environment is written.
//! - One `write` per line, or per batch of lines (an exec watch's), on an `O_APPEND` file:
//!   faces of the same user append side by side without tearing each other's lines. The
//!   file stays open between writes; before each, one `stat` says whether the path still
//!   names it (another face may have rotated it, a person removed it): if not, it is opened
//!   again (thousands of execs a second are judged and recorded under `--rules-at exec`).
//! - Never fails a spawn: a record that cannot be written is said once in the log.

use std::fs::File;
use std::io::{BufRead, Write as _};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use uexec_core::spawn::{Decided, DecisionLog};

/// The record's directory in uexec's state directory, and its file there.
pub const DIR_NAME: &str = "audit";
pub const FILE_NAME: &str = "audit.jsonl";
/// Past this size the file is rotated.
pub const ROTATE_BYTES: u64 = 8 * 1024 * 1024;
/// The longest command kept in a line; the rest is cut, and the line says so.
pub const COMMAND_MAX_BYTES: usize = 2048;

/// One decision as written down.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// RFC 3339, UTC, to the millisecond.
    pub time: String,
    /// Whose command: `@person`, `mcp:/src/app`, `serve:127.0.0.1:4021`.
    pub owner: String,
    pub command: String,
    pub cwd: String,
    /// The rules' (and hooks') decision: `allow`, `prompt`, `forbidden`.
    pub decision: String,
    /// `admitted` or `refused`.
    pub outcome: String,
    /// Who decided: `rules`, `no rule`, a hook, `the person (MCP form)`, `no one (no answer)`.
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub justification: Option<String>,
    /// The part of the script that decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
    /// The refusal's text, or a person's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// An exec judged in a session (`--rules-at exec`): the session, the process that
    /// exec'd and its parent (lines before these fields read as a script's text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ppid: Option<u32>,
}

impl Entry {
    /// `decided` for `owner`, its texts cut to their bound.
    pub fn of(owner: &str, decided: Decided) -> Self {
        let rule = decided.rule.as_ref();
        Self {
            time: uexec_core::rfc3339::format(decided.at),
            owner: owner.to_owned(),
            command: cut(decided.command),
            cwd: decided.cwd.display().to_string(),
            decision: decided.decision.to_string(),
            outcome: if decided.admitted {
                "admitted"
            } else {
                "refused"
            }
            .to_owned(),
            by: decided.by,
            rule: rule.map(|r| r.source.clone()),
            justification: rule.and_then(|r| r.justification.clone()),
            part: decided.part.map(cut),
            reason: decided.reason.map(cut),
            session: decided.exec.map(|e| e.session),
            pid: decided.exec.map(|e| e.pid),
            ppid: decided.exec.map(|e| e.ppid),
        }
    }

    /// When it was decided (`None`: a time this uexec cannot read).
    pub fn at(&self) -> Option<SystemTime> {
        uexec_core::rfc3339::parse(&self.time).ok()
    }
}

/// `text` cut to [`COMMAND_MAX_BYTES`] on a character boundary, saying how much went.
fn cut(text: String) -> String {
    if text.len() <= COMMAND_MAX_BYTES {
        return text;
    }
    let mut end = COMMAND_MAX_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes)", &text[..end], text.len() - end)
}

/// The record's file, shared by the owners of one process.
#[derive(Debug)]
pub struct AuditFile {
    path: PathBuf,
    /// A failure was said once; later ones are not.
    said: AtomicBool,
    /// The file open for appending, with its device and inode.
    open: Mutex<Option<(File, u64, u64)>>,
}

impl AuditFile {
    /// The file at `path` (made on the first decision).
    pub fn at(path: PathBuf) -> Arc<Self> {
        Arc::new(Self {
            path,
            said: AtomicBool::new(false),
            open: Mutex::new(None),
        })
    }

    /// This user's record (`None`: no state directory, neither `XDG_STATE_HOME` nor `HOME`).
    pub fn default_path() -> Option<PathBuf> {
        uexec_core::fs::state_dir().map(|d| d.join(DIR_NAME).join(FILE_NAME))
    }

    /// This user's record, if it has a place.
    pub fn of_this_user() -> Option<Arc<Self>> {
        Self::default_path().map(Self::at)
    }

    /// The log a store of `owner` writes its decisions to.
    pub fn for_owner(self: &Arc<Self>, owner: impl Into<String>) -> Arc<dyn DecisionLog> {
        Arc::new(OwnersLog {
            file: self.clone(),
            owner: owner.into(),
        })
    }

    /// Appends `entries`, one line each, in one write.
    fn append(&self, entries: &[Entry]) -> std::io::Result<()> {
        let mut lines = Vec::new();
        for entry in entries {
            serde_json::to_writer(&mut lines, entry).map_err(std::io::Error::other)?;
            lines.push(b'\n');
        }
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let mut now = std::fs::metadata(&self.path).ok();
        if now.as_ref().is_some_and(|m| m.len() >= ROTATE_BYTES) {
            // Another face may rotate at the same moment: one rename wins, the other
            // finds the file gone or small, and both go on appending.
            let _ = std::fs::rename(&self.path, rotated(&self.path));
            now = None;
        }
        let same = matches!((&*open, &now), (Some((_, dev, ino)), Some(m)) if m.dev() == *dev && m.ino() == *ino);
        if !same {
            *open = None;
            if let Some(dir) = self.path.parent() {
                uexec_core::fs::private_dir(dir)?;
            }
            let file = uexec_core::fs::private_append_file(&self.path)?;
            let m = file.metadata()?;
            *open = Some((file, m.dev(), m.ino()));
        }
        match open.as_mut() {
            Some((file, _, _)) => file.write_all(&lines),
            None => Ok(()),
        }
    }

    fn said_once(&self, e: &std::io::Error) {
        if !self.said.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                path = %self.path.display(),
                "the audit record cannot be written (said once): {e}"
            );
        }
    }
}

/// The file before the current one.
pub fn rotated(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

/// One owner's decisions, into the shared file.
#[derive(Debug)]
struct OwnersLog {
    file: Arc<AuditFile>,
    owner: String,
}

impl DecisionLog for OwnersLog {
    fn record(&self, decided: Decided) {
        self.record_all(vec![decided]);
    }

    fn record_all(&self, all: Vec<Decided>) {
        let entries: Vec<Entry> = all.into_iter().map(|d| Entry::of(&self.owner, d)).collect();
        if let Err(e) = self.file.append(&entries) {
            self.file.said_once(&e);
        }
    }
}

/// Every entry of the record at `path` (the rotated file first), oldest first, from `since`
/// on, given one by one to `each` (the record is never held whole in memory). Lines this
/// uexec cannot read are counted and skipped. Returns how many were skipped.
pub fn read(
    path: &Path,
    since: Option<SystemTime>,
    mut each: impl FnMut(Entry) -> std::io::Result<()>,
) -> std::io::Result<usize> {
    let mut skipped = 0;
    for file in [rotated(path), path.to_path_buf()] {
        let file = match std::fs::File::open(&file) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for line in std::io::BufReader::new(file).split(b'\n') {
            let line = line?;
            if line.is_empty() {
                continue;
            }
            let Ok(entry) = serde_json::from_slice::<Entry>(&line) else {
                skipped += 1;
                continue;
            };
            if since.is_some_and(|since| entry.at().is_some_and(|at| at < since)) {
                continue;
            }
            each(entry)?;
        }
    }
    Ok(skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use uexec_core::policy::rules::{Decision, RuleMatch};

    /// A fresh directory of this test's own.
    fn fresh(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("uexec-audit-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn decided(command: &str, admitted: bool) -> Decided {
        Decided {
            at: SystemTime::now(),
            command: command.to_owned(),
            cwd: "/w".into(),
            decision: Decision::Prompt,
            admitted,
            rule: Some(RuleMatch {
                source: "team.rules:3".into(),
                matched_prefix: vec!["git".into(), "push".into()],
                decision: Decision::Prompt,
                justification: Some("pushing is for people".into()),
            }),
            part: Some("git push".into()),
            by: "the person (MCP form)".into(),
            reason: None,
            exec: None,
        }
    }

    #[test]
    fn decisions_are_appended_as_lines_and_read_back_in_order() {
        let dir = fresh("lines");
        let path = dir.join("state/audit.jsonl");
        let file = AuditFile::at(path.clone());
        file.for_owner("mcp:/a").record(decided("git push", true));
        file.for_owner("@person")
            .record(decided("git push -f", false));
        let mut seen = Vec::new();
        let skipped = read(&path, None, |e| {
            seen.push(e);
            Ok(())
        })
        .unwrap();
        assert_eq!(skipped, 0);
        assert_eq!(seen.len(), 2);
        assert_eq!(
            (seen[0].owner.as_str(), seen[0].outcome.as_str()),
            ("mcp:/a", "admitted")
        );
        assert_eq!(seen[1].rule.as_deref(), Some("team.rules:3"));
        assert_eq!(seen[1].outcome, "refused");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_long_command_is_cut_and_the_file_rotates_past_its_bound() {
        let dir = fresh("rotate");
        let path = dir.join("state/audit.jsonl");
        let file = AuditFile::at(path.clone());
        let log = file.for_owner("mcp:/a");
        let long = "x".repeat(COMMAND_MAX_BYTES * 3);
        // Each line is a little over COMMAND_MAX_BYTES: enough of them pass the bound.
        let lines = ROTATE_BYTES as usize / COMMAND_MAX_BYTES + 2;
        for _ in 0..lines {
            log.record(decided(&long, true));
        }
        let old = std::fs::metadata(rotated(&path)).unwrap().len();
        let now = std::fs::metadata(&path).unwrap().len();
        assert!(old >= ROTATE_BYTES && now < ROTATE_BYTES, "{old} {now}");
        let mut first = None;
        read(&path, None, |e| {
            first.get_or_insert(e);
            Ok(())
        })
        .unwrap();
        let first = first.unwrap();
        assert!(first.command.len() < COMMAND_MAX_BYTES + 40, "cut");
        assert!(first
            .command
            .ends_with(&format!("({} more bytes)", COMMAND_MAX_BYTES * 2)));
    }

    #[test]
    fn since_leaves_out_what_came_before_and_a_bad_line_is_counted() {
        let dir = fresh("since");
        let path = dir.join("state/audit.jsonl");
        let file = AuditFile::at(path.clone());
        let mut old = decided("old", true);
        old.at = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        file.for_owner("o").record(old);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"not json\n")
            .unwrap();
        file.for_owner("o").record(decided("new", true));
        let since = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_750_000_000);
        let mut seen = Vec::new();
        let skipped = read(&path, Some(since), |e| {
            seen.push(e.command);
            Ok(())
        })
        .unwrap();
        assert_eq!((seen, skipped), (vec!["new".to_owned()], 1));
    }

    #[test]
    fn an_execs_place_is_written_and_a_line_without_one_still_reads() {
        let dir = fresh("place");
        let path = dir.join("state/audit.jsonl");
        let file = AuditFile::at(path.clone());
        let mut d = decided("/usr/bin/true", true);
        d.exec = Some(uexec_core::spawn::ExecPlace {
            session: 1000,
            pid: 42,
            ppid: 41,
        });
        file.for_owner("o").record(d);
        // A line of a uexec before the tree: no session, pid nor ppid.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(
                br#"{"time":"2026-01-01T00:00:00.000Z","owner":"o","command":"old","cwd":"/","decision":"allow","outcome":"admitted","by":"rules"}"#,
            )
            .unwrap();
        let mut seen = Vec::new();
        let skipped = read(&path, None, |e| {
            seen.push((e.command, e.session, e.pid, e.ppid));
            Ok(())
        })
        .unwrap();
        assert_eq!(skipped, 0);
        assert_eq!(
            seen,
            [
                ("/usr/bin/true".to_owned(), Some(1000), Some(42), Some(41)),
                ("old".to_owned(), None, None, None)
            ]
        );
        let line = std::fs::read_to_string(&path).unwrap();
        assert!(
            line.contains(r#""session":1000,"pid":42,"ppid":41"#),
            "{line}"
        );
    }
}
