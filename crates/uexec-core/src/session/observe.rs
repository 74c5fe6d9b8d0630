//! A call's window on a session: waits on the lifecycle `watch` and the output mark, each
//! with a deadline, until the window ends, the process is drained, or a wait condition
//! (pattern, idle, prompt) holds. Nothing here polls but the prompt check, whose backoff
//! doubles to at most a second while the output stays quiet.

use std::time::Duration;

use tokio::time::{timeout_at, Instant};

use super::{Lifecycle, Session};

/// A prompt a session waits at ([`Session::prompt`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    /// A terminal reading with echo off: a password. Never typed by a model.
    pub secret: bool,
    /// The last line of output (the question), escapes removed.
    pub line: String,
}
use crate::backend::InputWait;
use crate::events::lock;
use crate::output::text::strip_ansi;
use crate::output::until::{Condition, Matcher, Reason, PROMPT_FIRST_CHECK_MS, PROMPT_QUIET_MS};

/// Ends a call's pattern matching when the call ends (or is dropped).
struct MatcherGuard<'a>(&'a Session);

impl Drop for MatcherGuard<'_> {
    fn drop(&mut self) {
        self.0.mark.send_if_modified(|m| {
            m.matcher = None;
            m.want_output = false;
            false
        });
    }
}

impl Session {
    /// Waits until `done` holds, or until the deadline `deadline_of` gives (`None`: none),
    /// both re-evaluated whenever the lifecycle changes.
    pub(super) async fn wait_until(
        &self,
        done: impl Fn(&Lifecycle) -> bool,
        deadline_of: impl Fn(&Lifecycle) -> Option<Instant>,
    ) {
        let mut rx = self.state.subscribe();
        loop {
            let (finished, deadline) = {
                let s = rx.borrow_and_update();
                (done(&s), deadline_of(&s))
            };
            if finished {
                return;
            }
            let changed = match deadline {
                Some(deadline) if Instant::now() >= deadline => return,
                Some(deadline) => timeout_at(deadline, rx.changed()).await.ok(),
                None => Some(rx.changed().await),
            };
            if !matches!(changed, Some(Ok(()))) {
                return;
            }
        }
    }

    /// Waits up to `grace` for the exit; true when it came.
    pub async fn wait_exited(&self, grace: Duration) -> bool {
        let deadline = Instant::now() + grace;
        self.wait_until(|s| s.exited(), |_| Some(deadline)).await;
        self.lifecycle().exited()
    }

    /// Waits until `deadline`, or earlier once the process has exited and its output closed
    /// (after the exit, at most `close_wait` for the close). Output alone never ends the wait.
    pub async fn observe_until(&self, deadline: Instant, close_wait: Duration) {
        self.wait_until(Lifecycle::drained, |s| {
            Some(match s.exited_at() {
                Some(at) => deadline.min(at + close_wait),
                None => deadline,
            })
        })
        .await;
    }

    /// Like [`Self::observe_until`], but also ends when `condition` holds; says why it ended.
    /// While it runs, the condition's pattern sees every byte of output (pending output from
    /// before the call first).
    pub async fn observe(
        &self,
        deadline: Instant,
        close_wait: Duration,
        condition: Option<&Condition>,
    ) -> Reason {
        let Some(condition) = condition.filter(|c| c.watches_output()) else {
            self.observe_until(deadline, close_wait).await;
            return if self.lifecycle().exited() {
                Reason::Exited
            } else {
                Reason::Window
            };
        };
        let call_start = Instant::now();
        let (start_total, had_pending) = self.install_matcher(condition);
        let _uninstall = MatcherGuard(self);
        let mut lifecycle = self.state.subscribe();
        let mut marks = self.mark.subscribe();
        let mut prompt_seen_total = u64::MAX;
        let mut prompt_backoff = Duration::from_millis(PROMPT_FIRST_CHECK_MS);
        loop {
            let now = Instant::now();
            let mut wake = deadline;
            {
                let s = lifecycle.borrow_and_update();
                if Lifecycle::drained(&s) {
                    return Reason::Exited;
                }
                if let Some(at) = s.exited_at() {
                    if now >= at + close_wait {
                        return Reason::Exited;
                    }
                    wake = wake.min(at + close_wait);
                }
            }
            if now >= deadline {
                return Reason::Window;
            }
            let mut want_output = false;
            {
                let m = marks.borrow_and_update();
                if m.matched.is_some() {
                    return Reason::Matched;
                }
                let has_output = had_pending || m.total > start_total;
                if let Some(idle) = condition.idle {
                    if has_output {
                        let at = m.last_at.unwrap_or(call_start) + idle;
                        if now >= at {
                            return Reason::Idle;
                        }
                        wake = wake.min(at);
                    } else {
                        want_output = true;
                    }
                }
                if condition.prompt {
                    let quiet_since = m.last_at.unwrap_or(self.started_at);
                    if m.total != prompt_seen_total {
                        prompt_seen_total = m.total;
                        prompt_backoff = Duration::from_millis(PROMPT_FIRST_CHECK_MS);
                    }
                    let first = quiet_since + Duration::from_millis(PROMPT_FIRST_CHECK_MS);
                    if now < first {
                        wake = wake.min(first);
                    } else {
                        drop(m);
                        if self.waits_for_input(now - quiet_since) {
                            return Reason::Prompt;
                        }
                        // Input may be awaited later without a byte of output: look again,
                        // less and less often (at most every second), and at the next output.
                        wake = wake.min(now + prompt_backoff);
                        prompt_backoff = (prompt_backoff * 2).min(Duration::from_secs(1));
                        want_output = true;
                    }
                }
            }
            if want_output {
                // Silently: announcing it would wake this very loop.
                self.mark.send_if_modified(|m| {
                    m.want_output = true;
                    false
                });
            }
            tokio::select! {
                changed = lifecycle.changed() => if changed.is_err() { return Reason::Window },
                changed = marks.changed() => if changed.is_err() { return Reason::Window },
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    /// Starts matching the condition's pattern (pending output first); returns the output
    /// total at the start and whether output was pending.
    fn install_matcher(&self, condition: &Condition) -> (u64, bool) {
        let out = lock(&self.output);
        let had_pending = !out.pending.is_empty();
        let start_total = out.total;
        let matcher = condition.regex.clone().map(|regex| {
            let mut matcher = Matcher::new(regex);
            let pending = out.pending.peek();
            let base = out.total - (pending.kept_len() as u64 + pending.omitted_bytes);
            let mut found = matcher.feed(&pending.head, base);
            if found.is_none() && !pending.tail.is_empty() {
                if pending.omitted_bytes > 0 {
                    matcher.gap();
                }
                let tail_at = out.total - pending.tail.len() as u64;
                found = matcher.feed(&pending.tail, tail_at);
            }
            (matcher, found)
        });
        self.mark.send_if_modified(|m| {
            m.want_output = false;
            match matcher {
                Some((matcher, found)) => {
                    m.matcher = Some(matcher);
                    m.matched = found;
                }
                None => {
                    m.matcher = None;
                    m.matched = None;
                }
            }
            false
        });
        drop(out);
        (start_total, had_pending)
    }

    /// The prompt the session waits at now, as `until: {prompt: true}` would see it, and its
    /// last line; `None` while it prints or runs. Takes nothing the next call would get.
    pub fn prompt(&self) -> Option<Prompt> {
        let quiet_since = self.mark.borrow().last_at.unwrap_or(self.started_at);
        let quiet = Instant::now().saturating_duration_since(quiet_since);
        if quiet < Duration::from_millis(PROMPT_FIRST_CHECK_MS) || !self.waits_for_input(quiet) {
            return None;
        }
        let last = lock(&self.output).aggregated.last_bytes(512);
        let text = strip_ansi(&String::from_utf8_lossy(&last));
        let line = text.rsplit('\n').next().unwrap_or("").trim().to_owned();
        Some(Prompt {
            secret: self.awaiting_secret(),
            line,
        })
    }

    /// Whether the session waits for input, after `quiet` without output: a secret prompt;
    /// a process asleep reading its stdin; one in `select`/`poll` (readline, REPLs) after an
    /// unfinished last line (`$ `, `>>> `, `Continue? [y/N] `); where the backend cannot
    /// see its processes, [`PROMPT_QUIET_MS`] of quiet after an unfinished last line.
    fn waits_for_input(&self, quiet: Duration) -> bool {
        if self.awaiting_secret() {
            return true;
        }
        match self.control.input_wait() {
            Some(InputWait::Reading) => return true,
            Some(InputWait::Neither) => return false,
            // Servers poll too: a poller waits for input when it showed a prompt.
            Some(InputWait::Polling) => {}
            None if quiet < Duration::from_millis(PROMPT_QUIET_MS) => return false,
            None => {}
        }
        let last = lock(&self.output).aggregated.last_bytes(512);
        let text = strip_ansi(&String::from_utf8_lossy(&last));
        let line = text.rsplit('\n').next().unwrap_or("");
        !line.trim().is_empty()
    }
}
