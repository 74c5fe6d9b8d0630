//! The screen kept per PTY session (`uexec attach`'s redraw): fed live, handed over with no
//! gap, and rebuilt from the last bytes when the output outran it.

use std::sync::{Arc, Mutex};

use uexec_core::screen::{Screen, ScreenFactory, REBUILD_SEED_BYTES};

use crate::helpers::{exec, store_with};

/// A screen that remembers every byte it was fed and draws exactly that; its feed waits
/// while the test holds `gate`.
struct Recording {
    fed: Vec<u8>,
    gate: Arc<Mutex<()>>,
}

impl Screen for Recording {
    fn feed(&mut self, bytes: &[u8]) {
        let _open = self.gate.lock().unwrap_or_else(|e| e.into_inner());
        self.fed.extend_from_slice(bytes);
    }
    fn resize(&mut self, _rows: u16, _cols: u16) {}
    fn render(&self) -> Vec<u8> {
        self.fed.clone()
    }
}

fn recording(gate: &Arc<Mutex<()>>) -> ScreenFactory {
    let gate = gate.clone();
    ScreenFactory::new(move |_, _| {
        Box::new(Recording {
            fed: Vec::new(),
            gate: gate.clone(),
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kept_screen_has_every_byte_and_the_feed_goes_on_from_it() {
    let gate = Arc::new(Mutex::new(()));
    let store = store_with(|c| c.screens = Some(recording(&gate)));
    let go = std::env::temp_dir().join(format!("uexec-screen-go-{}", std::process::id()));
    let _ = std::fs::remove_file(&go);
    let mut req = exec(
        &format!(
            "printf first; while [ ! -e '{}' ]; do sleep 0.05; done; printf second; exec sleep 30",
            go.display()
        ),
        3000,
    );
    req.tty = Some(true);
    req.until = Some(uexec_core::until::Until {
        pattern: Some("first".into()),
        ..Default::default()
    });
    let snap = store.exec_command(req).await.unwrap();
    let id = snap.session_id().expect("running");
    let mut attachment = store.attach(id, false, 1024, None).await.unwrap();
    let screen = attachment.screen.take().expect("a kept screen");
    assert_eq!(screen, b"first");
    std::fs::write(&go, "").unwrap();
    let next = attachment.watch.output.recv().await.expect("live output");
    assert_eq!(&next[..], b"second");
    store.terminate(id).unwrap();
    let _ = std::fs::remove_file(&go);
}

// The gate is held across the call on purpose: the emulator must be stuck (on a worker
// thread) while the output floods past it.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_screen_the_output_outran_is_rebuilt_from_the_last_bytes() {
    let gate = Arc::new(Mutex::new(()));
    let store = store_with(|c| c.screens = Some(recording(&gate)));
    // 3 MiB while the emulator is stuck: far more than its feed holds.
    let held = gate.lock().unwrap();
    let mut req = exec(
        "printf FIRST; head -c 3145728 /dev/zero | tr '\\0' a; printf LAST; exec sleep 30",
        10_000,
    );
    req.tty = Some(true);
    req.until = Some(uexec_core::until::Until {
        pattern: Some("LAST".into()),
        ..Default::default()
    });
    let snap = store.exec_command(req).await.unwrap();
    let id = snap.session_id().expect("running");
    drop(held);
    let attachment = store.attach(id, false, 1024, None).await.unwrap();
    let screen = attachment.screen.expect("a kept screen");
    assert_eq!(
        screen.len(),
        REBUILD_SEED_BYTES,
        "rebuilt from the last bytes"
    );
    assert!(screen.ends_with(b"aLAST"));
    assert!(!screen.starts_with(b"FIRST"));
    store.terminate(id).unwrap();
}
