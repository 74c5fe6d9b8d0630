//! People watching from the side: live taps of the output, and the input lease.
//!
//! A tap is bounded in bytes, not in chunks: a watcher that falls behind is marked lagged
//! and catches up from the aggregated buffer ([`Session::resync`]), so a slow terminal costs
//! at most [`TAP_MAX_QUEUED_BYTES`] and never slows the pump. Registering a tap and reading
//! its seed happen under the output lock: no gap, no byte twice.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::{keeper, OutputBuffers, Session};
use crate::events::lock;

/// One live watcher's feed: bounded in bytes; a watcher that falls behind is marked lagged
/// and catches up from the buffer instead (what does not fit is dropped, never queued
/// without end).
pub(super) struct Tap {
    tx: mpsc::UnboundedSender<bytes::Bytes>,
    /// Bytes sent and not yet received.
    queued: Arc<std::sync::atomic::AtomicUsize>,
    lagged: Arc<std::sync::atomic::AtomicBool>,
}

impl Tap {
    fn offer(&self, chunk: &bytes::Bytes) {
        use std::sync::atomic::Ordering::SeqCst;
        let queued = self.queued.load(SeqCst);
        if queued + chunk.len() > TAP_MAX_QUEUED_BYTES || self.lagged.load(SeqCst) {
            self.lagged.store(true, SeqCst);
            return;
        }
        self.queued.fetch_add(chunk.len(), SeqCst);
        if self.tx.send(chunk.clone()).is_err() {
            self.queued.fetch_sub(chunk.len(), SeqCst);
        }
    }
}

/// Offers `bytes` to every live watcher, forgetting those that went away.
pub(super) fn offer(taps: &mut Vec<Tap>, bytes: &[u8]) {
    if taps.is_empty() {
        return;
    }
    taps.retain(|t| !t.tx.is_closed());
    let chunk = bytes::Bytes::copy_from_slice(bytes);
    for tap in taps.iter() {
        tap.offer(&chunk);
    }
}

/// Bytes a live watcher may have in flight before it is marked lagged: a burst a terminal
/// emulator takes a moment to parse fits; a flood it cannot follow does not.
const TAP_MAX_QUEUED_BYTES: usize = 1 << 20;

/// The receiving end of a live watcher's feed.
pub struct TapReceiver {
    rx: mpsc::UnboundedReceiver<bytes::Bytes>,
    queued: Arc<std::sync::atomic::AtomicUsize>,
}

impl TapReceiver {
    /// The next chunk; `None` once the session is gone.
    pub async fn recv(&mut self) -> Option<bytes::Bytes> {
        let chunk = self.rx.recv().await?;
        self.queued
            .fetch_sub(chunk.len(), std::sync::atomic::Ordering::SeqCst);
        Some(chunk)
    }

    /// The next chunk if one is queued.
    pub fn try_recv(&mut self) -> Result<bytes::Bytes, mpsc::error::TryRecvError> {
        let chunk = self.rx.try_recv()?;
        self.queued
            .fetch_sub(chunk.len(), std::sync::atomic::Ordering::SeqCst);
        Ok(chunk)
    }
}

/// A live view of a session's output: where it stands now, then what follows.
pub struct OutputWatch {
    /// The last bytes printed before the watch began (to redraw a screen from).
    pub seed: Vec<u8>,
    /// Every byte printed since, in order, unless [`OutputWatch::lagged`].
    pub output: TapReceiver,
    /// Set when chunks were dropped: call [`Session::resync`] (through the store).
    pub lagged: Arc<std::sync::atomic::AtomicBool>,
}

/// Registers a live watcher: the last `seed_bytes` printed, then every byte after.
fn add_tap(out: &mut OutputBuffers, seed_bytes: usize) -> OutputWatch {
    // Unbounded in chunks, bounded in bytes: `Tap::offer` queues at most
    // TAP_MAX_QUEUED_BYTES and marks the watcher lagged beyond.
    let (tx, rx) = mpsc::unbounded_channel();
    let lagged = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let queued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    out.taps.push(Tap {
        tx,
        queued: queued.clone(),
        lagged: lagged.clone(),
    });
    OutputWatch {
        seed: out.aggregated.last_bytes(seed_bytes),
        output: TapReceiver { rx, queued },
        lagged,
    }
}

/// The input lease of a session; released when dropped.
pub struct Lease(Arc<Session>);

impl Drop for Lease {
    fn drop(&mut self) {
        self.0
            .lease
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Session {
    /// Starts a live view: the last `seed_bytes` printed, then everything after, with no gap
    /// and no byte twice (both under the output lock).
    pub fn watch_output(&self, seed_bytes: usize) -> OutputWatch {
        add_tap(&mut lock(&self.output), seed_bytes)
    }

    /// Starts a follower's view (`uexec run`): every byte still kept, from the start when
    /// nothing was cut yet, then everything after; with the session offset of its first byte.
    pub fn follow_output(&self) -> (OutputWatch, u64) {
        let mut out = lock(&self.output);
        // Kept bytes are one run only while nothing was cut between head and tail.
        let kept = if out.aggregated.omitted() == 0 {
            out.aggregated.len()
        } else {
            0
        };
        let watch = add_tap(&mut out, kept);
        let from = out.total - watch.seed.len() as u64;
        (watch, from)
    }

    /// Catches a lagged follower up, whose next byte is at session offset `next`: what it
    /// still has queued is dropped, and it gets the last bytes printed since (at most
    /// `tail_bytes`, to see where things stand), with their session offset; the feed goes on
    /// after them. The follower skipped what lies between `next` and that offset.
    pub fn catch_up(
        &self,
        watch: &mut OutputWatch,
        next: u64,
        tail_bytes: usize,
    ) -> (Vec<u8>, u64) {
        let out = lock(&self.output);
        while watch.output.try_recv().is_ok() {}
        watch
            .lagged
            .store(false, std::sync::atomic::Ordering::SeqCst);
        let since = usize::try_from(out.total.saturating_sub(next)).unwrap_or(usize::MAX);
        let tail = out.aggregated.last_run(since.min(tail_bytes));
        let from = out.total - tail.len() as u64;
        (tail, from)
    }

    /// For a screen keeper, under the output lock: what is queued for its `tap` (or, when it
    /// has none or it dropped chunks, a new tap to rebuild from), and a person's new feed.
    pub(crate) fn sync_screen(&self, tap: Option<&mut OutputWatch>) -> keeper::Synced {
        let mut out = lock(&self.output);
        let (queued, rebuilt_tap) = match tap {
            Some(tap) if !tap.lagged.load(std::sync::atomic::Ordering::SeqCst) => {
                let mut queued = Vec::new();
                while let Ok(bytes) = tap.output.try_recv() {
                    queued.push(bytes);
                }
                (queued, None)
            }
            _ => (
                Vec::new(),
                Some(add_tap(&mut out, keeper::REBUILD_SEED_BYTES)),
            ),
        };
        let person = add_tap(&mut out, 0);
        keeper::Synced {
            queued,
            rebuilt_tap,
            person,
        }
    }

    /// Sets its terminal's size (at least 1x1), and its kept screen's.
    pub fn resize_terminal(&self, rows: u16, cols: u16) -> Result<(), crate::error::ExecError> {
        let (rows, cols) = (rows.max(1), cols.max(1));
        self.control()
            .resize(rows, cols)
            .map_err(|e| crate::error::ExecError::Write {
                session_id: self.id(),
                message: e.message,
            })?;
        if let Some(keeper) = self.screen() {
            keeper.resize(rows, cols);
        }
        Ok(())
    }

    /// The keeper of this session's screen, if it has one.
    pub fn screen(&self) -> Option<&keeper::KeeperHandle> {
        self.screen.get()
    }

    /// Catches a lagged watch up: drops what it has queued and returns a new seed (the last
    /// `seed_bytes`), under the output lock so nothing is missed or repeated after it.
    pub fn resync(&self, watch: &mut OutputWatch, seed_bytes: usize) -> Vec<u8> {
        let out = lock(&self.output);
        while watch.output.try_recv().is_ok() {}
        watch
            .lagged
            .store(false, std::sync::atomic::Ordering::SeqCst);
        out.aggregated.last_bytes(seed_bytes)
    }

    /// Takes the input lease (a person types; the model's writes are refused meanwhile);
    /// `None` when someone holds it already.
    pub fn take_lease(self: &Arc<Self>) -> Option<Lease> {
        self.lease
            .compare_exchange(
                false,
                true,
                std::sync::atomic::Ordering::SeqCst,
                std::sync::atomic::Ordering::SeqCst,
            )
            .is_ok()
            .then(|| Lease(self.clone()))
    }

    /// Whether a person holds the input lease.
    pub fn leased(&self) -> bool {
        self.lease.load(std::sync::atomic::Ordering::SeqCst)
    }
}
