//! Shell snapshots: `login: true` commands get what the profile set up, without running it
//! each time (issue 11).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use uexec_core::shell_snapshot::{ShellSnapshotOptions, ShellSnapshots};
use uexec_core::{ExecRequest, SessionStore};

use crate::helpers::{collect, marker, store_with, wait_gone};

/// A slow profile that leaves a function, an alias, a PATH entry, options and variables.
const BASH_PROFILE: &str = r#"echo run >> "$HOME/runs"
sleep 0.3
greet() { echo "hello from $1"; }
alias ll='echo aliased'
shopt -s extglob expand_aliases
export PATH="$HOME/bin:$PATH"
export PROFILE_VAR=profile
export PROFILE_API_TOKEN=s3cret
unset UNSET_ME
"#;

struct Home {
    dir: PathBuf,
}

impl Home {
    fn new(profile_name: &str, profile: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("uexec-snap-home-{}", marker()));
        std::fs::create_dir_all(dir.join("bin")).expect("home");
        std::fs::write(dir.join(profile_name), profile).expect("profile");
        Self { dir }
    }

    fn runs(&self) -> usize {
        std::fs::read_to_string(self.dir.join("runs"))
            .unwrap_or_default()
            .lines()
            .count()
    }

    fn snapshots(&self, options: ShellSnapshotOptions) -> ShellSnapshots {
        ShellSnapshots::new(ShellSnapshotOptions {
            dir: Some(self.dir.join("run")),
            ..options
        })
    }

    fn store(&self, shell: &str, snapshots: Option<ShellSnapshotOptions>) -> Arc<SessionStore> {
        self.store_sharing(shell, snapshots.map(|o| self.snapshots(o)), &[])
    }

    fn store_sharing(
        &self,
        shell: &str,
        snapshots: Option<ShellSnapshots>,
        env: &[(&str, &str)],
    ) -> Arc<SessionStore> {
        let home = self.dir.to_string_lossy().into_owned();
        let shell = shell.to_owned();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        store_with(move |c| {
            c.env_policy.set.extend(env);
            c.default_shell = Some(shell);
            c.env_policy.set.push(("HOME".into(), home));
            c.env_policy.set.push(("UNSET_ME".into(), "here".into()));
            c.shell_snapshots = snapshots;
        })
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn login(cmd: &str) -> ExecRequest {
    ExecRequest {
        cmd: cmd.into(),
        yield_time_ms: Some(10_000),
        ..ExecRequest::default()
    }
}

async fn run(store: &Arc<SessionStore>, cmd: &str) -> (String, Option<i32>) {
    let first = store.exec_command(login(cmd)).await.expect("exec");
    let (out, last) = collect(store, first).await;
    (out, last.exit_code())
}

const SEES_THE_PROFILE: &str = r#"greet world; ll; x=a; [[ $x == @(a|b) ]] && echo extglob-parsed
case :$PATH: in *":$HOME/bin:"*) echo path-added;; esac
echo "var=$PROFILE_VAR token=${PROFILE_API_TOKEN-unset} unset=${UNSET_ME-gone}""#;

const SEEN: &str = "hello from world\naliased\nextglob-parsed\npath-added\n\
    var=profile token=unset unset=gone\n";

#[tokio::test]
async fn login_commands_see_the_profile_which_runs_once() {
    let home = Home::new(".bash_profile", BASH_PROFILE);
    let store = home.store("/bin/bash", Some(ShellSnapshotOptions::default()));
    for _ in 0..3 {
        let (out, code) = run(&store, SEES_THE_PROFILE).await;
        assert_eq!(out, SEEN);
        assert_eq!(code, Some(0));
    }
    assert_eq!(home.runs(), 1, "the profile ran once");
    let script = std::fs::read_dir(home.dir.join("run"))
        .expect("runtime dir")
        .flatten()
        .find(|e| e.path().extension().is_some_and(|x| x == "sh"))
        .expect("a snapshot script");
    let text = std::fs::read_to_string(script.path()).expect("script");
    assert!(!text.contains("s3cret"), "no secret on disk:\n{text}");
    use std::os::unix::fs::PermissionsExt;
    let mode = script.metadata().expect("meta").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[tokio::test]
async fn without_snapshots_every_login_runs_the_profile() {
    let home = Home::new(".bash_profile", BASH_PROFILE);
    let store = home.store("/bin/bash", None);
    for _ in 0..2 {
        let (out, _) = run(&store, "echo $PROFILE_VAR").await;
        assert_eq!(out, "profile\n");
    }
    assert_eq!(home.runs(), 2);
}

#[tokio::test]
async fn a_changed_profile_is_rebuilt_in_the_background() {
    let home = Home::new(".bash_profile", BASH_PROFILE);
    let store = home.store("/bin/bash", Some(ShellSnapshotOptions::default()));
    assert_eq!(run(&store, "echo ${LATER-no}").await.0, "no\n");
    assert_eq!(home.runs(), 1);
    let profile = home.dir.join(".bash_profile");
    std::fs::write(&profile, format!("{BASH_PROFILE}export LATER=yes\n")).expect("edit");

    // Stale: real login shells until the rebuild is in; then the profile stops running.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let before = home.runs();
        let (out, _) = run(&store, "echo ${LATER-no}").await;
        assert_eq!(out, "yes\n", "a stale snapshot is never used");
        if home.runs() == before {
            break;
        }
        assert!(Instant::now() < deadline, "no rebuilt snapshot was used");
    }
    assert!(home.runs() >= 3, "a real login and a rebuild ran");
}

#[tokio::test]
async fn a_hanging_profile_falls_back_to_a_real_login() {
    let sleeper = marker();
    let profile = format!(
        "if [ ! -e \"$HOME/hung\" ]; then : > \"$HOME/hung\"; sleep {sleeper}; fi\n\
         export PROFILE_VAR=profile\n"
    );
    let home = Home::new(".bash_profile", &profile);
    let options = ShellSnapshotOptions {
        build_timeout: Duration::from_millis(300),
        ..ShellSnapshotOptions::default()
    };
    let store = home.store("/bin/bash", Some(options));
    let started = Instant::now();
    let (out, code) = run(&store, "echo $PROFILE_VAR").await;
    assert_eq!((out.as_str(), code), ("profile\n", Some(0)));
    assert!(started.elapsed() < Duration::from_secs(8), "the call hung");
    wait_gone(&sleeper).await;
    // Given up on for now: the next login is a real one too, and does not wait.
    assert_eq!(run(&store, "echo $PROFILE_VAR").await.0, "profile\n");
}

#[tokio::test]
async fn odd_commands_behave_as_under_a_real_login() {
    let home = Home::new(".bash_profile", BASH_PROFILE);
    let snap = home.store("/bin/bash", Some(ShellSnapshotOptions::default()));
    let real = home.store("/bin/bash", None);
    let commands = [
        "echo \"$0 $# $LINENO ${BASH_ENV-none}\"",
        "exit 7",
        "exec printf '%s\\n' \"a'b\\\"c \\\\ $HOME\"",
        "echo one\nll\n  echo three",
        "ll; alias ll='echo redefined'; ll\nll",
        "kill -TERM $$",
        "echo 'unterminated",
        "shopt -p extglob expand_aliases login_shell; set -o | grep -E '^(errexit|braceexpand)'",
        "declare -F; alias",
        "env | grep -v -e '^_=' -e TOKEN | sort",
        "echo -n no-newline",
        "printf '%s\\n' \"$@\"; echo \"$-\"",
    ];
    for cmd in commands {
        let via_snapshot = run(&snap, cmd).await;
        let via_login = run(&real, cmd).await;
        // `login_shell` is the one fact a non-login shell cannot fake.
        let via_snapshot = (
            via_snapshot
                .0
                .replace("shopt -u login_shell", "shopt -s login_shell"),
            via_snapshot.1,
        );
        assert_eq!(via_snapshot, via_login, "command {cmd:?}");
    }
    assert_eq!(
        home.runs(),
        1 + commands.len(),
        "one build, then real logins"
    );
}

#[tokio::test]
async fn dash_gets_the_environment_of_its_profile_once() {
    let sh = Path::new("/bin/sh");
    if !std::fs::canonicalize(sh).is_ok_and(|p| p.ends_with("dash")) {
        return;
    }
    let profile =
        "echo run >> \"$HOME/runs\"\nexport PATH=\"$HOME/bin:$PATH\" PROFILE_VAR=profile\n";
    let home = Home::new(".profile", profile);
    let store = home.store("/bin/sh", Some(ShellSnapshotOptions::default()));
    for _ in 0..2 {
        let cmd =
            "echo \"$PROFILE_VAR $0\"; case :$PATH: in *\":$HOME/bin:\"*) echo path-added;; esac";
        let (out, code) = run(&store, cmd).await;
        assert_eq!(out, "profile /bin/sh\npath-added\n");
        assert_eq!(code, Some(0));
    }
    assert_eq!(home.runs(), 1);
}

/// A profile that resets PATH (as Debian's `/etc/profile` does) and adds to it: the
/// caller's entries keep their order, what the profile added comes where the profile put it
/// (`$HOME/bin` before `/bin`, which the caller has too), from a snapshot and from a real
/// login alike (issue 42), and the variable that carried it is gone.
#[tokio::test]
async fn the_callers_path_outlives_a_profile_that_resets_it() {
    for (shell, profile_name) in [("/bin/bash", ".bash_profile"), ("/bin/sh", ".profile")] {
        let profile = "echo run >> \"$HOME/runs\"\nexport PATH=/usr/bin:/bin\n\
                       export PATH=\"$HOME/bin:$PATH\"\n";
        let home = Home::new(profile_name, profile);
        let caller = [("PATH", "/caller/bin:/bin:/caller/bin")];
        let snap = home.store_sharing(shell, Some(home.snapshots(Default::default())), &caller);
        let real = home.store_sharing(shell, None, &caller);
        let expected = format!(
            "/caller/bin:{}/bin:/usr/bin:/bin\ngone\n",
            home.dir.display()
        );
        let cmd = "echo \"$PATH\"; echo \"${UEXEC_CALLER_PATH-gone}\"";
        for store in [&snap, &real, &snap] {
            assert_eq!(
                run(store, cmd).await,
                (expected.clone(), Some(0)),
                "{shell}"
            );
        }
        assert_eq!(home.runs(), 2, "{shell}: one build, one real login");
    }
}

#[tokio::test]
async fn snapshots_of_many_environments_stay_bounded() {
    use uexec_core::shell_snapshot::MAX_SHELL_SNAPSHOTS;
    let home = Home::new(".bash_profile", "export PROFILE_VAR=profile\n");
    let snapshots = home.snapshots(ShellSnapshotOptions::default());
    for i in 0..MAX_SHELL_SNAPSHOTS + 4 {
        let n = i.to_string();
        let store = home.store_sharing("/bin/bash", Some(snapshots.clone()), &[("N", &n)]);
        let (out, _) = run(&store, "echo $PROFILE_VAR $N").await;
        assert_eq!(out, format!("profile {n}\n"));
        assert!(
            snapshots.len() <= MAX_SHELL_SNAPSHOTS,
            "{} kept",
            snapshots.len()
        );
    }
    assert_eq!(snapshots.len(), MAX_SHELL_SNAPSHOTS);
}

#[tokio::test]
async fn a_function_parsed_under_extglob_survives_extglob_turned_off() {
    let profile = "echo run >> \"$HOME/runs\"\nshopt -s extglob\n\
        pick() { case $1 in @(a|b)) echo picked;; *) echo literal;; esac; }\nshopt -u extglob\n";
    let home = Home::new(".bash_profile", profile);
    let store = home.store("/bin/bash", Some(ShellSnapshotOptions::default()));
    for _ in 0..2 {
        let (out, code) = run(&store, "pick a; shopt -p extglob || true").await;
        // As after a real login: the pattern is matched with extglob off, as the profile left it.
        assert_eq!(
            (out.as_str(), code),
            ("literal\nshopt -u extglob\n", Some(0))
        );
    }
    assert_eq!(home.runs(), 1, "served from the snapshot");
}

#[tokio::test]
async fn a_snapshot_that_does_not_load_cleanly_is_not_used() {
    // bash defines `a=b` but prints it back as something it cannot parse.
    let profile = "echo run >> \"$HOME/runs\"\nfunction a=b { echo odd; }\n\
        export PROFILE_VAR=profile\n";
    let home = Home::new(".bash_profile", profile);
    let store = home.store("/bin/bash", Some(ShellSnapshotOptions::default()));
    for _ in 0..2 {
        let (out, code) = run(&store, "\\a=b; echo $PROFILE_VAR").await;
        assert_eq!((out.as_str(), code), ("odd\nprofile\n", Some(0)));
    }
    assert_eq!(home.runs(), 3, "one failed build, then real logins");
}

#[tokio::test]
async fn the_files_of_a_uexec_killed_before_its_drop_go_at_the_next_build() {
    use std::os::unix::fs::DirBuilderExt;
    let home = Home::new(".bash_profile", BASH_PROFILE);
    let dir = home.dir.join("run");
    std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
    // A uexec SIGKILLed: its lock file is unlocked, its script and dump are left.
    let dead = [
        "snap-deadbeef.lock",
        "bash-0123456789abcdef-deadbeef-0.sh",
        "dash-0123456789abcdef-deadbeef-1.dump",
    ];
    // One that lives holds its lock; and a file of no snapshot's shape.
    let live = [
        "snap-cafef00d.lock",
        "bash-0123456789abcdef-cafef00d-0.sh",
        "notes.txt",
    ];
    for name in dead.iter().chain(&live) {
        std::fs::write(dir.join(name), "x").unwrap();
    }
    let held = std::fs::File::open(dir.join(live[0])).unwrap();
    held.lock().unwrap();

    let store = home.store("bash", Some(ShellSnapshotOptions::default()));
    let (out, code) = run(&store, SEES_THE_PROFILE).await;
    assert_eq!((out.as_str(), code), (SEEN, Some(0)));
    for name in dead {
        assert!(!dir.join(name).exists(), "{name} is left");
    }
    for name in live {
        assert!(dir.join(name).exists(), "{name} was removed");
    }
    // This instance holds a lock of its own now, which another cannot take.
    let own: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| n.starts_with("snap-") && n != live[0])
        .collect();
    assert_eq!(own.len(), 1, "{own:?}");
    let theirs = std::fs::File::open(dir.join(&own[0])).unwrap();
    assert!(theirs.try_lock().is_err(), "{} is not held", own[0]);
}
