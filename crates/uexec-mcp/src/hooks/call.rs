//! One `exec_command` call's hooks: its PreToolUse stage for the door, the follower of its
//! PostToolUse, and what either says for its result.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use uexec_core::SessionStore;

use super::failure::Failure;
use super::post::{self, PostToolUse, Returned, Watch};
use super::pre::{tool_input, PreToolUse};
use super::{Event, Hooks};
use crate::tools::parse::Dialect;

/// The hooks of one call (made before it runs; see the module doc of [`super`]).
pub struct CallHooks {
    pre: Option<Arc<PreToolUse>>,
    post: Option<Watch>,
    failure: Option<Failure>,
    /// The PermissionRequest hooks, and the call's input and id they are given.
    permission: Vec<super::HookCommand>,
    input: Value,
    call_id: String,
    dir: std::path::PathBuf,
    notes: Arc<Mutex<Vec<String>>>,
}

impl CallHooks {
    /// The hooks of a call of `exec_command` with `arguments` into `store`; hooks run in
    /// `dir`. The PostToolUse follower is subscribed here, before anything can run.
    pub fn new(
        hooks: &Hooks,
        store: &Arc<SessionStore>,
        arguments: Option<&Map<String, Value>>,
        call_id: &str,
        dialect: Dialect,
        dir: &Path,
    ) -> Self {
        let arguments = arguments.cloned().unwrap_or_default();
        let notes = Arc::new(Mutex::new(Vec::new()));
        let pre = hooks.matching(Event::PreToolUse);
        let pre = (!pre.is_empty()).then(|| {
            Arc::new(PreToolUse {
                hooks: pre,
                arguments: arguments.clone(),
                call_id: call_id.to_owned(),
                dialect,
                dir: dir.to_path_buf(),
                notes: notes.clone(),
            })
        });
        let post = hooks.matching(Event::PostToolUse);
        let post = (!post.is_empty()).then(|| {
            post::watch(
                store,
                PostToolUse {
                    hooks: post,
                    input: tool_input(&arguments),
                    call_id: call_id.to_owned(),
                    dir: dir.to_path_buf(),
                },
            )
        });
        let failure = hooks.matching(Event::PostToolUseFailure);
        let failure = (!failure.is_empty()).then(|| Failure {
            hooks: failure,
            input: tool_input(&arguments),
            call_id: call_id.to_owned(),
            dir: dir.to_path_buf(),
        });
        Self {
            pre,
            post,
            failure,
            permission: hooks.matching(Event::PermissionRequest),
            input: tool_input(&arguments),
            call_id: call_id.to_owned(),
            dir: dir.to_path_buf(),
            notes,
        }
    }

    /// The door's pre-spawn stage, when PreToolUse hooks match.
    pub fn pre_spawn(&self) -> Option<Arc<dyn uexec_core::spawn::PreSpawn>> {
        self.pre
            .clone()
            .map(|p| p as Arc<dyn uexec_core::spawn::PreSpawn>)
    }

    /// Whom the door asks about a held command: the PermissionRequest hooks, when some
    /// match, in front of `person`; else `person`.
    pub fn approver(
        &self,
        person: Option<Arc<dyn uexec_core::spawn::Approver>>,
    ) -> Option<Arc<dyn uexec_core::spawn::Approver>> {
        if self.permission.is_empty() {
            return person;
        }
        Some(Arc::new(super::permission::PermissionRequest {
            hooks: self.permission.clone(),
            input: self.input.clone(),
            call_id: self.call_id.clone(),
            dir: self.dir.clone(),
            person,
            answered_by: Mutex::new(None),
            notes: self.notes.clone(),
        }))
    }

    /// The call returned: `ran` is `Err(the tool's error)` when nothing ran, else whether
    /// the command is still running. What the hooks said, for the result (PostToolUse's
    /// only when the command ended in the window: it has run by then; PostToolUseFailure's
    /// when the call failed).
    pub async fn finish(self, ran: Result<bool, String>) -> Vec<String> {
        let how = match &ran {
            Err(_) => Returned::Refused,
            Ok(true) => Returned::Running,
            Ok(false) => Returned::Exited,
        };
        let mut notes = std::mem::take(
            &mut *self
                .notes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if let Some(post) = self.post {
            notes.extend(post.returned(how).await);
        }
        // A question sent back to the client (its retry decides) is no failure of the call.
        if let (Some(failure), Err(error)) = (&self.failure, &ran) {
            if !error.contains(uexec_core::spawn::NO_DECISION_YET) {
                notes.extend(failure.fire(error).await);
            }
        }
        notes
    }
}
