//! Durations as people write them on a command line (`500ms`, `10s`, `5m`, `1h`): the CLI
//! verbs' reading ([`uexec_cli::cli::duration`]), for the faces' flags too.

pub use uexec_cli::cli::duration::seconds;
