//! Allowlist entries: `host`, `*.domain`, either with `:port`, or an address.

use std::net::IpAddr;

/// One allowlist entry: `host`, `*.domain` (its subdomains) or either with `:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowEntry {
    /// Lowercase; starts with `*.` for a domain's subdomains.
    pub host: String,
    /// Any port when `None`.
    pub port: Option<u16>,
}

impl AllowEntry {
    /// Parses `host`, `*.domain`, `host:port`, `[v6]` or `[v6]:port`.
    pub fn parse(entry: &str) -> Result<Self, String> {
        let bad = || format!("{entry:?} is neither a host nor host:port");
        let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
            let (v6, after) = rest.split_once(']').ok_or_else(bad)?;
            v6.parse::<std::net::Ipv6Addr>().map_err(|_| bad())?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(bad)?),
            };
            (v6.to_owned(), port)
        } else {
            match entry.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), Some(p)),
                None => (entry.to_owned(), None),
            }
        };
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => Some(n),
                _ => return Err(bad()),
            },
        };
        let name = host.strip_prefix("*.").unwrap_or(&host);
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        };
        let valid = name.parse::<std::net::IpAddr>().is_ok()
            || (!name.is_empty() && name.split('.').all(label_ok));
        if !valid {
            return Err(bad());
        }
        Ok(Self {
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// Whether a connection to `host:port` is allowed by this entry.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        match self.host.strip_prefix("*.") {
            Some(domain) => host.ends_with(&format!(".{domain}")),
            None => host == self.host,
        }
    }

    /// The address this entry names, when it names one rather than a host name (canonical:
    /// an IPv4-mapped IPv6 address is its IPv4 one).
    pub fn address(&self) -> Option<IpAddr> {
        self.host.parse::<IpAddr>().ok().map(|ip| ip.to_canonical())
    }

    /// Whether this entry names `ip` (canonical) itself, for `port`: then that address is
    /// allowed even when it is not a public one.
    pub fn names_address(&self, ip: IpAddr, port: u16) -> bool {
        self.port.is_none_or(|p| p == port) && self.address() == Some(ip)
    }

    /// Whether this entry names `localhost` or a name under it.
    pub fn names_localhost(&self) -> bool {
        self.host == "localhost" || self.host.ends_with(".localhost")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_and_match() {
        let e = AllowEntry::parse("Example.com").expect("host");
        assert!(e.allows("example.com", 443) && e.allows("EXAMPLE.com", 80));
        assert!(!e.allows("a.example.com", 443));
        let w = AllowEntry::parse("*.example.com:443").expect("wildcard");
        assert!(w.allows("a.example.com", 443));
        assert!(!w.allows("example.com", 443) && !w.allows("a.example.com", 80));
        let v6 = AllowEntry::parse("[::1]:8080").expect("v6");
        assert!(v6.allows("[::1]", 8080));
        assert!(AllowEntry::parse("127.0.0.1:3000").is_ok());
        for bad in [
            "",
            "http://example.com",
            "example.com/path",
            "a b",
            "host:0",
            "host:http",
            "host:70000",
            "*.",
            "[nope]",
        ] {
            let e = AllowEntry::parse(bad).expect_err(bad);
            assert!(e.contains("neither a host nor host:port"), "{e}");
        }
    }

    fn entries(list: &[&str]) -> Vec<AllowEntry> {
        list.iter()
            .map(|e| AllowEntry::parse(e).expect(e))
            .collect()
    }

    #[test]
    fn an_entry_names_an_address_only_literally_and_for_its_port() {
        let ip = |s: &str| s.parse::<IpAddr>().expect(s);
        let [v4, any_port, v6, mapped, name] = <[AllowEntry; 5]>::try_from(entries(&[
            "127.0.0.1:8080",
            "10.0.0.7",
            "[::1]:8080",
            "[::ffff:127.0.0.2]",
            "localhost:8080",
        ]))
        .expect("five");
        assert!(v4.names_address(ip("127.0.0.1"), 8080));
        assert!(!v4.names_address(ip("127.0.0.1"), 8081));
        assert!(any_port.names_address(ip("10.0.0.7"), 1));
        assert!(v6.names_address(ip("::1"), 8080));
        assert!(mapped.names_address(ip("127.0.0.2"), 80), "canonical");
        assert!(
            !name.names_address(ip("127.0.0.1"), 8080),
            "a name names no address"
        );
    }
}
