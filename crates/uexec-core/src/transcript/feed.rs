//! A session's transcript as its pump and its readers see it: the files are made in the
//! background as the session starts (a spawn never waits for the disk), then one writer
//! thread per transcript is fed every read in order, so the disk write overlaps the next
//! read instead of adding to it.
//!
//! 1. [`Transcript::start`] plans the files on a blocking thread; the session keeps the
//!    [`Transcript`] (what readers ask) and its pump the [`TranscriptFeed`].
//! 2. At the first read, [`TranscriptFeed::begin`] waits for the files and starts the writer
//!    (a session that prints nothing costs no thread); if the files cannot be made, the
//!    transcript stops at byte 0.
//! 3. Each read is sent to a bounded queue: a disk slower than the output holds the pump
//!    (and the command at its pipe), never memory.
//! 4. After each write the writer publishes what is on disk (a `watch`): readers see the
//!    total, the rotation and a stop at once, and a result can wait for the writer to catch
//!    up ([`TranscriptProgress::reached`]). On a stop the writer ends, and so does the feed.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use super::{TranscriptInfo, TranscriptPlan, TranscriptStop, TranscriptWriter};

/// Most a result that cut output waits for the transcript to catch up before it says which
/// of the cut bytes are on disk (the writer is at most its queue, ~1 MiB, behind).
pub const RESULT_WAITS_FOR_TRANSCRIPT_MS: u64 = 1000;

/// Chunks in flight to a transcript's writer thread: at most this many reads (64 KiB each)
/// wait; a session that prints faster than the disk takes them waits for the disk.
const WRITER_QUEUE_CHUNKS: usize = 16;

/// A session's transcript: its files are made in the background as the session starts, then
/// a writer thread is fed in output order, so the disk write overlaps the next read instead
/// of adding to it.
#[derive(Debug)]
pub(crate) struct Transcript {
    /// Where it is planned to be (where it is, once [`Shared::dir`] is set).
    planned: PathBuf,
    shared: std::sync::Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// Where it is: set when the first read reaches it (the directory exists by then).
    dir: std::sync::OnceLock<PathBuf>,
    /// What is on disk, published by the writer after each write.
    progress: tokio::sync::watch::Sender<Progress>,
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            dir: std::sync::OnceLock::new(),
            progress: tokio::sync::watch::Sender::new(Progress::default()),
        }
    }
}

/// What a transcript's writer has done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Progress {
    total: u64,
    first_kept: u64,
    stop: Option<TranscriptStop>,
}

impl Shared {
    fn publish(&self, info: &TranscriptInfo) {
        self.progress.send_if_modified(|p| {
            let next = Progress {
                total: info.total,
                first_kept: info.first_kept,
                stop: info.stop.clone(),
            };
            let changed = *p != next;
            *p = next;
            changed
        });
    }
}

/// The pump's end of a transcript: send each read, in order; [`TranscriptFeed::close`]
/// waits until everything sent is written. The writer thread starts with the first read: a
/// session that prints nothing (`true`) costs no thread, and its end waits for no disk.
#[derive(Debug)]
pub(crate) struct TranscriptFeed {
    state: FeedState,
}

type Opening = tokio::task::JoinHandle<io::Result<TranscriptWriter>>;

#[derive(Debug)]
enum FeedState {
    /// Nothing printed yet; the files are being made (or are made).
    Opening(Opening, std::sync::Arc<Shared>),
    Running {
        tx: tokio::sync::mpsc::Sender<bytes::Bytes>,
        written: tokio::sync::oneshot::Receiver<()>,
    },
    Gone,
}

impl TranscriptFeed {
    /// At the first read: waits until the files exist (usually long since) and starts the
    /// writer, so that whatever shows this read can name the transcript. False once the
    /// transcript is gone.
    pub async fn begin(&mut self) -> bool {
        if let FeedState::Opening(..) = self.state {
            let FeedState::Opening(opening, shared) =
                std::mem::replace(&mut self.state, FeedState::Gone)
            else {
                return false;
            };
            let opened = opening.await.unwrap_or_else(|e| Err(io::Error::other(e)));
            match opened.and_then(|writer| {
                let dir = writer.dir.clone();
                start_writer(writer, shared.clone()).map(|running| (dir, running))
            }) {
                Ok((dir, (tx, written))) => {
                    let _ = shared.dir.set(dir);
                    self.state = FeedState::Running { tx, written };
                }
                Err(e) => {
                    // Nothing of what is printed reaches the disk: say so to readers.
                    tracing::warn!("no transcript: {e}");
                    shared.progress.send_modify(|p| {
                        p.stop = Some(TranscriptStop::new(0, &e));
                    });
                    return false;
                }
            }
        }
        matches!(self.state, FeedState::Running { .. })
    }

    /// Sends one read; false once the transcript is gone (or stopped: its writer ended).
    pub async fn send(&mut self, chunk: bytes::Bytes) -> bool {
        if !self.begin().await {
            return false;
        }
        match &self.state {
            FeedState::Running { tx, .. } => tx.send(chunk).await.is_ok(),
            _ => false,
        }
    }

    /// Ends the transcript and waits for its last write (a session that printed nothing
    /// does not wait for its files to be made).
    pub async fn close(self) {
        match self.state {
            FeedState::Opening(..) | FeedState::Gone => {}
            FeedState::Running { tx, written } => {
                drop(tx);
                let _ = written.await;
            }
        }
    }
}

/// The writer thread of one transcript; it ends (after the last write) when `tx` is dropped,
/// or as soon as a write fails (step 3 of the module docs).
#[allow(clippy::type_complexity)]
fn start_writer(
    mut writer: TranscriptWriter,
    shared: std::sync::Arc<Shared>,
) -> io::Result<(
    tokio::sync::mpsc::Sender<bytes::Bytes>,
    tokio::sync::oneshot::Receiver<()>,
)> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(WRITER_QUEUE_CHUNKS);
    let (done, written) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("uexec-transcript".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            while let Some(chunk) = rx.blocking_recv() {
                writer.append(&chunk);
                shared.publish(&writer.info());
                if writer.stopped() {
                    break;
                }
            }
            // The queue goes with the thread: a stopped transcript holds no output.
            drop(rx);
            writer.finish();
            let _ = done.send(());
        })?;
    Ok((tx, written))
}

impl Transcript {
    /// A transcript and its feed: the files are made on a blocking thread from now on (a
    /// spawn never waits for the disk: a metadata write can take milliseconds while a build
    /// keeps the disk busy); the writer thread starts with the first read.
    pub fn start(plan: TranscriptPlan) -> (Self, TranscriptFeed) {
        let shared = std::sync::Arc::new(Shared::default());
        let planned = plan.dir.clone();
        let opening = tokio::task::spawn_blocking(move || plan.open());
        let feed = TranscriptFeed {
            state: FeedState::Opening(opening, shared.clone()),
        };
        (Self { planned, shared }, feed)
    }

    /// Where it is on disk, once the session printed something (a session that printed
    /// nothing names none: there is nothing to read).
    pub fn written_dir(&self) -> Option<PathBuf> {
        self.shared.dir.get().cloned()
    }

    /// What is on disk now. A directory deleted since the writer last said what it wrote
    /// has nothing (one `stat`, and only for a transcript with bytes).
    pub fn info(&self) -> TranscriptInfo {
        let progress = self.shared.progress.borrow().clone();
        let dir = self.shared.dir.get().unwrap_or(&self.planned).clone();
        let stop = match progress.stop {
            None if progress.total > 0 && !dir.is_dir() => {
                Some(TranscriptStop::deleted(progress.total))
            }
            stop => stop,
        };
        TranscriptInfo {
            dir,
            total: progress.total,
            first_kept: progress.first_kept,
            stop,
        }
    }

    /// A handle to wait on the writer with ([`TranscriptProgress::reached`]).
    pub fn progress(&self) -> TranscriptProgress {
        TranscriptProgress(self.shared.progress.subscribe())
    }
}

/// Waits on a transcript's writer without holding the session.
#[derive(Debug)]
pub(crate) struct TranscriptProgress(tokio::sync::watch::Receiver<Progress>);

impl TranscriptProgress {
    /// Until every byte before session offset `offset` is on disk or the transcript
    /// stopped, or `within` passed: what a result is about to say then holds.
    pub async fn reached(&mut self, offset: u64, within: Duration) {
        let done = self.0.wait_for(|p| p.total >= offset || p.stop.is_some());
        let _ = tokio::time::timeout(within, done).await;
    }
}
