//! Output, from the bytes a process prints to the text a result carries:
//! - [`buffer`]: the head-and-tail buffer that keeps a bounded view of any amount of output;
//! - [`text`]: escape sequences and carriage returns, as a terminal would render them;
//! - [`hygiene`]: what a call asked to have cleaned;
//! - [`until`]: wait conditions, matched against the output as it comes;
//! - [`snapshot`]: what one call returns, truncated to its token budget (and `annotate`:
//!   uexec's own lines in its text).
//!
//! Nothing here knows a session, a store or a face: it is pure, and unit-tested beside each
//! rule. Character boundaries are `crate::utf8`'s, a leaf every room uses.

mod annotate;
pub mod buffer;
mod hygiene;
pub mod snapshot;
pub mod text;
pub mod until;

pub use hygiene::{Hygiene, HygieneRequest};
