//! Judging benchmark (not a test): a 10-part script against 1,000 rules, the figure the
//! issue sets (≤ 50 µs). Each sample is the median of `UEXEC_BENCH_RUNS` (default 2,000)
//! judgements after 200 to warm up; also shown: a one-command script, and the load.
//!
//! Run: `cargo bench -p uexec-rules --bench judge`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use uexec_rules::{CommandRules, Decision, Rules};

const PROGRAMS: &[&str] = &[
    "git", "cargo", "npm", "docker", "kubectl", "make", "ls", "grep", "rm", "python3",
];

/// 1,000 rules: 10 programs x 100 patterns, every decision, one in ten with alternatives.
fn rules_file() -> String {
    let mut text = String::new();
    for program in PROGRAMS {
        for i in 0..100 {
            let decision = ["allow", "prompt", "forbidden"][i % 3];
            if i % 10 == 0 {
                writeln!(
                    text,
                    "prefix_rule(pattern = [\"{program}\", [\"verb{i}\", \"alt{i}\"], \"--flag{i}\"], decision = \"{decision}\", justification = \"rule {i}\")"
                )
                .unwrap();
            } else {
                writeln!(
                    text,
                    "prefix_rule(pattern = [\"{program}\", \"verb{i}\"], decision = \"{decision}\")"
                )
                .unwrap();
            }
        }
    }
    text
}

const SCRIPT: &str = "cd src && git verb3 --stat; ls -la | grep verb7 foo; \
cargo verb12 -p x 2>&1 | tail -5; timeout 5 npm verb40 --flag40 && echo done; \
bash -c 'git verb5' || make verb9";

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let runs: usize = std::env::var("UEXEC_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let dir = std::env::temp_dir().join(format!("uexec-rules-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bench.rules");
    std::fs::write(&path, rules_file()).unwrap();

    let started = Instant::now();
    let rules = Rules::load(std::slice::from_ref(&path), Decision::Prompt).unwrap();
    let load = started.elapsed();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(rules.len(), 1000);

    let verdict = rules.judge(SCRIPT, "bash");
    assert_eq!(verdict.parts.len(), 10, "{verdict:#?}");

    let time = |script: &str| {
        for _ in 0..200 {
            std::hint::black_box(rules.judge(script, "bash"));
        }
        median(
            (0..runs)
                .map(|_| {
                    let t = Instant::now();
                    std::hint::black_box(rules.judge(std::hint::black_box(script), "bash"));
                    t.elapsed()
                })
                .collect(),
        )
    };
    let ten = time(SCRIPT);
    let no_rules = Rules::load(&[], Decision::Prompt).unwrap();
    for _ in 0..200 {
        std::hint::black_box(no_rules.judge(SCRIPT, "bash"));
    }
    let split_only = median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(no_rules.judge(std::hint::black_box(SCRIPT), "bash"));
                t.elapsed()
            })
            .collect(),
    );
    let one = time("git verb3 --stat");
    println!("| what | median |");
    println!("| --- | --- |");
    println!(
        "| judge a 10-part script, {} rules | {:.1} µs (goal ≤ 50 µs) |",
        rules.len(),
        ten.as_secs_f64() * 1e6
    );
    println!(
        "| the same script with no rule (the shell parser's share) | {:.1} µs |",
        split_only.as_secs_f64() * 1e6
    );
    println!(
        "| judge a 1-part script, same rules | {:.1} µs |",
        one.as_secs_f64() * 1e6
    );
    println!(
        "| load the 1,000-rule .rules file (once) | {:.1} ms |",
        load.as_secs_f64() * 1e3
    );
}
