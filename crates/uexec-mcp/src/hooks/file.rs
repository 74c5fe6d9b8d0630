//! A hooks file: Claude Code's settings JSON, read for its `hooks` key alone (a settings
//! file with permissions, env and the rest is fine). Every event Claude Code names is known;
//! uexec runs `PreToolUse`, `PermissionRequest`, `PostToolUse` and `PostToolUseFailure`
//! (Codex names the same events and reads the same answers) and says once that it ignores
//! the others. An
//! unknown event, a hook type other than `command`, a matcher that is no regex or a file
//! that is no JSON is an error naming the file, line and column: never a hook silently
//! dropped.

use std::path::Path;
use std::time::Duration;

use serde::de::IgnoredAny;
use serde::Deserialize;

use super::{Group, HookCommand, Matcher};

/// A hook's `timeout` when it gives none (Claude Code's: 60 s).
pub const DEFAULT_HOOK_TIMEOUT_MS: u64 = 60_000;

#[derive(Deserialize)]
struct SettingsShape {
    #[serde(default)]
    hooks: Option<EventsShape>,
}

/// Claude Code's hook events, by name: an unknown name fails here, with its position.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct EventsShape {
    #[serde(rename = "PreToolUse", default)]
    pre_tool_use: Vec<GroupShape>,
    #[serde(rename = "PostToolUse", default)]
    post_tool_use: Vec<GroupShape>,
    #[serde(rename = "PostToolUseFailure", default)]
    post_tool_use_failure: Vec<GroupShape>,
    #[serde(rename = "PermissionRequest", default)]
    permission_request: Vec<GroupShape>,
    #[serde(rename = "Notification", default)]
    notification: Option<IgnoredAny>,
    #[serde(rename = "UserPromptSubmit", default)]
    user_prompt_submit: Option<IgnoredAny>,
    #[serde(rename = "Stop", default)]
    stop: Option<IgnoredAny>,
    #[serde(rename = "SubagentStart", default)]
    subagent_start: Option<IgnoredAny>,
    #[serde(rename = "SubagentStop", default)]
    subagent_stop: Option<IgnoredAny>,
    #[serde(rename = "PreCompact", default)]
    pre_compact: Option<IgnoredAny>,
    #[serde(rename = "SessionStart", default)]
    session_start: Option<IgnoredAny>,
    #[serde(rename = "SessionEnd", default)]
    session_end: Option<IgnoredAny>,
}

impl EventsShape {
    /// The events of Claude Code present in the file that uexec does not run.
    fn ignored(&self) -> Vec<&'static str> {
        [
            (self.notification.is_some(), "Notification"),
            (self.user_prompt_submit.is_some(), "UserPromptSubmit"),
            (self.stop.is_some(), "Stop"),
            (self.subagent_start.is_some(), "SubagentStart"),
            (self.subagent_stop.is_some(), "SubagentStop"),
            (self.pre_compact.is_some(), "PreCompact"),
            (self.session_start.is_some(), "SessionStart"),
            (self.session_end.is_some(), "SessionEnd"),
        ]
        .into_iter()
        .filter_map(|(present, name)| present.then_some(name))
        .collect()
    }
}

#[derive(Deserialize)]
struct GroupShape {
    #[serde(default)]
    matcher: Option<String>,
    hooks: Vec<HookShape>,
}

#[derive(Deserialize)]
struct HookShape {
    #[serde(rename = "type")]
    kind: HookKind,
    command: String,
    /// Seconds.
    #[serde(default)]
    timeout: Option<f64>,
}

/// uexec runs command hooks; a `prompt` or `agent` hook asks a model, which uexec has not.
#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum HookKind {
    Command,
}

/// What one file holds: its PreToolUse, PostToolUse and PostToolUseFailure groups, and what
/// it ignores.
pub(super) struct Read {
    pub pre: Vec<Group>,
    pub post: Vec<Group>,
    pub failure: Vec<Group>,
    pub permission: Vec<Group>,
    pub ignored: Vec<&'static str>,
}

/// Reads `path`; an error names it, and the line and column where it can.
pub(super) fn read(path: &Path) -> Result<Read, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: {e}"))?;
    let shape: SettingsShape = serde_json::from_str(&text).map_err(|e| format!("{shown}: {e}"))?;
    let Some(events) = shape.hooks else {
        return Ok(Read {
            pre: Vec::new(),
            post: Vec::new(),
            failure: Vec::new(),
            permission: Vec::new(),
            ignored: Vec::new(),
        });
    };
    let groups = |shapes: &[GroupShape]| -> Result<Vec<Group>, String> {
        shapes
            .iter()
            .map(|g| {
                let written = g.matcher.as_deref().unwrap_or("");
                let matcher = Matcher::parse(written).map_err(|e| {
                    let at = position(&text, written);
                    format!("{shown}{at}: matcher {written:?}: {e}")
                })?;
                let hooks = g
                    .hooks
                    .iter()
                    .map(|h| hook(h, path))
                    .collect::<Result<_, _>>()?;
                Ok(Group { matcher, hooks })
            })
            .collect()
    };
    Ok(Read {
        pre: groups(&events.pre_tool_use)?,
        post: groups(&events.post_tool_use)?,
        failure: groups(&events.post_tool_use_failure)?,
        permission: groups(&events.permission_request)?,
        ignored: events.ignored(),
    })
}

fn hook(shape: &HookShape, path: &Path) -> Result<HookCommand, String> {
    let HookKind::Command = shape.kind;
    let timeout = match shape.timeout {
        None => Duration::from_millis(DEFAULT_HOOK_TIMEOUT_MS),
        Some(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => Duration::from_secs_f64(s),
        Some(s) => {
            return Err(format!(
                "{}: hook {:?}: timeout {s} is not a number of seconds in (0, 86400]",
                path.display(),
                shape.command
            ))
        }
    };
    Ok(HookCommand {
        command: shape.command.clone(),
        timeout,
    })
}

/// `:line:column` of the first quoted `needle` in `text`, when it is there.
fn position(text: &str, needle: &str) -> String {
    let quoted = serde_json::to_string(needle).unwrap_or_default();
    let Some(at) = text.find(&quoted) else {
        return String::new();
    };
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    format!(":{line}:{column}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(name: &str, text: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("uexec-hooks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_settings_file_is_read_for_its_hooks_alone() {
        let path = written(
            "settings.json",
            r#"{"permissions": {"allow": ["Bash(ls:*)"]},
                "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "check.sh", "timeout": 5}]}],
                          "Stop": [{"hooks": [{"type": "command", "command": "done.sh"}]}]}}"#,
        );
        let read = read(&path).expect("read");
        assert_eq!(read.pre.len(), 1);
        assert_eq!(read.pre[0].hooks[0].timeout, Duration::from_secs(5));
        assert!(read.post.is_empty());
        assert_eq!(read.ignored, ["Stop"]);
    }

    #[test]
    fn an_unknown_event_or_hook_type_names_file_line_and_column() {
        let path = written("typo.json", "{\"hooks\": {\n  \"PreToolUze\": []\n}}");
        let e = read(&path).err().expect("an unknown event");
        assert!(
            e.contains("typo.json") && e.contains("PreToolUze") && e.contains("line 2"),
            "{e}"
        );
        let path = written(
            "prompt.json",
            r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "prompt", "command": "x"}]}]}}"#,
        );
        let e = read(&path).err().expect("a prompt hook");
        assert!(e.contains("prompt") && e.contains("column"), "{e}");
    }

    #[test]
    fn a_bad_matcher_names_where_it_is() {
        let path = written(
            "matcher.json",
            "{\"hooks\": {\"PostToolUse\": [\n {\"matcher\": \"(Bash\", \"hooks\": []}]}}",
        );
        let e = read(&path).err().expect("a bad regex");
        assert!(e.contains("matcher.json:2:14"), "{e}");
    }
}
