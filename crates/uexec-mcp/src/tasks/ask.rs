//! A question a session asks while a task watches it: the task goes `input_required` and the
//! person answers (`exec_command`'s tasks and `wait`'s alike).
//!
//! A session that waits at a prompt (as `until: {prompt: true}` sees it) makes the task
//! `input_required`, for a client that declared form elicitation: the question is a form
//! with one field, `answer`, and `tasks/update` types it (and a newline). A password prompt
//! (echo off) is never a form field: for a client on this machine that declared URL-mode
//! elicitation it is a one-time loopback page ([`super::page`]) where the person types it;
//! for one with form elicitation only, a form with no field whose message is the page's link;
//! otherwise the status message says to ask the person. The secret never passes through the
//! model. A question asked (or declined) is not asked again until the session prints
//! something new.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, TaskStatus,
};
use rmcp::task_manager::TaskContext;
use uexec_core::SessionStore;

use super::page::{self, Page};
use super::Pulse;

/// How long a question waits for its answer at most.
const WHILE_ASKING: Duration = super::RETENTION;
/// Bytes of recent output a question is told apart by.
const RECENT_BYTES: usize = 4096;

/// What a question came to.
pub(super) enum Asked {
    /// Asked, answered (or not); the session goes on.
    Still,
    /// The session ended while the question waited.
    Ended,
    /// The task was cancelled while the question waited.
    Cancelled,
}

/// What a task may ask its person, and what it asked.
pub(super) struct Asker {
    /// The client answers form elicitations.
    elicits: bool,
    /// The client opens URL-mode elicitations, on this machine.
    opens_pages: bool,
    /// Form elicitation only, on this machine: a page offered in a form's message.
    pages_by_form: bool,
    asked: u32,
    /// The output a question was last asked at: not asked again until it changes.
    asked_at: Option<String>,
    /// The page the last password prompt was given (withdrawn when dropped).
    page: Option<Page>,
}

impl Asker {
    pub(super) fn new(elicits: bool, opens_pages: bool, pages_by_form: bool) -> Self {
        Self {
            elicits,
            opens_pages,
            pages_by_form,
            asked: 0,
            asked_at: None,
            page: None,
        }
    }

    /// If `session_id` waits at a prompt: the person is asked (or the status says why not),
    /// and an answer is typed. `None`: it does not wait at a prompt.
    pub(super) async fn at_prompt(
        &mut self,
        store: &Arc<SessionStore>,
        session_id: i32,
        context: &TaskContext,
        pulse: &Pulse,
    ) -> Option<Asked> {
        let prompt = store.prompt(session_id)?;
        let seen = store.recent_output(session_id, RECENT_BYTES);
        let can_ask = if prompt.secret {
            self.opens_pages || self.pages_by_form
        } else {
            self.elicits
        };
        if !can_ask || (self.asked_at.is_some() && self.asked_at == seen) {
            let on_page = self.page.as_ref().is_some_and(Page::open);
            context.set_status_message(prompt_line(session_id, &prompt, on_page));
            return Some(Asked::Still);
        }
        self.asked += 1;
        self.asked_at = seen;
        let request = if prompt.secret {
            match page::open(store, session_id, &prompt.line).await {
                Ok(opened) if self.opens_pages => {
                    self.page.insert(opened).request(session_id, &prompt.line)
                }
                Ok(opened) => self.page.insert(opened).form(session_id, &prompt.line)?,
                Err(why) => {
                    tracing::warn!("session {session_id}: {why}");
                    context.set_status_message(prompt_line(session_id, &prompt, false));
                    return Some(Asked::Still);
                }
            }
        } else {
            form(session_id, &prompt.line)?
        };
        pulse.announce(|status| status == TaskStatus::InputRequired);
        let question = context.request_input(format!("prompt-{}", self.asked), request);
        let answer = tokio::select! {
            answer = question => answer.ok().and_then(|v| serde_json::from_value::<ElicitResult>(v).ok()),
            _ = store.await_exit(session_id, WHILE_ASKING) => return Some(Asked::Ended),
            () = context.cancelled() => return Some(Asked::Cancelled),
        };
        let accepted = answer.filter(|a| a.action == ElicitationAction::Accept);
        if prompt.secret {
            // Accepted: the person answers on the page (what they type never comes here).
            if accepted.is_none() {
                self.page = None;
            }
            let on_page = self.page.as_ref().is_some_and(Page::open);
            context.set_status_message(prompt_line(session_id, &prompt, on_page));
            return Some(Asked::Still);
        }
        let typed = accepted
            .and_then(|a| a.content)
            .and_then(|c| c.get("answer")?.as_str().map(str::to_owned));
        if let Some(text) = typed {
            // Typed as a person would: the answer, then Enter.
            let _ = store
                .send_input(session_id, &format!("{text}\n"), false)
                .await;
            self.asked_at = None;
        }
        Some(Asked::Still)
    }
}

/// The form that asks what to type at the prompt `line`: one field, `answer`.
fn form(session_id: i32, line: &str) -> Option<InputRequest> {
    let schema = ElicitationSchema::builder()
        .required_string("answer")
        .build()
        .ok()?;
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!(
            "session {session_id} waits for input at: {line}\nWhat should be typed (Enter follows)?"
        ),
        requested_schema: schema,
    };
    Some(InputRequest::Elicitation(ElicitRequest::new(params)))
}

impl Page {
    /// The URL-mode elicitation that sends the person to this page.
    fn request(&self, session_id: i32, line: &str) -> InputRequest {
        let params = ElicitRequestParams::UrlElicitationParams {
            meta: None,
            message: format!(
                "session {session_id} waits at a password prompt: {line}\nOpen this page to type the password into it yourself (it works once); it never passes through the model."
            ),
            url: self.url().to_owned(),
            elicitation_id: self.elicitation_id().to_owned(),
        };
        InputRequest::Elicitation(ElicitRequest::new(params))
    }
}

impl Page {
    /// The form that sends the person to this page, for a client without URL-mode
    /// elicitation: no field (the password never passes through the client), its message
    /// the link; accept says the person is done, decline or cancel withdraws the page.
    fn form(&self, session_id: i32, line: &str) -> Option<InputRequest> {
        let schema = ElicitationSchema::builder().build().ok()?;
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: format!(
                "session {session_id} waits at a password prompt: {line}\nOpen {} in a browser on this machine and type the password there (the page works once; the password never passes through the model). Accept when you are done, or decline to cancel.",
                self.url()
            ),
            requested_schema: schema,
        };
        Some(InputRequest::Elicitation(ElicitRequest::new(params)))
    }
}

/// `session 7 waits at a password prompt (echo off): ...`.
fn prompt_line(session_id: i32, prompt: &uexec_core::Prompt, on_page: bool) -> String {
    if prompt.secret && on_page {
        format!(
            "session {session_id} waits at a password prompt (echo off): {}; the person was given a one-time page to type it (or uexec attach --write {session_id} in the daemon), never send secrets yourself",
            prompt.line
        )
    } else if prompt.secret {
        format!(
            "session {session_id} waits at a password prompt (echo off): {}; ask the person to answer it (uexec attach --write {session_id} in the daemon), never send secrets yourself",
            prompt.line
        )
    } else {
        format!(
            "session {session_id} waits for input at: {}; answer with write_stdin",
            prompt.line
        )
    }
}
