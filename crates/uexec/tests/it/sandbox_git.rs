//! No repository can be planted or rewritten from inside the sandbox (issue 23, section 3):
//! `.git` at a writable root and at the workdir, a worktree's `gitdir:` and its main
//! repository stay read-only, through a real `uexec mcp` over stdio, on the real kernel (the
//! rest of what stays read-only: `sandbox_fs`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::helpers::{eventually, text, UEXEC};
use crate::sandbox_fs::{exec, scratch, server};

fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap()
}

fn git_ok(dir: &Path, args: &[&str]) -> String {
    let out = git(dir, args);
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A repository at `dir/repo` with one commit, and its subdirectory `sub`.
fn repository(dir: &Path) -> (PathBuf, PathBuf) {
    let repo = dir.join("repo");
    let sub = repo.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    git_ok(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(sub.join("file"), "x\n").unwrap();
    git_ok(&repo, &["add", "."]);
    git_ok(&repo, &["commit", "-q", "-m", "one"]);
    (repo, sub)
}

#[test]
fn git_skips_an_empty_git_directory_when_it_looks_for_the_repository() {
    let dir = scratch("discovery");
    let (repo, sub) = repository(&dir);
    std::fs::create_dir(sub.join(".git")).unwrap();
    assert_eq!(
        git_ok(&sub, &["rev-parse", "--show-toplevel"]),
        repo.display().to_string()
    );
    assert!(git(&sub, &["status", "--short"]).status.success());
}

#[tokio::test]
async fn no_repository_can_be_planted_or_rewritten_from_a_workdir_below_the_root() {
    let dir = scratch("git");
    let (repo, sub) = repository(&dir);
    let config = std::fs::read(repo.join(".git/config")).unwrap();
    let dir_arg = dir.display().to_string();
    let (client, _) = server(
        Path::new(UEXEC),
        &dir,
        &["--structured", "--writable-root", &dir_arg],
        &[],
    )
    .await;
    let pwned = dir.join("pwned");
    let cmd = format!(
        "touch mine && echo wrote; \
         git init -q . && echo init-ok; \
         git config core.fsmonitor 'touch {pwned}' && echo config-ok; \
         printf '[core]\\n\\tfsmonitor = touch {pwned}\\n' >> ../.git/config && echo parent-config-ok; \
         printf '#!/bin/sh\\ntouch {pwned}\\n' > ../.git/hooks/pre-commit && echo hook-ok; \
         rmdir .git; mv .git moved; mkdir .git && echo mkdir-ok; \
         git init -q {dir} && echo root-init-ok; true",
        pwned = pwned.display(),
        dir = dir.display(),
    );
    let r = exec(
        &client,
        json!({"cmd": cmd, "workdir": sub.display().to_string(), "sandbox": "workspace-write"}),
    )
    .await;
    let out = text(&r);
    assert!(out.contains("wrote") && sub.join("mine").exists(), "{out}");
    for step in [
        "init-ok",
        "config-ok",
        "parent-config-ok",
        "hook-ok",
        "mkdir-ok",
        "root-init-ok",
    ] {
        assert!(!out.contains(step), "{step}: {out}");
    }
    assert_eq!(
        std::fs::read(repo.join(".git/config")).unwrap(),
        config,
        "{out}"
    );
    assert!(!repo.join(".git/hooks/pre-commit").exists(), "{out}");
    // After the session, the placeholders are gone and git works outside as before.
    eventually("the placeholders removed", Duration::from_secs(5), || {
        !sub.join(".git").exists() && !dir.join(".git").exists()
    })
    .await;
    assert!(!sub.join("moved").exists(), "{out}");
    assert_eq!(
        git_ok(&sub, &["rev-parse", "--show-toplevel"]),
        repo.display().to_string()
    );
    let status = git_ok(&sub, &["status", "--short"]);
    assert_eq!(status, "?? mine");
    assert!(!pwned.exists(), "{out}");
}

#[tokio::test]
async fn a_worktrees_gitdir_and_its_main_repository_are_read_only() {
    let dir = scratch("worktree");
    let (repo, _) = repository(&dir);
    let wt = dir.join("wt");
    git_ok(&repo, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    let gitdir = PathBuf::from(git_ok(&wt, &["rev-parse", "--absolute-git-dir"]));
    assert!(
        gitdir.starts_with(repo.join(".git/worktrees")),
        "{}",
        gitdir.display()
    );
    let head = std::fs::read(gitdir.join("HEAD")).unwrap();
    let dot_git = std::fs::read(wt.join(".git")).unwrap();
    let dir_arg = dir.display().to_string();
    let (client, _) = server(
        Path::new(UEXEC),
        &dir,
        &["--structured", "--writable-root", &dir_arg],
        &[],
    )
    .await;
    let cmd = format!(
        "touch mine && echo wrote; \
         echo 'ref: refs/heads/evil' > {gitdir}/HEAD && echo gitdir-ok; \
         echo 'gitdir: /elsewhere' > .git && echo dotgit-ok; \
         git config core.pager 'touch pwned' && echo config-ok; true",
        gitdir = gitdir.display(),
    );
    let r = exec(
        &client,
        json!({"cmd": cmd, "workdir": wt.display().to_string(), "sandbox": "workspace-write"}),
    )
    .await;
    let out = text(&r);
    assert!(out.contains("wrote"), "{out}");
    for step in ["gitdir-ok", "dotgit-ok", "config-ok"] {
        assert!(!out.contains(step), "{step}: {out}");
    }
    assert_eq!(std::fs::read(gitdir.join("HEAD")).unwrap(), head, "{out}");
    assert_eq!(std::fs::read(wt.join(".git")).unwrap(), dot_git, "{out}");
    assert!(out.contains("Read-only file system"), "{out}");
}
