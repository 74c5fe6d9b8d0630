//! The workspace's architecture invariant: `unsafe` lives here and nowhere else. The compiler
//! enforces `#![forbid(unsafe_code)]` once it is written; this test makes sure every crate
//! root writes it, including crates and binaries added later.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

/// Every crate root of the workspace: each `src/lib.rs`, and each `[[bin]]`'s `path`.
fn crate_roots(crates: &Path) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    for entry in std::fs::read_dir(crates).unwrap().flatten() {
        let dir = entry.path();
        let Ok(manifest) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        if dir.join("src/lib.rs").exists() {
            roots.push(dir.join("src/lib.rs"));
        }
        if dir.join("src/main.rs").exists() {
            roots.push(dir.join("src/main.rs"));
        }
        for line in manifest.lines() {
            if let Some(path) = line.trim().strip_prefix("path = \"") {
                roots.push(dir.join(path.trim_end_matches('"')));
            }
        }
    }
    roots.sort();
    roots.dedup();
    roots
}

#[test]
fn every_crate_but_this_one_forbids_unsafe_code() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let roots = crate_roots(crates);
    assert!(roots.len() >= 9, "crate roots found: {roots:?}");
    let this = Path::new(env!("CARGO_MANIFEST_DIR"));
    for root in roots.iter().filter(|r| !r.starts_with(this)) {
        let text = std::fs::read_to_string(root).unwrap();
        if root.ends_with("uexec/src/front.rs") {
            // The front's C `main` is the one exception, allowed on that item alone.
            assert!(text.contains("#![deny(unsafe_code)]"), "{}", root.display());
            assert_eq!(
                text.matches("#[allow(unsafe_code)]").count(),
                1,
                "{}",
                root.display()
            );
        } else {
            assert!(
                text.contains("#![forbid(unsafe_code)]"),
                "{} does not say #![forbid(unsafe_code)]",
                root.display()
            );
        }
    }
}
