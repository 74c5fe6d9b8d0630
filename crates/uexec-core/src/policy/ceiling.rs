//! The server's sandbox policy is a ceiling: a call may narrow it, never widen it.
//!
//! Why: the `sandbox` and `network` arguments are the model's, and the model is what the
//! sandbox is for: a confused or prompt-injected model must not be able to ask its way out.
//! So a call's choice is checked against the server's (a person's flags) before anything
//! runs:
//! 1. profiles are ordered `read-only` < `workspace-write` < `danger-full-access`; a call may
//!    ask for the server's profile or a narrower one;
//! 2. networks are ordered `off` < an allowlist < `on`; under `on` any allowlist is a
//!    narrowing, under an allowlist only an allowlist whose every entry the server's list
//!    already allows (host and port), under `off` nothing but `off`;
//! 3. anything wider is a [`Widening`]: an error naming the field, what was asked and the
//!    server's policy. Nothing runs. The faces add how a person widens it (their flags).
//!
//! The writable roots are the server's as well (its working directory and each writable
//! root): a call's `workdir` is where the command runs, never what it may write.

use super::{AllowEntry, Network, Profile};

/// A call asked for more than the server allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Widening {
    /// A wider profile.
    #[error(
        "invalid arguments: sandbox: {:?} is wider than this server's sandbox ({:?}); a call may only narrow it (to {})",
        asked.as_str(),
        ceiling.as_str(),
        narrower_profiles(*ceiling)
    )]
    Profile { asked: Profile, ceiling: Profile },
    /// A wider network (`on` under an allowlist or `off`, an allowlist under `off`).
    #[error(
        "invalid arguments: {field}: {asked} is wider than this server's network policy ({}); a call may only narrow it (to {})",
        describe(ceiling),
        narrower_networks(ceiling)
    )]
    Network {
        field: &'static str,
        asked: String,
        ceiling: Network,
    },
    /// An allowlist entry the server's allowlist does not allow.
    #[error(
        "invalid arguments: network.allow[{index}]: {entry:?} is not allowed by this server's allowlist ({}); a call may only name hosts it allows",
        list(ceiling)
    )]
    AllowEntry {
        index: usize,
        entry: String,
        ceiling: Vec<AllowEntry>,
    },
    /// A resource limit above the server's (`limits.memory_max`, `limits.pids_max`; see
    /// [`super::narrow_limits`]).
    #[error(
        "invalid arguments: {field}: {asked} is above this server's limit ({ceiling}); a call may only lower it"
    )]
    Limit {
        field: &'static str,
        asked: String,
        ceiling: String,
    },
}

fn rank(profile: Profile) -> u8 {
    match profile {
        Profile::ReadOnly => 0,
        Profile::WorkspaceWrite => 1,
        Profile::DangerFullAccess => 2,
    }
}

fn narrower_profiles(ceiling: Profile) -> String {
    let names: Vec<String> = [
        Profile::ReadOnly,
        Profile::WorkspaceWrite,
        Profile::DangerFullAccess,
    ]
    .into_iter()
    .filter(|p| rank(*p) <= rank(ceiling))
    .map(|p| format!("{:?}", p.as_str()))
    .collect();
    names.join(" or ")
}

fn describe(network: &Network) -> String {
    match network {
        Network::On => "\"on\"".to_owned(),
        Network::Off => "\"off\"".to_owned(),
        Network::Allow(allow) => format!("an allowlist of {}", list(allow)),
    }
}

fn narrower_networks(ceiling: &Network) -> &'static str {
    match ceiling {
        Network::On => "\"off\", an allowlist or \"on\"",
        Network::Allow(_) => "\"off\" or an allowlist of hosts the server's list allows",
        Network::Off => "\"off\"",
    }
}

fn list(allow: &[AllowEntry]) -> String {
    let entries: Vec<String> = allow.iter().map(show).collect();
    entries.join(", ")
}

/// An entry as a person writes it (`host`, `*.domain`, `host:port`, `[v6]:port`).
pub fn show(entry: &AllowEntry) -> String {
    let v6 = entry.host.contains(':');
    match (entry.port, v6) {
        (None, false) => entry.host.clone(),
        (None, true) => format!("[{}]", entry.host),
        (Some(port), false) => format!("{}:{port}", entry.host),
        (Some(port), true) => format!("[{}]:{port}", entry.host),
    }
}

/// Whether everything `call` allows, `server` allows too: the same host or a subdomain of
/// a wildcard's domain (a wildcard never covers its bare domain), on any port or the same.
fn covers(server: &AllowEntry, call: &AllowEntry) -> bool {
    let port = match server.port {
        None => true,
        Some(p) => call.port == Some(p),
    };
    let host = server.host == call.host
        || server
            .host
            .strip_prefix("*.")
            .is_some_and(|domain| call.host.ends_with(&format!(".{domain}")));
    port && host
}

/// The profile and network a call runs with: its own where it asked and they narrow the
/// server's, the server's where it did not ask.
pub fn narrow(
    ceiling_profile: Profile,
    ceiling_network: &Network,
    profile: Option<Profile>,
    network: Option<Network>,
) -> Result<(Profile, Network), Widening> {
    let profile = match profile {
        None => ceiling_profile,
        Some(asked) if rank(asked) <= rank(ceiling_profile) => asked,
        Some(asked) => {
            return Err(Widening::Profile {
                asked,
                ceiling: ceiling_profile,
            })
        }
    };
    let network = match network {
        None => ceiling_network.clone(),
        Some(asked) => narrow_network(ceiling_network, asked)?,
    };
    Ok((profile, network))
}

fn narrow_network(ceiling: &Network, asked: Network) -> Result<Network, Widening> {
    let wider = |field: &'static str, asked: &str| Widening::Network {
        field,
        asked: asked.to_owned(),
        ceiling: ceiling.clone(),
    };
    match (ceiling, &asked) {
        (_, Network::Off) | (Network::On, _) => Ok(asked),
        (_, Network::On) => Err(wider("network", "\"on\"")),
        (Network::Off, Network::Allow(_)) => Err(wider("network.allow", "an allowlist")),
        (Network::Allow(server), Network::Allow(call)) => {
            for (index, entry) in call.iter().enumerate() {
                if !server.iter().any(|s| covers(s, entry)) {
                    return Err(Widening::AllowEntry {
                        index,
                        entry: show(entry),
                        ceiling: server.clone(),
                    });
                }
            }
            Ok(asked)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(entries: &[&str]) -> Network {
        Network::Allow(
            entries
                .iter()
                .map(|e| AllowEntry::parse(e).expect("an entry"))
                .collect(),
        )
    }

    #[test]
    fn a_call_that_asks_nothing_gets_the_servers_policy() {
        let got = narrow(Profile::WorkspaceWrite, &Network::Off, None, None).expect("narrow");
        assert_eq!(got, (Profile::WorkspaceWrite, Network::Off));
    }

    #[test]
    fn a_narrower_profile_is_taken_and_a_wider_one_refused() {
        let got = narrow(
            Profile::WorkspaceWrite,
            &Network::On,
            Some(Profile::ReadOnly),
            None,
        )
        .expect("read-only under workspace-write");
        assert_eq!(got.0, Profile::ReadOnly);
        let e = narrow(
            Profile::WorkspaceWrite,
            &Network::On,
            Some(Profile::DangerFullAccess),
            None,
        )
        .expect_err("danger-full-access under workspace-write");
        let text = e.to_string();
        assert!(
            text.starts_with("invalid arguments: sandbox: \"danger-full-access\" is wider than this server's sandbox (\"workspace-write\")"),
            "{text}"
        );
        assert!(
            text.contains("\"read-only\" or \"workspace-write\""),
            "{text}"
        );
        assert!(narrow(
            Profile::ReadOnly,
            &Network::On,
            Some(Profile::WorkspaceWrite),
            None
        )
        .is_err());
        assert!(narrow(
            Profile::DangerFullAccess,
            &Network::On,
            Some(Profile::DangerFullAccess),
            None
        )
        .is_ok());
    }

    #[test]
    fn networks_narrow_from_on_to_an_allowlist_to_off() {
        let profile = Profile::DangerFullAccess;
        let list = allow(&["github.com"]);
        for (ceiling, asked) in [
            (Network::On, Network::Off),
            (Network::On, list.clone()),
            (Network::On, Network::On),
            (list.clone(), Network::Off),
            (list.clone(), list.clone()),
            (Network::Off, Network::Off),
        ] {
            let got = narrow(profile, &ceiling, None, Some(asked.clone()));
            assert_eq!(
                got,
                Ok((profile, asked.clone())),
                "{asked:?} under {ceiling:?}"
            );
        }
        for (ceiling, asked, field) in [
            (
                Network::Off,
                Network::On,
                "invalid arguments: network: \"on\"",
            ),
            (
                list.clone(),
                Network::On,
                "invalid arguments: network: \"on\"",
            ),
            (
                Network::Off,
                list.clone(),
                "invalid arguments: network.allow: an allowlist",
            ),
        ] {
            let e = narrow(profile, &ceiling, None, Some(asked.clone()))
                .expect_err("a widening")
                .to_string();
            assert!(e.starts_with(field), "{asked:?} under {ceiling:?}: {e}");
            assert!(e.contains("this server's network policy"), "{e}");
        }
    }

    #[test]
    fn an_allowlist_under_an_allowlist_names_only_hosts_the_server_allows() {
        let server = allow(&["*.example.com", "github.com:443", "10.0.0.7"]);
        for ok in [
            "a.example.com",
            "a.example.com:8080",
            "*.b.example.com",
            "*.example.com:443",
            "github.com:443",
            "10.0.0.7:22",
        ] {
            assert!(
                narrow(Profile::ReadOnly, &server, None, Some(allow(&[ok]))).is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "example.com",
            "github.com",
            "github.com:80",
            "evil.com",
            "*.com",
            "10.0.0.8",
            "localhost",
        ] {
            let e = narrow(
                Profile::ReadOnly,
                &server,
                None,
                Some(allow(&["a.example.com", bad])),
            )
            .expect_err(bad)
            .to_string();
            assert!(
                e.starts_with("invalid arguments: network.allow[1]: "),
                "{bad}: {e}"
            );
            assert!(e.contains("*.example.com, github.com:443, 10.0.0.7"), "{e}");
        }
    }
}
