//! The pump: one task per session that owns the backend's output channel and exit report.
//!
//! In order, for every chunk: the transcript's directory exists before the first byte shows
//! (a result with output can name it); the buffers and taps take it under the output lock;
//! the output mark moves (waking a call whose pattern matched); deltas go out on character
//! boundaries; then the transcript writer takes it, so a disk slower than the output holds
//! the pump (and the process at its pipe), never memory. Output is read before the exit
//! report, so bytes written before the exit land before it is recorded.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::{taps, Lifecycle, Session};
use crate::backend::{ExitReport, OutputChunk};
use crate::events::{lock, EventKind};
use crate::limits::OUTPUT_DELTA_MAX_BYTES;
use crate::transcript::TranscriptFeed;
use crate::utf8::split_chunks;

impl Session {
    pub(super) async fn pump(
        self: Arc<Self>,
        mut output: mpsc::Receiver<OutputChunk>,
        exit: oneshot::Receiver<ExitReport>,
        mut transcript: Option<TranscriptFeed>,
    ) {
        let mut exit = exit;
        let mut exit_pending = true;
        let mut output_open = true;
        while output_open || exit_pending {
            tokio::select! {
                // Output first: bytes written before the exit land before it is recorded.
                biased;
                chunk = output.recv(), if output_open => match chunk {
                    Some(chunk) => {
                        // The transcript's directory exists before the first byte shows:
                        // a snapshot with output can name it.
                        if let Some(feed) = &mut transcript {
                            if !feed.begin().await {
                                transcript = None;
                            }
                        }
                        self.on_output(&chunk.bytes);
                        // In order, after the buffers: a disk slower than the output holds
                        // the pump here (and the process at its pipe), never memory.
                        if let Some(feed) = &mut transcript {
                            if !feed.send(chunk.bytes).await {
                                transcript = None;
                            }
                        }
                    }
                    None => {
                        output_open = false;
                        // Closed output means a complete transcript: the last write first.
                        if let Some(feed) = transcript.take() {
                            feed.close().await;
                        }
                        self.on_close();
                    }
                },
                report = &mut exit, if exit_pending => {
                    exit_pending = false;
                    // A backend that vanished without a report: exited, code unknown.
                    self.on_exit(report.unwrap_or_default());
                }
            }
        }
    }

    fn on_output(&self, bytes: &[u8]) {
        if let Some(m) = &self.metrics {
            m.output(bytes.len());
        }
        let whole = {
            let mut out = lock(&self.output);
            out.pending.push(bytes);
            out.aggregated.push(bytes);
            taps::offer(&mut out.taps, bytes);
            let offset = out.total;
            out.total += bytes.len() as u64;
            let total = out.total;
            self.mark.send_if_modified(|m| {
                m.total = total;
                m.last_at = Some(Instant::now());
                let mut announce = std::mem::take(&mut m.want_output);
                if m.matched.is_none() {
                    if let Some(found) = m.matcher.as_mut().and_then(|mt| mt.feed(bytes, offset)) {
                        m.matched = Some(found);
                        announce = true;
                    }
                }
                announce
            });
            out.delta_carry.join(bytes)
        };
        self.publish_deltas(&whole);
    }

    fn on_close(&self) {
        let rest = lock(&self.output).delta_carry.finish();
        self.publish_deltas(&rest);
        self.state.send_if_modified(Lifecycle::output_closed);
    }

    fn publish_deltas(&self, bytes: &[u8]) {
        if bytes.is_empty() || !self.events.has_subscribers() {
            return;
        }
        let ended = lock(&self.ended);
        if *ended {
            return;
        }
        for chunk in split_chunks(bytes, OUTPUT_DELTA_MAX_BYTES) {
            self.events.publish(
                &self.info.call_id,
                self.info.id,
                EventKind::OutputDelta {
                    chunk: bytes::Bytes::copy_from_slice(chunk),
                },
            );
        }
    }

    fn on_exit(&self, report: ExitReport) {
        self.state
            .send_if_modified(|s| s.exit_reported(report, Instant::now()));
    }
}
