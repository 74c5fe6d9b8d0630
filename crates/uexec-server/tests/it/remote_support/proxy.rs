//! A TCP proxy on 127.0.0.1:0 between the remote backend and its server, so a test can break
//! the connection the way a network does: cut every live connection, refuse new ones, or
//! hold new ones (accepted, not yet forwarded) until told to go on.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::AbortHandle;

/// What the proxy does with a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Forward,
    /// Accept and close at once.
    Refuse,
    /// Accept and wait (the client's handshake hangs) until the admission changes.
    Hold,
}

pub struct TcpProxy {
    addr: SocketAddr,
    admission: watch::Sender<Admission>,
    live: Arc<Mutex<Vec<AbortHandle>>>,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl TcpProxy {
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (admission, _) = watch::channel(Admission::Forward);
        let live: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let accepted = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn({
            let admission = admission.subscribe();
            let live = live.clone();
            let accepted = accepted.clone();
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    accepted.fetch_add(1, Ordering::SeqCst);
                    let admission = admission.clone();
                    let conn = tokio::spawn(forward(client, upstream, admission));
                    live.lock().unwrap().push(conn.abort_handle());
                }
            }
        });
        Self {
            addr,
            admission,
            live,
            accepted,
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    /// Drops every live connection (both sockets: each side sees the connection end).
    pub fn cut(&self) {
        for conn in self.live.lock().unwrap().drain(..) {
            conn.abort();
        }
    }

    pub fn admit(&self, admission: Admission) {
        self.admission.send_replace(admission);
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.task.abort();
        self.cut();
    }
}

async fn forward(
    mut client: TcpStream,
    upstream: SocketAddr,
    mut admission: watch::Receiver<Admission>,
) {
    let decided = admission
        .wait_for(|a| *a != Admission::Hold)
        .await
        .map(|a| *a);
    if !matches!(decided, Ok(Admission::Forward)) {
        return;
    }
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
}
