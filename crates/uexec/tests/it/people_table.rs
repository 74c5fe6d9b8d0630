//! Issue 42's table, row by row, as a person does it in tmux (a bash in a real terminal,
//! `send-keys` types, `capture-pane` reads): run in the foreground with their PATH and
//! credentials (past a login profile that resets PATH); start in the background at once;
//! see and follow the output later by name; attach, answer its prompt, and come back to an
//! intact prompt with the session's exit code; stop another; see what ended with which code
//! and why; run 100 jobs; clean up.

use crate::people_story::Terminal;
use crate::place::DaemonPlace;

#[tokio::test]
async fn a_person_does_every_row_of_the_table_in_tmux() {
    let place = DaemonPlace::new("people-table");
    let term = Terminal::new(&place);
    let home = place.cwd.join("home");
    // Their own tool, on a PATH a login profile would lose: Debian's /etc/profile style.
    let tools = home.join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    std::fs::write(
        tools.join("persontool"),
        "#!/bin/sh\necho \"persontool sees ${GH_TOKEN:-no token}, NO_COLOR=${NO_COLOR:-unset}\"\n",
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(tools.join("persontool"))
        .status()
        .unwrap();
    std::fs::write(home.join(".profile"), "PATH=/usr/bin:/bin\n").unwrap();
    term.run(
        "unset NO_COLOR; export PATH=\"$HOME/tools:$PATH\" GH_TOKEN=ghp_person_token",
        0,
    )
    .await;

    // 1. The foreground, with their PATH and credentials, colours not turned off.
    let out = term.run("uexec run -- persontool", 0).await;
    assert!(
        out.contains("persontool sees ghp_person_token, NO_COLOR=unset"),
        "{out}"
    );

    // 2. In the background at once: exit 0, the id on stdout, the command still running.
    let out = term
        .run(
            "uexec run -d --tty --name asker -- sh -c 'echo started; printf \"Continue? [y/N] \"; read a; echo \"answer=$a\"; exit 3'",
            0,
        )
        .await;
    let id: i64 = out
        .lines()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no id printed: {out}"));

    // 3. Its output later, by name.
    let typed = term.type_line("uexec logs asker");
    term.shows(&typed, "Continue? [y/N]").await;

    // 4. Attach, answer its prompt: the session ends with its code, the prompt comes back.
    let typed = term.type_line("uexec attach --write asker");
    term.shows(&typed, "Continue? [y/N]").await;
    term.keys(&["y", "Enter"]);
    let (out, code) = term.ends(&typed).await;
    assert!(out.contains("answer=y"), "{out}");
    assert_eq!(code, 3, "attach exits with the session's code: {out}");

    // 5. Stop another.
    term.run("uexec run -d --name long -- sleep 600", 0).await;
    term.run("uexec kill long", 0).await;

    // 6. What ended, with which code: ls -a, and wait gives the stored code every time.
    let out = term.run("uexec ls -a", 0).await;
    assert!(out.contains(&id.to_string()), "{out}");
    term.run("uexec wait asker", 3).await;
    term.run("uexec wait asker", 3).await;

    // 7. A hundred jobs, each started at once; every one exits 0, and so ends.
    let out = term
        .run(
            "ids=$(for i in $(seq 100); do uexec run -d -- true || echo FAIL; done); echo \"started=$(echo $ids | wc -w)\"; for id in $ids; do uexec wait $id >/dev/null || echo FAIL; done",
            0,
        )
        .await;
    assert!(
        out.contains("started=100") && !out.contains("FAIL"),
        "{out}"
    );

    // 8. Clean up: the ended ones go, nothing runs any more.
    term.run("uexec prune", 0).await;
    let out = term.run("uexec ls -a -q | wc -l", 0).await;
    assert_eq!(out.trim().lines().last().map(str::trim), Some("0"), "{out}");
    term.run("uexec daemon --stop", 0).await;
}
