//! Turning `exec_command` arguments into a spawn (SPEC §2 step 1, §8, §9): every check of
//! the request that can fail happens here, before an id is reserved or a process started,
//! and each failure names its field. What is decided here is the request's; what a spawn
//! must pass besides (the rules, a person's yes, the confinement, the shell snapshot) is
//! [`super::admit`]'s, after it.
//!
//! Not yet pure (ARCHITECTURE's aim): it still checks the working directory and the shell
//! on disk, reads the process environment when the caller brings none, and asks the local
//! backend which limits this machine applies.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use std::time::Duration;

use crate::backend::local::find_program;
use crate::backend::{EnvMode, Placement, Program, SpawnSpec};
use crate::config::StoreConfig;
use crate::confine::UexecDirs;
use crate::error::ExecError;
use crate::limits::{exec_window_ms, output_token_budget, MAX_TIMEOUT_MS, MIN_TIMEOUT_MS};
use crate::output::until::Condition;
use crate::output::Hygiene;
use crate::policy::{narrow, narrow_limits, needed_layers, Layer, Network, Profile};
use crate::request::ExecRequest;

/// An `exec_command` after validation.
pub struct Plan {
    pub spec: SpawnSpec,
    pub command: String,
    pub window: Duration,
    pub max_output_tokens: u64,
    /// Ends the first window early (`until`).
    pub condition: Option<Condition>,
    /// The hard completion timeout (`timeout_ms`).
    pub timeout: Option<Duration>,
    pub hygiene: Hygiene,
    /// The sandbox the policy asks for, when one applies (the door confines the spawn).
    pub sandbox: Option<Sandboxing>,
    /// A local login shell: a shell snapshot may stand in for its profile.
    pub(super) local_login: bool,
    /// Where it runs: a request a pre-spawn hook rewrote is planned for the same place.
    pub(super) placement: Placement,
}

/// The sandbox of a call, as the policy narrowed it: what the confinement must apply.
#[derive(Debug, Clone)]
pub struct Sandboxing {
    pub profile: Profile,
    pub network: Network,
    /// Never empty.
    pub layers: Vec<Layer>,
}

impl Plan {
    /// Validates an `exec_command` and builds what to spawn.
    pub fn new(
        config: &StoreConfig,
        req: &ExecRequest,
        placement: Placement,
    ) -> Result<Self, ExecError> {
        if req.cmd.is_empty() {
            return Err(ExecError::invalid("cmd", "must not be empty"));
        }
        no_nul("cmd", &req.cmd)?;
        let max_output_tokens = token_budget(config, req.max_output_tokens)?;
        let condition = req.until.as_ref().map(Condition::new).transpose()?;
        let timeout = match req.timeout_ms {
            None => None,
            Some(ms) if (MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(&ms) => {
                Some(Duration::from_millis(ms as u64))
            }
            Some(ms) => {
                return Err(ExecError::invalid(
                    "timeout_ms",
                    format!("{ms} is out of range ({MIN_TIMEOUT_MS}..={MAX_TIMEOUT_MS} ms)"),
                ))
            }
        };
        let tty = req.tty.unwrap_or(false);
        if req.pipe_stdin && tty {
            return Err(ExecError::invalid(
                "stdin",
                "\"pipe\" is for pipe sessions; with tty=true stdin is the terminal already",
            ));
        }
        let workdir = req.workdir.as_deref().filter(|w| !w.is_empty());
        if let Some(dir) = workdir {
            no_nul("workdir", dir)?;
        }
        if let Some(shell) = &req.shell {
            no_nul("shell", shell)?;
        }
        let requested_shell = req.shell.clone().filter(|s| !s.is_empty());
        let login = req.login.unwrap_or(true);
        let remote = matches!(placement, Placement::Remote { .. });
        let local = matches!(placement, Placement::Local);
        let planned_for = placement.clone();
        let (cwd, shell, env, env_mode) = match placement {
            Placement::Local => {
                let cwd = workdir.map_or_else(|| config.cwd.clone(), |d| config.cwd.join(d));
                if !cwd.is_dir() {
                    let why = if cwd.exists() {
                        "is not a directory"
                    } else {
                        "does not exist"
                    };
                    return Err(ExecError::invalid(
                        "workdir",
                        format!("{} {why}", cwd.display()),
                    ));
                }
                let mut env = match &config.base_env {
                    Some(base) => config.env_policy.command_env(base.clone(), tty),
                    None => config.env_policy.command_env(std::env::vars_os(), tty),
                };
                let shell = requested_shell.unwrap_or_else(|| default_shell(config));
                if login {
                    // The caller's PATH outlives a profile that resets it (crate::env).
                    crate::env::keep_caller_path(&mut env, &shell);
                }
                if find_program(&shell, env.get(OsStr::new("PATH")).map(OsString::as_os_str))
                    .is_none()
                {
                    return Err(ExecError::invalid(
                        "shell",
                        format!("{shell} not found or not executable"),
                    ));
                }
                (cwd, shell, env, EnvMode::Exact)
            }
            Placement::Remote {
                cwd: remote_cwd,
                shell: remote_shell,
            } => {
                let base = remote_cwd.unwrap_or_else(|| PathBuf::from("/"));
                let cwd = workdir.map_or_else(|| base.clone(), |d| base.join(d));
                let shell = requested_shell
                    .or(remote_shell)
                    .unwrap_or_else(|| "/bin/sh".to_owned());
                let mode = EnvMode::InheritFiltered {
                    drop: config.env_policy.drop.clone(),
                };
                (cwd, shell, config.env_policy.overrides(tty), mode)
            }
        };
        let mut spec = SpawnSpec {
            program: Program::Shell {
                shell,
                login,
                script: req.cmd.clone(),
            },
            arg0: None,
            cwd,
            env,
            env_mode,
            tty,
            pipe_stdin: req.pipe_stdin,
            one_stream: req.one_stream,
            passed_fd: None,
            launcher: None,
            limits: crate::policy::Limits::default(),
        };
        let sandbox = sandbox_for(config, req, remote)?;
        spec.limits = limits_for(config, req, remote)?;
        Ok(Self {
            spec,
            sandbox,
            command: req.cmd.clone(),
            window: Duration::from_millis(exec_window_ms(req.yield_time_ms)),
            max_output_tokens,
            condition,
            timeout,
            hygiene: config.hygiene.with(req.hygiene),
            local_login: local && login,
            placement: planned_for,
        })
    }
}

/// The sandbox of a call (local only): the call's choice checked against the server's
/// policy, which is a ceiling ([`narrow`]), and the layers it needs. `None` when the command
/// runs unsandboxed.
fn sandbox_for(
    config: &StoreConfig,
    req: &ExecRequest,
    remote: bool,
) -> Result<Option<Sandboxing>, ExecError> {
    if remote {
        if req.sandbox.is_some() || req.network.is_some() {
            return Err(ExecError::invalid(
                "sandbox",
                "remote environments apply their own policy; sandbox and network are for local commands",
            ));
        }
        return Ok(None);
    }
    let policy = &config.sandbox;
    let (profile, network) = narrow(
        policy.profile,
        &policy.network,
        req.sandbox,
        req.network.clone(),
    )?;
    let layers = needed_layers(profile, &network);
    Ok((!layers.is_empty()).then_some(Sandboxing {
        profile,
        network,
        layers,
    }))
}

/// The limits of a call (local only): its own checked against the server's, a ceiling
/// ([`narrow_limits`]), then against what this machine and server can apply (the local
/// backend's cgroups): a limit is refused, never dropped.
fn limits_for(
    config: &StoreConfig,
    req: &ExecRequest,
    remote: bool,
) -> Result<crate::policy::Limits, ExecError> {
    if remote {
        if !req.limits.is_empty() {
            return Err(ExecError::invalid(
                "limits",
                "remote environments apply their own limits; limits are for local commands",
            ));
        }
        return Ok(crate::policy::Limits::default());
    }
    let limits = narrow_limits(&config.limits, &req.limits)?;
    crate::backend::local::check_limits(&limits).map_err(|e| ExecError::Limit {
        field: match e.controller {
            crate::backend::local::Controller::Memory => "limits.memory_max",
            crate::backend::local::Controller::Pids => "limits.pids_max",
            crate::backend::local::Controller::Cpu => "limits.cpu_max",
        },
        reason: e.why,
        machine: e.machine,
    })?;
    Ok(limits)
}

/// uexec's own directories that `config` names (a confinement keeps them read-only).
pub(super) fn uexec_dirs(config: &StoreConfig) -> UexecDirs {
    UexecDirs {
        transcripts: config.transcripts.as_ref().map(|t| t.root.clone()),
        shell_snapshots: config.shell_snapshots.as_ref().map(|s| s.dir()),
    }
}

/// The token budget of a call: negative is an error, the rest is capped by policy.
pub fn token_budget(config: &StoreConfig, requested: Option<i64>) -> Result<u64, ExecError> {
    match requested {
        Some(n) if n < 0 => Err(ExecError::invalid(
            "max_output_tokens",
            format!("must not be negative (got {n})"),
        )),
        other => Ok(output_token_budget(
            other.map(|n| n as u64),
            config.output_token_policy_max,
        )),
    }
}

fn default_shell(config: &StoreConfig) -> String {
    if let Some(shell) = &config.default_shell {
        return shell.clone();
    }
    match std::env::var("SHELL") {
        Ok(shell) if !shell.is_empty() && Path::new(&shell).is_file() => shell,
        _ if Path::new("/bin/bash").is_file() => "/bin/bash".to_owned(),
        _ => "/bin/sh".to_owned(),
    }
}

fn no_nul(field: &'static str, value: &str) -> Result<(), ExecError> {
    if value.contains('\0') {
        return Err(ExecError::invalid(field, "must not contain NUL bytes"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> StoreConfig {
        StoreConfig {
            cwd: std::env::temp_dir(),
            default_shell: Some("/bin/sh".into()),
            ..StoreConfig::default()
        }
    }

    fn req(cmd: &str) -> ExecRequest {
        ExecRequest {
            cmd: cmd.into(),
            ..ExecRequest::default()
        }
    }

    #[test]
    fn local_defaults_are_a_login_shell_in_the_server_cwd_with_the_forced_env() {
        let plan = Plan::new(&config(), &req("ls"), Placement::Local).expect("valid");
        assert_eq!(plan.spec.command().0, ["/bin/sh", "-lc", "ls"]);
        assert_eq!(plan.spec.cwd, std::env::temp_dir());
        assert_eq!(plan.spec.env_mode, EnvMode::Exact);
        assert_eq!(plan.spec.env[OsStr::new("TERM")], "dumb");
        assert_eq!(plan.window, Duration::from_millis(10_000));
        assert_eq!(plan.max_output_tokens, 10_000);
        let plan = Plan::new(
            &config(),
            &ExecRequest {
                login: Some(false),
                workdir: Some(String::new()),
                ..req("ls")
            },
            Placement::Local,
        )
        .expect("valid");
        assert_eq!(plan.spec.command().0[1], "-c");
        assert_eq!(plan.spec.cwd, std::env::temp_dir());
    }

    #[test]
    fn a_local_login_carries_the_callers_path_past_its_profile_and_shows_the_command_as_is() {
        let mut caller = config();
        caller.base_env = Some(
            [("PATH", "/my/tools::/usr/bin:/bin:/my/tools")]
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        );
        let plan = Plan::new(&caller, &req("mytool"), Placement::Local).expect("valid");
        let marker = OsStr::new(crate::env::CALLER_PATH_VAR);
        assert_eq!(plan.spec.env[marker], "/my/tools:/usr/bin:/bin");
        assert_eq!(plan.spec.command().0, ["/bin/sh", "-lc", "mytool"]);
        let (argv, _) = plan.spec.command_to_exec();
        assert_eq!(argv[..2], ["/bin/sh", "-lc"]);
        assert_eq!(argv[2], crate::env::after_login_profile("mytool"));
        assert!(argv[2].ends_with("; mytool"));
        // No login, no profile: the PATH is the caller's as it is.
        let plan = Plan::new(
            &caller,
            &ExecRequest {
                login: Some(false),
                ..req("mytool")
            },
            Placement::Local,
        )
        .expect("valid");
        assert!(!plan.spec.env.contains_key(marker));
        assert_eq!(plan.spec.command_to_exec(), plan.spec.command());
    }

    #[test]
    fn remote_plans_check_nothing_locally() {
        let placement = Placement::Remote {
            cwd: Some(PathBuf::from("/srv/app")),
            shell: Some("/usr/bin/zsh".into()),
        };
        let r = ExecRequest {
            workdir: Some("no/such/dir/here".into()),
            ..req("make")
        };
        let plan = Plan::new(&config(), &r, placement).expect("valid remotely");
        assert_eq!(plan.spec.cwd, PathBuf::from("/srv/app/no/such/dir/here"));
        assert_eq!(plan.spec.command().0[0], "/usr/bin/zsh");
        assert!(matches!(
            plan.spec.env_mode,
            EnvMode::InheritFiltered { .. }
        ));
        assert_eq!(plan.spec.env[OsStr::new("NO_COLOR")], "1");
        assert!(
            !plan.spec.env.contains_key(OsStr::new("PATH")),
            "the remote keeps its own PATH"
        );
        assert!(!plan
            .spec
            .env
            .contains_key(OsStr::new(crate::env::CALLER_PATH_VAR)));
    }

    #[test]
    fn token_budgets_refuse_negatives_and_cap_the_rest() {
        assert!(token_budget(&config(), Some(-1)).is_err());
        assert_eq!(
            token_budget(&config(), Some(i64::MAX)).expect("capped"),
            10_000
        );
        assert_eq!(token_budget(&config(), Some(0)).expect("zero"), 0);
    }

    #[test]
    fn a_sandbox_is_planned_as_the_layers_it_needs_and_no_sandbox_needs_none() {
        let sandboxed = ExecRequest {
            sandbox: Some(crate::policy::Profile::ReadOnly),
            ..req("ls")
        };
        let plan = Plan::new(&config(), &sandboxed, Placement::Local).expect("planned");
        let sandboxing = plan.sandbox.expect("a sandbox");
        assert!(!sandboxing.layers.is_empty());
        // The door confines it, not the plan.
        assert!(plan.spec.launcher.is_none());
        let plan = Plan::new(&config(), &req("ls"), Placement::Local).expect("unsandboxed");
        assert!(plan.sandbox.is_none());
    }

    #[test]
    fn a_call_cannot_widen_the_servers_sandbox_even_without_a_confinement() {
        let mut strict = config();
        strict.sandbox.profile = crate::policy::Profile::ReadOnly;
        let wider = ExecRequest {
            sandbox: Some(crate::policy::Profile::DangerFullAccess),
            ..req("ls")
        };
        let e = Plan::new(&strict, &wider, Placement::Local)
            .err()
            .expect("a widening");
        assert!(matches!(e, ExecError::Widening(_)), "{e}");
    }
}
