//! Engine benchmarks (not tests): each figure is a ratio against a baseline measured in the
//! same run, on the same machine.
//!
//! 1. overhead: `exec_command` of `true` (login=false, pipes) vs a bare tokio spawn+wait of
//!    the same argv (`bash -c true`), medians of `UEXEC_BENCH_RUNS` (default 200) each, back
//!    to back and each after a pause (`UEXEC_BENCH_PAUSED_RUNS` each); and
//!    the same with transcripts kept (the default of `uexec mcp` and the daemon), interleaved;
//!    and the spawn with its cgroup against without, back to back (`UEXEC_BENCH_RUNS` of
//!    each) and *after a pause* (an agent's calls come seconds apart; the kernel's cgroup
//!    lock is slow to take after an idle spell, issue 41): `UEXEC_BENCH_PAUSED_RUNS`
//!    (default 40) of each, every timed call after `UEXEC_BENCH_PAUSE_MS` (default 100) of
//!    sleep; the two in pairs, the order alternating, and beside the ratio of the medians
//!    the median of the pairs' differences (the load's drift taken out);
//! 2. flood: 1 GiB through a session (`head -c 1G /dev/zero`, polled to its end) vs the
//!    same stream into `cat > /dev/null`; peak RSS of this process afterwards;
//! 3. transcripts: the same flood, and a program's flood (`seq`, ~500 MiB), with every byte
//!    also kept on disk vs not (three interleaved rounds, medians); beside them what keeping
//!    the /dev/zero flood costs any program on this filesystem (`tee FILE` vs `cat`);
//! 4. idle: CPU time this process spends over 10 s while 64 sessions sleep.
//!
//! Run: `cargo bench -p uexec-core --bench engine` (prints a Markdown table);
//! `UEXEC_BENCH_SPAWN_ONLY=1` stops after the spawn rows.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use uexec_core::backend::local::set_session_cgroups;
use uexec_core::{ExecRequest, LocalBackend, SessionStore, StoreConfig, WriteRequest};

const FLOOD_BYTES: u64 = 1 << 30;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let rest = stat.rsplit_once(") ").unwrap().1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat (11 and 12 after the command name).
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10) // USER_HZ = 100 on Linux
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib / 1024.0
}

fn shell() -> String {
    std::env::var("UEXEC_BENCH_SHELL").unwrap_or_else(|_| "/bin/bash".into())
}

fn request(cmd: &str, yield_ms: i64) -> ExecRequest {
    ExecRequest {
        cmd: cmd.into(),
        login: Some(false),
        shell: Some(shell()),
        yield_time_ms: Some(yield_ms),
        ..ExecRequest::default()
    }
}

async fn overhead(
    store: &Arc<SessionStore>,
    kept: &Arc<SessionStore>,
    runs: usize,
    pause: Duration,
) -> (Duration, Duration, Duration) {
    let mut bare = Vec::with_capacity(runs);
    let mut engine = Vec::with_capacity(runs);
    let mut engine_kept = Vec::with_capacity(runs);
    let rest = || async {
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    };
    for _ in 0..runs {
        rest().await;
        let t = Instant::now();
        tokio::process::Command::new(shell())
            .args(["-c", "true"])
            .status()
            .await
            .unwrap();
        bare.push(t.elapsed());
        rest().await;
        let t = Instant::now();
        let s = store.exec_command(request("true", 10_000)).await.unwrap();
        engine.push(t.elapsed());
        assert_eq!(s.exit_code(), Some(0));
        rest().await;
        let t = Instant::now();
        let s = kept.exec_command(request("true", 10_000)).await.unwrap();
        engine_kept.push(t.elapsed());
        assert_eq!(s.exit_code(), Some(0));
    }
    (median(bare), median(engine), median(engine_kept))
}

/// The `true` spawn with its cgroup and without, in pairs (the order alternating from one
/// pair to the next), each timed call after `pause` (none: back to back).
struct Paired {
    with: Duration,
    without: Duration,
    /// The median of the pairs' differences (with minus without), in ms: what the cgroup
    /// costs one call, the load's drift from pair to pair taken out.
    diff_ms: f64,
}

impl Paired {
    fn ratio(&self) -> f64 {
        self.with.as_secs_f64() / self.without.as_secs_f64()
    }
}

async fn cgroup_pairs(store: &Arc<SessionStore>, runs: usize, pause: Duration) -> Paired {
    let mut with = Vec::with_capacity(runs);
    let mut without = Vec::with_capacity(runs);
    for i in 0..runs {
        for cgroup in [i % 2 == 0, i % 2 == 1] {
            set_session_cgroups(cgroup);
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            let t = Instant::now();
            let s = store.exec_command(request("true", 10_000)).await.unwrap();
            let took = t.elapsed();
            assert_eq!(s.exit_code(), Some(0));
            if cgroup { &mut with } else { &mut without }.push(took);
        }
    }
    set_session_cgroups(true);
    let mut diffs: Vec<f64> = with
        .iter()
        .zip(&without)
        .map(|(w, wo)| (w.as_secs_f64() - wo.as_secs_f64()) * 1e3)
        .collect();
    diffs.sort_by(f64::total_cmp);
    Paired {
        with: median(with),
        without: median(without),
        diff_ms: diffs[diffs.len() / 2],
    }
}

/// A flood whose output is known: its command and its size.
struct Flood {
    cmd: String,
    bytes: u64,
}

fn zero_flood() -> Flood {
    Flood {
        cmd: format!("head -c {FLOOD_BYTES} /dev/zero"),
        bytes: FLOOD_BYTES,
    }
}

/// `seq 1 60000000`: the kind of flood a program prints (528 888 897 bytes).
fn seq_flood() -> Flood {
    Flood {
        cmd: "seq 1 60000000".into(),
        bytes: 528_888_897,
    }
}

/// Bytes per second of `flood` piped into `sink` (a shell command reading stdin).
async fn piped_rate(flood: &Flood, sink: &str) -> f64 {
    let t = Instant::now();
    let status = tokio::process::Command::new("/bin/bash")
        .args(["-c", &format!("{} | {sink}", flood.cmd)])
        .status()
        .await
        .unwrap();
    assert!(status.success());
    flood.bytes as f64 / t.elapsed().as_secs_f64()
}

/// Bytes per second of `flood` through a session, polled to its end; and the tokens
/// accounted across the calls.
async fn session_rate(store: &Arc<SessionStore>, flood: &Flood) -> (f64, u64) {
    let t = Instant::now();
    let mut snap = store
        .exec_command(request(&flood.cmd, 30_000))
        .await
        .unwrap();
    let mut tokens = snap.original_token_count;
    while let Some(id) = snap.session_id() {
        snap = store
            .write_stdin(WriteRequest {
                session_id: id,
                yield_time_ms: Some(30_000),
                ..WriteRequest::default()
            })
            .await
            .unwrap();
        tokens += snap.original_token_count;
    }
    assert_eq!(snap.exit_code(), Some(0));
    (flood.bytes as f64 / t.elapsed().as_secs_f64(), tokens)
}

fn median_f64(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn idle(store: &Arc<SessionStore>) -> Duration {
    for _ in 0..64 {
        let s = store.exec_command(request("sleep 60", 250)).await.unwrap();
        assert!(s.session_id().is_some());
    }
    let before = cpu_time();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let spent = cpu_time() - before;
    store.clean_all();
    spent
}

#[tokio::main]
async fn main() {
    let runs: usize = std::env::var("UEXEC_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let store = SessionStore::new(Arc::new(LocalBackend), StoreConfig::default());
    // Every byte kept on disk (a temp dir on the same filesystem) for the `kept` rows.
    let root = std::env::temp_dir().join(format!("uexec-bench-transcripts-{}", std::process::id()));
    let config = StoreConfig {
        transcripts: Some(uexec_core::transcript::TranscriptConfig {
            root: root.clone(),
            session_max_bytes: 4 * FLOOD_BYTES,
            total_max_bytes: 8 * FLOOD_BYTES,
        }),
        ..StoreConfig::default()
    };
    let kept = SessionStore::new(Arc::new(LocalBackend), config);
    // Warm-up: first spawns pay for page faults and lazy runtime setup.
    for _ in 0..10 {
        store.exec_command(request("true", 10_000)).await.unwrap();
        kept.exec_command(request("true", 10_000)).await.unwrap();
    }
    let (bare, engine, engine_kept) = overhead(&store, &kept, runs, Duration::ZERO).await;
    let env_usize = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let paused_runs = env_usize("UEXEC_BENCH_PAUSED_RUNS", 40);
    let pause_ms = env_usize("UEXEC_BENCH_PAUSE_MS", 100);
    let (bare_paused, engine_paused, _) = overhead(
        &store,
        &kept,
        paused_runs,
        Duration::from_millis(pause_ms as u64),
    )
    .await;
    let back_to_back = cgroup_pairs(&store, runs, Duration::ZERO).await;
    let paused = cgroup_pairs(&store, paused_runs, Duration::from_millis(pause_ms as u64)).await;
    let spawn_rows = || {
        println!("| benchmark | baseline | uexec | ratio | goal |");
        println!("|---|---|---|---|---|");
        println!(
            "| `true` spawn→exit, median of {runs} | {:.2} ms (tokio spawn+wait) | {:.2} ms (exec_command) | {:.2}x | <= 1.5x |",
            bare.as_secs_f64() * 1e3,
            engine.as_secs_f64() * 1e3,
            engine.as_secs_f64() / bare.as_secs_f64()
        );
        println!(
            "| the same, each after a {pause_ms} ms pause, median of {paused_runs} | {:.2} ms (tokio spawn+wait) | {:.2} ms (exec_command) | {:.2}x | <= 1.5x |",
            bare_paused.as_secs_f64() * 1e3,
            engine_paused.as_secs_f64() * 1e3,
            engine_paused.as_secs_f64() / bare_paused.as_secs_f64()
        );
        let cgroups = match uexec_core::backend::local::cgroup_status() {
            Ok(root) => format!(
                "its cgroup made, entered and removed (under {})",
                root.display()
            ),
            Err(why) => format!("no cgroup here ({why}): both rows alike"),
        };
        println!(
            "| `true` spawn→exit, {cgroups}, back to back, median of {runs} (paired: {:+.3} ms) | {:.2} ms (without) | {:.2} ms | {:.2}x | <= 1.1x |",
            back_to_back.diff_ms,
            back_to_back.without.as_secs_f64() * 1e3,
            back_to_back.with.as_secs_f64() * 1e3,
            back_to_back.ratio()
        );
        println!(
            "| the same, each after a {pause_ms} ms pause, median of {paused_runs} (paired: {:+.3} ms) | {:.2} ms (without) | {:.2} ms | {:.2}x | <= 1.1x |",
            paused.diff_ms,
            paused.without.as_secs_f64() * 1e3,
            paused.with.as_secs_f64() * 1e3,
            paused.ratio()
        );
    };
    if std::env::var_os("UEXEC_BENCH_SPAWN_ONLY").is_some() {
        spawn_rows();
        return;
    }
    // A first flood for the RSS and the token accounting (the rates come from the rounds).
    let (_, tokens) = session_rate(&store, &zero_flood()).await;
    let rss = peak_rss_mib();
    // The floods again, kept and not, interleaved, and with `tee` into a file beside them.
    let tee_file = std::env::temp_dir().join(format!("uexec-bench-tee-{}", std::process::id()));
    let tee_sink = format!("tee {} > /dev/null", tee_file.display());
    let mut rounds: [Vec<f64>; 6] = Default::default();
    for _ in 0..3 {
        rounds[0].push(session_rate(&store, &zero_flood()).await.0);
        rounds[1].push(session_rate(&kept, &zero_flood()).await.0);
        rounds[2].push(piped_rate(&zero_flood(), "cat > /dev/null").await);
        rounds[3].push(piped_rate(&zero_flood(), &tee_sink).await);
        let _ = std::fs::remove_file(&tee_file);
        rounds[4].push(session_rate(&store, &seq_flood()).await.0);
        rounds[5].push(session_rate(&kept, &seq_flood()).await.0);
    }
    let [zero_plain, zero_kept, cat, tee, seq_plain, seq_kept] = rounds.map(median_f64);
    // Every byte was kept: the sessions' segments hold both floods, three times.
    let kept_bytes: u64 = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .flat_map(|session| std::fs::read_dir(session.path()).unwrap().flatten())
        .filter(|f| f.file_name().to_string_lossy().starts_with("output"))
        .map(|f| f.metadata().unwrap().len())
        .sum();
    eprintln!("(transcripts: {kept_bytes} bytes on disk)");
    // The `true`s printed nothing, so they add no byte.
    assert_eq!(kept_bytes, 3 * (zero_flood().bytes + seq_flood().bytes));
    let _ = std::fs::remove_dir_all(&root);
    let idle_cpu = idle(&store).await;
    let mib = |r: f64| r / (1024.0 * 1024.0);
    spawn_rows();
    println!(
        "| `true` spawn→exit, transcripts kept, median of {runs} | {:.2} ms (tokio spawn+wait) | {:.2} ms (exec_command) | {:.2}x | <= 1.5x |",
        bare.as_secs_f64() * 1e3,
        engine_kept.as_secs_f64() * 1e3,
        engine_kept.as_secs_f64() / bare.as_secs_f64()
    );
    println!(
        "| 1 GiB pipe flood (median of 3) | {:.0} MiB/s (`cat > /dev/null`) | {:.0} MiB/s (session, polled) | {:.2}x | >= 0.5x |",
        mib(cat),
        mib(zero_plain),
        zero_plain / cat
    );
    println!(
        "| `seq 1 60000000` (504 MiB), every byte also in the transcript (median of 3) | {:.0} MiB/s (session, no transcript) | {:.0} MiB/s | {:.2}x | >= 0.9x |",
        mib(seq_plain),
        mib(seq_kept),
        seq_kept / seq_plain
    );
    println!(
        "| 1 GiB /dev/zero flood, every byte also in the transcript (median of 3) | {:.0} MiB/s (session, no transcript) | {:.0} MiB/s | {:.2}x | >= 0.9x |",
        mib(zero_plain),
        mib(zero_kept),
        zero_kept / zero_plain
    );
    println!(
        "| the same flood kept by `tee FILE` on this filesystem (median of 3) | {:.0} MiB/s (`cat > /dev/null`) | {:.0} MiB/s (`tee FILE > /dev/null`) | {:.2}x | (the disk's ceiling) |",
        mib(cat),
        mib(tee),
        tee / cat
    );
    println!("| peak RSS after the flood | | {rss:.1} MiB | | < 64 MiB |");
    println!(
        "| CPU over 10 s with 64 idle sessions | | {} ms | | ~0 (no polling) |",
        idle_cpu.as_millis()
    );
    eprintln!(
        "(flood: {tokens} tokens accounted across the calls, {} expected)",
        FLOOD_BYTES.div_ceil(4)
    );
}
