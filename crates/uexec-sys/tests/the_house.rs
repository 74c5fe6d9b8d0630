//! The workspace's shape, as ARCHITECTURE.md draws it and the README promises: no source file
//! passes 600 lines, and within each crate no module uses a module that uses it.
//!
//! Why a test: both rot one commit at a time, and each commit looks harmless. The check is
//! textual, as a reader would do it:
//! 1. every `.rs` file under a crate's `src/` is a module, named by its path (`a/b.rs` and
//!    `a/b/mod.rs` are `a::b`);
//! 2. a module uses another when its code (comments left out) names `crate::x::...` or
//!    reaches it with `super::`;
//! 3. at the level of each crate's top modules (its rooms), and of their children, no two
//!    modules use each other through any chain. A room's files may use their own room.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Longest source file, in lines.
const MAX_SOURCE_LINES: usize = 600;

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// The module path of a file under `src` (`None` for the crate root).
fn module_of(src: &Path, file: &Path) -> Option<Vec<String>> {
    let rel = file.strip_prefix(src).ok()?.with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    match parts.as_slice() {
        [] => None,
        [only] if only == "lib" || only == "main" => None,
        _ => Some(parts),
    }
}

/// The code of a file without its comments (line comments, and so doc comments).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(at) => &l[..at],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths `code` names after `prefix` (`crate::a::b` gives `[a, b]`).
fn paths_after<'a>(code: &'a str, prefix: &str) -> Vec<Vec<&'a str>> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        found.push(rest[..end].split("::").filter(|s| !s.is_empty()).collect());
    }
    found
}

/// Who uses whom among a crate's modules, cut to `depth` levels.
fn uses(src: &Path, depth: usize) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let cut = |p: &[String]| p[..p.len().min(depth)].to_vec();
    let mut graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for file in sources(src) {
        let Some(module) = module_of(src, &file) else {
            continue;
        };
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        let me = cut(&module);
        let mut targets = Vec::new();
        for path in paths_after(&code, "crate::") {
            targets.push(path.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        }
        // `super::x` from `a/b.rs` is `a::x`; from `a/b/mod.rs` it is `a::x` too (the
        // parent of `a::b`).
        let mut rest = code.as_str();
        while let Some(at) = rest.find("super::") {
            let before = rest[..at].chars().next_back();
            let mut after = &rest[at..];
            rest = &rest[at + "super::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut base = module.clone();
            while let Some(tail) = after.strip_prefix("super::") {
                base.pop();
                after = tail;
            }
            let end = after
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(after.len());
            base.extend(
                after[..end]
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(String::from),
            );
            targets.push(base);
        }
        for target in targets {
            if target.is_empty() {
                continue;
            }
            let target = cut(&target);
            // A room's files may use their own room, and a module its own children.
            if target.starts_with(&me) || me.starts_with(&target) {
                continue;
            }
            graph.entry(me.clone()).or_default().insert(target);
        }
    }
    graph
}

/// A chain of uses that comes back to where it started, if there is one.
fn a_circle(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<Vec<String>>> {
    fn visit(
        at: &Vec<String>,
        graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        path: &mut Vec<Vec<String>>,
        done: &mut BTreeSet<Vec<String>>,
    ) -> Option<Vec<Vec<String>>> {
        if let Some(i) = path.iter().position(|p| p == at) {
            let mut circle = path[i..].to_vec();
            circle.push(at.clone());
            return Some(circle);
        }
        if done.contains(at) {
            return None;
        }
        path.push(at.clone());
        for next in graph.get(at).into_iter().flatten() {
            if let Some(circle) = visit(next, graph, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(at.clone());
        None
    }
    let mut done = BTreeSet::new();
    for start in graph.keys() {
        if let Some(circle) = visit(start, graph, &mut Vec::new(), &mut done) {
            return Some(circle);
        }
    }
    None
}

fn crate_sources() -> Vec<PathBuf> {
    let mut srcs: Vec<PathBuf> = std::fs::read_dir(crates_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    srcs.sort();
    srcs
}

#[test]
fn no_source_file_passes_600_lines() {
    let mut long = Vec::new();
    for src in crate_sources() {
        for file in sources(&src) {
            let lines = std::fs::read_to_string(&file).unwrap().lines().count();
            if lines > MAX_SOURCE_LINES {
                long.push(format!("{} ({lines} lines)", file.display()));
            }
        }
    }
    assert!(long.is_empty(), "split these by concern: {long:#?}");
}

#[test]
fn no_module_uses_a_module_that_uses_it() {
    let srcs = crate_sources();
    assert!(srcs.len() >= 9, "crates found: {srcs:?}");
    for src in srcs {
        for depth in [1, 2] {
            if let Some(circle) = a_circle(&uses(&src, depth)) {
                let names: Vec<String> = circle.iter().map(|m| m.join("::")).collect();
                panic!("{}: {}", src.display(), names.join(" -> "));
            }
        }
    }
}

#[test]
fn the_circle_check_finds_a_circle() {
    // The check itself, on a crate made for it: `a` uses `b`, `b` uses `a` through `super`.
    let dir = std::env::temp_dir().join(format!("uexec-house-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("b")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(
        src.join("a.rs"),
        "use crate::b::x; // crate::c is a comment\n",
    )
    .unwrap();
    std::fs::write(src.join("b/mod.rs"), "mod y;\n").unwrap();
    std::fs::write(src.join("b/y.rs"), "use super::super::a::z;\n").unwrap();
    let graph = uses(&src, 1);
    let circle = a_circle(&graph).map(|c| {
        c.iter()
            .map(|m| m.join("::"))
            .collect::<Vec<_>>()
            .join(" -> ")
    });
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(circle.as_deref(), Some("a -> b -> a"), "{graph:?}");
}

/// The places in `src` (comments left out) outside `allowed` that start a process through a
/// backend: `backend.spawn(`, `Backend::spawn(`.
fn backend_spawns(src: &Path, allowed: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for file in sources(src) {
        let relative = file
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if allowed.iter().any(|a| relative.starts_with(a)) {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        let squeezed: String = code.split_whitespace().collect();
        if squeezed.contains("backend.spawn(") || squeezed.contains("Backend::spawn(") {
            found.push(relative);
        }
    }
    found
}

#[test]
fn only_the_front_door_starts_a_process_in_the_engine() {
    // `spawn/` is the door; `backend/` is what it calls (and its own tests).
    let core = crates_dir().join("uexec-core").join("src");
    let elsewhere = backend_spawns(&core, &["spawn/", "backend/"]);
    assert!(
        elsewhere.is_empty(),
        "a spawn that skips the door (rules, a person's yes, the confinement): {elsewhere:?}"
    );
    // The check itself: the door does call it.
    assert_eq!(backend_spawns(&core, &["backend/"]), ["spawn/admit.rs"]);
    // The exec server's process/start passes the door's rules too.
    let server = crates_dir().join("uexec-server").join("src");
    assert_eq!(backend_spawns(&server, &[]), Vec::<String>::new());
}
