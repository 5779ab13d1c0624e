//! TLS termination, when the relay is given a certificate and key
//! (`AROMBA_RELAY_TLS_CERT`, `AROMBA_RELAY_TLS_KEY`): rustls with the ring
//! provider, the files reread on SIGHUP (a renewed certificate takes effect
//! for new connections; a file that does not load leaves the old one in
//! place). Handshakes run in each connection's own task, under the HTTP
//! pool's slots and deadline ([`crate::serve`]), so a client that stalls its
//! handshake holds up nobody else.

use crate::config::TlsFiles;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use tokio::net::TcpListener;

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
