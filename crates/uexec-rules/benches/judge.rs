//! Judging benchmark (not a test): a 10-part script against 1,000 rules, the figure the
//! issue sets (≤ 50 µs): the best of five rounds, each the median of `UEXEC_BENCH_RUNS`
//! (default 2,000) judgements after 200 to warm up; also shown: the same script with no
//! rule (what the shell parser takes), a one-command script, the same command as an exec's
//! words (`judge_words`: what `--rules-at exec` asks at every exec, no script parsed), and
//! loading the file.
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

    // The machine is shared (2 cores, other builds): five interleaved rounds, each the
    // median of `runs` judgements; the best round is the figure (the least disturbed), the
    // median round beside it.
    let no_rules = Rules::load(&[], Decision::Prompt).unwrap();
    let time = |rules: &Rules, script: &str| {
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
    let exec: Vec<String> = ["git", "verb3", "--stat"].map(str::to_owned).to_vec();
    let time_words = |rules: &Rules| {
        for _ in 0..200 {
            std::hint::black_box(rules.judge_words(&exec));
        }
        median(
            (0..runs)
                .map(|_| {
                    let t = Instant::now();
                    std::hint::black_box(rules.judge_words(std::hint::black_box(&exec)));
                    t.elapsed()
                })
                .collect(),
        )
    };
    let (mut ten, mut split_only, mut one, mut words) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        ten.push(time(&rules, SCRIPT));
        split_only.push(time(&no_rules, SCRIPT));
        one.push(time(&rules, "git verb3 --stat"));
        words.push(time_words(&rules));
    }
    let show = |mut rounds: Vec<Duration>| {
        rounds.sort();
        format!(
            "{:.1} µs (median round {:.1} µs)",
            rounds[0].as_secs_f64() * 1e6,
            rounds[rounds.len() / 2].as_secs_f64() * 1e6
        )
    };
    println!("| what | median of {runs}, best of 5 rounds |");
    println!("| --- | --- |");
    println!(
        "| judge a 10-part script, {} rules (goal ≤ 50 µs) | {} |",
        rules.len(),
        show(ten)
    );
    println!(
        "| the same script, no rule (the shell parser's share) | {} |",
        show(split_only)
    );
    println!("| judge a 1-part script, same rules | {} |", show(one));
    println!(
        "| judge the same command as an exec's words, same rules | {} |",
        show(words)
    );
    println!(
        "| load the 1,000-rule .rules file (once) | {:.1} ms |",
        load.as_secs_f64() * 1e3
    );
}
