//! The limits' steps against directories shaped like cgroups (plain files where the kernel
//! has its own): this machine's cgroup v2 offers no memory, pids or cpu controller (they are
//! bound to v1), so what the kernel does with the writes is not tried here.

use std::path::{Path, PathBuf};

use super::*;
use crate::policy::{parse_cpus, CpuMax, NO_LIMIT};

/// A cgroup-shaped directory: `own` offering `offered`, enabling `own_enabled`, holding
/// `procs`, and its `uexec.1` subtree root enabling `root_enabled`.
struct Fake {
    own: PathBuf,
    root: PathBuf,
}

impl Fake {
    fn new(offered: &str, own_enabled: &str, root_enabled: &str, procs: &str) -> Self {
        let own = std::env::temp_dir().join(format!(
            "uexec-fake-cgroup-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        let root = own.join("uexec.1");
        fs::create_dir_all(&root).expect("fake tree");
        fs::write(own.join("cgroup.controllers"), offered).expect("controllers");
        fs::write(own.join("cgroup.subtree_control"), own_enabled).expect("own control");
        fs::write(own.join("cgroup.procs"), procs).expect("procs");
        fs::write(root.join("cgroup.subtree_control"), root_enabled).expect("root control");
        Self { own, root }
    }

    fn read(&self, path: &Path) -> String {
        fs::read_to_string(path).unwrap_or_default()
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.own);
    }
}

fn limits(memory: Option<u64>, pids: Option<u64>, cpu: Option<CpuMax>) -> Limits {
    Limits {
        memory_max: memory,
        pids_max: pids,
        cpu_max: cpu,
    }
}

#[test]
fn each_limit_needs_its_controller() {
    assert_eq!(needed(&Limits::default()), vec![]);
    let all = limits(Some(1 << 30), Some(10), parse_cpus("1").ok());
    assert_eq!(
        needed(&all),
        vec![Controller::Memory, Controller::Pids, Controller::Cpu]
    );
    assert_eq!(
        needed(&limits(None, Some(10), None)),
        vec![Controller::Pids]
    );
}

#[test]
fn controllers_already_enabled_for_the_sessions_are_left_alone() {
    let fake = Fake::new("memory pids", "memory pids", "memory pids", "1\n");
    enable(&fake.own, &fake.root, &[Controller::Memory], 1).expect("enabled already");
    assert_eq!(
        fake.read(&fake.root.join("cgroup.subtree_control")),
        "memory pids"
    );
    assert!(enabled(&fake.own, &fake.root, &limits(Some(1 << 30), None, None)).is_ok());
}

#[test]
fn offered_controllers_are_enabled_in_uexecs_cgroup_then_in_its_subtree() {
    let fake = Fake::new("cpu memory pids", "", "", "1\n");
    enable(
        &fake.own,
        &fake.root,
        &[Controller::Memory, Controller::Pids],
        1,
    )
    .expect("enable");
    assert_eq!(
        fake.read(&fake.own.join("cgroup.subtree_control")),
        "+memory +pids"
    );
    assert_eq!(
        fake.read(&fake.root.join("cgroup.subtree_control")),
        "+memory +pids"
    );
}

#[test]
fn a_controller_the_kernel_does_not_offer_is_refused_saying_where_it_is_bound() {
    // This machine's own words: v2 offers hugetlb only; memory is bound to v1.
    let fake = Fake::new("hugetlb\n", "", "", "1\n");
    let e = enable(&fake.own, &fake.root, &[Controller::Memory], 1).expect_err("not offered");
    assert_eq!(e.controller, Controller::Memory);
    assert!(e.machine);
    assert!(
        e.why.starts_with("this machine cannot limit a session's memory: the memory controller is not offered to uexec's cgroup"),
        "{e}"
    );
    assert!(e.why.contains("its cgroup.controllers: hugetlb"), "{e}");
    // Nothing was written.
    assert_eq!(fake.read(&fake.own.join("cgroup.subtree_control")), "");
    let e = enabled(&fake.own, &fake.root, &limits(None, Some(10), None)).expect_err("pids");
    assert_eq!(e.controller, Controller::Pids);
    assert!(e.why.contains("number of processes"), "{e}");
}

#[test]
fn a_v1_binding_is_found_in_proc_self_cgroup() {
    let text = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/x\n2:cpu,cpuacct:/\n0::/\n";
    assert_eq!(
        v1_binding(Controller::Memory, text).as_deref(),
        Some("4:memory:/process_api/x")
    );
    assert_eq!(
        v1_binding(Controller::Cpu, text).as_deref(),
        Some("2:cpu,cpuacct:/")
    );
    assert_eq!(v1_binding(Controller::Pids, "0::/\n"), None);
}

#[test]
fn a_call_s_limit_needs_what_the_server_enabled_at_its_start() {
    let fake = Fake::new("memory pids cpu", "memory", "memory", "");
    assert!(enabled(&fake.own, &fake.root, &limits(Some(1 << 30), None, None)).is_ok());
    let e = enabled(&fake.own, &fake.root, &limits(None, Some(10), None)).expect_err("pids");
    assert_eq!(e.controller, Controller::Pids);
    assert!(
        e.why
            .starts_with("this server did not enable the pids controller"),
        "{e}"
    );
}

#[test]
fn uexec_moves_into_a_leaf_of_its_own_only_when_alone() {
    let fake = Fake::new("memory", "", "", "77\n");
    leave_for_leaf(&fake.own, 77).expect("alone");
    assert_eq!(
        fake.read(&fake.own.join("uexec.77.server/cgroup.procs")),
        "77"
    );
    let crowded = Fake::new("memory", "", "", "77\n12\n13\n");
    let e = leave_for_leaf(&crowded.own, 77).expect_err("not alone");
    assert!(e.contains("holds 2 besides uexec (pids 12, 13)"), "{e}");
    assert!(!crowded.own.join("uexec.77.server").exists());
}

#[test]
fn a_session_s_limits_are_written_as_the_kernel_reads_them() {
    let fake = Fake::new("", "", "", "");
    let dir = fake.root.join("s1");
    fs::create_dir(&dir).expect("session dir");
    let half = parse_cpus("0.5").ok();
    apply(&dir, &limits(Some(64 << 20), Some(20), half)).expect("apply");
    assert_eq!(fake.read(&dir.join("memory.max")), "67108864");
    assert_eq!(fake.read(&dir.join("pids.max")), "20");
    assert_eq!(fake.read(&dir.join("cpu.max")), "50000 100000");
    // Only what is set is written.
    let bare = fake.root.join("s2");
    fs::create_dir(&bare).expect("session dir");
    apply(&bare, &limits(None, Some(5), None)).expect("apply");
    assert!(!bare.join("memory.max").exists());
    // `max`: written as the kernel reads no limit.
    apply(&bare, &limits(Some(NO_LIMIT), None, Some(CpuMax::none()))).expect("apply");
    assert_eq!(fake.read(&bare.join("memory.max")), "max");
    assert_eq!(fake.read(&bare.join("cpu.max")), "max 100000");
    // A cgroup without the file (the controller off): the spawn fails, naming the limit.
    let e = apply(&fake.root.join("gone"), &limits(Some(64 << 20), None, None))
        .expect_err("no such cgroup");
    assert!(e.to_string().contains("memory_max"), "{e}");
}

#[test]
fn an_oom_kill_and_a_refused_fork_are_read_from_the_events() {
    let fake = Fake::new("", "", "", "");
    let dir = &fake.root;
    let set = limits(Some(64 << 20), Some(20), None);
    assert_eq!(hits(dir, &set), vec![], "no events files: nothing hit");
    fs::write(
        dir.join("memory.events"),
        "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n",
    )
    .expect("memory.events");
    fs::write(dir.join("pids.events"), "max 3\n").expect("pids.events");
    assert_eq!(
        hits(dir, &set),
        vec![
            LimitHit::Memory {
                kills: 1,
                max_bytes: 64 << 20
            },
            LimitHit::Pids {
                refused: 3,
                max: 20
            }
        ]
    );
    assert_eq!(
        hits(dir, &set)[0].text(),
        "Memory limit reached: the OOM killer killed 1 process of this session (memory_max 64 MiB)"
    );
    // A count of 0, or a limit the session did not have, is no hit.
    fs::write(dir.join("memory.events"), "oom_kill 0\n").expect("memory.events");
    assert_eq!(hits(dir, &limits(None, Some(20), None)).len(), 1);
    assert_eq!(hits(dir, &limits(Some(1 << 30), None, None)), vec![]);
    assert_eq!(
        event_count("oom_kill_x 4\noom_kill 2\n", "oom_kill"),
        Some(2)
    );
}
