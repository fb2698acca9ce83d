//! A buyer endpoint behind TLS with a self-signed certificate, on 127.0.0.1:0: what a buyer
//! with a broken certificate looks like to the outbox, whose client verifies certificates
//! against the public roots. It counts the connections it accepts (each is one attempt)
//! and completes no request: the client gives up in the handshake.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The endpoint; stops when dropped.
pub struct TlsReceiver {
    pub addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TlsReceiver {
    pub fn start() -> TlsReceiver {
        let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()])
            .expect("a self-signed certificate is made");
        let cert = certified.cert.der().clone();
        let key = tokio_rustls::rustls::pki_types::PrivateKeyDer::Pkcs8(
            certified.key_pair.serialize_der().into(),
        );
        let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(Arc::new(
            tokio_rustls::rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("the default TLS versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .expect("the certificate and key match");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        let (shutdown, mut stop) = tokio::sync::oneshot::channel::<()>();
        let (ready, bound) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("test-tls-receiver".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("the runtime starts");
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                        .await
                        .expect("port 0 binds");
                    ready
                        .send(listener.local_addr().expect("bound"))
                        .expect("the test waits for the address");
                    loop {
                        tokio::select! {
                            accepted = listener.accept() => {
                                let Ok((stream, _)) = accepted else { continue };
                                counted.fetch_add(1, Ordering::SeqCst);
                                let acceptor = acceptor.clone();
                                // The client refuses the certificate, so this fails.
                                tokio::spawn(async move { let _ = acceptor.accept(stream).await; });
                            }
                            _ = &mut stop => break,
                        }
                    }
                });
            })
            .expect("the thread starts");
        TlsReceiver {
            addr: bound.recv().expect("the receiver reports its address"),
            connections,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://{}{}", self.addr, path)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for TlsReceiver {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
