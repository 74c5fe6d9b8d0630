//! Codex's `environments.toml`, read the way Codex reads it, so one file serves both:
//!
//! ```toml
//! [[environments]]
//! id = "pod-a"                      # ASCII letters, digits, '-' or '_'; not "local"/"none"
//! url = "wss://pod-a.agents:9000"   # an exec server (uexec serve, codex exec-server)
//! auth_bearer_token = "..."         # optional (prefer --environment-token-file pod-a=PATH)
//! connect_timeout_sec = 5           # optional
//!
//! [[environments]]
//! id = "ssh-dev"
//! program = "ssh"                   # an exec server over a child's stdio
//! args = ["dev", "uexec serve --listen stdio"]
//! ```
//!
//! Codex's top-level `default` and `include_local` are accepted and ignored: uexec's default
//! is always its own machine. Unknown keys are errors, as in Codex.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// Longest id (Codex's limit).
pub const MAX_ENVIRONMENT_ID_LEN: usize = 64;

/// One environment of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub id: String,
    pub target: Target,
}

/// How an environment is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// An exec server at a `ws://` or `wss://` URL.
    Url {
        url: String,
        token: Option<String>,
        connect_timeout: Option<Duration>,
    },
    /// An exec server on the stdio of a child process.
    Program { program: String, args: Vec<String> },
}

/// Why a file cannot be used; says which file and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("environments file {path}: {message}")]
pub struct FileError {
    pub path: PathBuf,
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[allow(dead_code)]
    default: Option<String>,
    #[allow(dead_code)]
    include_local: Option<bool>,
    #[serde(default)]
    environments: Vec<RawEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    id: toml::Spanned<String>,
    url: Option<String>,
    program: Option<String>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    cwd: Option<PathBuf>,
    auth_bearer_token: Option<String>,
    connect_timeout_sec: Option<f64>,
    initialize_timeout_sec: Option<f64>,
}

/// Reads and checks the file.
pub fn load(path: &Path) -> Result<Vec<Entry>, FileError> {
    let text = std::fs::read_to_string(path).map_err(|e| FileError {
        path: path.to_owned(),
        message: format!("cannot read it: {e}"),
    })?;
    parse(path, &text)
}

/// Parses and checks the text of the file at `path`.
pub fn parse(path: &Path, text: &str) -> Result<Vec<Entry>, FileError> {
    let error = |message: String| FileError {
        path: path.to_owned(),
        message,
    };
    let raw: RawFile = toml::from_str(text).map_err(|e| error(toml_error(text, &e)))?;
    let mut seen = HashSet::new();
    let mut entries = Vec::with_capacity(raw.environments.len());
    for item in raw.environments {
        // The line is counted only for an error: counting it for every entry made a long
        // file quadratic to read (20,000 entries took 4 s).
        let at = item.id.span().start;
        let located = |m: String| error(format!("line {}: {m}", line_of(text, at)));
        let entry = check(item).map_err(located)?;
        if !seen.insert(entry.id.clone()) {
            return Err(located(format!(
                "environments.id: `{}` is given twice",
                entry.id
            )));
        }
        entries.push(entry);
    }
    Ok(entries)
}

fn check(item: RawEntry) -> Result<Entry, String> {
    let id = item.id.into_inner();
    check_id(&id)?;
    if item.program.is_none() && (item.args.is_some() || item.env.is_some() || item.cwd.is_some()) {
        return Err(format!(
            "environment `{id}`: args, env and cwd need a program"
        ));
    }
    if item.url.is_none()
        && (item.connect_timeout_sec.is_some() || item.auth_bearer_token.is_some())
    {
        return Err(format!(
            "environment `{id}`: connect_timeout_sec and auth_bearer_token need a url"
        ));
    }
    let connect_timeout = item
        .connect_timeout_sec
        .map(|s| {
            Duration::try_from_secs_f64(s).map_err(|_| {
                format!("environment `{id}`: connect_timeout_sec: {s} is not a duration")
            })
        })
        .transpose()?;
    if let Some(s) = item.initialize_timeout_sec {
        Duration::try_from_secs_f64(s).map_err(|_| {
            format!("environment `{id}`: initialize_timeout_sec: {s} is not a duration")
        })?;
    }
    let target = match (item.url, item.program) {
        (Some(url), None) => {
            let url = url.trim().to_owned();
            if !url.starts_with("ws://") && !url.starts_with("wss://") {
                return Err(format!(
                    "environment `{id}`: url `{url}` must start with ws:// or wss://"
                ));
            }
            if url.len() <= "wss://".len() || url.ends_with("://") {
                return Err(format!("environment `{id}`: url `{url}` has no host"));
            }
            Target::Url {
                url,
                token: item.auth_bearer_token.filter(|t| !t.is_empty()),
                connect_timeout,
            }
        }
        (None, Some(program)) => {
            let program = program.trim().to_owned();
            if program.is_empty() {
                return Err(format!("environment `{id}`: program is empty"));
            }
            Target::Program {
                program,
                args: item.args.unwrap_or_default(),
            }
        }
        (None, None) => {
            return Err(format!(
                "environment `{id}` has neither url nor program (give exactly one)"
            ))
        }
        (Some(_), Some(_)) => {
            return Err(format!(
                "environment `{id}` has both url and program (give exactly one)"
            ))
        }
    };
    Ok(Entry { id, target })
}

/// Codex's rules for ids.
pub fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("environments.id is empty".to_owned());
    }
    if id == "local" || id.eq_ignore_ascii_case("none") {
        return Err(format!("environments.id `{id}` is reserved"));
    }
    if id.len() > MAX_ENVIRONMENT_ID_LEN {
        return Err(format!(
            "environments.id `{id}` is longer than {MAX_ENVIRONMENT_ID_LEN} characters"
        ));
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "environments.id `{id}` may contain only ASCII letters, digits, '-' and '_'"
        ));
    }
    Ok(())
}

/// The parser's message on one line, led by where it is.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim().replace('\n', " ");
    match e.span() {
        Some(span) => format!("line {}: {message}", line_of(text, span.start)),
        None => message,
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(offset)
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str) -> Result<Vec<Entry>, String> {
        parse(Path::new("envs.toml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn urls_and_programs_are_read_as_codex_writes_them() {
        let entries = parse_str(
            r#"
default = "pod-a"
include_local = true

[[environments]]
id = "pod-a"
url = " wss://pod-a:9000 "
auth_bearer_token = "t0k"
connect_timeout_sec = 2.5

[[environments]]
id = "ssh-dev"
program = "ssh"
args = ["dev", "uexec serve --listen stdio"]
"#,
        )
        .unwrap();
        assert_eq!(
            entries,
            [
                Entry {
                    id: "pod-a".into(),
                    target: Target::Url {
                        url: "wss://pod-a:9000".into(),
                        token: Some("t0k".into()),
                        connect_timeout: Some(Duration::from_millis(2500)),
                    }
                },
                Entry {
                    id: "ssh-dev".into(),
                    target: Target::Program {
                        program: "ssh".into(),
                        args: vec!["dev".into(), "uexec serve --listen stdio".into()],
                    }
                }
            ]
        );
        assert_eq!(parse_str("").unwrap(), []);
    }

    /// Regression: the line of every entry was counted from the start of the text, so
    /// 20,000 entries took 4 s to read (the line is now counted for an error only).
    #[test]
    fn twenty_thousand_entries_load_and_an_error_after_them_names_its_line() {
        let entry = |i: usize| {
            format!("[[environments]]\nid = \"pod-{i}\"\nurl = \"wss://uexec-{i}.uexec.uexec.svc:9000\"\n\n")
        };
        let mut text: String = (0..20_000).map(entry).collect();
        let entries = parse_str(&text).unwrap();
        assert_eq!(entries.len(), 20_000);
        for (i, e) in entries.iter().enumerate() {
            let url = format!("wss://uexec-{i}.uexec.uexec.svc:9000");
            assert_eq!(e.id, format!("pod-{i}"));
            assert_eq!(
                e.target,
                Target::Url {
                    url,
                    token: None,
                    connect_timeout: None
                }
            );
        }
        // Four lines an entry: the id of entry 20,000 (counting from 0) is on line 80,002.
        text.push_str("[[environments]]\nid = \"pod-7\"\nurl = \"ws://x:1\"\n");
        let e = parse_str(&text).unwrap_err();
        assert!(
            e.ends_with("line 80002: environments.id: `pod-7` is given twice"),
            "{e}"
        );
    }

    #[test]
    fn bad_files_name_the_file_the_line_and_the_field() {
        let cases = [
            ("[[environments]]\nid = \"a\"\n", "line 2: environment `a` has neither url nor program"),
            (
                "[[environments]]\nid = \"a\"\nurl = \"ws://x:1\"\nprogram = \"p\"\n",
                "line 2: environment `a` has both url and program",
            ),
            (
                "[[environments]]\nid = \"a\"\nurl = \"ws://x:1\"\n\n[[environments]]\nid = \"a\"\nurl = \"ws://y:1\"\n",
                "line 6: environments.id: `a` is given twice",
            ),
            ("[[environments]]\nid = \"a b\"\nurl = \"ws://x:1\"\n", "line 2: environments.id `a b` may contain only"),
            ("[[environments]]\nid = \"local\"\nurl = \"ws://x:1\"\n", "environments.id `local` is reserved"),
            ("[[environments]]\nid = \"a\"\nurl = \"http://x:1\"\n", "url `http://x:1` must start with ws:// or wss://"),
            ("[[environments]]\nid = \"a\"\nurl = \"ws://\"\n", "url `ws://` has no host"),
            ("[[environments]]\nid = \"a\"\nurl = \"ws://x:1\"\nargs = []\n", "args, env and cwd need a program"),
            ("[[environments]]\nid = \"a\"\nprogram = \"p\"\nconnect_timeout_sec = 1\n", "need a url"),
            ("[[environments]]\nid = \"a\"\nurl = \"ws://x:1\"\nconnect_timeout_sec = -1\n", "connect_timeout_sec: -1 is not a duration"),
            ("[[environments]]\nid = \"a\"\nurl = \"ws://x:1\"\nport = 3\n", "line 4: unknown field `port`"),
            ("[[environments]]\nid = \"a\"\nurl = ws://x\n", "line 3: "),
            ("[[environments]]\nurl = \"ws://x:1\"\n", "missing field `id`"),
        ];
        for (text, expected) in cases {
            let e = parse_str(text).unwrap_err();
            assert!(e.starts_with("environments file envs.toml: "), "{e}");
            assert!(e.contains(expected), "{text:?}: {e}");
        }
    }
}
