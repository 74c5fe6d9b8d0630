use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use uexec_rules::{CommandRules, Decision, LoadError, Rules, Verdict};

/// A file of `text` named `name` in a directory of this test run's own.
pub fn file(name: &str, text: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "uexec-rules-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

pub fn load(name: &str, text: &str, unmatched: Decision) -> Result<Rules, LoadError> {
    let path = file(name, text);
    let loaded = Rules::load(std::slice::from_ref(&path), unmatched);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
    loaded
}

pub fn rules(text: &str) -> Rules {
    load("team.rules", text, Decision::Allow).unwrap()
}

pub fn judge(rules: &Rules, script: &str) -> Verdict {
    rules.judge(script, "bash")
}

/// Rules that forbid `git push` and allow `git status` and `ls`.
pub fn push_forbidden() -> Rules {
    rules(
        r#"
prefix_rule(pattern = ["git", "push"], decision = "forbidden", justification = "pushing is for people")
prefix_rule(pattern = ["git", "status"], decision = "allow")
prefix_rule(pattern = ["ls"])
"#,
    )
}
