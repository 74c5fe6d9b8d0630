//! One client's environments, from its flags to an [`EnvironmentRegistry`], in two steps so
//! that `uexec mcp --daemon` can take the first and the daemon the second:
//!
//! 1. [`read`], in the client's process: the environments file is read and checked, the
//!    token files read, the CA file checked and the paths made absolute. Each error names
//!    its flag, before anything is served or any daemon asked (the daemon's cwd is not the
//!    client's, and a daemon's log is no place for a client's mistake).
//! 2. [`start`], where the sessions run (this process, or the daemon for each of its
//!    connections): the `--environment` servers are dialled in the background, the file's
//!    entries become environments and the file is watched for changes.
//!
//! Between the two the settings are plain values ([`EnvironmentSettings`]), which a
//! daemon's hello carries; tokens among them, never logged.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use uexec_client::ClientConfig;
use uexec_core::Backend;
use uexec_net::secret::read_token_file;
use uexec_net::tls::ClientTrust;
use uexec_protocol::daemon::EnvironmentSettings;

use super::backend::{Endpoint, EnvironmentBackend};
use super::{file, Defaults, EnvironmentRegistry};
use crate::{McpError, McpOptions};

/// Step 1: the environment flags of `args`, read and checked.
pub(crate) fn read(args: &McpOptions) -> Result<EnvironmentSettings, McpError> {
    let file = args.environments_file.as_deref().map(absolute);
    // The file's ids are names --environment-token-file may give.
    let file_ids: Vec<String> = match &file {
        Some(path) => file::load(path)?.into_iter().map(|e| e.id).collect(),
        None => Vec::new(),
    };
    // What `start` would refuse, refused here too: before any daemon is asked.
    if let (Some(path), Some(id)) = (
        &file,
        file_ids
            .iter()
            .find(|id| args.environments.iter().any(|(name, _)| name == *id)),
    ) {
        return Err(McpError::Settings(format!(
            "environments file {}: environment `{id}` is also given with --environment",
            path.display()
        )));
    }
    let tokens = remote_tokens(args, &file_ids)?;
    let ca = args.remote_ca.as_deref().map(absolute);
    if ca.is_some() {
        // A bad CA file is an error now, naming the flag, not at the first wss:// dial.
        ClientTrust::new(ca.clone()).client_config()?;
    }
    Ok(EnvironmentSettings {
        fixed: args.environments.clone(),
        file,
        tokens,
        ca,
    })
}

/// Step 2: the environments of `settings`, their servers dialled in the background and
/// their file watched. Dropping the registry stops the watch.
pub(crate) fn start(settings: &EnvironmentSettings) -> Result<Arc<EnvironmentRegistry>, McpError> {
    let file = match &settings.file {
        Some(path) => Some((path.clone(), file::load(path)?)),
        None => None,
    };
    // Checked by `read`; a CA file spoilt since then fails the wss:// dials, naming it.
    let client = ClientConfig {
        trust: ClientTrust::new(settings.ca.clone()),
        ..ClientConfig::default()
    };
    let tokens: HashMap<String, String> = settings
        .tokens
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    // Dialled in the background, as the file's are: one server that is down or refuses
    // its certificate fails that environment's sessions (naming it and its URL) and is
    // dialled again at its next command; the others, and local commands, go on.
    let mut fixed: BTreeMap<String, Arc<dyn Backend>> = BTreeMap::new();
    for (name, url) in &settings.fixed {
        let token = tokens.get(name).or_else(|| tokens.get("")).cloned();
        let endpoint = Endpoint {
            url: url.clone(),
            token,
            connect_timeout: None,
            client: client.clone(),
        };
        let backend = EnvironmentBackend::new(name, endpoint);
        backend.warm_up();
        fixed.insert(name.clone(), backend);
    }
    let registry = EnvironmentRegistry::new(fixed, file, Defaults { tokens, client })?;
    registry.watch();
    Ok(registry)
}

/// The token of each environment by name; `""` is the default one (--remote-token or
/// --remote-token-file). `file_ids` are the environments file's entries.
fn remote_tokens(
    args: &McpOptions,
    file_ids: &[String],
) -> Result<BTreeMap<String, String>, McpError> {
    let mut tokens = BTreeMap::new();
    let default = match &args.remote_token_file {
        Some(path) => Some(read_token_file("--remote-token-file", path)?),
        None => args.remote_token.clone().filter(|t| !t.is_empty()),
    };
    if let Some(token) = default {
        tokens.insert(String::new(), token);
    }
    for (name, path) in &args.environment_token_files {
        if !args.environments.iter().any(|(env, _)| env == name)
            && !file_ids.iter().any(|id| id == name)
        {
            return Err(McpError::NoSuchEnvironment {
                name: name.clone(),
                path: path.clone(),
            });
        }
        let token = read_token_file("--environment-token-file", Path::new(path))?;
        tokens.insert(name.clone(), token);
    }
    Ok(tokens)
}

/// `path` from this process's working directory (as given when it cannot be resolved).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
