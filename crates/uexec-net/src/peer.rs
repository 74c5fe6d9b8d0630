//! Who is at the other end of a loopback TCP connection.
//!
//! TCP carries no credentials, but on one machine the kernel knows both ends: the peer's own
//! socket is the entry of `/proc/net/tcp` (or `tcp6`) whose *local* address is the peer's
//! address and whose *remote* address is our local one, and that entry names the uid that
//! opened it. Only loopback peers are looked up: another host's sockets are not in our table.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The two ends of an accepted connection; put in every request's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// The peer's address.
    pub remote: SocketAddr,
    /// Our end (the listener's address as the peer dialled it).
    pub local: SocketAddr,
}

impl Peer {
    /// The uid that owns the peer's socket, when it is a loopback peer found in
    /// `/proc/net/tcp{,6}`.
    pub fn uid(&self) -> Option<u32> {
        if !canonical(self.remote.ip()).is_loopback() {
            return None;
        }
        ["/proc/net/tcp", "/proc/net/tcp6"].iter().find_map(|path| {
            let table = std::fs::read_to_string(path).ok()?;
            socket_owner(&table, self.remote, self.local)
        })
    }

    /// Whether the peer is a loopback socket of this process's own (effective) user.
    pub fn is_same_user(&self) -> bool {
        self.uid() == Some(uexec_core::sys::effective_uid())
    }
}

/// The uid of the entry of a `/proc/net/tcp{,6}` table whose local address is `local` and
/// whose remote address is `remote`.
pub fn socket_owner(table: &str, local: SocketAddr, remote: SocketAddr) -> Option<u32> {
    let (local, remote) = (canonical_addr(local), canonical_addr(remote));
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // sl local rem st tx:rx tr:when retrnsmt uid ...
        let entry_local = parse_addr(fields.get(1)?)?;
        let entry_remote = parse_addr(fields.get(2)?)?;
        if entry_local == local && entry_remote == remote {
            fields.get(7)?.parse().ok()
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

    #[test]
    fn finds_the_peer_socket_owner_in_both_tables() {
        let v4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1
   2: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000 65534        0 3 1 0 20 4 30 10 -1
";
        let peer: SocketAddr = "127.0.0.1:54321".parse().unwrap();
        let ours: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(socket_owner(v4, peer, ours), Some(65534));
        assert_eq!(socket_owner(v4, ours, peer), Some(0));
        assert_eq!(socket_owner(v4, "127.0.0.1:1".parse().unwrap(), ours), None);

        let v6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0000000000000000FFFF00000100007F:D431 0000000000000000FFFF00000100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 3 1 0 20 4 30 10 -1
   1: 00000000000000000000000001000000:D432 00000000000000000000000001000000:1F90 01 00000000:00000000 00:00000000 00000000  1001        0 3 1 0 20 4 30 10 -1
";
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:54321".parse().unwrap();
        assert_eq!(socket_owner(v6, mapped, ours), Some(1000));
        assert_eq!(socket_owner(v6, peer, ours), Some(1000));
        let v6_peer: SocketAddr = "[::1]:54322".parse().unwrap();
        assert_eq!(
            socket_owner(v6, v6_peer, "[::1]:8080".parse().unwrap()),
            Some(1001)
        );
    }

    #[test]
    fn a_live_loopback_connection_is_ours() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_accepted, remote) = listener.accept().unwrap();
        let peer = Peer {
            remote,
            local: listener.local_addr().unwrap(),
        };
        assert_eq!(client.local_addr().unwrap(), remote);
        assert!(peer.is_same_user());
    }
}
