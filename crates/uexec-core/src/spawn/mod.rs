//! The front door of a spawn: every command a store starts passes here, and nowhere else
//! calls [`Backend::spawn`](crate::backend::Backend::spawn) (a test holds that).
//!
//! 1. [`plan`]: the request checked and turned into a [`SpawnSpec`](crate::backend::SpawnSpec)
//!    (each failure names its field);
//! 2. [`admit`]: what a spawn must pass besides, in this order, in one function: the command
//!    rules, the call's pre-spawn hooks ([`PreSpawn`]), a person's yes when they ask for
//!    one, the confinement, the shell snapshot. The spec is edited there and only there;
//! 3. [`Admitted::spawn`]: the backend starts it.
//!
//! Every decision of step 2 is recorded once ([`DecisionLog`], the metrics' counts).

mod admit;
mod exec_watch;
mod plan;
mod pre_spawn;

pub use crate::policy::decisions::{masked, Decided, DecisionLog, ExecPlace};
pub use admit::{
    admit, admit_spec, Admitted, AdmittedSpec, Answer, Approver, Question, NO_DECISION_YET,
};
pub use exec_watch::ExecWatch;
pub use plan::{token_budget, Plan, Sandboxing};
pub use pre_spawn::{Pending, PreSpawn, PreSpawnAnswer};
