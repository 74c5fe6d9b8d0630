//! `wss://`: the listener with a certificate made at test time, the remote backend trusting
//! it through `ClientConfig::trust` (what `--remote-ca` sets), and refusing it otherwise.

use std::sync::Arc;

use uexec_client::{ClientConfig, RemoteBackend};
use uexec_core::LocalBackend;
use uexec_net::tls::{server_config, ClientTrust};
use uexec_net::ListenerOptions;
use uexec_server::transport::ws::WsListener;
use uexec_server::{ExecServer, ServerConfig};

struct TlsServer {
    url: String,
    ca: std::path::PathBuf,
    dir: std::path::PathBuf,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn tls_server() -> TlsServer {
    let dir = std::env::temp_dir().join(format!(
        "uexec-tls-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let options = ListenerOptions {
        tls: Some(server_config(&cert, &key).unwrap()),
        ..ListenerOptions::default()
    };
    let listener = WsListener::bind_with("127.0.0.1:0".parse().unwrap(), options)
        .await
        .unwrap();
    let url = format!("wss://localhost:{}", listener.local_addr().port());
    assert!(listener.url().starts_with("wss://"));
    let server = ExecServer::new(ServerConfig::default(), Arc::new(LocalBackend));
    tokio::spawn(listener.serve(server, None));
    TlsServer { url, ca: cert, dir }
}

#[tokio::test]
async fn the_remote_backend_connects_over_wss_to_a_server_it_trusts() {
    let server = tls_server().await;
    let config = ClientConfig {
        trust: ClientTrust::new(Some(server.ca.clone())),
        ..ClientConfig::default()
    };
    let backend = RemoteBackend::connect_with(&server.url, None, config)
        .await
        .unwrap();
    assert!(backend.session_id().is_some());
}

#[tokio::test]
async fn the_remote_backend_refuses_a_certificate_it_does_not_trust() {
    let server = tls_server().await;
    let error = RemoteBackend::connect_with(&server.url, None, ClientConfig::default())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("certificate"), "{error}");
}
