//! One `exec_command` call's hooks: its PreToolUse stage for the door, the follower of its
//! PostToolUse, and what either says for its result.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use uexec_core::SessionStore;

use super::post::{self, PostToolUse, Returned, Watch};
use super::pre::{tool_input, PreToolUse};
use super::{Event, Hooks};
use crate::tools::parse::Dialect;

/// The hooks of one call (made before it runs; see the module doc of [`super`]).
pub struct CallHooks {
    pre: Option<Arc<PreToolUse>>,
    post: Option<Watch>,
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
        Self { pre, post, notes }
    }

    /// The door's pre-spawn stage, when PreToolUse hooks match.
    pub fn pre_spawn(&self) -> Option<Arc<dyn uexec_core::spawn::PreSpawn>> {
        self.pre
            .clone()
            .map(|p| p as Arc<dyn uexec_core::spawn::PreSpawn>)
    }

    /// The call returned: `ran` is `None` when nothing ran, else whether the command is
    /// still running. What the hooks said, for the result (PostToolUse's only when the
    /// command ended in the window: it has run by then).
    pub async fn finish(self, ran: Option<bool>) -> Vec<String> {
        let how = match ran {
            None => Returned::Refused,
            Some(true) => Returned::Running,
            Some(false) => Returned::Exited,
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
        notes
    }
}
