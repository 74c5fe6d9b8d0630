//! The exec-server face of uexec: `uexec serve`.

/// Arguments of `uexec serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Where to listen: `ws://127.0.0.1:PORT` (port 0 picks one; the bound URL is printed on
    /// stdout) or `stdio` (newline-delimited JSON on stdin/stdout).
    #[arg(long, default_value = "ws://127.0.0.1:0")]
    pub listen: String,
}

/// Runs the exec server until its transport ends.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    anyhow::bail!("uexec serve --listen {}: the exec server is not built yet", args.listen)
}
