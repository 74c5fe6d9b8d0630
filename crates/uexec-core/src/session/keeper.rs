//! A terminal screen kept per PTY session, so that a person who attaches sees the screen as
//! it is now (a full-screen program that drew itself long ago included), not a replay of
//! the last bytes printed.
//!
//! The emulator comes from the face (the daemon's is `vt100`); the engine only feeds it,
//! and off the output path:
//! 1. a keeper task per PTY session reads a bounded tap of its output
//!    ([`Session::watch_output`](crate::session::Session)) and feeds the emulator;
//! 2. a person attaching asks the keeper: under the session's output lock, the keeper takes
//!    what is still queued for it and the person's live feed starts, so the screen it draws
//!    and the feed that follows have no gap and no byte twice;
//! 3. output faster than the emulator parses overflows the tap: the keeper lets go of it
//!    (stale) rather than fall ever further behind, and the next attach rebuilds the screen
//!    from the last [`REBUILD_SEED_BYTES`] printed, then keeps it live again.
//!
//! A keeper holds its session weakly: it ends with the session.

use std::sync::{Arc, Weak};

use tokio::sync::{mpsc, oneshot, watch};

use super::{OutputWatch, Session};

/// Output a stale screen is rebuilt from.
pub const REBUILD_SEED_BYTES: usize = 256 * 1024;

/// A terminal emulator's screen.
pub trait Screen: Send + 'static {
    /// Parses output.
    fn feed(&mut self, bytes: &[u8]);
    /// The terminal's new size (no reflow: as a terminal does).
    fn resize(&mut self, rows: u16, cols: u16);
    /// Escape codes that draw this screen on a terminal of its size, cursor included.
    fn render(&self) -> Vec<u8>;
}

/// Makes a screen of `rows` × `cols`.
#[derive(Clone)]
pub struct ScreenFactory(pub Arc<dyn Fn(u16, u16) -> Box<dyn Screen> + Send + Sync>);

impl ScreenFactory {
    pub fn new(make: impl Fn(u16, u16) -> Box<dyn Screen> + Send + Sync + 'static) -> Self {
        Self(Arc::new(make))
    }

    fn make(&self, (rows, cols): (u16, u16)) -> Box<dyn Screen> {
        (self.0)(rows.max(1), cols.max(1))
    }
}

impl std::fmt::Debug for ScreenFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScreenFactory")
    }
}

/// The screen now, and the output that follows it.
pub struct ScreenView {
    /// Draws the screen (see [`Screen::render`]).
    pub screen: Vec<u8>,
    /// Every byte printed after the screen was taken (its seed is empty).
    pub watch: OutputWatch,
}

/// A person asking for the screen.
struct ViewRequest {
    size: Option<(u16, u16)>,
    reply: oneshot::Sender<ScreenView>,
}

/// Views asked for and not yet drawn: people attaching, a handful at most; one more waits.
const VIEW_QUEUE: usize = 8;

/// A session's way to its keeper.
#[derive(Debug, Clone)]
pub struct KeeperHandle {
    views: mpsc::Sender<ViewRequest>,
    /// The terminal's latest size: resizes replace each other, nothing queues.
    size: Arc<watch::Sender<(u16, u16)>>,
}

impl KeeperHandle {
    /// The screen now (at `size`, which the screen keeps, when given) and a live feed from
    /// there. `None` when the keeper is gone (the session is ending).
    pub async fn view(&self, size: Option<(u16, u16)>) -> Option<ScreenView> {
        let (reply, rx) = oneshot::channel();
        self.views.send(ViewRequest { size, reply }).await.ok()?;
        rx.await.ok()
    }

    /// The session's terminal size, as last set.
    pub fn size(&self) -> (u16, u16) {
        *self.size.borrow()
    }

    /// The session's terminal was resized.
    pub fn resize(&self, rows: u16, cols: u16) {
        self.size.send_replace((rows.max(1), cols.max(1)));
    }
}

/// Starts the keeper of `session`'s screen, `size` being its terminal's.
pub(crate) fn start(
    session: &Arc<Session>,
    factory: ScreenFactory,
    size: (u16, u16),
) -> KeeperHandle {
    let (views, view_rx) = mpsc::channel(VIEW_QUEUE);
    let (size_tx, size_rx) = watch::channel(size);
    let keeper = Keeper {
        session: Arc::downgrade(session),
        screen: factory.make(size),
        size,
        factory,
        tap: Some(session.watch_output(REBUILD_SEED_BYTES)),
    };
    tokio::spawn(keeper.run(view_rx, size_rx));
    KeeperHandle {
        views,
        size: Arc::new(size_tx),
    }
}

struct Keeper {
    session: Weak<Session>,
    factory: ScreenFactory,
    screen: Box<dyn Screen>,
    size: (u16, u16),
    /// `None` while stale.
    tap: Option<OutputWatch>,
}

impl Keeper {
    async fn run(
        mut self,
        mut views: mpsc::Receiver<ViewRequest>,
        mut sizes: watch::Receiver<(u16, u16)>,
    ) {
        if let Some(tap) = &mut self.tap {
            let seed = std::mem::take(&mut tap.seed);
            self.screen.feed(&seed);
        }
        loop {
            tokio::select! {
                chunk = next_chunk(&mut self.tap) => match chunk {
                    Some(bytes) if !self.lagged() => self.screen.feed(&bytes),
                    // Behind (chunks were dropped), or the output ended: stop reading; a
                    // view rebuilds from the buffer if it must.
                    _ => self.tap = None,
                },
                changed = sizes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let size = *sizes.borrow_and_update();
                    if size != self.size {
                        self.size = size;
                        self.screen.resize(size.0, size.1);
                    }
                }
                request = views.recv() => match request {
                    None => return,
                    Some(ViewRequest { size, reply }) => {
                        let Some(view) = self.view(size) else { return };
                        let _ = reply.send(view);
                    }
                },
            }
        }
    }

    fn lagged(&self) -> bool {
        self.tap
            .as_ref()
            .is_some_and(|t| t.lagged.load(std::sync::atomic::Ordering::SeqCst))
    }

    fn view(&mut self, size: Option<(u16, u16)>) -> Option<ScreenView> {
        let session = self.session.upgrade()?;
        let synced = session.sync_screen(self.tap.as_mut());
        match synced.rebuilt_tap {
            Some(tap) => {
                // Stale: a new screen from the last bytes printed, live again from here.
                self.screen = self.factory.make(self.size);
                self.screen.feed(&tap.seed);
                self.tap = Some(OutputWatch {
                    seed: Vec::new(),
                    ..tap
                });
            }
            None => {
                for bytes in synced.queued {
                    self.screen.feed(&bytes);
                }
            }
        }
        if let Some((rows, cols)) = size {
            if (rows, cols) != self.size {
                self.size = (rows.max(1), cols.max(1));
                self.screen.resize(self.size.0, self.size.1);
            }
        }
        Some(ScreenView {
            screen: self.screen.render(),
            watch: synced.person,
        })
    }
}

async fn next_chunk(tap: &mut Option<OutputWatch>) -> Option<bytes::Bytes> {
    match tap {
        Some(tap) => tap.output.recv().await,
        None => std::future::pending().await,
    }
}

/// What [`Session::sync_screen`] took under the output lock.
pub(crate) struct Synced {
    /// The keeper's queued chunks (when it was live).
    pub queued: Vec<bytes::Bytes>,
    /// A new tap for a stale keeper, its seed the last [`REBUILD_SEED_BYTES`].
    pub rebuilt_tap: Option<OutputWatch>,
    /// The person's feed.
    pub person: OutputWatch,
}
