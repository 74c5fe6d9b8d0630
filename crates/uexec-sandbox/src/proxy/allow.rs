//! The allowlist's entries, the proxy's port, and the variables that point a command's tools
//! at it: the launcher listens on that port, and those variables name it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use uexec_core::policy::AllowEntry;

/// The proxy's port on the namespace's loopback.
pub const PROXY_PORT: u16 = 3128;

/// The variables that point tools at the proxy. `NO_PROXY` keeps the namespace's own
/// loopback (where the command's own servers listen) off the proxy, except what the
/// allowlist names there: an allowed `127.0.0.1:PORT` is the host's, reached only through
/// the proxy, so neither `127.0.0.1` nor the `localhost` that means it may send it around.
pub fn proxy_env(allow: &[AllowEntry]) -> Vec<(&'static str, String)> {
    let url = format!("http://127.0.0.1:{PROXY_PORT}");
    let mut env: Vec<(&'static str, String)> = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "npm_config_proxy",
        "npm_config_https_proxy",
        "YARN_HTTP_PROXY",
        "YARN_HTTPS_PROXY",
        "PIP_PROXY",
    ]
    .into_iter()
    .map(|name| (name, url.clone()))
    .collect();
    let local = local_bypass(allow).join(",");
    env.push(("NO_PROXY", local.clone()));
    env.push(("no_proxy", local));
    env
}

/// The loopback names and addresses `NO_PROXY` holds for `allow` (see [`proxy_env`]).
fn local_bypass(allow: &[AllowEntry]) -> Vec<&'static str> {
    let named = |ip: IpAddr| allow.iter().any(|a| a.address() == Some(ip));
    let v4 = named(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let v6 = named(IpAddr::V6(Ipv6Addr::LOCALHOST));
    let localhost = v4 || v6 || allow.iter().any(AllowEntry::names_localhost);
    [
        (!localhost).then_some("localhost"),
        (!v4).then_some("127.0.0.1"),
        (!v6).then_some("::1"),
    ]
    .into_iter()
    .flatten()
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(list: &[&str]) -> Vec<AllowEntry> {
        list.iter()
            .map(|e| AllowEntry::parse(e).expect(e))
            .collect()
    }

    #[test]
    fn no_proxy_leaves_out_the_loopback_the_allowlist_names() {
        let bypass = |list: &[&str]| local_bypass(&entries(list)).join(",");
        assert_eq!(bypass(&["example.com"]), "localhost,127.0.0.1,::1");
        assert_eq!(bypass(&["127.0.0.1:8080"]), "::1");
        assert_eq!(bypass(&["[::1]:8080"]), "127.0.0.1");
        assert_eq!(bypass(&["127.0.0.1", "[::1]"]), "");
        assert_eq!(bypass(&["localhost:8080"]), "127.0.0.1,::1");
        assert_eq!(bypass(&["*.localhost"]), "127.0.0.1,::1");
        assert_eq!(bypass(&["[::ffff:127.0.0.1]:80"]), "::1");
        let env = proxy_env(&entries(&["127.0.0.1:8080"]));
        for name in ["NO_PROXY", "no_proxy"] {
            assert!(env.contains(&(name, "::1".to_owned())), "{env:?}");
        }
    }
}
