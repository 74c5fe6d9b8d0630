//! A client's [`Settings`] (the `uexec mcp` flags, as the daemon's hello carries them) over a
//! store's configuration: the same whether the store runs in the MCP server's own process
//! or in the daemon, so a flag means one thing in both.

use uexec_core::confine::SandboxConfig;
use uexec_core::env::EnvPolicy;
use uexec_core::StoreConfig;
use uexec_protocol::daemon::{Hello, SandboxSettings, Settings, PERSON};

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
        pty_term: None,
    };
    config.hygiene.strip_ansi = settings.strip_ansi;
    config.hygiene.collapse_cr = settings.collapse_cr;
    config.deterministic_ids = settings.deterministic_ids;
    config.allow_secret_input = settings.allow_secret_input;
    if settings.no_shell_snapshot {
        config.shell_snapshots = None;
    }
    apply_sandbox(&settings.sandbox, &mut config.sandbox)
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
/// client's directory, environment and settings. A person's PTY sessions get a real `TERM`
/// ([`uexec_core::env::PERSON_PTY_TERM`]): they are for a terminal, not for a model.
pub fn store_config(hello: &Hello, base: &StoreConfig) -> Result<StoreConfig, String> {
    let mut config = base.clone();
    config.cwd = hello.cwd.clone();
    config.base_env = Some(hello.environment()?);
    apply(&hello.settings, &mut config)?;
    if hello.owner == PERSON {
        config.env_policy.pty_term = Some(uexec_core::env::PERSON_PTY_TERM.to_owned());
    }
    Ok(config)
}
