//! `uexec completions SHELL` completes sessions: the script `uexec completions bash` prints,
//! sourced in a real bash with the completion function `complete -p uexec` names called as
//! bash calls it, offers a named session's id and name for `uexec kill <TAB>`, from the
//! daemon `uexec ls` asks (which starts none), and only where a session goes.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use crate::helpers::UEXEC;
use crate::place::DaemonPlace;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The script `uexec completions SHELL` prints, written into the place.
fn script(place: &DaemonPlace, shell: &str) -> std::path::PathBuf {
    let out = place.command(&["completions", shell]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let file = place.cwd.join(format!("uexec.{shell}"));
    std::fs::write(&file, &out.stdout).unwrap();
    file
}

/// PATH with this build's `uexec` first, as a person who installed it has it.
fn path() -> String {
    format!(
        "{}:{}",
        Path::new(UEXEC).parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// What bash offers for the words of `line` (the last one being completed): the script
/// sourced, the function `complete -p uexec` registered called with COMP_WORDS and
/// COMP_CWORD set, as bash calls it on TAB.
fn bash_offers(place: &DaemonPlace, line: &[&str]) -> Vec<String> {
    let file = script(place, "bash");
    let words: Vec<String> = line.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}' || exit 9\n\
         f=$(complete -p uexec | sed -n 's/.* -F \\([^ ]*\\) .*/\\1/p')\n\
         [ -n \"$f\" ] || exit 8\n\
         COMP_WORDS=({})\n\
         COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))\n\
         COMP_LINE=\"${{COMP_WORDS[*]}}\"\n\
         COMP_POINT=${{#COMP_LINE}}\n\
         \"$f\" uexec \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        file.display(),
        words.join(" ")
    );
    let out = place
        .command_of(
            Path::new("bash"),
            &["--norc", "--noprofile", "-c", &program],
        )
        .env("PATH", path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completes_the_ids_and_names_of_sessions_where_a_session_goes() {
    let place = DaemonPlace::new("complete");
    let out = place
        .command(&["run", "-d", "--name", "web", "--", "exec sleep 600"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let id = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(id.parse::<u32>().is_ok(), "{id:?}");

    let started = Instant::now();
    let offered = bash_offers(&place, &["uexec", "kill", ""]);
    let took = started.elapsed();
    assert!(offered.contains(&id), "{offered:?}");
    assert!(offered.contains(&"web".to_owned()), "{offered:?}");
    // A failure guard, not a figure: the whole bash, the script and one `uexec ls`.
    assert!(took < Duration::from_secs(10), "{took:?}");
    eprintln!("bash sourced the script and completed `uexec kill ` in {took:?}");

    // What the word starts with narrows it; a verb's other words are not sessions.
    assert_eq!(bash_offers(&place, &["uexec", "wait", "w"]), ["web"]);
    assert_eq!(bash_offers(&place, &["uexec", "kill", "web", "w"]), ["web"]);
    assert_eq!(
        bash_offers(&place, &["uexec", "--log-file", "x", "attach", &id[..1]]),
        std::slice::from_ref(&id)
    );
    for line in [
        &["uexec", "send", "web", "w"][..],
        &["uexec", "wait", "web", "w"],
        &["uexec", "kill", "--signal", "w"],
        &["uexec", "ls", "w"],
    ] {
        let offered = bash_offers(&place, line);
        assert!(
            !offered.contains(&"web".to_owned()),
            "{line:?}: {offered:?}"
        );
    }
    // Flags still complete as clap_complete's script completes them.
    let flags = bash_offers(&place, &["uexec", "kill", "--si"]);
    assert_eq!(flags, ["--signal"]);
    // The verbs too.
    assert_eq!(bash_offers(&place, &["uexec", "ki"]), ["kill"]);
}

#[test]
fn completing_a_session_starts_no_daemon() {
    let place = DaemonPlace::new("complete-none");
    assert_eq!(
        bash_offers(&place, &["uexec", "kill", "w"]),
        Vec::<String>::new()
    );
    assert!(!place.socket().exists(), "a daemon was started");
    assert!(place.status().is_none());
}

/// zsh's and fish's scripts are made too: every SESSION spec of zsh's is rewritten (a
/// script clap_complete wrote otherwise is left as it is, and fails here); where fish is
/// installed, it offers the session as bash does.
#[test]
fn zsh_and_fish_scripts_complete_sessions_too() {
    let place = DaemonPlace::new("complete-fish");
    let zsh = std::fs::read_to_string(script(&place, "zsh")).unwrap();
    assert_eq!(
        zsh.matches(":_uexec_sessions' \\").count(),
        10,
        "wait kill send poll logs attach rm keep pause resume"
    );
    let fish = script(&place, "fish");
    let fish_text = std::fs::read_to_string(&fish).unwrap();
    assert!(fish_text.contains("__fish_uexec_wants_session kill 1 "));
    let Ok(version) = std::process::Command::new("fish").arg("--version").output() else {
        eprintln!("no fish here: its script is only checked as text");
        return;
    };
    assert!(version.status.success());
    let out = place
        .command(&["run", "-d", "--name", "web", "--", "exec sleep 600"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let id = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let program = format!("source '{}'; complete -C 'uexec kill '", fish.display());
    let out = place
        .command_of(Path::new("fish"), &["--no-config", "-c", &program])
        .env("PATH", path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let offered = String::from_utf8(out.stdout).unwrap();
    let offered: Vec<&str> = offered.lines().collect();
    assert!(offered.contains(&id.as_str()), "{offered:?}");
    assert!(offered.contains(&"web"), "{offered:?}");
}
