//! What the logs may not show: a session id is what `resumeSessionId` takes, so whoever reads
//! it can take over the session's processes. Nothing at info level or above names one.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use uexec_client::RemoteBackend;
use uexec_core::backend::Backend;
use uexec_server::ServerConfig;

use crate::helpers::{eventually, TestServer};
use crate::remote_support::proxy::{Admission, TcpProxy};
use crate::remote_support::scenarios::client_config;

/// Everything logged at info level and above, as text.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

// One thread: the subscriber set for this test sees every task of it.
#[tokio::test(flavor = "current_thread")]
async fn session_ids_are_not_logged_at_info_level() {
    let logs = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer({
            let logs = logs.clone();
            move || logs.clone()
        })
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let config = ServerConfig {
        detached_session_ttl: Duration::from_millis(50),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(config, None).await;
    let proxy = TcpProxy::start(server.addr).await;
    let backend = RemoteBackend::connect_with(&proxy.url(), None, client_config())
        .await
        .unwrap();
    let first = backend.session_id().unwrap();
    // The connection drops; the server expires the session before the client gets through
    // again, so resuming it is refused (with its id in the server's message).
    proxy.admit(Admission::Hold);
    proxy.cut();
    eventually("the server to expire the session", || {
        server.server.session_count() == 0
    })
    .await;
    proxy.admit(Admission::Forward);
    eventually("the client to give up resuming", || {
        backend.session_id().is_none()
    })
    .await;
    // The next spawn opens a fresh session.
    let spawned = backend
        .spawn(crate::remote_spawn::spec("true"))
        .await
        .unwrap();
    let second = backend.session_id().unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(10), spawned.exit).await;

    let text = logs.text();
    assert!(
        text.contains("exec-server connection lost"),
        "the logs were captured: {text}"
    );
    for id in [first, second] {
        assert!(!text.contains(&id), "session id {id} logged:\n{text}");
    }
}
