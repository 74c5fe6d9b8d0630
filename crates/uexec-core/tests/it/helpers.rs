//! Fixtures, waits with deadlines, and /proc inspection.

use std::sync::Arc;
use std::time::{Duration, Instant};

use uexec_core::{ExecRequest, LocalBackend, SessionStore, Snapshot, StoreConfig, WriteRequest};

/// A store on the local backend with sequential ids and a temp cwd.
pub fn store() -> Arc<SessionStore> {
    store_with(|_| {})
}

pub fn store_with(tweak: impl FnOnce(&mut StoreConfig)) -> Arc<SessionStore> {
    let mut config = StoreConfig {
        cwd: std::env::temp_dir(),
        deterministic_ids: true,
        default_shell: Some("/bin/bash".into()),
        ..StoreConfig::default()
    };
    tweak(&mut config);
    SessionStore::new(Arc::new(LocalBackend), config)
}

/// `exec_command` with `login: false` and the given window.
pub fn exec(cmd: &str, yield_ms: i64) -> ExecRequest {
    ExecRequest {
        cmd: cmd.into(),
        login: Some(false),
        yield_time_ms: Some(yield_ms),
        ..ExecRequest::default()
    }
}

pub fn poll(session_id: i32, yield_ms: i64) -> WriteRequest {
    WriteRequest {
        session_id,
        yield_time_ms: Some(yield_ms),
        ..WriteRequest::default()
    }
}

pub fn write(session_id: i32, chars: &str, yield_ms: i64) -> WriteRequest {
    WriteRequest {
        session_id,
        chars: chars.into(),
        yield_time_ms: Some(yield_ms),
        ..WriteRequest::default()
    }
}

/// Polls until the session exits; returns all output and the last snapshot.
pub async fn collect(store: &Arc<SessionStore>, first: Snapshot) -> (String, Snapshot) {
    let mut out = first.output.clone();
    let mut last = first;
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Some(id) = last.session_id() {
        assert!(
            Instant::now() < deadline,
            "session {id} did not exit; output so far: {out}"
        );
        last = store.write_stdin(poll(id, 5000)).await.expect("poll");
        out.push_str(&last.output);
    }
    (out, last)
}

/// Waits for `check` to hold, failing after `timeout`.
pub async fn eventually(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A unique marker to find processes by command line.
pub fn marker() -> String {
    format!("1000.{}", rand_u32() % 900_000_000 + 100_000_000)
}

fn rand_u32() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    nanos ^ std::process::id().rotate_left(16)
}

/// Processes whose command line contains `needle`. A zombie has no command line left, so it
/// is never found here: [`wait_gone`] looks for zombies by pid.
pub fn procs_with(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in dir.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline)
            .replace('\0', " ")
            .contains(needle)
        {
            found.push(pid);
        }
    }
    found
}

/// Whether `pid` is a zombie child of this test process (which runs the engine): the engine
/// must reap every child it starts.
pub fn is_my_zombie(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name may hold spaces and parentheses: the fields start after the last ')'.
    let mut fields = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace())
        .into_iter()
        .flatten();
    fields.next() == Some("Z") && fields.next() == Some(&std::process::id().to_string())
}

/// Waits until no process has `needle` in its command line, and the ones that had are not
/// left as zombies of this process.
pub async fn wait_gone(needle: &str) {
    let seen = procs_with(needle);
    eventually(
        &format!("processes with {needle} to die and be reaped"),
        Duration::from_secs(10),
        || procs_with(needle).is_empty() && !seen.iter().any(|&pid| is_my_zombie(pid)),
    )
    .await;
}

pub async fn wait_present(needle: &str) {
    eventually(
        &format!("a process with {needle}"),
        Duration::from_secs(10),
        || !procs_with(needle).is_empty(),
    )
    .await;
}

/// A file the test creates when a command may go on: `Gate::wait()` is the shell that waits
/// for it, so what a command prints after it cannot race the first call's window however
/// slow the machine is.
pub struct Gate(std::path::PathBuf);

impl Gate {
    pub fn new() -> Self {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "uexec-until-gate-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_file(&path);
        Self(path)
    }

    pub fn wait(&self) -> String {
        format!("while [ ! -e '{}' ]; do sleep 0.02; done", self.0.display())
    }

    pub fn open(&self) {
        std::fs::write(&self.0, "").unwrap();
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
