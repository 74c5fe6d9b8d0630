//! Who is at the other end of a local connection: which user, and whether it is a sandboxed
//! command of that user.
//!
//! Why the uid is not enough: a uexec sandbox runs its command with the user's own uid, so
//! every door that admits "the server's own user" (the daemon's socket, a token-less
//! loopback listener) would admit the sandboxed command too, and run for it what the sandbox
//! forbids. What sets a sandboxed command apart is its user namespace: every uexec sandbox
//! makes one of its own, and nothing in it can go back to ours (that takes a capability in
//! ours). So a local peer is the user only when it lives in this process's user namespace.
//!
//! A Unix socket (the daemon) names the process that connected, race-free:
//! 1. `SO_PEERPIDFD` gives a pidfd of it; its pid here is the `Pid:` line of the pidfd's
//!    fdinfo (where `SO_PEERPIDFD` is missing, before Linux 6.5, `SO_PEERCRED`'s pid, which
//!    a process that exits at once could hand to a recycled pid);
//! 2. the pid's `/proc/PID/ns/user` is compared with ours (device and inode);
//! 3. the pidfd must still be alive, so that the pid was not recycled while we looked.
//!
//! Where the namespaces layer is missing (`--sandbox-fallback best-effort`), a sandboxed
//! command lives in our user namespace; what still sets it apart is the seccomp filter its
//! launcher installed, which nothing can remove. So a peer confined by more seccomp filters
//! than the daemon itself (`Seccomp_filters:` of `/proc/PID/status`, readable by all) is
//! refused too: whatever confines it, an unconfined executor would undo. (Without the
//! seccomp layer as well, only Landlock is left, which `/proc` does not show.)
//!
//! Reading `/proc/PID/ns/user` needs ptrace read access. The owner of a user namespace holds
//! every capability in it and in the namespaces below it, so we can always read that link
//! for a process that runs (that was exec'd) in a sandbox we (or a uexec of ours) made,
//! dumpable or not. `EACCES` therefore means a non-dumpable process whose memory belongs to
//! our own namespace: the `uexec` front and the CLI verbs make themselves non-dumpable
//! before they connect. (Only a user without `CAP_SYS_PTRACE` ever meets it.) One other
//! kind exists: a sandbox's init, forked by the launcher and never exec'd, keeps our
//! namespace's memory while it lives in the sandbox's. A command cannot take it over unless
//! it holds every capability the init holds in the sandbox, which only a root user's command
//! does, and root meets no `EACCES`; still, the init lives in a pid namespace below ours,
//! which `NSpid:` of `/proc/PID/status` (readable by all) shows, and no non-dumpable process
//! of ours does (a pid namespace of our own user namespace takes `CAP_SYS_ADMIN` there). So
//! on `EACCES` the peer counts as ours only when its pid namespace is as deep as ours.
//!
//! TCP carries no credentials, but on one machine the kernel knows both ends: the peer's own
//! socket is the entry of `/proc/net/tcp` (or `tcp6`) whose *local* address is the peer's
//! address and whose *remote* address is our local one; that entry names the uid that opened
//! it and the socket's inode. Only loopback peers are looked up: another host's sockets are
//! not in our table. For a peer of our uid:
//! 1. the processes whose `/proc/PID/ns/user` differs from ours are the only candidates (a
//!    `readlink` each: most processes are in ours; those of other users cannot be read and
//!    need not be, as the socket's uid is ours);
//! 2. any of their threads holding `socket:[INODE]` makes the peer a sandboxed command.
//!
//! That look-up is made once per connection, at its first request that needs it, off the
//! async threads. It has a gap the Unix socket's has not: a command that keeps its socket in
//! flight (sent over `SCM_RIGHTS` to itself) while the server looks is held by no process
//! at that moment. A listener that sandboxed commands can reach should have a token.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use tokio::sync::OnceCell;

/// The two ends of an accepted connection; put in every request's extensions. Clones share
/// the connection's [`LocalUser`], looked up once.
#[derive(Debug, Clone)]
pub struct Peer {
    /// The peer's address.
    pub remote: SocketAddr,
    /// Our end (the listener's address as the peer dialled it).
    pub local: SocketAddr,
    user: Arc<OnceCell<LocalUser>>,
}

/// Who a TCP peer is on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalUser {
    /// Not a loopback peer, or its socket was not found: nobody we know.
    Unknown,
    /// A loopback socket of another uid.
    Other(u32),
    /// A loopback socket of our uid held by a process in another user namespace: a
    /// sandboxed command.
    Sandboxed,
    /// A loopback socket of our uid, held by no process in another user namespace.
    Same,
}

impl Peer {
    pub fn new(remote: SocketAddr, local: SocketAddr) -> Self {
        Self {
            remote,
            local,
            user: Arc::default(),
        }
    }

    /// Who the peer is (see the module docs), looked up at the first call on this
    /// connection.
    pub async fn user(&self) -> LocalUser {
        let (remote, local) = (self.remote, self.local);
        *self
            .user
            .get_or_init(|| async move {
                tokio::task::spawn_blocking(move || local_user(remote, local))
                    .await
                    .unwrap_or(LocalUser::Unknown)
            })
            .await
    }
}

/// The blocking look-up behind [`Peer::user`].
pub fn local_user(remote: SocketAddr, local: SocketAddr) -> LocalUser {
    if !canonical(remote.ip()).is_loopback() {
        return LocalUser::Unknown;
    }
    let entry = ["/proc/net/tcp", "/proc/net/tcp6"].iter().find_map(|path| {
        let table = std::fs::read_to_string(path).ok()?;
        socket_entry(&table, remote, local)
    });
    let Some(entry) = entry else {
        return LocalUser::Unknown;
    };
    if entry.uid != uexec_sys::effective_uid() {
        return LocalUser::Other(entry.uid);
    }
    if held_in_another_user_namespace(entry.inode) {
        LocalUser::Sandboxed
    } else {
        LocalUser::Same
    }
}

/// Whether a thread of a process in another user namespace than ours holds the socket
/// `inode` (steps 1-2 of the TCP look-up).
pub fn held_in_another_user_namespace(inode: u64) -> bool {
    let Ok(ours) = std::fs::read_link("/proc/self/ns/user") else {
        return false;
    };
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return false;
    };
    let wanted = format!("socket:[{inode}]");
    processes.flatten().any(|process| {
        let name = process.file_name();
        if !name.as_encoded_bytes().iter().all(u8::is_ascii_digit) {
            return false;
        }
        let dir = process.path();
        match std::fs::read_link(dir.join("ns/user")) {
            Ok(theirs) if theirs != ours => {}
            // Ours, gone, or not ours to read.
            _ => return false,
        }
        let Ok(tasks) = std::fs::read_dir(dir.join("task")) else {
            return false;
        };
        tasks.flatten().any(|task| {
            let Ok(fds) = std::fs::read_dir(task.path().join("fd")) else {
                return false;
            };
            fds.flatten()
                .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|link| link == *wanted))
        })
    })
}

/// Where the process at the other end of a Unix socket lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// In our user namespace: the user itself.
    Ours,
    /// In another user namespace: a sandboxed command.
    Sandboxed,
    /// It could not be told (the process is gone, or out of our sight): refuse it.
    Unknown(String),
}

/// Where the process that connected the peer end of `socket` lives (the Unix steps of the
/// module docs).
pub fn unix_peer_standing(socket: BorrowedFd<'_>) -> Standing {
    let fd = socket.as_raw_fd();
    match uexec_sys::peer_pidfd(fd) {
        Ok(pidfd) => {
            let fdinfo = format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd());
            let pid = uexec_sys::read_kernel_file(Path::new(&fdinfo))
                .ok()
                .and_then(|text| fdinfo_pid(&text));
            let standing = match pid {
                Some(pid) if pid > 0 => pid_standing(pid),
                Some(0) => Standing::Unknown("its process is out of our pid namespace".into()),
                Some(_) => Standing::Unknown("its process has exited".into()),
                None => Standing::Unknown(format!("no pid in {fdinfo}")),
            };
            if uexec_sys::pidfd_alive(&pidfd) {
                standing
            } else {
                Standing::Unknown("its process has exited".into())
            }
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => {
            match uexec_sys::peer_credentials(fd) {
                Ok((pid, _)) if pid > 0 => pid_standing(pid),
                Ok(_) => Standing::Unknown("the kernel gave no pid for it".into()),
                Err(e) => Standing::Unknown(format!("SO_PEERCRED: {e}")),
            }
        }
        Err(e) => Standing::Unknown(format!("SO_PEERPIDFD: {e}")),
    }
}

/// Where the process `pid` lives (step 2, the `EACCES` rule and the seccomp rule of the
/// module docs).
fn pid_standing(pid: i32) -> Standing {
    let ns = |path: &str| std::fs::metadata(path).map(|m| (m.dev(), m.ino()));
    let status = |path: &str| {
        uexec_sys::read_kernel_file(Path::new(path))
            .map_err(|e| Standing::Unknown(format!("{path}: {e}")))
    };
    let (ours, our_status, their_status) = match (
        ns("/proc/self/ns/user"),
        status("/proc/self/status"),
        status(&format!("/proc/{pid}/status")),
    ) {
        (Ok(ours), Ok(our_status), Ok(their_status)) => (ours, our_status, their_status),
        (Err(e), _, _) => return Standing::Unknown(format!("/proc/self/ns/user: {e}")),
        (_, Err(unknown), _) | (_, _, Err(unknown)) => return unknown,
    };
    let in_our_namespace = match ns(&format!("/proc/{pid}/ns/user")) {
        Ok(theirs) => theirs == ours,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            pid_namespace_depth(&our_status).is_some()
                && pid_namespace_depth(&our_status) == pid_namespace_depth(&their_status)
        }
        Err(e) => return Standing::Unknown(format!("/proc/{pid}/ns/user: {e}")),
    };
    if in_our_namespace && seccomp_filters(&their_status) <= seccomp_filters(&our_status) {
        Standing::Ours
    } else {
        Standing::Sandboxed
    }
}

/// The `Pid:` of a pidfd's fdinfo: the pid in our pid namespace, 0 when the process is not
/// in it, -1 when it has exited.
pub fn fdinfo_pid(fdinfo: &str) -> Option<i32> {
    fdinfo
        .lines()
        .find_map(|line| line.strip_prefix("Pid:"))
        .and_then(|pid| pid.trim().parse().ok())
}

/// How many pid namespaces a process is in, seen from our `/proc` (the `NSpid:` line of its
/// status: one pid per level).
pub fn pid_namespace_depth(status: &str) -> Option<usize> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("NSpid:"))
        .map(|pids| pids.split_whitespace().count())
        .filter(|n| *n > 0)
}

/// How many seccomp filters confine a process (`Seccomp_filters:` of its status, Linux
/// 5.9+; before, filter mode 2 of `Seccomp:` counts as one). A filter, once installed,
/// stays: the count only grows.
pub fn seccomp_filters(status: &str) -> u32 {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|value| value.trim().parse::<u32>().ok())
    };
    field("Seccomp_filters:").unwrap_or_else(|| u32::from(field("Seccomp:") == Some(2)))
}

/// What a `/proc/net/tcp{,6}` entry says of a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketEntry {
    /// The uid that opened it (column 8).
    pub uid: u32,
    /// Its inode (column 10): `socket:[INODE]` in its holders' `/proc/PID/fd`.
    pub inode: u64,
}

/// The entry of a `/proc/net/tcp{,6}` table whose local address is `local` and whose remote
/// address is `remote`.
pub fn socket_entry(table: &str, local: SocketAddr, remote: SocketAddr) -> Option<SocketEntry> {
    let (local, remote) = (canonical_addr(local), canonical_addr(remote));
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
        let entry_local = parse_addr(fields.get(1)?)?;
        let entry_remote = parse_addr(fields.get(2)?)?;
        if entry_local == local && entry_remote == remote {
            Some(SocketEntry {
                uid: fields.get(7)?.parse().ok()?,
                inode: fields.get(9)?.parse().ok()?,
            })
        } else {
            None
        }
    })
}

/// `0100007F:1F90` (IPv4) or 32 hex digits `:PORT` (IPv6): each 32-bit word is printed as a
/// host-order integer of network-order bytes.
fn parse_addr(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |hex: &str| u32::from_str_radix(hex, 16).ok().map(u32::to_ne_bytes);
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(ip)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_mut(4).enumerate() {
                chunk.copy_from_slice(&word(ip.get(i * 8..i * 8 + 8)?)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(canonical(ip), port))
}

fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

fn canonical_addr(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(canonical(addr.ip()), addr.port())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn finds_the_peer_socket_owner_and_inode_in_both_tables() {
        let v4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1
   2: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000 65534        0 3 1 0 20 4 30 10 -1
";
        let peer: SocketAddr = "127.0.0.1:54321".parse().unwrap();
        let ours: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let entry = |uid, inode| Some(SocketEntry { uid, inode });
        assert_eq!(socket_entry(v4, peer, ours), entry(65534, 3));
        assert_eq!(socket_entry(v4, ours, peer), entry(0, 2));
        assert_eq!(socket_entry(v4, "127.0.0.1:1".parse().unwrap(), ours), None);

        let v6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0000000000000000FFFF00000100007F:D431 0000000000000000FFFF00000100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 77231 1 0 20 4 30 10 -1
   1: 00000000000000000000000001000000:D432 00000000000000000000000001000000:1F90 01 00000000:00000000 00:00000000 00000000  1001        0 4294967296 1 0 20 4 30 10 -1
";
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:54321".parse().unwrap();
        assert_eq!(socket_entry(v6, mapped, ours), entry(1000, 77231));
        assert_eq!(socket_entry(v6, peer, ours), entry(1000, 77231));
        let v6_peer: SocketAddr = "[::1]:54322".parse().unwrap();
        assert_eq!(
            socket_entry(v6, v6_peer, "[::1]:8080".parse().unwrap()),
            entry(1001, 4_294_967_296)
        );
        // A line cut short names no socket.
        let cut = "header\n   0: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000 0\n";
        assert_eq!(socket_entry(cut, peer, ours), None);
    }

    #[test]
    fn the_pid_of_a_pidfd_is_its_fdinfo_pid_line() {
        let fdinfo =
            "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\nPid:\t4242\nNSpid:\t4242\n";
        assert_eq!(fdinfo_pid(fdinfo), Some(4242));
        assert_eq!(fdinfo_pid("pos:\t0\nPid:\t-1\n"), Some(-1));
        assert_eq!(fdinfo_pid("pos:\t0\nPid:\t0\n"), Some(0));
        assert_eq!(fdinfo_pid("pos:\t0\nflags:\t02000002\n"), None);
        // `NSpid:` is not `Pid:`.
        assert_eq!(fdinfo_pid("NSpid:\t7\n"), None);
    }

    #[test]
    fn seccomp_filters_are_counted_and_mode_2_alone_is_one() {
        assert_eq!(seccomp_filters("Seccomp:\t2\nSeccomp_filters:\t3\n"), 3);
        assert_eq!(seccomp_filters("Seccomp:\t0\nSeccomp_filters:\t0\n"), 0);
        assert_eq!(seccomp_filters("Name:\tsh\nSeccomp:\t2\n"), 1);
        assert_eq!(seccomp_filters("Seccomp:\t1\n"), 0);
        assert_eq!(seccomp_filters("Name:\tsh\n"), 0);
    }

    #[test]
    fn the_pid_namespace_depth_counts_the_nspid_levels() {
        assert_eq!(pid_namespace_depth("Name:\tsh\nNSpid:\t812\n"), Some(1));
        assert_eq!(
            pid_namespace_depth("NStgid:\t812\t1\nNSpid:\t812\t1\n"),
            Some(2)
        );
        assert_eq!(pid_namespace_depth("Name:\tsh\n"), None);
        assert_eq!(pid_namespace_depth("NSpid:\n"), None);
    }

    #[test]
    fn a_live_loopback_connection_is_ours() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_accepted, remote) = listener.accept().unwrap();
        assert_eq!(client.local_addr().unwrap(), remote);
        assert_eq!(
            local_user(remote, listener.local_addr().unwrap()),
            LocalUser::Same
        );
    }

    #[test]
    fn a_unix_peer_of_this_process_is_ours() {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(unix_peer_standing(ours.as_fd()), Standing::Ours);
        drop(theirs);
    }
}
