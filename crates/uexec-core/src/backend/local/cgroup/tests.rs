//! The session cgroup's end against directories shaped like cgroups (plain files where the
//! kernel has its own), and the mount table's escapes.

use super::place::unescape;
use super::*;

/// A session's cgroup over a directory shaped like one (plain files where the kernel
/// has its own), holding the processes `procs` and having used `usec` of CPU.
fn fake_session(procs: &str, usec: u64) -> (PathBuf, SessionCgroup) {
    let dir = std::env::temp_dir().join(format!(
        "uexec-fake-session-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    fs::create_dir_all(&dir).expect("fake cgroup");
    fs::write(dir.join("cgroup.procs"), procs).expect("procs");
    set_usage(&dir, usec);
    let cgroup = SessionCgroup {
        dir: dir.clone(),
        dir_fd: open_dir(&dir).expect("the directory"),
        entry: CgroupEntry::AtBirth,
        tree: fake_tree(),
        removed: AtomicBool::new(false),
        last: Arc::default(),
        limits: Limits::default(),
        killed: AtomicBool::new(false),
        ending: Mutex::new(None),
        settled: AtomicBool::new(false),
    };
    (dir, cgroup)
}

/// A tree of its own (a value, as every test needs a fresh one), asking births at first.
fn fake_tree() -> &'static Tree {
    Box::leak(Box::new(Tree {
        own: std::env::temp_dir(),
        root: std::env::temp_dir(),
        next: AtomicU64::new(1),
        born_inside: AtomicBool::new(true),
        keeper: keeper::Keeper::default(),
    }))
}

fn set_usage(dir: &Path, usec: u64) {
    let stat = format!("usage_usec {usec}\nuser_usec {usec}\nsystem_usec 0\n");
    fs::write(dir.join("cpu.stat"), stat).expect("cpu.stat");
}

fn cpu_of(cgroup: &SessionCgroup) -> Option<u64> {
    cgroup.usage().map(|u| u.cpu_usec)
}

/// Once the leader is gone and its cgroup holds nothing, nothing can enter it: its
/// ending and its figures are final, read once and kept (the outcome's, then the
/// sweep's, and any racing reader's, without the files again).
#[test]
fn a_cgroup_found_empty_at_the_end_is_read_once_and_its_figures_kept() {
    let (dir, cgroup) = fake_session("", 500);
    assert_eq!(cgroup.ending().tree, Some(TreeEnd::Whole));
    assert_eq!(cpu_of(&cgroup), Some(500));
    set_usage(&dir, 900);
    fs::write(dir.join("cgroup.procs"), "4242\n").expect("procs");
    assert_eq!(cgroup.ending().tree, Some(TreeEnd::Whole));
    assert_eq!(cpu_of(&cgroup), Some(500), "figures read again");
    drop(cgroup);
    let _ = fs::remove_dir_all(&dir);
}

/// A cgroup that still holds what the leader left is read afresh: its processes run on
/// until the sweep kills them.
#[test]
fn a_cgroup_left_running_is_read_afresh() {
    let (dir, cgroup) = fake_session("4242\n", 500);
    let ending = cgroup.ending();
    assert!(
        matches!(ending.tree, Some(TreeEnd::LeftRunning { count: 1, .. })),
        "{ending:?}"
    );
    assert_eq!(cpu_of(&cgroup), Some(500));
    set_usage(&dir, 900);
    assert_eq!(cpu_of(&cgroup), Some(900));
    assert_eq!(cgroup.ending(), ending, "the ending is the first one read");
    drop(cgroup);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn mountinfo_paths_are_unescaped() {
    assert_eq!(
        unescape(r"/sys/fs/cgroup/unified"),
        "/sys/fs/cgroup/unified"
    );
    assert_eq!(unescape(r"/a\040b\134c"), r"/a b\c");
    assert_eq!(unescape(r"/odd\x"), r"/odd\x");
}

/// A command born in its cgroup is held as it is: no read of where it is, no write.
#[test]
fn a_child_born_in_its_cgroup_is_held_without_a_migration() {
    let (dir, cgroup) = fake_session("", 0);
    assert!(cgroup.hold(std::process::id(), Some(CgroupEntry::AtBirth)));
    assert_eq!(fs::read_to_string(dir.join("cgroup.procs")).unwrap(), "");
    assert_eq!(cgroup.tree.entry(), CgroupEntry::AtBirth);
    drop(cgroup);
    let _ = fs::remove_dir_all(&dir);
}

/// A command that migrated when asked to be born in its cgroup means the kernel cannot
/// (the spawn fell back): the tree remembers, and the next sessions' commands migrate.
#[test]
fn a_child_that_migrated_when_asked_to_be_born_makes_the_next_ones_migrate() {
    let (dir, cgroup) = fake_session("", 0);
    assert_eq!(cgroup.child_cgroup().entry, CgroupEntry::AtBirth);
    let pid = std::process::id();
    assert!(cgroup.hold(pid, Some(CgroupEntry::Migrates)));
    // Not found inside (a fake cgroup), so moved in by the parent, as a warm launcher is.
    assert_eq!(
        fs::read_to_string(dir.join("cgroup.procs")).unwrap(),
        pid.to_string()
    );
    assert_eq!(cgroup.tree.entry(), CgroupEntry::Migrates);
    drop(cgroup);
    let _ = fs::remove_dir_all(&dir);
}

/// Waits until `done` holds, at most 5 s.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A session's cgroup is made ahead and removed behind (issue 41): the first is made in
/// place, then the keeper's thread keeps spares, the next sessions take one (nothing is
/// made on their way), and an ended session's cgroup is removed by the thread, which tops
/// the spares up again. Over plain directories: the keeper only makes and removes them.
#[test]
fn sessions_cgroups_are_made_ahead_and_removed_behind() {
    let root = std::env::temp_dir().join(format!(
        "uexec-fake-tree-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    fs::create_dir_all(&root).expect("fake tree");
    let tree: &'static Tree = Box::leak(Box::new(Tree {
        own: std::env::temp_dir(),
        root: root.clone(),
        next: AtomicU64::new(1),
        born_inside: AtomicBool::new(true),
        keeper: keeper::Keeper::default(),
    }));
    let spares = || {
        let mut names: Vec<String> = fs::read_dir(&root)
            .expect("the tree")
            .map(|e| {
                e.expect("an entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    };
    let first = tree.take_cgroup().expect("made in place");
    assert_eq!(first.dir, root.join("s1"));
    eventually("the keeper to make its spares", || {
        spares() == ["s1", "s2", "s3"]
    });
    let second = tree.take_cgroup().expect("a spare");
    assert!(
        [root.join("s2"), root.join("s3")].contains(&second.dir),
        "{} was not made ahead",
        second.dir.display()
    );
    assert_eq!(spares(), ["s1", "s2", "s3"], "nothing made on the way");
    tree.remove_later(first.dir.clone(), Arc::default());
    eventually("the first removed and the spares topped up", || {
        spares() == ["s2", "s3", "s4"]
    });
    drop((first, second));
    let _ = fs::remove_dir_all(&root);
}
