//! Sessions that outlive their owner's clients. A store whose owner's clients are all gone
//! may be asked to end its running sessions ([`SessionStore::end_unkept`]: the daemon does
//! so when an agent's last connection closes, after its linger), as a store in the agent's
//! own process would be shut down with it. A person may keep one ([`SessionStore::keep`]:
//! `uexec keep`): a dev server an agent started, wanted after the agent is gone.

use super::SessionStore;
use crate::error::ExecError;
use crate::events::lock;

impl SessionStore {
    /// Marks a stored session kept (`kept`), or no longer kept.
    pub fn keep(&self, session_id: i32, kept: bool) -> Result<(), ExecError> {
        let mut inner = lock(&self.inner);
        let entry = inner
            .sessions
            .get_mut(&session_id)
            .ok_or(ExecError::UnknownProcess(session_id))?;
        entry.kept = kept;
        Ok(())
    }

    /// Ends every running session that is not kept, on behalf of `by` (see
    /// [`Self::terminate_by`]: the owner's next result, should it come back, says so);
    /// returns their ids, in order. Sessions that already exited stay, to be reported.
    pub fn end_unkept(&self, by: &str) -> Vec<i32> {
        let mut ids: Vec<i32> = lock(&self.inner)
            .sessions
            .iter()
            .filter(|(_, e)| !e.kept && !e.session.lifecycle().exited())
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        // One that ended or went meanwhile is not ours to end any more.
        ids.retain(|id| {
            self.stop(*id, by, crate::request::Stopped::ClientGone)
                .is_ok()
        });
        ids
    }
}
