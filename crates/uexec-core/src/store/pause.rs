//! Pause and resume (`uexec pause`, `uexec resume`): a running session's processes frozen
//! at once, every descendant with them, and thawed later, where its backend can (a cgroup
//! per session). A paused session stays running as far as its lifecycle goes: its hard
//! timeout, a terminate and a sweep still reach it.

use super::SessionStore;
use crate::error::ExecError;

impl SessionStore {
    /// Freezes (`frozen`) or thaws a running session, returning once its backend says it
    /// is done.
    pub async fn pause(&self, session_id: i32, frozen: bool) -> Result<(), ExecError> {
        let session = self
            .touch(session_id)
            .ok_or(ExecError::UnknownProcess(session_id))?;
        let refused = |message: String| ExecError::Pause {
            session_id,
            frozen,
            message,
        };
        if session.lifecycle().exited() {
            return Err(refused("it has exited".to_owned()));
        }
        session
            .control()
            .pause(frozen)
            .await
            .map_err(|e| refused(e.message))
    }
}
