//! Which build of uexec a process runs, as a hello says it ([`Hello::build`]): the daemon
//! refuses a client of another build, since two builds of one version may speak differently.
//!
//! [`Hello::build`]: uexec_protocol::daemon::Hello::build

/// This executable's identity: device, inode, size and modification time of the file the
/// process runs (a rebuild or a reinstall changes it).
pub fn build_id() -> String {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| build_id_of(std::path::Path::new("/proc/self/exe")))
        .clone()
}

/// The identity [`build_id`] gives in a process running `exe`: what a client that is not
/// the engine (the `uexec` front) says for the engine beside it.
pub fn build_id_of(exe: &std::path::Path) -> String {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(exe)
        .map(|m| {
            format!(
                "{}:{}:{}:{}",
                m.dev(),
                m.ino(),
                m.size(),
                m.mtime_nsec() + m.mtime() * 1_000_000_000
            )
        })
        .unwrap_or_else(|_| "unknown".to_owned())
}
