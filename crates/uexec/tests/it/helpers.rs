//! Launching `uexec mcp`, a recording MCP client, and waits with deadlines.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ProgressNotificationParam,
    ResourceUpdatedNotificationParam,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Map, Value};

pub const UEXEC: &str = env!("CARGO_BIN_EXE_uexec");

/// Records the notifications a server sends.
#[derive(Clone, Default)]
pub struct Recorder {
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    pub updated: Arc<Mutex<Vec<String>>>,
    /// `notifications/tools/list_changed` heard.
    pub tools_changed: Arc<std::sync::atomic::AtomicUsize>,
    /// `notifications/resources/list_changed` heard.
    pub resources_changed: Arc<std::sync::atomic::AtomicUsize>,
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.updated.lock().unwrap().push(params.uri);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.resources_changed
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

pub type Client = RunningService<RoleClient, Recorder>;

/// Scratch directories of this test process, removed when it exits: the servers that
/// write transcripts into them live as long as their tests' clients, which have no hook.
static SCRATCH: Mutex<Vec<std::path::PathBuf>> = Mutex::new(Vec::new());

extern "C" fn remove_scratch() {
    if let Ok(dirs) = SCRATCH.lock() {
        for dir in dirs.iter() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A new directory under the temp dir, removed when the test process exits.
pub fn scratch_dir(kind: &str) -> std::path::PathBuf {
    static AT_EXIT: std::sync::Once = std::sync::Once::new();
    // SAFETY: registers a plain function with no arguments to run at exit.
    AT_EXIT.call_once(|| unsafe {
        libc::atexit(remove_scratch);
    });
    let dir = std::env::temp_dir().join(format!(
        "uexec-it-{kind}-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    SCRATCH.lock().unwrap().push(dir.clone());
    dir
}

/// `uexec mcp --in-process` over stdio in a fresh temp cwd with an empty HOME: the server
/// whose pid is returned owns the sessions (the daemon, a plain `uexec mcp`'s default, has
/// its tests with a place of their own: `place.rs`).
pub async fn stdio_client(extra: &[&str]) -> (Client, Recorder, u32) {
    let dir = scratch_dir("mcp");
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let mut cmd = tokio::process::Command::new(UEXEC);
    cmd.args(["mcp", "--in-process"])
        .args(extra)
        .current_dir(&dir)
        .env("HOME", dir.join("home"))
        // Some machines set it for everything; what commands get is uexec's to say.
        .env_remove("PYTHONUNBUFFERED");
    let transport = TokioChildProcess::new(cmd).unwrap();
    let pid = transport.id().unwrap_or(0);
    let recorder = Recorder::default();
    let client = recorder.clone().serve(transport).await.unwrap();
    (client, recorder, pid)
}

pub fn rand_suffix() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    u64::from(t.subsec_nanos()) ^ (t.as_secs() << 20)
}

pub fn args(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

pub async fn call(client: &Client, tool: &'static str, arguments: Value) -> CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args(arguments)))
        .await
        .unwrap()
}

pub fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The ids a `list_sessions` result (structured) names.
pub fn session_ids(listed: &CallToolResult) -> Vec<i64> {
    structured(listed)["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["session_id"].as_i64())
        .collect()
}

pub fn structured(r: &CallToolResult) -> Value {
    r.structured_content.clone().unwrap_or(json!(null))
}

pub fn marker() -> String {
    format!("1000.{}", rand_suffix() % 900_000_000 + 100_000_000)
}

/// Processes whose command line contains `needle`. A zombie has no command line left, so it
/// is never found here: look for zombies with [`zombie_children`].
pub fn procs_with(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
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

/// A process as `/proc/PID/stat` tells it: its state letter (`Z` for a zombie) and parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: u32,
    pub state: char,
    pub ppid: u32,
}

/// `/proc/PID/stat` of `pid`; `None` once the process is gone (reaped).
pub fn proc_stat(pid: u32) -> Option<ProcStat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields start after the last ')'.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some(ProcStat { pid, state, ppid })
}

/// Every child of `parent`, zombies included.
pub fn children_of(parent: u32) -> Vec<ProcStat> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter_map(proc_stat)
        .filter(|p| p.ppid == parent)
        .collect()
}

/// Children of `parent` that died and were not reaped: for a `uexec`, always a bug.
pub fn zombie_children(parent: u32) -> Vec<u32> {
    children_of(parent)
        .into_iter()
        .filter(|p| p.state == 'Z')
        .map(|p| p.pid)
        .collect()
}

pub async fn eventually(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts one session per `(command, tty)`; `{}` / `{0}` in the command stands for a fresh
/// sleep marker. Returns the markers once every one of them has a live process.
pub async fn start_sleepers(client: &Client, commands: &[(&str, bool)]) -> Vec<String> {
    let mut markers = Vec::new();
    for (template, tty) in commands {
        let m = marker();
        let cmd = template.replace("{0}", &m).replace("{}", &m);
        call(
            client,
            "exec_command",
            json!({"cmd": cmd, "tty": tty, "login": false, "yield_time_ms": 250}),
        )
        .await;
        markers.push(m);
    }
    eventually(
        "the sessions' processes to start",
        Duration::from_secs(5),
        || markers.iter().all(|m| !procs_with(m).is_empty()),
    )
    .await;
    markers
}

/// `kill -SIGNAL pid` (through kill(1): the tests need no libc).
pub fn send_signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

/// Subscribes `client` to session `id`'s resource, runs `end` (what ends the session, if
/// it does not end by itself), and waits until `recorder` hears its `resources/updated`.
#[allow(deprecated)] // resources/subscribe: the legacy path, still what most clients use
pub async fn hear_the_end_of(
    client: &Client,
    recorder: &Recorder,
    id: i64,
    end: impl std::future::Future<Output = ()>,
) {
    let uri = format!("uexec://sessions/{id}");
    client
        .subscribe(rmcp::model::SubscribeRequestParams::new(uri.clone()))
        .await
        .unwrap();
    end.await;
    let updated = recorder.updated.clone();
    eventually(
        "a resources/updated for the session's end",
        Duration::from_secs(10),
        || updated.lock().unwrap().contains(&uri),
    )
    .await;
}

pub async fn wait_all_gone(markers: &[String], what: &str) {
    eventually(what, Duration::from_secs(5), || {
        markers.iter().all(|m| procs_with(m).is_empty())
    })
    .await;
}

/// A session that runs `then` once the test creates its gate file, left running (a 250 ms
/// window): its id, and the gate. It exits when the test says so, however slow the machine.
pub async fn gated_session(client: &Client, then: &str) -> (i64, std::path::PathBuf) {
    let gate = std::env::temp_dir().join(format!("uexec-it-gate-{}", rand_suffix()));
    let cmd = format!(
        "while [ ! -e '{}' ]; do sleep 0.02; done; {then}",
        gate.display()
    );
    let r = call(
        client,
        "exec_command",
        json!({"cmd": cmd, "login": false, "yield_time_ms": 250}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    (id, gate)
}

/// `cmd` (an MCP server on its stdio) given `lines` and then the end of its input, as
/// `printf LINES | CMD` would: what it printed on stdout and on stderr, once it exited.
pub fn piped(mut cmd: std::process::Command, lines: &[Value]) -> (String, String) {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What the shell `body` printed (stdout and, where it says `2>&1`, stderr), run as root of a
/// user namespace in a mount namespace of its own, where `$1` is a 64 KiB tmpfs already full
/// but for `$1/run` (0700) and `$1/home`, and `$2` is uexec: a full disk nothing outside sees.
pub fn on_a_full_disk(body: &str) -> String {
    let root = std::env::temp_dir().join(format!("uexec-it-full-{}", rand_suffix()));
    std::fs::create_dir_all(&root).unwrap();
    let script = format!(
        r#"set -e
mount -t tmpfs -o size=64k tmpfs "$1"
mkdir "$1/run" "$1/home" && chmod 700 "$1/run"
dd if=/dev/zero of="$1/fill" bs=4k 2>/dev/null || true
{body}"#
    );
    let out = std::process::Command::new("unshare")
        .args([
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            &script,
            "sh",
        ])
        .arg(&root)
        .arg(UEXEC)
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&root);
    String::from_utf8_lossy(&out.stdout).into_owned()
}
