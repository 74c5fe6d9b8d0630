//! What a sandbox costs per command, through the engine (not a test): `exec_command` of
//! `true` (login=false, pipes) unsandboxed, under `read-only`, and under `read-only` with
//! the network off, each with the launcher started ahead (the default) and exec'd per
//! command (`cold_launcher`), interleaved so that machine noise hits every variant; medians
//! of `UEXEC_BENCH_RUNS` (default 300) each, and their ratios to the unsandboxed one. The
//! launcher is `UEXEC_BIN` (default `target/release/uexec-engine`, built first: the engine
//! is its own launcher; the `uexec` front would add an exec);
//! `UEXEC_BENCH_GAP_MS` (default 0: back to back) leaves that long between commands.
//!
//! Run: `cargo build --release -p uexec && cargo bench -p uexec-sandbox --bench sandbox`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use uexec_core::confine::SandboxConfig;
use uexec_core::policy::{Network, Profile};
use uexec_core::{ExecRequest, LocalBackend, SessionStore, StoreConfig};
use uexec_sandbox::{Launcher, Sandbox};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn request(sandbox: Option<Profile>, network: Option<Network>) -> ExecRequest {
    ExecRequest {
        cmd: "true".into(),
        login: Some(false),
        shell: Some("/bin/bash".into()),
        yield_time_ms: Some(10_000),
        sandbox,
        network,
        ..ExecRequest::default()
    }
}

fn store(launcher: PathBuf, cold_launcher: bool) -> Arc<SessionStore> {
    let config = StoreConfig {
        sandbox: SandboxConfig {
            confinement: Some({
                let launcher = Launcher::open(launcher).unwrap();
                if cold_launcher {
                    Sandbox::cold(launcher)
                } else {
                    Sandbox::new(launcher)
                }
            }),
            ..SandboxConfig::default()
        },
        ..StoreConfig::default()
    };
    SessionStore::new(Arc::new(LocalBackend), config)
}

#[tokio::main]
async fn main() {
    let runs: usize = std::env::var("UEXEC_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let launcher = std::env::var_os("UEXEC_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/release/uexec-engine")
        });
    assert!(
        launcher.is_file(),
        "build the launcher first: {}",
        launcher.display()
    );
    // Cold: the launcher exec'd per command, from a copy of the binary (warm launchers are
    // per launcher, process-wide).
    let copy = std::env::temp_dir().join(format!("uexec-bench-cold-{}", std::process::id()));
    std::fs::copy(&launcher, &copy).unwrap();
    let warm = store(launcher.canonicalize().unwrap(), false);
    let cold = store(copy.clone(), true);
    let off = || Some(Network::Off);
    let ro = Some(Profile::ReadOnly);
    type Variant<'a> = (
        &'a str,
        &'a Arc<SessionStore>,
        Option<Profile>,
        Option<Network>,
    );
    let variants: [Variant; 5] = [
        ("unsandboxed", &warm, None, None),
        ("read-only", &warm, ro, None),
        ("read-only, network off", &warm, ro, off()),
        ("read-only, launcher exec'd per command", &cold, ro, None),
        (
            "read-only, network off, exec'd per command",
            &cold,
            ro,
            off(),
        ),
    ];
    // Time left between commands (an agent's commands come seconds apart; back to back, a
    // command may find the launcher started for it still starting).
    let gap = Duration::from_millis(
        std::env::var("UEXEC_BENCH_GAP_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    );
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(runs); variants.len()];
    for round in 0..runs + 10 {
        for (i, (_, store, sandbox, network)) in variants.iter().enumerate() {
            if !gap.is_zero() {
                tokio::time::sleep(gap).await;
            }
            let t = Instant::now();
            let s = store
                .exec_command(request(*sandbox, network.clone()))
                .await
                .unwrap();
            let elapsed = t.elapsed();
            assert_eq!(s.exit_code(), Some(0), "{:?}", s.output);
            if round >= 10 {
                samples[i].push(elapsed); // the first rounds warm the caches
            }
        }
    }
    let _ = std::fs::remove_file(&copy);
    let medians: Vec<Duration> = samples.into_iter().map(median).collect();
    let base = medians[0].as_secs_f64();
    println!(
        "| exec_command `true`, median of {runs}, {} ms apart | ms | x unsandboxed |",
        gap.as_millis()
    );
    println!("|---|---|---|");
    for ((name, ..), m) in variants.iter().zip(&medians) {
        println!(
            "| {name} | {:.2} | {:.2} |",
            m.as_secs_f64() * 1e3,
            m.as_secs_f64() / base
        );
    }
}
