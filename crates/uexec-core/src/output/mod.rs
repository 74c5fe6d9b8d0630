//! Output, from the bytes a process prints to the text a result carries:
//! - [`buffer`]: the head-and-tail buffer that keeps a bounded view of any amount of output;
//! - [`text`]: escape sequences and carriage returns, as a terminal would render them;
//! - [`hygiene`]: what a call asked to have cleaned;
//! - [`until`]: wait conditions, matched against the output as it comes;
//! - [`snapshot`]: what one call returns, truncated to its token budget (and `annotate`:
//!   uexec's own lines in its text; `omitted`: where what it left out is in what the
//!   command printed, through `origin`: where a cleaned text's positions come from).
//!
//! Nothing here knows a session, a store or a face: it is pure, and unit-tested beside each
//! rule. Character boundaries are `crate::utf8`'s, a leaf every room uses.

mod annotate;
pub mod buffer;
mod hygiene;
mod omitted;
mod origin;
pub mod snapshot;
pub mod text;
pub mod until;

pub use hygiene::{Hygiene, HygieneRequest};
