//! A child given a cgroup is in it from its first instruction: born there (`clone3` with
//! `CLONE_INTO_CGROUP`) where the kernel can, else moved in before it execs; and a spawn
//! that cannot enter its cgroup fails rather than running outside it.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

use uexec_sys::{CgroupEntry, ChildCgroup, ChildSpec};

/// This process's cgroup v2 directory (the cgroup2 mount, `/sys/fs/cgroup` or its
/// `unified` subdirectory on a hybrid machine, joined with `/proc/self/cgroup`'s `0::`).
fn own_cgroup_dir() -> PathBuf {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").expect("/proc/self/cgroup");
    let own = cgroups
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .expect("a cgroup v2 line");
    let mounts = std::fs::read_to_string("/proc/self/mounts").expect("/proc/self/mounts");
    let mount = mounts
        .lines()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .find(|f| f.get(2) == Some(&"cgroup2"))
        .map(|f| f[1].to_owned())
        .expect("a cgroup2 mount");
    PathBuf::from(mount).join(own.trim_start_matches('/'))
}

/// This process's cgroup as `/proc/self/cgroup` names it.
fn own_cgroup_name() -> String {
    std::fs::read_to_string("/proc/self/cgroup")
        .expect("/proc/self/cgroup")
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .expect("a cgroup v2 line")
        .to_owned()
}

/// A fresh cgroup under ours, removed when dropped (its processes are reaped by then).
struct Scratch {
    dir: PathBuf,
    name: String,
    fd: OwnedFd,
}

impl Scratch {
    fn new(what: &str) -> Self {
        // Tests run at once, some asking for the same kind: each its own.
        static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let leaf = format!("uexec-sys-test.{}.{what}.{n}", std::process::id());
        let dir = own_cgroup_dir().join(&leaf);
        std::fs::create_dir(&dir).expect("make a cgroup");
        let fd = std::fs::File::open(&dir).expect("open it").into();
        let name = format!("{}/{leaf}", own_cgroup_name().trim_end_matches('/'));
        Self { dir, name, fd }
    }
}

/// Whether this kernel spawns into cgroups (x86_64, Linux 5.7 or later, no seccomp filter
/// refusing clone3), as the project's machines do.
fn kernel_spawns_into_cgroups() -> bool {
    let probe = Scratch::new("probe");
    uexec_sys::probe_spawn_into_cgroup(probe.fd.as_raw_fd()).is_ok()
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// Runs `cat /proc/self/cgroup` in `cgroup`: its v2 line and how it entered.
fn cat_own_cgroup(cgroup: ChildCgroup) -> std::io::Result<(String, Option<CgroupEntry>)> {
    let (mut read, write) = {
        let (r, w) = uexec_sys::pipe_cloexec()?;
        (std::fs::File::from(r), w)
    };
    let null = uexec_sys::dev_null()?;
    let child = uexec_sys::spawn_child(&ChildSpec {
        program: c("/bin/cat"),
        argv: vec![c("cat"), c("/proc/self/cgroup")],
        envp: Vec::new(),
        cwd: c("/"),
        stdio: [null.as_raw_fd(), write.as_raw_fd(), null.as_raw_fd()],
        controlling_tty: false,
        passed_fds: Vec::new(),
        program_fd: None,
        cgroup: Some(cgroup),
    })?;
    drop(write);
    let mut out = String::new();
    read.read_to_string(&mut out)?;
    let (_, status) = uexec_sys::wait_child(Some(child.pid))?;
    assert!(status.success(), "{status:?}");
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or_default()
        .to_owned();
    Ok((line, child.cgroup_entry))
}

#[test]
fn a_child_asked_to_be_born_in_its_cgroup_is_and_says_so() {
    let cgroup = Scratch::new("birth");
    let (line, entry) = cat_own_cgroup(ChildCgroup {
        dir: cgroup.fd.as_raw_fd(),
        entry: CgroupEntry::AtBirth,
    })
    .expect("spawn");
    assert_eq!(line, cgroup.name);
    // A kernel that cannot spawn into a cgroup says the child migrated instead.
    let expected = if kernel_spawns_into_cgroups() {
        CgroupEntry::AtBirth
    } else {
        CgroupEntry::Migrates
    };
    assert_eq!(entry, Some(expected));
}

#[test]
fn a_child_asked_to_migrate_moves_itself_in_before_it_execs() {
    let cgroup = Scratch::new("migrate");
    let (line, entry) = cat_own_cgroup(ChildCgroup {
        dir: cgroup.fd.as_raw_fd(),
        entry: CgroupEntry::Migrates,
    })
    .expect("spawn");
    assert_eq!(line, cgroup.name);
    assert_eq!(entry, Some(CgroupEntry::Migrates));
}

/// A directory that is no cgroup: the kernel refuses the birth there (EBADF), which is
/// about this spawn, not the kernel: the spawn fails, nothing runs outside its cgroup.
#[test]
fn a_cgroup_the_kernel_refuses_fails_the_spawn_instead_of_running_outside_it() {
    if !kernel_spawns_into_cgroups() {
        return; // the migration's failure is the caller's to check (it reads where it is)
    }
    let not_a_cgroup: OwnedFd = std::fs::File::open("/").expect("/").into();
    let e = cat_own_cgroup(ChildCgroup {
        dir: not_a_cgroup.as_raw_fd(),
        entry: CgroupEntry::AtBirth,
    })
    .expect_err("no cgroup");
    assert!(e.to_string().contains("in its cgroup"), "{e}");
}

/// Where `clone3` is refused for good (here a seccomp filter answers ENOSYS, as a
/// container's often does), the child migrates instead, still in its cgroup before it
/// execs, and says so (the caller then asks the next ones to migrate).
#[cfg(target_arch = "x86_64")]
#[test]
fn a_child_whose_clone3_is_refused_migrates_instead_and_says_so() {
    let cgroup = Scratch::new("refused");
    let dir = cgroup.fd.as_raw_fd();
    // A filter binds the thread that installs it (and its children): one of its own.
    let (line, entry) = std::thread::spawn(move || {
        refuse_clone3_on_this_thread();
        cat_own_cgroup(ChildCgroup {
            dir,
            entry: CgroupEntry::AtBirth,
        })
        .expect("spawn")
    })
    .join()
    .unwrap();
    assert_eq!(line, cgroup.name);
    assert_eq!(entry, Some(CgroupEntry::Migrates));
}

/// A seccomp filter on this thread: `clone3` fails with ENOSYS, everything else runs.
#[cfg(target_arch = "x86_64")]
fn refuse_clone3_on_this_thread() {
    const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
    const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
    let insn = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let mut program = [
        // The syscall number (`seccomp_data.nr`, offset 0).
        insn(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0),
        insn(
            libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
            0,
            1,
            libc::SYS_clone3 as u32,
        ),
        insn(
            libc::BPF_RET | libc::BPF_K,
            0,
            0,
            SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        ),
        insn(libc::BPF_RET | libc::BPF_K, 0, 0, SECCOMP_RET_ALLOW),
    ];
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_mut_ptr(),
    };
    // SAFETY: prctl on this thread with a filter program that outlives the call.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        assert_eq!(
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &prog as *const libc::sock_fprog
            ),
            0,
            "{}",
            std::io::Error::last_os_error()
        );
    }
}
