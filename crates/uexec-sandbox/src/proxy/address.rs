//! Where an allowed target may take the proxy. An allowlist names hosts, but a connection
//! goes to addresses, and a name can resolve to anything its owner likes: a wildcard entry
//! (`*.example.com`) hands that choice to whoever controls a subdomain, and DNS rebinding
//! changes the answer between two lookups. Unchecked, `localhost`, or any name pointed at
//! 127.0.0.1, brings the host's loopback (uexec's own listeners among it) back through the
//! proxy, and a private address brings the host's local network. So:
//! 1. the target's name is resolved once, here ([`resolve`]; an address is taken as it is),
//!    and the connection goes only to the addresses that came back: nothing looks the name
//!    up again;
//! 2. each address is canonicalised (an IPv4-mapped IPv6 address is its IPv4 one) and
//!    screened ([`screen`]): a non-public one ([`non_public`]: loopback, unspecified,
//!    link-local, private, shared, multicast, broadcast or reserved) is dropped, unless an
//!    allowlist entry names that very address ([`super::AllowEntry::names_address`]);
//! 3. when nothing is left of a name whose addresses were dropped, the request is a denial,
//!    as a host off the list is, and its message says which address to name to allow it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// What kind of non-public address `ip` is; `None` for a public one.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4_range(v4),
        IpAddr::V6(v6) => v6_range(v6),
    }
}

fn v4_range(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    Some(match (a, b) {
        (127, _) => "loopback",
        // 0.0.0.0 reaches the host itself; the rest of 0/8 is "this network".
        (0, _) => "unspecified",
        (10, _) | (172, 16..=31) | (192, 168) => "private",
        (169, 254) => "link-local",
        (100, 64..=127) => "shared (CGNAT)",
        (224..=239, _) => "multicast",
        (240..=255, _) => "reserved or broadcast",
        _ => return None,
    })
}

fn v6_range(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    let embedded_v4 = || Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7]));
    Some(match s[0] {
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_unspecified() => "unspecified",
        x if x & 0xffc0 == 0xfe80 => "link-local",
        x if x & 0xffc0 == 0xfec0 => "site-local",
        x if x & 0xfe00 == 0xfc00 => "private (unique local)",
        x if x & 0xff00 == 0xff00 => "multicast",
        // Forms that carry an IPv4 address are judged by it: NAT64's well-known prefix
        // (64:ff9b::/96) and the old IPv4-compatible one (::/96).
        0x64 if s[1] == 0xff9b && s[2..6] == [0; 4] => return v4_range(embedded_v4()),
        0 if s[1..6] == [0; 5] => return v4_range(embedded_v4()),
        _ => return None,
    })
}

/// The addresses of a target: those the proxy may connect to, in the resolver's order, and
/// those it dropped, with their kind.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Screened {
    pub permitted: Vec<SocketAddr>,
    pub refused: Vec<(SocketAddr, &'static str)>,
}

/// Screens resolved addresses (step 2 of the module docs): `named(ip)` says whether an
/// allowlist entry names that address (for the target's port) literally.
pub fn screen(
    addrs: impl IntoIterator<Item = SocketAddr>,
    named: impl Fn(IpAddr) -> bool,
) -> Screened {
    let mut screened = Screened::default();
    for addr in addrs {
        let addr = SocketAddr::new(addr.ip().to_canonical(), addr.port());
        if screened.permitted.contains(&addr) || screened.refused.iter().any(|(a, _)| *a == addr) {
            continue;
        }
        match non_public(addr.ip()) {
            Some(kind) if !named(addr.ip()) => screened.refused.push((addr, kind)),
            _ => screened.permitted.push(addr),
        }
    }
    screened
}

/// The addresses of `host` (a name, an IPv4 address or a bracketed IPv6 one) at `port`: an
/// address as it is, a name resolved once (step 1 of the module docs).
pub async fn resolve(host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    Ok(tokio::net::lookup_host((bare, port)).await?.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect(s)
    }

    #[test]
    fn non_public_ranges_are_named_and_public_ones_pass() {
        for (addr, kind) in [
            ("127.0.0.1", "loopback"),
            ("127.255.0.9", "loopback"),
            ("0.0.0.0", "unspecified"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "link-local"),
            ("100.64.0.1", "shared (CGNAT)"),
            ("100.127.255.255", "shared (CGNAT)"),
            ("224.0.0.1", "multicast"),
            ("255.255.255.255", "reserved or broadcast"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fe80::1", "link-local"),
            ("fd00::1", "private (unique local)"),
            ("fc00::1", "private (unique local)"),
            ("ff02::1", "multicast"),
            // IPv4-mapped, NAT64 and IPv4-compatible forms are judged by their IPv4 address.
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:10.0.0.1", "private"),
            ("64:ff9b::7f00:1", "loopback"),
            ("::169.254.169.254", "link-local"),
        ] {
            assert_eq!(non_public(ip(addr)), Some(kind), "{addr}");
        }
        for public in [
            "93.184.216.34",
            "172.15.255.255",
            "172.32.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert_eq!(non_public(ip(public)), None, "{public}");
        }
    }

    #[test]
    fn screening_drops_non_public_addresses_unless_named_and_canonicalises() {
        let at = |s: &str| SocketAddr::new(ip(s), 8080);
        let resolved = [
            at("::ffff:127.0.0.1"),
            at("127.0.0.1"),
            at("::1"),
            at("93.184.216.34"),
        ];
        let screened = screen(resolved, |_| false);
        assert_eq!(screened.permitted, [at("93.184.216.34")]);
        assert_eq!(
            screened.refused,
            [(at("127.0.0.1"), "loopback"), (at("::1"), "loopback")],
            "the mapped form is the IPv4 one, counted once"
        );
        let screened = screen(resolved, |a| a == ip("127.0.0.1"));
        assert_eq!(screened.permitted, [at("127.0.0.1"), at("93.184.216.34")]);
        assert_eq!(screened.refused, [(at("::1"), "loopback")]);
    }

    #[tokio::test]
    async fn an_address_is_taken_as_it_is_and_a_name_is_resolved() {
        assert_eq!(
            resolve("[::1]", 80).await.expect("v6"),
            [SocketAddr::new(ip("::1"), 80)]
        );
        assert_eq!(
            resolve("10.0.0.7", 443).await.expect("v4"),
            [SocketAddr::new(ip("10.0.0.7"), 443)]
        );
        let local = resolve("localhost", 80).await.expect("localhost resolves");
        assert!(local.iter().all(|a| a.ip().is_loopback()), "{local:?}");
    }
}
