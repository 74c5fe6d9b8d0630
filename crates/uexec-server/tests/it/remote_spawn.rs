//! The remote backend's `spawn`, on its own: a process that ends before `spawn` returns, and
//! a spawn abandoned while `process/start` is on its way.

use std::net::SocketAddr;

use futures::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use uexec_client::RemoteBackend;
use uexec_core::backend::{Backend, SpawnSpec};

use crate::helpers::{pid_alive, TestServer};
use crate::remote_support::scenarios::{client_config, eventually, scratch_dir, spawn_spec};

/// `sh -c script`.
pub fn spec(script: &str) -> SpawnSpec {
    spawn_spec(&["/bin/sh", "-c", script])
}

/// The server's `exited` and `closed` may reach the process's feed before `spawn` looks at
/// it again: that is a process that ran, not a lost connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_ends_before_spawn_returns_is_spawned() {
    let server = TestServer::start().await;
    let backend = RemoteBackend::connect_with(&server.url(), None, client_config())
        .await
        .unwrap();
    for i in 0..40 {
        let spawned = backend
            .spawn(spec("exit 3"))
            .await
            .unwrap_or_else(|e| panic!("spawn {i}: {e:?}"));
        let exit = spawned.exit.await.unwrap();
        assert_eq!(exit.exit_code, Some(3), "spawn {i}: {exit:?}");
    }
}

/// A spawn whose caller gives up once `process/start` went out (the engine's call was
/// cancelled): the server started the process, nobody will ever look at it, so it is
/// terminated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_cancelled_after_its_start_went_out_terminates_the_remote_process() {
    let server = TestServer::start().await;
    let relay = StartAnswerWithholder::start(server.addr).await;
    let backend = RemoteBackend::connect_with(&relay.url(), None, client_config())
        .await
        .unwrap();
    let dir = scratch_dir("cancelled-spawn");
    let pid_file = dir.join("pid");
    let script = format!(
        "echo $$ > {}.tmp; mv {0}.tmp {0}; exec sleep 1000",
        pid_file.display()
    );
    // A boxed future: dropping it drops the spawn.
    let mut spawn = backend.spawn(spec(&script));
    tokio::select! {
        outcome = &mut spawn => panic!("spawn returned though its answer is withheld: {:?}", outcome.map(|_| ())),
        () = eventually("the server to start the process", || pid_file.exists()) => {}
    }
    drop(spawn);
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    eventually(&format!("pid {pid} to die"), || !pid_alive(pid)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A WebSocket relay on 127.0.0.1:0 that passes frames both ways until the client sends a
/// `process/start`, then stops passing the server's frames to the client (the start's
/// answer never arrives) while still passing the client's to the server.
struct StartAnswerWithholder {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl StartAnswerWithholder {
    async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                tokio::spawn(relay(tcp, upstream));
            }
        });
        Self { addr, task }
    }

    fn url(&self) -> String {
        format!("ws://{}", self.addr)
    }
}

impl Drop for StartAnswerWithholder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(tcp: TcpStream, upstream: SocketAddr) {
    let Ok(client) = tokio_tungstenite::accept_async(tcp).await else {
        return;
    };
    let Ok((server, _)) = tokio_tungstenite::connect_async(format!("ws://{upstream}")).await else {
        return;
    };
    let (mut to_client, mut from_client) = client.split();
    let (mut to_server, mut from_server) = server.split();
    let mut withholding = false;
    loop {
        tokio::select! {
            msg = from_client.next() => {
                let Some(Ok(msg)) = msg else { return };
                if msg.to_text().is_ok_and(|t| t.contains("\"process/start\"")) {
                    withholding = true;
                }
                if to_server.send(msg).await.is_err() {
                    return;
                }
            }
            msg = from_server.next() => {
                let Some(Ok(msg)) = msg else { return };
                if !withholding && to_client.send(msg).await.is_err() {
                    return;
                }
            }
        }
    }
}
