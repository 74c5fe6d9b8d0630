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
    let removed: Vec<i64> = if conn.daemon_may_run() {
        let result = call(&mut conn, "prune_sessions", json!({})).await?;
        result.structured["removed"]
            .as_array()
            .map(|ids| ids.iter().filter_map(serde_json::Value::as_i64).collect())
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    if args.json {
        print_json(&json!({ "removed": removed }));
    } else if removed.is_empty() {
        println!("No ended sessions to remove.");
    } else {
        // Said here, not the tool's text, which may carry the person's exit notices.
        let ids: Vec<String> = removed.iter().map(i64::to_string).collect();
        println!(
            "Removed {} ended session(s): {}",
            removed.len(),
            ids.join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}
