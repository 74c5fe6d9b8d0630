//! An error with its causes on one line, `what: why: root cause`, as anyhow's `{:#}` prints
//! them: for logs, and for a caller that prints a client error whole without anyhow.

use std::fmt;

/// Displays `0` and each of its sources, joined by `": "`.
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(e) = cause {
            write!(f, ": {e}")?;
            cause = e.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot reach the daemon")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn a_chain_names_every_cause_after_its_error() {
        let e = Outer(std::io::Error::other("refused"));
        assert_eq!(Chain(&e).to_string(), "cannot reach the daemon: refused");
    }
}
