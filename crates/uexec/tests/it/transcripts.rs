//! Transcripts tell the truth and stay with their owner.
//!
//! 1. A transcript whose filesystem fills stops there: every result and every `read_output`
//!    page says where and why, and none promises a byte past it. The filesystem is a 1 MiB
//!    tmpfs that only the server sees: it runs in its own user and mount namespace
//!    (`unshare --user --map-root-user --mount`), so the test needs no privilege and leaves
//!    the host's mounts alone.
//! 2. `read_output {transcript: PATH}` reads only the caller's own sessions: another bearer
//!    token's, another daemon owner's, a planted directory, a symlink or a path outside the
//!    root all get the same refusal. A person at the daemon still reads any session.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::{json, Value};

use crate::helpers::{call, scratch_dir, stdio_client, structured, text, Client, Recorder, UEXEC};
use crate::place::DaemonPlace;

/// What `seq 1 N` prints.
fn seq_output(n: u32) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 1..=n {
        out.extend_from_slice(format!("{i}\n").as_bytes());
    }
    out
}

/// `uexec mcp --structured` over stdio whose transcripts go to a tmpfs of `size` (`mount -o
/// size=`) mounted in the server's own user and mount namespaces. Returns the client, the
/// transcripts root as the server sees it, and the server's pid.
async fn client_on_a_small_tmpfs(size: &str) -> (Client, PathBuf, u32) {
    let probe = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "true"])
        .stderr(Stdio::piped())
        .output()
        .expect("unshare (util-linux) runs");
    assert!(
        probe.status.success(),
        "this test needs user namespaces (`unshare --user --map-root-user --mount true` failed: {}); \
         as a normal user they may be off: sysctl kernel.unprivileged_userns_clone=1 or \
         kernel.apparmor_restrict_unprivileged_userns=0",
        String::from_utf8_lossy(&probe.stderr).trim()
    );
    let place = scratch_dir("transcripts-tmpfs");
    let mount = place.join("mnt");
    let home = place.join("home");
    std::fs::create_dir_all(&mount).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let root = mount.join("sessions");
    let mut cmd = tokio::process::Command::new("unshare");
    cmd.args(["--user", "--map-root-user", "--mount", "sh", "-c"])
        .arg(r#"mount -t tmpfs -o "size=$1,mode=0700" tmpfs "$2" && exec "$3" mcp --structured --transcripts-dir "$4""#)
        .args(["sh", size])
        .arg(&mount)
        .arg(UEXEC)
        .arg(&root)
        .current_dir(&place)
        .env("HOME", &home);
    let transport = TokioChildProcess::new(cmd).unwrap();
    let pid = transport.id().expect("the server runs");
    let client = Recorder::default().serve(transport).await.unwrap();
    (client, root, pid)
}

/// Peak resident memory of `pid`, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn u64_at(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{pointer} in {v}"))
}

#[tokio::test]
async fn a_transcript_whose_disk_fills_says_where_it_stopped_and_promises_no_byte_past_it() {
    let (client, root, server) = client_on_a_small_tmpfs("1m").await;
    // About 4.6 MB of numbered lines and 128 MiB more through a pipe, then the session
    // stays. Past the stop, the output flows on as fast as ever, in bounded memory.
    let want = seq_output(700_000);
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "seq 1 700000; head -c 134217728 /dev/zero; echo flood-done; exec sleep 60",
               "login": false, "max_output_tokens": 200, "yield_time_ms": 30000,
               "until": {"pattern": "flood-done"}}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(
        s["reason"],
        "matched",
        "the flood ran to its end: {}",
        text(&r)
    );
    // Bounded: a release build's server peaks near 34 MiB here, a debug build's near 70 to
    // 95 MiB (its progress forwarder drains the events more slowly; the peak does not grow
    // with the flood: 71 MiB after 512 MiB).
    let limit_kib = if cfg!(debug_assertions) { 160 } else { 64 } * 1024;
    let rss = peak_rss_kib(server);
    assert!(rss < limit_kib, "server peak RSS {rss} KiB");
    let id = s["session_id"].as_i64().expect("still running");
    let dir = s["transcript"].as_str().expect("the transcript is named");
    assert!(Path::new(dir).starts_with(&root), "{dir}");
    let (start, end) = (
        u64_at(&s, "/omitted_range/start"),
        u64_at(&s, "/omitted_range/end"),
    );
    let stop = u64_at(&s, "/transcript_stopped/at");
    assert_eq!(
        s["transcript_stopped"]["error"], "No space left on device",
        "{s}"
    );
    assert!(
        start < stop && stop < end && stop <= 1 << 20,
        "cut {start}..{end}, stopped at {stop}"
    );
    assert_eq!(
        s["omitted_readable"],
        json!({"start": start, "end": stop}),
        "only what is on disk is readable"
    );
    let line = format!(
        "Transcript: {dir} (bytes {start}..{end} left out here; read_output has {start}..{stop}; \
         {stop}..{end} are lost: the transcript stopped at byte {stop}: No space left on device)"
    );
    assert!(text(&r).contains(&line), "{}", text(&r));
    assert!(!text(&r).contains("read_output has them"));

    // The disk agrees (the server's commands see its tmpfs): the segments hold exactly the
    // bytes up to the stop, and `meta` says where and why it stopped.
    let disk = call(
        &client,
        "exec_command",
        json!({"cmd": format!("cat {dir}/output.* | wc -c; grep ^stopped {dir}/meta"),
               "login": false, "yield_time_ms": 10000}),
    )
    .await;
    assert_eq!(
        structured(&disk)["output"],
        format!("{stop}\nstopped_at={stop}\nstopped_because=No space left on device\n"),
        "{}",
        text(&disk)
    );

    // read_output has every byte up to the stop, says where it stopped, and nothing after.
    let read = |extra: Value| {
        let mut req = json!({"session_id": id});
        req.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        call(&client, "read_output", req)
    };
    let stopped_text = format!("the transcript stopped at byte {stop}: No space left on device");
    let page = read(json!({"offset": start, "limit": 1000})).await;
    let p = structured(&page);
    assert_eq!(
        p["text"].as_str().unwrap().as_bytes(),
        &want[start as usize..start as usize + 1000]
    );
    assert_eq!(p["total"], stop, "{p}");
    assert_eq!(
        p["transcript_stopped"],
        json!({"at": stop, "error": "No space left on device"})
    );
    assert!(text(&page).contains(&stopped_text), "{}", text(&page));
    let last = read(json!({"offset": stop - 10, "limit": 100})).await;
    let l = structured(&last);
    assert_eq!(
        l["text"].as_str().unwrap().as_bytes(),
        &want[stop as usize - 10..stop as usize]
    );
    assert_eq!(l["next_offset"], stop);
    // A byte the result left out past the stop: not there, and the page says why.
    let past = read(json!({"offset": end - 100, "limit": 100})).await;
    let q = structured(&past);
    assert_eq!(
        (q["text"].as_str(), q["next_offset"].as_u64()),
        (Some(""), Some(stop)),
        "{q}"
    );
    assert!(
        text(&past).contains(&format!("bytes from {stop} on are lost")),
        "{}",
        text(&past)
    );
    let grep = read(json!({"grep": "^flood-done$"})).await;
    assert_eq!(structured(&grep)["matches"], 0);
    assert!(text(&grep).contains(&stopped_text), "{}", text(&grep));

    // Gone, the session's transcript still says so (by path, too).
    let killed = call(&client, "terminate_session", json!({"session_id": id})).await;
    assert_eq!(killed.is_error, Some(false), "{}", text(&killed));
    let gone = call(
        &client,
        "read_output",
        json!({"transcript": dir, "tail_lines": 1}),
    )
    .await;
    let g = structured(&gone);
    assert_eq!(
        (
            g["next_offset"].as_u64(),
            g["transcript_stopped"]["at"].as_u64()
        ),
        (Some(stop), Some(stop)),
        "{}",
        text(&gone)
    );

    // The disk is full now: the next session's transcript cannot even be made, and its
    // result says that what it left out is lost.
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "seq 1 700000", "login": false, "max_output_tokens": 200,
               "yield_time_ms": 30000}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(s["exit_code"], 0, "{}", text(&r));
    let (start, end) = (
        u64_at(&s, "/omitted_range/start"),
        u64_at(&s, "/omitted_range/end"),
    );
    assert_eq!(s.get("transcript"), None, "{s}");
    assert_eq!(s.get("omitted_readable"), None, "{s}");
    assert_eq!(
        s["transcript_stopped"],
        json!({"at": 0, "error": "No space left on device"})
    );
    assert!(
        text(&r).contains(&format!(
            "Transcript: none (bytes {start}..{end} left out here are lost: \
             no transcript could be made: No space left on device)"
        )),
        "{}",
        text(&r)
    );
    client.cancel().await.unwrap();
}

/// EFBIG, the other way a disk says no: a file size limit (`ulimit -f`). Past it, the
/// kernel sends SIGXFSZ, which by default kills the writer: the server ignores it, so its
/// write fails and its transcript stops instead, while its commands keep the default.
#[tokio::test]
async fn a_file_size_limit_stops_the_transcript_not_the_server() {
    let place = scratch_dir("transcripts-fsize");
    let root = place.join("sessions");
    std::fs::create_dir_all(place.join("home")).unwrap();
    let limit: u64 = 2_000_000;
    let mut cmd = tokio::process::Command::new("prlimit");
    cmd.arg(format!("--fsize={limit}"))
        .args([UEXEC, "mcp", "--structured", "--transcripts-dir"])
        .arg(&root)
        .current_dir(&place)
        .env("HOME", place.join("home"));
    let client = Recorder::default()
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap();
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "seq 1 700000", "login": false, "max_output_tokens": 200,
               "yield_time_ms": 30000}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(s["exit_code"], 0, "{}", text(&r));
    assert_eq!(
        s["transcript_stopped"],
        json!({"at": limit, "error": "File too large"}),
        "{s}"
    );
    assert_eq!(s["omitted_readable"]["end"], limit, "{s}");
    // The server is alive, and a command that writes past the limit meets it as it would
    // anywhere else: killed by SIGXFSZ (128 + 25).
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "head -c 3000000 /dev/zero > big; echo $?", "login": false,
               "yield_time_ms": 30000}),
    )
    .await;
    let out = structured(&r)["output"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // (bash's message is on stderr, `$?` on stdout: two pipes, either may come first.)
    assert!(
        out.contains("File size limit exceeded") && out.lines().any(|l| l == "153"),
        "{out}"
    );
    client.cancel().await.unwrap();
}

/// The refusal for any transcript path that is not one of the caller's sessions: the same
/// words whatever lies at the path, so a client learns nothing of others' transcripts.
fn assert_unknown(r: &rmcp::model::CallToolResult, path: &str) {
    assert_eq!(r.is_error, Some(true), "{path}: {}", text(r));
    assert_eq!(
        text(r),
        format!(
            "read_output failed: invalid arguments: transcript: unknown transcript {path}: \
             not one of this client's sessions (running, or among the last 256 that ended)"
        ),
        "{path}"
    );
}

/// `uexec mcp --http` with `--structured`, its transcripts under `root`, one client per token.
fn start_http(tokens: &str, root: &Path) -> crate::mcp_http::Server {
    let root = root.display().to_string();
    crate::mcp_http::start_with(Some(tokens), &["--structured", "--transcripts-dir", &root])
}

async fn http_client(server: &crate::mcp_http::Server, token: &str) -> Client {
    let config =
        StreamableHttpClientTransportConfig::with_uri(format!("http://{}/mcp", server.addr))
            .auth_header(token.to_owned());
    Recorder::default()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap()
}

#[tokio::test]
async fn one_tokens_client_cannot_read_anothers_transcript_by_either_argument() {
    let root = scratch_dir("transcripts-http").join("sessions");
    let server = start_http("alpha,beta", &root);
    let alpha = http_client(&server, "alpha").await;
    let beta = http_client(&server, "beta").await;
    // Exits in its first call: only the path names it.
    let done = call(
        &alpha,
        "exec_command",
        json!({"cmd": "echo alpha-secret; seq 1 300000", "login": false, "yield_time_ms": 30000}),
    )
    .await;
    let path = structured(&done)["transcript"]
        .as_str()
        .expect("a cut result names its transcript")
        .to_owned();
    let mine = call(
        &alpha,
        "read_output",
        json!({"transcript": path, "limit": 13}),
    )
    .await;
    assert_eq!(
        structured(&mine)["text"],
        "alpha-secret\n",
        "{}",
        text(&mine)
    );
    // The same directory, written another way, is still alpha's.
    let alias = format!("{path}/");
    let mine = call(
        &alpha,
        "read_output",
        json!({"transcript": alias, "limit": 13}),
    )
    .await;
    assert_eq!(
        structured(&mine)["text"],
        "alpha-secret\n",
        "{}",
        text(&mine)
    );

    let theirs = call(&beta, "read_output", json!({"transcript": path})).await;
    assert_unknown(&theirs, &path);
    assert!(!text(&theirs).contains("alpha-secret"));
    let name = Path::new(&path)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    for other in [
        alias,
        format!("{}/../sessions/{name}", root.display()),
        format!("{}/{}-ffffff", root.display(), 4242),
        root.display().to_string(),
        "/etc".to_owned(),
    ] {
        let r = call(&beta, "read_output", json!({"transcript": other})).await;
        assert_unknown(&r, &other);
    }

    // A running session: by id, beta is refused as it always was.
    let live = call(
        &alpha,
        "exec_command",
        json!({"cmd": "echo alpha-live; exec sleep 30", "login": false, "yield_time_ms": 500}),
    )
    .await;
    let id = structured(&live)["session_id"].as_i64().expect("running");
    let by_id = call(&beta, "read_output", json!({"session_id": id})).await;
    assert_eq!(by_id.is_error, Some(true));
    assert!(
        text(&by_id).contains(&format!("Unknown process id {id}")),
        "{}",
        text(&by_id)
    );
    let own = call(&alpha, "read_output", json!({"session_id": id})).await;
    assert_eq!(structured(&own)["text"], "alpha-live\n", "{}", text(&own));
    let kill = call(&alpha, "terminate_session", json!({"session_id": id})).await;
    assert_eq!(kill.is_error, Some(false));
    alpha.cancel().await.unwrap();
    beta.cancel().await.unwrap();
}

/// A session directory made by hand under `root` (as another client's would be): 0700,
/// a `meta` and one segment holding `bytes`.
fn plant_session(dir: &Path, bytes: &[u8]) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(dir.join("meta"), "session_id=1000\n").unwrap();
    std::fs::write(dir.join("output.000000"), bytes).unwrap();
}

#[tokio::test]
async fn read_output_by_path_refuses_every_path_but_the_callers_own_sessions() {
    let place = scratch_dir("transcripts-paths");
    let root = place.join("sessions");
    let root_arg = root.display().to_string();
    let (client, _, _) = stdio_client(&["--structured", "--transcripts-dir", &root_arg]).await;
    // Another client's session, a symlink out of the root, and a directory outside it.
    let planted = root.join("1000-abcdef");
    plant_session(&planted, b"planted-bytes\n");
    let outside = place.join("outside");
    plant_session(&outside, b"outside-bytes\n");
    std::os::unix::fs::symlink(&outside, root.join("1001-abcdef")).unwrap();
    for path in [
        planted.display().to_string(),
        root.join("1001-abcdef").display().to_string(),
        format!("{root_arg}/../outside"),
        outside.display().to_string(),
        format!("{root_arg}/1002-000000"),
        "sessions/1000-abcdef".to_owned(),
        "/".to_owned(),
    ] {
        let r = call(&client, "read_output", json!({"transcript": path})).await;
        assert_unknown(&r, &path);
    }
    // Its own session it reads, by path too.
    let mine = call(
        &client,
        "exec_command",
        json!({"cmd": "echo mine", "login": false, "yield_time_ms": 10000}),
    )
    .await;
    assert_eq!(structured(&mine)["exit_code"], 0);
    let listed = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| std::fs::read_to_string(p.join("output.000000")).is_ok_and(|t| t == "mine\n"))
        .expect("its transcript is on disk");
    let path = listed.display().to_string();
    let page = call(&client, "read_output", json!({"transcript": path})).await;
    assert_eq!(structured(&page)["text"], "mine\n", "{}", text(&page));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_person_at_the_daemon_reads_any_owners_transcript_and_an_agent_only_its_own() {
    let place = DaemonPlace::new("transcripts");
    let one = place.client(&["--owner", "agent-1", "--structured"]).await;
    let two = place.client(&["--owner", "agent-2", "--structured"]).await;
    let person = place.person_client().await;
    let done = call(
        &one,
        "exec_command",
        json!({"cmd": "echo agent-one-output; seq 1 300000", "login": false,
               "yield_time_ms": 30000}),
    )
    .await;
    let path = structured(&done)["transcript"]
        .as_str()
        .expect("a cut result names its transcript")
        .to_owned();
    let root = Path::new(&path).parent().unwrap().to_path_buf();
    let refused = call(&two, "read_output", json!({"transcript": path})).await;
    assert_unknown(&refused, &path);
    let read = call(
        &person,
        "read_output",
        json!({"transcript": path, "limit": 17}),
    )
    .await;
    assert_eq!(
        structured(&read)["text"],
        "agent-one-output\n",
        "{}",
        text(&read)
    );
    // A session no store remembers (an earlier daemon's): the person reads it, as before.
    let earlier = root.join("1999-abcdef");
    plant_session(&earlier, b"an earlier daemon's\n");
    let read = call(&person, "read_output", json!({"transcript": earlier})).await;
    assert_eq!(
        structured(&read)["text"],
        "an earlier daemon's\n",
        "{}",
        text(&read)
    );
    // But never a path out of the root, through a symlink or `..`.
    let outside = place.cwd.join("outside");
    plant_session(&outside, b"outside-bytes\n");
    std::os::unix::fs::symlink(&outside, root.join("1998-abcdef")).unwrap();
    for path in [
        root.join("1998-abcdef").display().to_string(),
        format!("{}/../../../../../outside", root.display()),
        outside.display().to_string(),
    ] {
        let r = call(&person, "read_output", json!({"transcript": path})).await;
        assert_eq!(r.is_error, Some(true), "{path}: {}", text(&r));
        assert!(!text(&r).contains("outside-bytes"), "{path}: {}", text(&r));
    }
    for client in [one, two, person] {
        client.cancel().await.unwrap();
    }
}
