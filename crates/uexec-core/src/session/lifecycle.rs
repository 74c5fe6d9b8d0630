//! What is known about a session's process, as one value with pure transitions.
//!
//! Why a value, and why pure:
//! 1. five actors learn things about a process: its pump (the exit report, the close of the
//!    output), a terminate, the hard timeout, its policy monitors and the End's settling;
//! 2. every wait of the engine (a call's window, the End, a monitor) is a wait on this one
//!    value, held in a `watch`: each transition says whether anything changed, so waiters
//!    wake on change and only then;
//! 3. so the rules (which failure wins, when the exit can be reported, what the outcome
//!    says) live here, beside their unit tests, with no process, task or clock of their own.
//!
//! The facts are independent and arrive in any order. [`Exit`] is the truth about the
//! process; the call timeline (which call reports the exit to the model) is not part of it
//! and lives beside it ([`super::Calls`]), since nobody waits on it.

use tokio::time::Instant;

use crate::backend::{Ending, ExitReport, Usage};
use crate::limits::TIMEOUT_EXIT_CODE;

/// The process timeline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Exit {
    #[default]
    Running,
    /// Known gone since `at` (killed, or its backend no longer knows it); the backend's own
    /// report may still come.
    Gone { at: Instant },
    /// The backend reported the exit; `at` is when the process was first known gone.
    Reported { at: Instant, code: Option<i32> },
}

/// How a process ended, as every call and the End report it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub exit_code: Option<i32>,
    pub failure: Option<String>,
    /// Killed by the hard timeout (the exit code is then [`TIMEOUT_EXIT_CODE`]).
    pub timed_out_ms: Option<u64>,
    /// Verdicts recorded without terminating: the process ran on to its own exit, and the
    /// End is failed all the same.
    pub verdicts: Vec<String>,
    /// What its processes used, as its backend counted them when the outcome was fixed.
    pub usage: Option<Usage>,
    /// What the command left running at its exit (then killed) and the limits its
    /// processes ran into, where its backend can tell.
    pub ending: Ending,
}

/// Everything that changes about a session's process, in one value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Lifecycle {
    exit: Exit,
    output_closed: bool,
    /// The first failure recorded (a monitor's, a backend's); later ones are dropped.
    failure: Option<String>,
    /// The hard timeout (`timeout_ms`) fired: the group got SIGTERM, then SIGKILL.
    timed_out_ms: Option<u64>,
    /// Policy monitors still watching (SPEC §7).
    monitors_running: usize,
    /// Verdicts a monitor recorded without terminating, in order, and how many of them a
    /// snapshot has reported.
    verdicts: Vec<String>,
    verdicts_reported: usize,
    /// What a monitor told the command's next result, in order (at most [`MAX_NOTICES`]
    /// waiting, the rest only counted).
    notices: Vec<String>,
    notices_dropped: u64,
    /// Fixed once, when the exit is first reported, so a call and the End never disagree.
    outcome: Option<Outcome>,
}

/// Notices a session keeps for its results; past them, they are counted.
pub const MAX_NOTICES: usize = 64;

impl Lifecycle {
    /// A running process watched by `monitors` policy monitors.
    pub fn new(monitors: usize) -> Self {
        Self {
            monitors_running: monitors,
            ..Self::default()
        }
    }

    /// The process is gone (the truth; its exit code may stay unknown).
    pub fn exited(&self) -> bool {
        self.exited_at().is_some()
    }

    /// When the process was first known gone.
    pub fn exited_at(&self) -> Option<Instant> {
        match self.exit {
            Exit::Running => None,
            Exit::Gone { at } | Exit::Reported { at, .. } => Some(at),
        }
    }

    /// Exited, its output closed and its exit report in: nothing more will come.
    pub fn drained(&self) -> bool {
        matches!(self.exit, Exit::Reported { .. }) && self.output_closed
    }

    /// Every policy monitor has said what it had to say.
    pub fn monitors_settled(&self) -> bool {
        self.monitors_running == 0
    }

    /// The outcome, once fixed ([`Self::fix_outcome`]).
    pub fn outcome(&self) -> Option<&Outcome> {
        self.outcome.as_ref()
    }

    /// The exit code as known now, for people: the outcome's once fixed, else what the
    /// outcome would say (the timeout's code, or the exit report's).
    pub fn exit_code(&self) -> Option<i32> {
        if let Some(outcome) = &self.outcome {
            return outcome.exit_code;
        }
        match self.exit {
            Exit::Running => None,
            _ if self.timed_out_ms.is_some() => Some(TIMEOUT_EXIT_CODE),
            Exit::Reported { code, .. } => code,
            Exit::Gone { .. } => None,
        }
    }

    /// The failure recorded, if any (the first one).
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    /// The backend's exit report arrived: the process is gone (since now, unless it was
    /// known gone before), with the report's code; its failure counts unless one came first.
    pub fn exit_reported(&mut self, report: ExitReport, now: Instant) -> bool {
        let at = self.exited_at().unwrap_or(now);
        let code = match self.exit {
            Exit::Reported { code, .. } => code.or(report.exit_code),
            _ => report.exit_code,
        };
        self.exit = Exit::Reported { at, code };
        if let Some(failure) = report.failure {
            self.fail(failure);
        }
        true
    }

    /// The process is known gone now, its report not (yet) in: a kill, a backend that no
    /// longer knows it. No change once it is known gone.
    pub fn gone(&mut self, now: Instant) -> bool {
        if self.exited() {
            return false;
        }
        self.exit = Exit::Gone { at: now };
        true
    }

    /// The output reached its end.
    pub fn output_closed(&mut self) -> bool {
        !std::mem::replace(&mut self.output_closed, true)
    }

    /// Records a failure; the first one wins.
    pub fn fail(&mut self, message: String) -> bool {
        if self.failure.is_some() {
            return false;
        }
        self.failure = Some(message);
        true
    }

    /// The hard timeout of `ms` fired (the first time counts).
    pub fn timed_out(&mut self, ms: u64) -> bool {
        if self.timed_out_ms.is_some() {
            return false;
        }
        self.timed_out_ms = Some(ms);
        true
    }

    /// One monitor finished watching.
    pub fn monitor_done(&mut self) -> bool {
        let before = self.monitors_running;
        self.monitors_running = before.saturating_sub(1);
        before != self.monitors_running
    }

    /// A monitor's verdict, recorded without terminating.
    pub fn record_verdict(&mut self, message: String) -> bool {
        self.verdicts.push(message);
        true
    }

    /// A monitor's notice for the next result (the process runs on, its outcome unchanged).
    pub fn notice(&mut self, message: String) -> bool {
        if self.notices.len() < MAX_NOTICES {
            self.notices.push(message);
        } else {
            self.notices_dropped += 1;
        }
        true
    }

    /// The notices recorded since the last call (each returned once), and a line for those
    /// past [`MAX_NOTICES`].
    pub fn take_new_notices(&mut self) -> Vec<String> {
        let mut new = std::mem::take(&mut self.notices);
        if self.notices_dropped > 0 {
            new.push(format!(
                "… and {} more (the first {MAX_NOTICES} are shown)",
                std::mem::take(&mut self.notices_dropped)
            ));
        }
        new
    }

    /// The verdicts recorded since the last call (each is returned once). Nobody waits on
    /// this: it is no change to announce.
    pub fn take_new_verdicts(&mut self) -> Vec<String> {
        let new = self.verdicts[self.verdicts_reported..].to_vec();
        self.verdicts_reported = self.verdicts.len();
        new
    }

    /// Fixes the outcome from what is known now (and the backend's figures `usage` and
    /// `ending`), unless it already was; true when this call fixed it.
    pub fn fix_outcome(&mut self, usage: Option<Usage>, ending: Ending) -> bool {
        if self.outcome.is_some() {
            return false;
        }
        let code = match self.exit {
            Exit::Reported { code, .. } => code,
            _ => None,
        };
        self.outcome = Some(Outcome {
            exit_code: if self.timed_out_ms.is_some() {
                Some(TIMEOUT_EXIT_CODE)
            } else {
                code
            },
            failure: self.failure.clone(),
            timed_out_ms: self.timed_out_ms,
            verdicts: self.verdicts.clone(),
            usage,
            ending,
        });
        true
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn report(code: Option<i32>, failure: Option<&str>) -> ExitReport {
        ExitReport {
            exit_code: code,
            failure: failure.map(str::to_owned),
        }
    }

    fn fixed(mut l: Lifecycle) -> Outcome {
        l.fix_outcome(None, Ending::default());
        l.outcome().cloned().unwrap_or_default()
    }

    #[test]
    fn a_new_process_runs_and_nothing_is_known_of_its_end() {
        let l = Lifecycle::new(1);
        assert!(!l.exited());
        assert!(!l.drained());
        assert!(!l.monitors_settled());
        assert_eq!(l.outcome(), None);
    }

    #[test]
    fn the_exit_report_marks_the_process_gone_with_its_code() {
        let mut l = Lifecycle::new(0);
        let now = Instant::now();
        assert!(l.exit_reported(report(Some(3), None), now));
        assert_eq!(l.exited_at(), Some(now));
        assert_eq!(fixed(l).exit_code, Some(3));
    }

    #[test]
    fn a_report_after_a_kill_keeps_the_time_of_the_kill_and_takes_the_code() {
        let mut l = Lifecycle::new(0);
        let killed = Instant::now();
        assert!(l.gone(killed));
        l.exit_reported(report(Some(137), None), killed + Duration::from_secs(1));
        assert_eq!(l.exited_at(), Some(killed));
        assert_eq!(fixed(l).exit_code, Some(137));
    }

    #[test]
    fn a_kill_after_the_report_changes_nothing() {
        let mut l = Lifecycle::new(0);
        let now = Instant::now();
        l.exit_reported(report(Some(0), None), now);
        let before = l.clone();
        assert!(!l.gone(now + Duration::from_secs(1)));
        assert_eq!(l, before);
    }

    #[test]
    fn the_code_people_see_before_the_outcome_is_fixed_is_the_one_it_will_say() {
        let mut l = Lifecycle::new(0);
        assert_eq!(l.exit_code(), None, "running");
        l.gone(Instant::now());
        assert_eq!(l.exit_code(), None, "gone, no report yet");
        l.exit_reported(report(Some(137), None), Instant::now());
        assert_eq!(l.exit_code(), Some(137));
        let mut timed = Lifecycle::new(0);
        timed.timed_out(300);
        timed.exit_reported(report(Some(143), None), Instant::now());
        assert_eq!(timed.exit_code(), Some(TIMEOUT_EXIT_CODE));
        assert_eq!(timed.exit_code(), fixed(timed.clone()).exit_code);
    }

    #[test]
    fn a_process_known_gone_without_its_report_has_no_code() {
        let mut l = Lifecycle::new(0);
        l.gone(Instant::now());
        assert!(l.exited());
        assert!(!l.drained(), "the report may still come");
        assert_eq!(fixed(l).exit_code, None);
    }

    #[test]
    fn drained_needs_the_report_and_the_close_in_either_order() {
        let now = Instant::now();
        let mut a = Lifecycle::new(0);
        a.output_closed();
        assert!(!a.drained());
        a.exit_reported(report(Some(0), None), now);
        assert!(a.drained());

        let mut b = Lifecycle::new(0);
        b.exit_reported(report(Some(0), None), now);
        assert!(!b.drained());
        assert!(b.output_closed());
        assert!(!b.output_closed(), "a second close is no change");
        assert!(b.drained());
    }

    #[test]
    fn the_first_failure_wins_over_the_backends() {
        let mut l = Lifecycle::new(0);
        assert!(l.fail("denied by policy".into()));
        assert!(!l.fail("second".into()));
        l.exit_reported(report(Some(1), Some("connection lost")), Instant::now());
        assert_eq!(fixed(l).failure.as_deref(), Some("denied by policy"));
    }

    #[test]
    fn a_backend_failure_counts_when_none_came_first() {
        let mut l = Lifecycle::new(0);
        l.exit_reported(report(None, Some("connection lost")), Instant::now());
        assert_eq!(fixed(l).failure.as_deref(), Some("connection lost"));
    }

    #[test]
    fn a_timed_out_process_reports_the_timeout_code_whatever_it_exited_with() {
        let mut l = Lifecycle::new(0);
        assert!(l.timed_out(500));
        assert!(!l.timed_out(900), "the first timeout counts");
        l.exit_reported(report(Some(143), None), Instant::now());
        let outcome = fixed(l);
        assert_eq!(outcome.exit_code, Some(TIMEOUT_EXIT_CODE));
        assert_eq!(outcome.timed_out_ms, Some(500));
    }

    #[test]
    fn the_outcome_is_fixed_once_and_later_facts_do_not_change_it() {
        let mut l = Lifecycle::new(1);
        l.exit_reported(report(Some(0), None), Instant::now());
        assert!(l.fix_outcome(None, Ending::default()));
        l.record_verdict("late".into());
        l.fail("late failure".into());
        assert!(!l.fix_outcome(None, Ending::default()));
        let outcome = l.outcome().cloned().unwrap_or_default();
        assert_eq!(outcome.exit_code, Some(0));
        assert_eq!(outcome.failure, None);
        assert!(outcome.verdicts.is_empty());
    }

    #[test]
    fn each_verdict_is_taken_once_and_all_of_them_reach_the_outcome() {
        let mut l = Lifecycle::new(1);
        l.record_verdict("a".into());
        assert_eq!(l.take_new_verdicts(), vec!["a".to_owned()]);
        assert!(l.take_new_verdicts().is_empty());
        l.record_verdict("b".into());
        assert_eq!(l.take_new_verdicts(), vec!["b".to_owned()]);
        assert_eq!(fixed(l).verdicts, vec!["a".to_owned(), "b".to_owned()]);
    }

    #[test]
    fn notices_are_taken_once_and_those_past_the_bound_are_counted() {
        let mut l = Lifecycle::new(1);
        for i in 0..MAX_NOTICES + 3 {
            l.notice(format!("n{i}"));
        }
        let taken = l.take_new_notices();
        assert_eq!(taken.len(), MAX_NOTICES + 1);
        assert_eq!(taken[0], "n0");
        assert_eq!(
            taken[MAX_NOTICES],
            format!("… and 3 more (the first {MAX_NOTICES} are shown)")
        );
        assert!(l.take_new_notices().is_empty());
        // Taken, they make room for the next ones.
        l.notice("later".into());
        assert_eq!(l.take_new_notices(), vec!["later".to_owned()]);
    }

    #[test]
    fn monitors_settle_when_the_last_is_done_and_never_below_zero() {
        let mut l = Lifecycle::new(2);
        assert!(l.monitor_done());
        assert!(!l.monitors_settled());
        assert!(l.monitor_done());
        assert!(l.monitors_settled());
        assert!(!l.monitor_done(), "no change below zero");
    }
}
