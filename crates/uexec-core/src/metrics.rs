//! Figures a person's tools read: counters and histograms that the faces feed, rendered as
//! Prometheus text (the exposition format 0.0.4) with the figures of the moment.
//!
//! Why here: the engine starts and ends every session, whichever face asked, so the counts
//! are kept where that happens and rendered once. A [`Metrics`] is a value the process
//! makes and hands to its stores (`StoreConfig::metrics`) and faces, never a global.
//!
//! No label ever carries a session id, a command line or an owner: those are secrets and
//! unbounded. Labels are the closed sets below (a cause, a state, a call's name).
//!
//! 1. Counters and histograms are atomics: feeding them never blocks a session.
//! 2. What is true now (sessions by state, memory in use, transcript bytes on disk) is
//!    gathered by the face at scrape time into a [`Now`].
//! 3. [`Metrics::render`] writes both, every family with its `HELP` and `TYPE`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::usage::Usage;

/// Why a command could not be started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpawnFailure {
    /// The program or the working directory does not exist.
    NotFound,
    /// The program is not executable.
    PermissionDenied,
    /// The backend cannot be reached (a remote exec server).
    Unavailable,
    /// The policy refused it (a sandbox wider than the server's, a layer missing).
    Refused,
    Other,
}

impl SpawnFailure {
    const ALL: [Self; 5] = [
        Self::NotFound,
        Self::PermissionDenied,
        Self::Unavailable,
        Self::Refused,
        Self::Other,
    ];

    fn label(self) -> &'static str {
        match self {
            Self::NotFound => "not_found",
            Self::PermissionDenied => "permission_denied",
            Self::Unavailable => "unavailable",
            Self::Refused => "refused",
            Self::Other => "other",
        }
    }
}

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCause {
    /// Exit code 0.
    Success,
    /// Another exit code below 128.
    Error,
    /// Killed by a signal (a terminate among them): code 128 + N.
    Signal,
    /// Ended by its hard timeout.
    Timeout,
    /// A policy monitor or its backend failed it.
    Failed,
}

impl ExitCause {
    const ALL: [Self; 5] = [
        Self::Success,
        Self::Error,
        Self::Signal,
        Self::Timeout,
        Self::Failed,
    ];

    /// The cause of an end with this code, failure and timeout.
    pub fn of(exit_code: Option<i32>, failed: bool, timed_out: bool) -> Self {
        match (failed, timed_out, exit_code) {
            (true, _, _) => Self::Failed,
            (false, true, _) => Self::Timeout,
            (false, false, Some(0)) => Self::Success,
            (false, false, Some(code)) if code > 128 => Self::Signal,
            (false, false, _) => Self::Error,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Error => "error",
            Self::Signal => "signal",
            Self::Timeout => "timeout",
            Self::Failed => "failed",
        }
    }
}

/// Bounds of the call-latency buckets, in seconds: a window is 250 ms to 300 s.
const CALL_BUCKETS_S: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];
/// Bounds of the per-session CPU-time buckets, in seconds.
const CPU_BUCKETS_S: [f64; 10] = [0.01, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0, 1800.0, 3600.0];
/// Bounds of the per-session peak-memory buckets, in bytes (1 MiB to 16 GiB).
const MEMORY_BUCKETS_BYTES: [f64; 8] = [
    1048576.0,
    16777216.0,
    67108864.0,
    268435456.0,
    1073741824.0,
    4294967296.0,
    8589934592.0,
    17179869184.0,
];

/// A histogram of fixed buckets; the sum in millionths, so that it stays an atomic.
struct Histogram {
    bounds: &'static [f64],
    /// One per bound, then `+Inf`; each counts its own band (cumulated when rendered).
    bands: Vec<AtomicU64>,
    sum_millionths: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            bands: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_millionths: AtomicU64::new(0),
        }
    }

    fn observe(&self, value: f64) {
        let band = self
            .bounds
            .iter()
            .position(|b| value <= *b)
            .unwrap_or(self.bounds.len());
        if let Some(b) = self.bands.get(band) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        let millionths = (value.max(0.0) * 1e6).round() as u64;
        self.sum_millionths.fetch_add(millionths, Ordering::Relaxed);
    }

    /// The `_bucket`, `_sum` and `_count` lines of `name` with `labels` (`k="v",` each).
    fn write(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulated = 0;
        for (i, band) in self.bands.iter().enumerate() {
            cumulated += band.load(Ordering::Relaxed);
            let le = self
                .bounds
                .get(i)
                .map_or_else(|| "+Inf".to_owned(), |b| b.to_string());
            let _ = writeln!(out, "{name}_bucket{{{labels}le=\"{le}\"}} {cumulated}");
        }
        let sum = self.sum_millionths.load(Ordering::Relaxed) as f64 / 1e6;
        let labels = labels.trim_end_matches(',');
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(out, "{name}_count{{{labels}}} {cumulated}");
    }
}

/// A family's `HELP` and `TYPE` lines.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// What is true at the moment of a scrape, gathered by the face.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Now {
    /// Sessions running (paused ones aside).
    pub running: u64,
    /// Sessions frozen by a pause.
    pub paused: u64,
    /// Sessions that exited and whose exit nobody was told of yet.
    pub exited: u64,
    /// CPU time the live sessions used so far, where sessions have a cgroup.
    pub cpu_seconds: f64,
    /// Memory the live sessions use now, where the memory controller counts it.
    pub memory_bytes: Option<u64>,
    /// Bytes of transcripts on disk; `None`: no transcripts are kept.
    pub transcript_bytes: Option<u64>,
}

/// The counters and histograms of one process.
pub struct Metrics {
    spawns: AtomicU64,
    spawn_failures: [AtomicU64; 5],
    /// The front door's decisions: by the decision (allow, prompt, forbidden), then
    /// admitted or refused.
    decisions: [[AtomicU64; 2]; 3],
    exits: [AtomicU64; 5],
    output_bytes: AtomicU64,
    /// CPU time of the sessions that ended, in microseconds.
    ended_cpu_usec: AtomicU64,
    session_cpu: Histogram,
    session_memory_peak: Histogram,
    calls: Mutex<BTreeMap<&'static str, Histogram>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            spawns: AtomicU64::new(0),
            spawn_failures: Default::default(),
            decisions: Default::default(),
            exits: Default::default(),
            output_bytes: AtomicU64::new(0),
            ended_cpu_usec: AtomicU64::new(0),
            session_cpu: Histogram::new(&CPU_BUCKETS_S),
            session_memory_peak: Histogram::new(&MEMORY_BUCKETS_BYTES),
            calls: Mutex::new(BTreeMap::new()),
        }
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("spawns", &self.spawns.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Metrics {
    /// A command started.
    pub fn spawned(&self) {
        self.spawns.fetch_add(1, Ordering::Relaxed);
    }

    /// A command could not be started.
    pub fn spawn_failed(&self, why: SpawnFailure) {
        if let Some(i) = SpawnFailure::ALL.iter().position(|f| *f == why) {
            self.spawn_failures[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The front door decided a command: `decision` by the rules (and hooks), then
    /// `admitted` or refused (a person's no, no answer, a forbidden rule).
    pub fn decided(&self, decision: crate::policy::rules::Decision, admitted: bool) {
        let row = &self.decisions[decision as usize];
        row[usize::from(!admitted)].fetch_add(1, Ordering::Relaxed);
    }

    /// Bytes a command printed.
    pub fn output(&self, bytes: usize) {
        self.output_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// A session ended, `why`, having used `usage` (where its backend counts it).
    pub fn ended(&self, why: ExitCause, usage: Option<&Usage>) {
        if let Some(i) = ExitCause::ALL.iter().position(|c| *c == why) {
            self.exits[i].fetch_add(1, Ordering::Relaxed);
        }
        if let Some(usage) = usage {
            self.ended_cpu_usec
                .fetch_add(usage.cpu_usec, Ordering::Relaxed);
            self.session_cpu.observe(usage.cpu_seconds());
            if let Some(peak) = usage.memory_peak_bytes {
                self.session_memory_peak.observe(peak as f64);
            }
        }
    }

    /// A call of `name` (a tool, or an exec-server method) took `took`.
    pub fn call(&self, name: &'static str, took: Duration) {
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        calls
            .entry(name)
            .or_insert_with(|| Histogram::new(&CALL_BUCKETS_S))
            .observe(took.as_secs_f64());
    }

    /// Every family, as Prometheus text, with `now`'s figures.
    pub fn render(&self, now: &Now) -> String {
        let mut out = String::new();
        family(
            &mut out,
            "uexec_sessions",
            "gauge",
            "Sessions now, by state (exited: its exit not reported yet).",
        );
        for (state, n) in [
            ("running", now.running),
            ("paused", now.paused),
            ("exited", now.exited),
        ] {
            let _ = writeln!(out, "uexec_sessions{{state=\"{state}\"}} {n}");
        }
        family(
            &mut out,
            "uexec_spawns_total",
            "counter",
            "Commands started.",
        );
        let _ = writeln!(
            out,
            "uexec_spawns_total {}",
            self.spawns.load(Ordering::Relaxed)
        );
        family(
            &mut out,
            "uexec_spawn_failures_total",
            "counter",
            "Commands that could not be started, by cause.",
        );
        for (why, n) in SpawnFailure::ALL.iter().zip(&self.spawn_failures) {
            let _ = writeln!(
                out,
                "uexec_spawn_failures_total{{cause=\"{}\"}} {}",
                why.label(),
                n.load(Ordering::Relaxed)
            );
        }
        family(
            &mut out,
            "uexec_decisions_total",
            "counter",
            "Commands the front door decided, by the rules' decision (allow, prompt: a person was asked, forbidden) and outcome (admitted, refused).",
        );
        for (decision, row) in ["allow", "prompt", "forbidden"].iter().zip(&self.decisions) {
            for (outcome, n) in ["admitted", "refused"].iter().zip(row) {
                let _ = writeln!(
                    out,
                    "uexec_decisions_total{{decision=\"{decision}\",outcome=\"{outcome}\"}} {}",
                    n.load(Ordering::Relaxed)
                );
            }
        }
        family(
            &mut out,
            "uexec_exits_total",
            "counter",
            "Sessions that ended, by cause (success: code 0; error: another code; signal: killed, a terminate among them; timeout: their hard timeout; failed: a policy or the backend failed them).",
        );
        for (why, n) in ExitCause::ALL.iter().zip(&self.exits) {
            let _ = writeln!(
                out,
                "uexec_exits_total{{cause=\"{}\"}} {}",
                why.label(),
                n.load(Ordering::Relaxed)
            );
        }
        family(
            &mut out,
            "uexec_output_bytes_total",
            "counter",
            "Bytes the commands printed.",
        );
        let _ = writeln!(
            out,
            "uexec_output_bytes_total {}",
            self.output_bytes.load(Ordering::Relaxed)
        );
        if let Some(bytes) = now.transcript_bytes {
            family(
                &mut out,
                "uexec_transcript_bytes",
                "gauge",
                "Bytes of transcripts on disk.",
            );
            let _ = writeln!(out, "uexec_transcript_bytes {bytes}");
        }
        family(
            &mut out,
            "uexec_session_cpu_seconds_total",
            "counter",
            "CPU time of the sessions' processes, the live ones' so far and the ended ones' (where sessions have a cgroup).",
        );
        let ended = self.ended_cpu_usec.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(
            out,
            "uexec_session_cpu_seconds_total {}",
            ended + now.cpu_seconds
        );
        if let Some(bytes) = now.memory_bytes {
            family(
                &mut out,
                "uexec_session_memory_bytes",
                "gauge",
                "Memory the live sessions use now (where the memory controller counts it).",
            );
            let _ = writeln!(out, "uexec_session_memory_bytes {bytes}");
        }
        family(
            &mut out,
            "uexec_session_cpu_seconds",
            "histogram",
            "CPU time each ended session used (where sessions have a cgroup).",
        );
        self.session_cpu
            .write(&mut out, "uexec_session_cpu_seconds", "");
        family(
            &mut out,
            "uexec_session_memory_peak_bytes",
            "histogram",
            "The most memory each ended session used at once (where the memory controller counts it).",
        );
        self.session_memory_peak
            .write(&mut out, "uexec_session_memory_peak_bytes", "");
        family(
            &mut out,
            "uexec_call_duration_seconds",
            "histogram",
            "How long calls took, by call (a tool, or an exec-server method).",
        );
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        for (name, histogram) in calls.iter() {
            let labels = format!("call=\"{name}\",");
            histogram.write(&mut out, "uexec_call_duration_seconds", &labels);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_end_is_classified_by_failure_then_timeout_then_code() {
        assert_eq!(ExitCause::of(Some(0), false, false), ExitCause::Success);
        assert_eq!(ExitCause::of(Some(2), false, false), ExitCause::Error);
        assert_eq!(ExitCause::of(Some(137), false, false), ExitCause::Signal);
        assert_eq!(ExitCause::of(Some(124), false, true), ExitCause::Timeout);
        assert_eq!(ExitCause::of(Some(-1), true, false), ExitCause::Failed);
        assert_eq!(ExitCause::of(None, false, false), ExitCause::Error);
    }

    #[test]
    fn histograms_count_cumulatively_with_their_sum() {
        let m = Metrics::default();
        m.call("exec_command", Duration::from_millis(3));
        m.call("exec_command", Duration::from_millis(300));
        m.call("write_stdin", Duration::from_secs(400));
        let text = m.render(&Now::default());
        assert!(
            text.contains(
                "uexec_call_duration_seconds_bucket{call=\"exec_command\",le=\"0.005\"} 1\n"
            ),
            "{text}"
        );
        assert!(text
            .contains("uexec_call_duration_seconds_bucket{call=\"exec_command\",le=\"0.5\"} 2\n"));
        assert!(text
            .contains("uexec_call_duration_seconds_bucket{call=\"exec_command\",le=\"+Inf\"} 2\n"));
        assert!(text.contains("uexec_call_duration_seconds_sum{call=\"exec_command\"} 0.303\n"));
        assert!(text.contains("uexec_call_duration_seconds_count{call=\"write_stdin\"} 1\n"));
        assert!(text
            .contains("uexec_call_duration_seconds_bucket{call=\"write_stdin\",le=\"300\"} 0\n"));
    }

    #[test]
    fn every_family_says_its_help_and_type_and_the_figures_add_up() {
        let m = Metrics::default();
        m.spawned();
        m.spawned();
        m.spawn_failed(SpawnFailure::NotFound);
        m.output(10);
        m.output(5);
        let usage = Usage {
            cpu_usec: 1_500_000,
            memory_peak_bytes: Some(2 << 20),
            ..Usage::default()
        };
        m.ended(ExitCause::Signal, Some(&usage));
        let now = Now {
            running: 1,
            cpu_seconds: 0.5,
            transcript_bytes: Some(4096),
            ..Now::default()
        };
        let text = m.render(&now);
        for line in [
            "uexec_sessions{state=\"running\"} 1",
            "uexec_spawns_total 2",
            "uexec_spawn_failures_total{cause=\"not_found\"} 1",
            "uexec_spawn_failures_total{cause=\"refused\"} 0",
            "uexec_exits_total{cause=\"signal\"} 1",
            "uexec_output_bytes_total 15",
            "uexec_transcript_bytes 4096",
            "uexec_session_cpu_seconds_total 2",
            "uexec_session_cpu_seconds_bucket{le=\"5\"} 1",
            "uexec_session_memory_peak_bytes_bucket{le=\"16777216\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}: {text}");
        }
        // Each sample's family was declared before it.
        let mut declared = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                declared.insert(rest.split(' ').next().unwrap_or("").to_owned());
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap_or("");
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s).filter(|f| declared.contains(*f)))
                    .unwrap_or(name);
                assert!(declared.contains(family), "{line}");
            }
        }
        // No memory figure is invented where none is counted.
        assert!(!text.contains("uexec_session_memory_bytes "), "{text}");
    }
}
