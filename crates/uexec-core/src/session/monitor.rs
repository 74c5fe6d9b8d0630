//! The session's side of policy monitors ([`crate::policy::Monitored`]): what a monitor
//! may do to the session it watches. The session counts its monitors, and its End waits for
//! them to settle, at most `LATE_FAILURE_GRACE_MS` after the exit.

use futures::future::BoxFuture;
use futures::FutureExt;

use super::{Lifecycle, Session};
use crate::policy::Monitored;

impl Monitored for Session {
    fn fail_and_terminate(&self, message: String) {
        Session::fail_and_terminate(self, message);
    }

    fn record_verdict(&self, message: String) {
        self.state.send_if_modified(|s| s.record_verdict(message));
    }

    fn notice(&self, message: String) {
        self.state.send_if_modified(|s| s.notice(message));
    }

    fn exited(&self) -> BoxFuture<'static, ()> {
        let mut rx = self.state.subscribe();
        async move {
            let _ = rx.wait_for(Lifecycle::exited).await.is_ok();
        }
        .boxed()
    }
}
