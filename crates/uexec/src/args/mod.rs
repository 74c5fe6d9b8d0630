//! The faces' flags: clap lives here, in the binary, and each face's flags convert into the
//! plain options its library starts with.
//!
//! Help text, defaults, value parsers and their messages are the flags'; the libraries see
//! only values, and name a flag in an error only to say which one is at fault.

pub mod daemon;
pub mod duration;
pub mod limits;
pub mod mcp;
pub mod net;
pub mod serve;
pub mod verbs;

use std::path::PathBuf;

use uexec_mcp::TranscriptOptions;

/// Where session transcripts go (`uexec mcp`, `uexec daemon`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TranscriptArgs {
    /// Keep every session's output on disk under DIR, one directory per session (default
    /// `$XDG_STATE_HOME/uexec/sessions`, else `~/.local/state/uexec/sessions`; 0700, files
    /// 0600). The `read_output` tool pages through them. Not with `uexec mcp --daemon`
    /// (the daemon's are set on `uexec daemon`), as each of these.
    #[arg(long, value_name = "DIR")]
    pub transcripts_dir: Option<PathBuf>,
    /// Keep no transcripts (and offer no `read_output`). Not with `uexec mcp --daemon`.
    #[arg(long, conflicts_with = "transcripts_dir")]
    pub no_transcripts: bool,
    /// Most bytes of one session's transcript kept on disk; older bytes rotate away in
    /// quarters (default 268435456: 256 MiB). Not with `uexec mcp --daemon`.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(16384..))]
    pub transcript_max_bytes: Option<u64>,
    /// Most bytes of disk all transcripts take together (directories and blocks count: a
    /// session that printed nothing is not free); the least recently written sessions go
    /// first, never one written in the last minute (default 2147483648: 2 GiB). Not with
    /// `uexec mcp --daemon`.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(16384..))]
    pub transcripts_total_max_bytes: Option<u64>,
}

impl From<TranscriptArgs> for TranscriptOptions {
    fn from(args: TranscriptArgs) -> Self {
        Self {
            transcripts_dir: args.transcripts_dir,
            no_transcripts: args.no_transcripts,
            transcript_max_bytes: args.transcript_max_bytes,
            transcripts_total_max_bytes: args.transcripts_total_max_bytes,
        }
    }
}
