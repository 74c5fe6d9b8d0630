//! `uexec prune`: forgets every ended session of every owner (`prune_sessions`), their
//! transcripts with them, as `docker container prune` does; running sessions stay.

use std::process::ExitCode;

use serde_json::json;

use super::common::{call, print_json, Failure};
use super::conn::{Conn, Target};

/// `uexec prune`.
#[derive(Debug, Clone, clap::Args)]
pub struct PruneArgs {
    /// Print what was removed as JSON ({removed: [ids]}).
    #[arg(long)]
    pub json: bool,
}

pub async fn prune(target: &Target, args: PruneArgs) -> Result<ExitCode, Failure> {
    let mut conn = Conn::open(target, Vec::new())?;
    // No daemon, nothing ended to remove: none is started only to say so.
    let (removed, text) = if conn.daemon_may_run() {
        let result = call(&mut conn, "prune_sessions", json!({})).await?;
        (result.structured["removed"].clone(), result.text)
    } else {
        (json!([]), "No ended sessions to remove.".to_owned())
    };
    if args.json {
        print_json(&json!({ "removed": removed }));
    } else {
        println!("{text}");
    }
    Ok(ExitCode::SUCCESS)
}
