//! Waiting on sessions without writing: the `wait` tool over several sessions at once, and
//! a person's wait for an exit that leaves the output and the exit report to the owner.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::SessionStore;
use crate::config::StoreConfig;
use crate::error::ExecError;
use crate::limits::{
    MAX_EMPTY_POLL_YIELD_TIME_MS, MAX_WAIT_SESSIONS, MIN_YIELD_TIME_MS, POST_EXIT_CLOSE_WAIT_MS,
};
use crate::output::snapshot::Snapshot;
use crate::output::until::{Condition, Reason};
use crate::request::WaitRequest;
use crate::session::Session;
use crate::spawn as plan;

impl SessionStore {
    /// Waits on several sessions at once (the `wait` tool): returns when the first of them
    /// (or, with `all`, every one) exits or meets `until`, or when the window ends; then
    /// one snapshot per session, in the order asked. Nothing is checked lazily: a bad or
    /// unknown id fails the call before any session is touched.
    pub async fn wait(
        self: &Arc<Self>,
        req: WaitRequest,
    ) -> Result<Vec<(i32, Result<Snapshot, ExecError>)>, ExecError> {
        self.wait_for(&self.config, req).await
    }

    /// [`Self::wait`] with a caller's defaults (token budget): see
    /// [`Self::exec_command_for`].
    pub async fn wait_for(
        self: &Arc<Self>,
        caller: &StoreConfig,
        req: WaitRequest,
    ) -> Result<Vec<(i32, Result<Snapshot, ExecError>)>, ExecError> {
        if req.session_ids.is_empty() {
            return Err(ExecError::invalid(
                "session_ids",
                "give at least one session id",
            ));
        }
        if req.session_ids.len() > MAX_WAIT_SESSIONS {
            return Err(ExecError::invalid(
                "session_ids",
                format!(
                    "{} ids is more than the {MAX_WAIT_SESSIONS} one call may wait on",
                    req.session_ids.len()
                ),
            ));
        }
        let mut seen = HashSet::new();
        if let Some(dup) = req.session_ids.iter().find(|id| !seen.insert(**id)) {
            return Err(ExecError::invalid(
                "session_ids",
                format!("{dup} is listed twice"),
            ));
        }
        let condition = req.until.as_ref().map(Condition::new).transpose()?;
        let max_output_tokens = plan::token_budget(caller, req.max_output_tokens)?;
        let window_ms = req
            .yield_time_ms
            .map_or(crate::limits::DEFAULT_WAIT_YIELD_TIME_MS, |ms| {
                (ms.max(0) as u64).clamp(MIN_YIELD_TIME_MS, MAX_EMPTY_POLL_YIELD_TIME_MS)
            });
        let mut sessions = Vec::with_capacity(req.session_ids.len());
        for &id in &req.session_ids {
            sessions.push(self.touch(id).ok_or(ExecError::UnknownProcess(id))?);
        }
        // Locks in id order: two waits on overlapping sets cannot deadlock.
        let mut order: Vec<usize> = (0..sessions.len()).collect();
        order.sort_by_key(|&i| sessions[i].id());
        let mut guards = Vec::with_capacity(sessions.len());
        for &i in &order {
            guards.push(sessions[i].interaction.lock().await);
        }
        let window_start = Instant::now();
        let deadline = window_start + Duration::from_millis(window_ms);
        let close_wait = Duration::from_millis(POST_EXIT_CLOSE_WAIT_MS);
        let live: Vec<&Arc<Session>> = sessions.iter().filter(|s| !s.reported()).collect();
        let mut reasons: HashMap<i32, Reason> = HashMap::new();
        if !live.is_empty() {
            let observations = live.iter().map(|s| {
                let condition = condition.as_ref();
                Box::pin(async move { (s.id(), s.observe(deadline, close_wait, condition).await) })
            });
            if req.all {
                for (id, reason) in futures::future::join_all(observations).await {
                    reasons.insert(id, reason);
                }
            } else {
                let ((id, reason), _, _) = futures::future::select_all(observations).await;
                reasons.insert(id, reason);
            }
        }
        let mut results = Vec::with_capacity(sessions.len());
        for session in &sessions {
            let id = session.id();
            if session.reported() {
                results.push((id, Err(ExecError::UnknownProcess(id))));
                continue;
            }
            let reason = reasons.get(&id).copied().unwrap_or_else(|| {
                if session.lifecycle().exited() {
                    Reason::Exited
                } else if session.matched().is_some() {
                    Reason::Matched
                } else {
                    Reason::Window
                }
            });
            let hygiene = session.info.hygiene;
            let snapshot = self
                .conclude(session, window_start, max_output_tokens, hygiene, reason)
                .await;
            results.push((id, snapshot));
        }
        drop(guards);
        Ok(results)
    }

    /// Waits (up to `limit`) for a session's exit without taking its output or its exit
    /// report (people: the owner's next call still gets both). `None` when it still runs.
    /// A session gone from the store whose end is remembered (its exit was reported, or it
    /// was terminated: `uexec ls -a` lists it) gives that end, every time it is asked.
    pub async fn await_exit(
        &self,
        id: i32,
        limit: Duration,
    ) -> Result<Option<crate::session::Outcome>, ExecError> {
        let Some(session) = self.touch(id) else {
            let end = self
                .ended_outcome(id, limit)
                .await
                .ok_or(ExecError::UnknownProcess(id))?;
            return Ok(Some(end));
        };
        if !session.wait_exited(limit).await {
            return Ok(None);
        }
        Ok(Some(
            session
                .settle(Duration::from_millis(POST_EXIT_CLOSE_WAIT_MS))
                .await,
        ))
    }
}
