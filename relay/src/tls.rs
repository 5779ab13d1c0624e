//! TLS termination, when the relay is given a certificate and key
//! (`AROMBA_RELAY_TLS_CERT`, `AROMBA_RELAY_TLS_KEY`): rustls with the ring
//! provider, the files reread on SIGHUP (a renewed certificate takes effect
//! for new connections; a file that does not load leaves the old one in
//! place). Handshakes run concurrently, each with a deadline, so a client
//! that stalls its handshake holds up nobody else.

use crate::config::TlsFiles;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// Handshakes in flight at once; more wait for a slot.
const MAX_HANDSHAKES: usize = 1024;
/// The whole handshake's deadline.
const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("the certificate file {0} cannot be read as PEM certificates")]
    Certificates(String),
    #[error("the key file {0} cannot be read as a PEM private key")]
    Key(String),
    #[error("the certificate and key in {0} do not make a usable pair: {1}")]
    Pair(String, rustls::Error),
    #[error("TLS cannot be set up: {0}")]
    Setup(#[from] rustls::Error),
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn load(files: &TlsFiles) -> Result<Arc<CertifiedKey>, TlsError> {
    let cert_name = files.cert.display().to_string();
    let key_name = files.key.display().to_string();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|_| TlsError::Certificates(cert_name.clone()))?
        .collect::<Result<_, _>>()
        .map_err(|_| TlsError::Certificates(cert_name.clone()))?;
    if chain.is_empty() {
        return Err(TlsError::Certificates(cert_name));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|_| TlsError::Key(key_name))?;
    let certified = CertifiedKey::from_der(chain, key, &provider())
        .map_err(|e| TlsError::Pair(cert_name, e))?;
    Ok(Arc::new(certified))
}

/// The current certificate, swapped on reload.
#[derive(Debug)]
pub struct Certificates {
    files: TlsFiles,
    current: RwLock<Arc<CertifiedKey>>,
}

impl Certificates {
    pub fn load(files: TlsFiles) -> Result<Certificates, TlsError> {
        let current = RwLock::new(load(&files)?);
        Ok(Certificates { files, current })
    }

    /// Rereads both files; on failure the certificate in use stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let fresh = load(&self.files)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = fresh;
        Ok(())
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        )
    }
}

pub fn server_config(certs: Arc<Certificates>) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(certs);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Accepted TLS connections, for `axum::serve`.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    pub fn new(
        tcp: TcpListener,
        config: Arc<rustls::ServerConfig>,
    ) -> std::io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        let acceptor = TlsAcceptor::from(config);
        let slots = Arc::new(Semaphore::new(MAX_HANDSHAKES));
        tokio::spawn(async move {
            loop {
                let Ok(permit) = slots.clone().acquire_owned().await else {
                    return;
                };
                let (stream, peer) = match tcp.accept().await {
                    Ok(pair) => pair,
                    Err(e) => {
                        // Out of descriptors and the like: wait, then go on.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                if tx.is_closed() {
                    return;
                }
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    let _permit = permit;
                    if let Ok(Ok(tls)) =
                        tokio::time::timeout(HANDSHAKE_DEADLINE, acceptor.accept(stream)).await
                    {
                        let _ = tx.send((tls, peer)).await;
                    }
                });
            }
        });
        Ok(TlsListener { ready, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(pair) => pair,
            // The accept task ended: nothing will come again.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}

/// The peer's address, as handlers and the rate limits see it, whichever
/// listener accepted the connection.
#[derive(Clone, Copy, Debug)]
pub struct PeerAddr(pub SocketAddr);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, TcpListener>>
    for PeerAddr
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, TcpListener>) -> PeerAddr {
        PeerAddr(*stream.remote_addr())
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, TlsListener>>
    for PeerAddr
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, TlsListener>) -> PeerAddr {
        PeerAddr(*stream.remote_addr())
    }
}
