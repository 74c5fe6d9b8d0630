//! `uexec man DIR`: the man pages a package installs, made from the clap tree of `--help`.

use crate::helpers::{scratch_dir, UEXEC};

fn uexec(args: &[&str]) -> std::process::Output {
    std::process::Command::new(UEXEC)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_man_pages_are_the_help_of_every_verb() {
    let dir = scratch_dir("man").join("man1");
    let out = uexec(&["man", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let page = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let top = page("uexec.1");
    assert!(
        top.contains(&format!(
            ".TH uexec 1  \"uexec {}\"",
            env!("CARGO_PKG_VERSION")
        )),
        "{top}"
    );
    // The exit codes and units of `uexec --help`, and every verb, each with its own page.
    assert!(
        top.contains("Exit codes:") && top.contains("Units:"),
        "{top}"
    );
    for verb in [
        "mcp", "serve", "daemon", "run", "ls", "logs", "attach", "wait", "kill", "pause", "resume",
    ] {
        assert!(top.contains(&format!("uexec\\-{verb}(1)")), "{verb}");
        let page = page(&format!("uexec-{verb}.1"));
        assert!(page.contains(&format!(".TH uexec-{verb} 1")), "{page}");
    }
    // `uexec mcp`'s flags under the headings of its --help.
    let mcp = page("uexec-mcp.1");
    for heading in [
        "FACES",
        "DAEMON",
        "HTTP",
        "ENVIRONMENTS",
        "SANDBOX",
        "TRANSCRIPTS",
        "LIMITS",
    ] {
        assert!(mcp.contains(&format!(".SH {heading}\n")), "{heading}");
    }
    assert!(mcp.contains("\\-\\-network\\-allow"), "{mcp}");
    // The verb that writes them is for packagers: not in --help, and no page of its own.
    assert!(!dir.join("uexec-man.1").exists());
    let help = String::from_utf8(uexec(&["--help"]).stdout).unwrap();
    assert!(
        !help.lines().any(|l| l.trim_start().starts_with("man ")),
        "{help}"
    );
}

#[test]
fn man_without_a_directory_or_into_a_file_is_refused_by_name() {
    let out = uexec(&["man"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("<DIR>"));
    let out = uexec(&["man", "/dev/null/pages"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .starts_with("uexec: cannot write the man pages into /dev/null/pages: "),
        "{out:?}"
    );
}
