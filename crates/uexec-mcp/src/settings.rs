//! A client's [`Settings`] (the `uexec mcp` flags, as the daemon's hello carries them) over a
//! store's configuration: the same whether the store runs in the MCP server's own process
//! or in the daemon, so a flag means one thing in both.

use uexec_core::confine::SandboxConfig;
use uexec_core::env::EnvPolicy;
use uexec_core::policy::{parse_bytes, parse_cpus, parse_pids, show_count, Limits, NO_LIMIT};
use uexec_core::StoreConfig;
use uexec_protocol::daemon::{Hello, LimitSettings, SandboxSettings, Settings, PERSON};

/// `settings` over `config`.
pub fn apply(settings: &Settings, config: &mut StoreConfig) -> Result<(), String> {
    config.default_shell = settings.shell.clone();
    if let Some(max) = settings.max_output_tokens {
        config.output_token_policy_max = max;
    }
    config.env_policy = EnvPolicy {
        keep: settings.env_keep.clone(),
        set: settings.env_set.clone(),
        drop: settings.env_drop.clone(),
        ..EnvPolicy::default()
    };
    config.hygiene.strip_ansi = settings.strip_ansi;
    config.hygiene.collapse_cr = settings.collapse_cr;
    config.deterministic_ids = settings.deterministic_ids;
    config.allow_secret_input = settings.allow_secret_input;
    if settings.no_shell_snapshot {
        config.shell_snapshots = None;
    }
    config.limits = config.limits.lowest(read_limits(&settings.limits)?);
    apply_rules(settings, config)?;
    apply_sandbox(&settings.sandbox, &mut config.sandbox)
}

/// `--rules` and `--unmatched`: the files read (an error names the file, line and column),
/// what they ignore said once in the log.
fn apply_rules(settings: &Settings, config: &mut StoreConfig) -> Result<(), String> {
    use uexec_core::policy::exec_rules::{self, RulesAt};
    use uexec_core::policy::rules::Decision;
    let unmatched = match settings.unmatched.as_deref() {
        None => Decision::Allow,
        Some(word) => word.parse().map_err(|e| format!("--unmatched: {e}"))?,
    };
    let rules_at = match settings.rules_at.as_deref() {
        None => RulesAt::Text,
        Some(word) => RulesAt::parse(word)
            .ok_or_else(|| format!("--rules-at: {word:?} is neither text nor exec"))?,
    };
    if settings.rules.is_empty() {
        if settings.unmatched.is_some() {
            return Err("--unmatched: needs --rules (with no rules, every command runs)".into());
        }
        if settings.rules_at.is_some() {
            return Err("--rules-at: needs --rules (with no rules, every command runs)".into());
        }
        return Ok(());
    }
    config.rules_at = match rules_at {
        // Where the kernel cannot hand execs over, the text alone (said once, at start).
        RulesAt::Exec if exec_rules::exec_support().is_err() => RulesAt::Text,
        other => other,
    };
    let rules = uexec_rules::Rules::load(&settings.rules, unmatched)
        .map_err(|e| format!("--rules: {e}"))?;
    for warning in rules.warnings() {
        tracing::warn!("--rules: {warning}");
    }
    let own: std::sync::Arc<dyn uexec_core::policy::rules::CommandRules> =
        std::sync::Arc::new(rules);
    // A daemon's own rules stay: a client's add to them, the strictest decision wins.
    config.rules = Some(match config.rules.take() {
        None => own,
        Some(daemon) => {
            std::sync::Arc::new(uexec_core::policy::rules::Strictest(vec![daemon, own]))
        }
    });
    Ok(())
}

/// The limit flags as words (sent to a daemon in the hello).
pub fn limit_words(limits: &Limits) -> LimitSettings {
    LimitSettings {
        memory_max: limits.memory_max.map(show_count),
        pids_max: limits.pids_max.map(show_count),
        cpu_max: limits.cpu_max.map(|c| match c.quota_usec {
            NO_LIMIT => "max".to_owned(),
            _ => c.share().to_string(),
        }),
    }
}

fn read_limits(words: &LimitSettings) -> Result<Limits, String> {
    let named = |flag: &'static str| move |e: String| format!("{flag}: {e}");
    Ok(Limits {
        memory_max: words
            .memory_max
            .as_deref()
            .map(parse_bytes)
            .transpose()
            .map_err(named("--memory-max"))?,
        pids_max: words
            .pids_max
            .as_deref()
            .map(parse_pids)
            .transpose()
            .map_err(named("--pids-max"))?,
        cpu_max: words
            .cpu_max
            .as_deref()
            .map(parse_cpus)
            .transpose()
            .map_err(named("--cpu-max"))?,
    })
}

/// Refuses `limits` this process's sessions cannot have (their controllers enabled when it
/// started: `uexec_core::backend::local::prepare_limits`), naming the flag; `hint` says
/// where a person enables them, when the machine could.
pub fn check_limits(limits: &Limits, hint: &str) -> Result<(), String> {
    uexec_core::backend::local::check_limits(limits).map_err(|e| {
        let flag = e.controller.limit().replace('_', "-");
        let hint = if e.machine { "" } else { hint };
        format!("--{flag}: {e}{hint}")
    })
}

/// The sandbox settings over `sandbox` (its launcher is the server's own and stays).
fn apply_sandbox(settings: &SandboxSettings, sandbox: &mut SandboxConfig) -> Result<(), String> {
    use uexec_core::policy::{AllowEntry, Network};
    let named = |flag: &str, e: String| format!("{flag}: {e}");
    if let Some(p) = &settings.profile {
        sandbox.profile = p.parse().map_err(|e| named("--sandbox", e))?;
    }
    if let Some(n) = &settings.network {
        sandbox.network = n.parse().map_err(|e| named("--network", e))?;
    }
    if !settings.network_allow.is_empty() {
        let allow = settings
            .network_allow
            .iter()
            .map(|e| AllowEntry::parse(e).map_err(|e| named("--network-allow", e)))
            .collect::<Result<Vec<_>, _>>()?;
        sandbox.network = Network::Allow(allow);
    }
    for root in &settings.writable_roots {
        if !root.is_absolute() || !root.is_dir() {
            return Err(format!(
                "--writable-root {}: not an existing directory (an absolute path)",
                root.display()
            ));
        }
    }
    sandbox.writable_roots = settings.writable_roots.clone();
    if let Some(f) = &settings.fallback {
        sandbox.fallback = f.parse().map_err(|e| named("--sandbox-fallback", e))?;
    }
    if let Some(d) = &settings.on_denial {
        sandbox.on_denial = d.parse().map_err(|e| named("--network-denial", e))?;
    }
    Ok(())
}

/// The store configuration of a daemon client's sessions, over the daemon's `base`: the
/// client's directory, environment and settings. A person's commands get the person's
/// environment as it is ([`EnvPolicy::for_person`]: their secrets, which only a person's
/// CLI sends, to a daemon it checked is theirs, and their colours; their terminal's `TERM`
/// on a PTY): they are for a terminal, not for a model. An agent's keep the hygiene.
pub fn store_config(hello: &Hello, base: &StoreConfig) -> Result<StoreConfig, String> {
    let mut config = base.clone();
    config.cwd = hello.cwd.clone();
    config.base_env = Some(hello.environment()?);
    apply(&hello.settings, &mut config)?;
    check_limits(
        &config.limits,
        " (the daemon enables the controllers of its own limits when it starts: `uexec daemon --stop`, then `uexec daemon --memory-max BYTES|max ...`)",
    )?;
    config.decisions =
        crate::audit::AuditFile::of_this_user().map(|file| file.for_owner(hello.owner.clone()));
    if hello.owner == PERSON {
        config.env_policy = EnvPolicy {
            set: config.env_policy.set.clone(),
            drop: config.env_policy.drop.clone(),
            ..EnvPolicy::for_person()
        };
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use std::ffi::OsStr;
    use uexec_protocol::daemon::{PROTOCOL, VERSION};

    fn hello(owner: &str) -> Hello {
        let b64 = base64::engine::general_purpose::STANDARD;
        let env = [("GH_TOKEN", "ghp_x"), ("PATH", "/venv/bin:/usr/bin")]
            .iter()
            .map(|(k, v)| (b64.encode(k), b64.encode(v)))
            .collect();
        Hello {
            protocol: PROTOCOL.into(),
            version: VERSION.into(),
            build: "b".into(),
            owner: owner.into(),
            cwd: std::env::temp_dir(),
            env,
            settings: Settings {
                env_set: vec![("SET_BY_FLAG".into(), "1".into())],
                ..Settings::default()
            },
            attach: None,
            status: false,
            run: None,
            metrics: false,
        }
    }

    /// A person's commands get their environment whole (their hello carries it); an
    /// agent's, from the same hello, keep the hygiene; both get their `--env` flags.
    #[test]
    fn a_persons_store_gets_their_environment_and_an_agents_the_hygiene() {
        let base = StoreConfig::default();
        let person = store_config(&hello(PERSON), &base).expect("person");
        let agent = store_config(&hello("mcp:agent"), &base).expect("agent");
        assert!(person.env_policy.person && !agent.env_policy.person);
        let env = |c: &StoreConfig| {
            c.env_policy
                .command_env(c.base_env.clone().expect("the client's"), false)
        };
        let (person, agent) = (env(&person), env(&agent));
        assert_eq!(person[OsStr::new("GH_TOKEN")], "ghp_x");
        assert!(!person.contains_key(OsStr::new("NO_COLOR")));
        assert!(!agent.contains_key(OsStr::new("GH_TOKEN")));
        assert_eq!(agent[OsStr::new("NO_COLOR")], "1");
        for env in [&person, &agent] {
            assert_eq!(env[OsStr::new("PATH")], "/venv/bin:/usr/bin");
            assert_eq!(env[OsStr::new("SET_BY_FLAG")], "1");
        }
    }
}
