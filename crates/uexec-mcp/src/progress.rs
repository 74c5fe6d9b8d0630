//! Progress notifications: output that arrives during a call's window goes to the client as
//! `notifications/progress` when the call carries a progress token.
//!
//! The store holds at most ~1 MiB of output deltas per subscriber and counts the rest as
//! `OutputSkipped` (the forwarder itself may be starved of CPU), and a client may read
//! slowly (or not at all for a while): queueing one notification per output delta would make
//! the server's memory grow with the output, and the result would wait behind the backlog. So
//! the forwarder coalesces:
//!
//! 1. Before the call starts, subscribe to the store's events (nothing can be missed).
//! 2. A task drains the stream at once, whatever the client's pace: each output delta of the
//!    call's session adds to a running byte count and to a bounded [`Pending`] sample (the
//!    last [`PROGRESS_SAMPLE_MAX_BYTES`] of the text not yet sent); a skipped stretch adds to
//!    the count and restarts the sample.
//! 3. At most one notification is in flight. When it has gone, the next one carries what
//!    arrived meanwhile: `progress` is the running byte count, `message` the sample, led by
//!    `[… N bytes omitted …]` when the sample had to drop bytes. A client that keeps up gets
//!    every byte, in order.
//! 4. When the call is done, what is already published is folded in and the stream is
//!    dropped (a process may go on printing while a client that reads nothing holds up the
//!    sends); one last notification carries it after the one in flight: the result waits for
//!    at most two bounded notifications, never for a backlog.
//! 5. A cancelled call drops its forwarder: nothing more is sent.

use std::future::Future;
use std::pin::Pin;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use rmcp::RoleServer;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use uexec_core::{Event, EventKind, EventStream};

/// Most bytes of not-yet-sent output one progress message carries.
pub const PROGRESS_SAMPLE_MAX_BYTES: usize = 16 * 1024;

/// Which events belong to the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallTarget {
    /// `exec_command`: the session it starts, known by the call id.
    Call(String),
    /// `write_stdin`: an existing session.
    Session(i32),
}

impl CallTarget {
    fn matches(&self, event: &Event) -> bool {
        match self {
            CallTarget::Call(call_id) => event.call_id == *call_id,
            CallTarget::Session(id) => event.session_id == *id,
        }
    }
}

/// Output of the call not yet sent: a running count and a bounded sample (pure state).
#[derive(Debug, Default)]
pub struct Pending {
    /// Bytes of output seen since the call started (sent or not).
    total: u64,
    /// The last bytes not yet sent, starting on a UTF-8 boundary when the input did.
    sample: Vec<u8>,
    /// Bytes not yet sent that the sample dropped.
    omitted: u64,
}

impl Pending {
    pub fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        self.sample.extend_from_slice(chunk);
        if self.sample.len() > PROGRESS_SAMPLE_MAX_BYTES {
            let mut cut = self.sample.len() - PROGRESS_SAMPLE_MAX_BYTES;
            // Never start the sample inside a character.
            while cut < self.sample.len() && is_continuation(self.sample[cut]) {
                cut += 1;
            }
            self.sample.drain(..cut);
            self.omitted += cut as u64;
        }
    }

    /// Output the event stream counted instead of queueing (the forwarder fell behind): the
    /// sample so far no longer ends where the next bytes begin, so it is dropped too.
    pub fn skip(&mut self, bytes: u64) {
        self.total += bytes;
        self.omitted += self.sample.len() as u64 + bytes;
        self.sample.clear();
    }

    /// The next notification's `(progress, message)`, if any output is unsent.
    pub fn take(&mut self) -> Option<(u64, String)> {
        if self.sample.is_empty() && self.omitted == 0 {
            return None;
        }
        let text = String::from_utf8_lossy(&self.sample);
        let message = match std::mem::take(&mut self.omitted) {
            0 => text.into_owned(),
            n => format!("[… {n} bytes omitted …]{text}"),
        };
        self.sample.clear();
        Some((self.total, message))
    }
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

/// A running forwarder. [`ProgressForwarder::finish`] flushes and stops it; dropping it stops
/// it at once.
pub struct ProgressForwarder {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl ProgressForwarder {
    pub fn start(
        events: EventStream,
        target: CallTarget,
        token: ProgressToken,
        peer: Peer<RoleServer>,
    ) -> Self {
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(forward(events, target, token, peer, stopped));
        Self {
            stop: Some(stop),
            task,
        }
    }

    /// Sends what the call printed and is not sent yet, then stops.
    pub async fn finish(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

impl Drop for ProgressForwarder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Sending = Pin<Box<dyn Future<Output = ()> + Send>>;

async fn forward(
    mut events: EventStream,
    target: CallTarget,
    token: ProgressToken,
    peer: Peer<RoleServer>,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut pending = Pending::default();
    let mut in_flight: Option<Sending> = None;
    loop {
        if in_flight.is_none() {
            in_flight = pending.take().map(|p| notify(&peer, &token, p));
        }
        // Events last: under a flood they are always ready and must not starve the others.
        tokio::select! {
            biased;
            _ = &mut stopped => break,
            () = async {
                match in_flight.as_mut() {
                    Some(sending) => sending.await,
                    None => std::future::pending().await,
                }
            } => in_flight = None,
            event = events.recv() => match event {
                Some(e) => fold(&mut pending, &target, &e),
                None => break,
            },
        }
    }
    // What was published before the stop, not what a process still printing adds meanwhile.
    for _ in 0..events.len() {
        match events.try_recv() {
            Ok(e) => fold(&mut pending, &target, &e),
            Err(_) => break,
        }
    }
    // The last sends may wait on a client that reads nothing: the stream is let go first, or
    // a process still printing would fill it for as long as they wait.
    drop(events);
    if let Some(sending) = in_flight {
        sending.await;
    }
    if let Some(p) = pending.take() {
        notify(&peer, &token, p).await;
    }
}

fn fold(pending: &mut Pending, target: &CallTarget, event: &Event) {
    if !target.matches(event) {
        return;
    }
    match &event.kind {
        EventKind::OutputDelta { chunk } => pending.push(chunk),
        EventKind::OutputSkipped { bytes } => pending.skip(*bytes),
        _ => {}
    }
}

fn notify(
    peer: &Peer<RoleServer>,
    token: &ProgressToken,
    (progress, message): (u64, String),
) -> Sending {
    let peer = peer.clone();
    let param =
        ProgressNotificationParam::new(token.clone(), progress as f64).with_message(message);
    Box::pin(async move {
        if let Err(e) = peer.notify_progress(param).await {
            tracing::debug!(error = %e, "progress notification not delivered");
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_that_keeps_up_gets_every_byte() {
        let mut p = Pending::default();
        assert_eq!(p.take(), None);
        p.push(b"one\n");
        assert_eq!(p.take(), Some((4, "one\n".to_owned())));
        p.push(b"two\n");
        p.push(b"three\n");
        assert_eq!(p.take(), Some((14, "two\nthree\n".to_owned())));
        assert_eq!(p.take(), None);
    }

    #[test]
    fn a_backlog_is_a_count_and_the_last_bytes() {
        let mut p = Pending::default();
        for _ in 0..1000 {
            p.push(&[b'x'; 8192]);
        }
        let (progress, message) = p.take().unwrap_or_default();
        assert_eq!(progress, 8_192_000);
        let omitted = 8_192_000 - PROGRESS_SAMPLE_MAX_BYTES;
        let marker = format!("[… {omitted} bytes omitted …]");
        assert!(message.starts_with(&marker), "{}", &message[..60]);
        assert_eq!(message.len(), marker.len() + PROGRESS_SAMPLE_MAX_BYTES);
    }

    #[test]
    fn skipped_output_counts_and_the_sample_restarts_after_it() {
        let mut p = Pending::default();
        p.push(b"before ");
        p.skip(1000);
        p.push(b"after");
        assert_eq!(
            p.take(),
            Some((1012, "[… 1007 bytes omitted …]after".to_owned()))
        );
    }

    #[test]
    fn the_sample_never_starts_inside_a_character() {
        let mut p = Pending::default();
        let text = "é".repeat(PROGRESS_SAMPLE_MAX_BYTES); // two bytes each
        p.push(b"a");
        p.push(text.as_bytes());
        let (_, message) = p.take().unwrap_or_default();
        let body = message
            .rsplit_once("…]")
            .map(|(_, b)| b)
            .unwrap_or_default();
        assert!(body.chars().all(|c| c == 'é'), "{}", &body[..8]);
        assert!(!message.contains('\u{FFFD}'));
    }
}
