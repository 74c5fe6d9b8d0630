//! The door's cost (not a test): a `true` through the engine with command rules (the 1,000
//! of the judge bench, plus the record of each decision) against the same without rules,
//! the goal being ≤ 1.05×. Timed in pairs, the order alternating from one pair to
//! the next, back to back and each call after a 100 ms pause (an agent's calls come
//! seconds apart); the median of the pairs' differences beside the ratio of medians.
//!
//! Run: `cargo bench -p uexec-rules --bench door` (`UEXEC_BENCH_RUNS`, default 200 pairs;
//! 40 after a pause).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use uexec_core::spawn::{Decided, DecisionLog};
use uexec_core::{ExecRequest, LocalBackend, SessionStore, StoreConfig};
use uexec_rules::{Decision, Rules};

/// 1,000 rules over ten programs, none of them `true`'s (the judge bench's file).
fn rules_file() -> String {
    let mut text = String::new();
    for program in [
        "git", "cargo", "npm", "docker", "kubectl", "make", "ls", "grep", "rm", "python3",
    ] {
        for i in 0..100 {
            let decision = ["allow", "prompt", "forbidden"][i % 3];
            writeln!(
                text,
                "prefix_rule(pattern = [\"{program}\", \"verb{i}\"], decision = \"{decision}\")"
            )
            .unwrap();
        }
    }
    text
}

/// A record kept in memory, bounded: what a face's file would be told.
#[derive(Debug, Default)]
struct Counted(Mutex<u64>);

impl DecisionLog for Counted {
    fn record(&self, decided: Decided) {
        std::hint::black_box(decided);
        *self.0.lock().unwrap() += 1;
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn request() -> ExecRequest {
    ExecRequest {
        cmd: "true".into(),
        login: Some(false),
        shell: Some("/bin/bash".into()),
        yield_time_ms: Some(10_000),
        ..ExecRequest::default()
    }
}

/// `runs` pairs, each call after `pause`: (without, with, median difference in ms).
async fn pairs(
    plain: &Arc<SessionStore>,
    ruled: &Arc<SessionStore>,
    runs: usize,
    pause: Duration,
) -> (Duration, Duration, f64) {
    let (mut without, mut with) = (Vec::new(), Vec::new());
    for i in 0..runs {
        for rules in [i % 2 == 0, i % 2 == 1] {
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            let store = if rules { ruled } else { plain };
            let t = Instant::now();
            let s = store.exec_command(request()).await.unwrap();
            let took = t.elapsed();
            assert_eq!(s.exit_code(), Some(0));
            if rules { &mut with } else { &mut without }.push(took);
        }
    }
    let mut diffs: Vec<f64> = with
        .iter()
        .zip(&without)
        .map(|(w, wo)| (w.as_secs_f64() - wo.as_secs_f64()) * 1e3)
        .collect();
    diffs.sort_by(f64::total_cmp);
    (median(without), median(with), diffs[diffs.len() / 2])
}

#[tokio::main]
async fn main() {
    let runs: usize = std::env::var("UEXEC_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let dir = std::env::temp_dir().join(format!("uexec-door-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bench.rules");
    std::fs::write(&path, rules_file()).unwrap();
    let rules = Rules::load(std::slice::from_ref(&path), Decision::Allow).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let counted = Arc::new(Counted::default());
    let base = StoreConfig {
        shell_snapshots: None,
        ..StoreConfig::default()
    };
    let plain = SessionStore::new(Arc::new(LocalBackend), base.clone());
    let ruled = SessionStore::new(
        Arc::new(LocalBackend),
        StoreConfig {
            rules: Some(Arc::new(rules)),
            decisions: Some(counted.clone()),
            ..base
        },
    );
    // Warm both (the first spawn of a store makes its cgroup tree).
    for _ in 0..20 {
        plain.exec_command(request()).await.unwrap();
        ruled.exec_command(request()).await.unwrap();
    }
    let back = pairs(&plain, &ruled, runs, Duration::ZERO).await;
    let paused = pairs(
        &plain,
        &ruled,
        (runs / 5).max(10),
        Duration::from_millis(100),
    )
    .await;
    assert!(
        *counted.0.lock().unwrap() > 0,
        "the decisions were recorded"
    );
    println!(
        "| benchmark | without rules | with 1,000 rules | ratio | median pair difference | goal |"
    );
    println!("|---|---|---|---|---|---|");
    for (label, (without, with, diff)) in [
        (
            format!("`true` spawn→exit, back to back, {runs} pairs"),
            back,
        ),
        (
            format!(
                "the same, each after a 100 ms pause, {} pairs",
                (runs / 5).max(10)
            ),
            paused,
        ),
    ] {
        println!(
            "| {label} | {:.2} ms | {:.2} ms | {:.2}x | {diff:+.3} ms | <= 1.05x |",
            without.as_secs_f64() * 1e3,
            with.as_secs_f64() * 1e3,
            with.as_secs_f64() / without.as_secs_f64()
        );
    }
}
