//! Ctrl-C after the command exited signals nothing: its process group id may already belong
//! to someone else.

use std::time::Duration;

use crate::helpers::{eventually, exec, store, write};

#[tokio::test]
async fn ctrl_c_after_the_leader_was_reaped_signals_nothing() {
    let dir = std::env::temp_dir().join(format!("uexec-ctrl-c-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ready, hit) = (dir.join("ready"), dir.join("hit"));
    let _ = std::fs::remove_file(&hit);
    // A background job of the group that would record a SIGINT; the leader exits at once.
    let script = format!(
        "import signal, time, pathlib\n\
         signal.signal(signal.SIGINT, lambda *a: pathlib.Path('{}').write_text('int'))\n\
         pathlib.Path('{}').write_text('ready')\n\
         time.sleep(30)",
        hit.display(),
        ready.display()
    );
    let cmd = format!("python3 -c \"{script}\" & sleep 1; exit 0");
    let store = store();
    let s = store.exec_command(exec(&cmd, 250)).await.unwrap();
    let id = s.session_id().expect("running after 250 ms");
    eventually("the job to be ready", Duration::from_secs(10), || {
        ready.exists()
    })
    .await;
    eventually("the leader to exit", Duration::from_secs(10), || {
        store
            .list_sessions()
            .iter()
            .any(|i| i.session_id == id && i.exited)
    })
    .await;
    let snap = store.write_stdin(write(id, "\u{3}", 250)).await.unwrap();
    assert_eq!(snap.exit_code(), Some(0), "the exit is reported");
    assert!(
        !hit.exists(),
        "Ctrl-C reached a group whose leader was reaped"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
