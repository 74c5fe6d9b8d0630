//! A person at the other end of an rmcp client, for the tests of held commands: the client
//! offers form elicitation when the person has an answer (none: a client without it), keeps
//! each question it was asked, and answers each with the same form, after thinking as long
//! as it was told to.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
};
use rmcp::service::RequestContext;
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::{json, Value};

#[derive(Clone, Default)]
pub struct Person {
    /// The form's answer (`{"answer": "run once"}`); `None`: a client without elicitation.
    pub answer: Option<Value>,
    /// Each question's message, in order.
    pub asked: Arc<Mutex<Vec<String>>>,
    /// How long the person takes to answer.
    pub thinks: Duration,
    /// How many answers went back.
    pub answered: Arc<Mutex<usize>>,
}

impl Person {
    /// A client that cannot ask anyone.
    pub fn nobody() -> Self {
        Self::default()
    }

    /// A person who answers every form with `answer`.
    pub fn answering(answer: Value) -> Self {
        Self {
            answer: Some(answer),
            ..Self::default()
        }
    }

    /// The same person, taking `thinks` over each answer.
    pub fn thinking(self, thinks: Duration) -> Self {
        Self { thinks, ..self }
    }

    /// The questions asked so far.
    pub fn questions(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl ClientHandler for Person {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        if self.answer.is_some() {
            info.capabilities = ClientCapabilities::default();
            info.capabilities.elicitation = serde_json::from_value(json!({"form": {}})).ok();
        }
        info
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.asked.lock().unwrap().push(message);
        }
        tokio::time::sleep(self.thinks).await;
        *self.answered.lock().unwrap() += 1;
        let mut result = ElicitResult::new(ElicitationAction::Accept);
        result.content = self.answer.clone();
        Ok(result)
    }
}
