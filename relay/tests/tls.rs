//! TLS termination: the relay serves wss with the files it is given and
//! rereads them on SIGHUP; the client verifies the certificate against the
//! relay's name and nothing turns that off.

use aromba_testkit::relay as support;

use aromba_relay_proto::client::{Endpoint, dial, handshake};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::CertificateDer;
use sqlx::PgPool;
use std::path::Path;
use std::sync::Arc;
use support::{Server, config, post_json, start};

/// A certificate authority of the test's own, and a way to issue leaf
/// certificates for `localhost` under it.
struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    der: CertificateDer<'static>,
}

impl TestCa {
    fn new(name: &str) -> TestCa {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("self-signed");
        TestCa {
            der: cert.der().clone(),
            issuer: Issuer::new(params, key),
        }
    }

    /// Writes a leaf certificate and key for `localhost` under `dir`.
    fn issue(&self, dir: &Path, serial: u64) -> (std::path::PathBuf, std::path::PathBuf) {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        params.serial_number = Some(serial.into());
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        let cert_path = dir.join(format!("cert-{serial}.pem"));
        let key_path = dir.join(format!("key-{serial}.pem"));
        std::fs::write(&cert_path, cert.pem()).expect("write cert");
        std::fs::write(&key_path, key.serialize_pem()).expect("write key");
        (cert_path, key_path)
    }

    fn roots(&self) -> Arc<rustls::RootCertStore> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.der.clone()).expect("a root");
        Arc::new(roots)
    }
}

fn endpoint(port: u16, server: &Server, roots: Option<Arc<rustls::RootCertStore>>) -> Endpoint {
    Endpoint::new(
        format!("wss://localhost:{port}/v1/connect"),
        server.id,
        server.token.clone(),
        roots,
    )
}

#[sqlx::test(migrations = false)]
async fn the_relay_terminates_tls_and_the_client_verifies_it(db: PgPool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new("Aromba test CA");
    let (cert, key) = ca.issue(dir.path(), 1);
    // Register over plain HTTP on a relay of its own, then serve TLS.
    let plain = start(db.clone(), config()).await;
    let server = Server::new();
    assert_eq!(post_json(&plain, &server.registration()).await.0, 201);
    plain.stop().await;
    let mut c = config();
    c.tls = Some(aromba_relay::config::TlsFiles { cert, key });
    let relay = start_tls(db.clone(), c).await;
    let port = relay.1;

    let good = endpoint(port, &server, Some(ca.roots()));
    let mut ws = dial(&good).await.expect("a verified TLS connection");
    handshake(&mut ws, &good)
        .await
        .expect("hello accepted over TLS");

    // The webpki roots do not know the test CA: refused.
    assert!(dial(&endpoint(port, &server, None)).await.is_err());
    // Another CA's roots: refused.
    let other = TestCa::new("Someone else");
    assert!(
        dial(&endpoint(port, &server, Some(other.roots())))
            .await
            .is_err()
    );
    // The right CA but another name: refused.
    let wrong_name = Endpoint {
        url: format!("wss://127.0.0.1:{port}/v1/connect"),
        ..good.clone()
    };
    assert!(dial(&wrong_name).await.is_err());
    relay.0.stop().await;
}

/// A relay with TLS; its port.
async fn start_tls(db: PgPool, config: aromba_relay::Config) -> (support::TestRelay, u16) {
    let relay = support::start_tls(db, config).await;
    let port = relay.addr.port();
    (relay, port)
}

#[sqlx::test(migrations = false)]
async fn sighup_rereads_the_certificate(db: PgPool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let first_ca = TestCa::new("First CA");
    let second_ca = TestCa::new("Second CA");
    let (cert, key) = first_ca.issue(dir.path(), 1);
    let cert_path = dir.path().join("relay.pem");
    let key_path = dir.path().join("relay.key");
    std::fs::copy(&cert, &cert_path).expect("copy");
    std::fs::copy(&key, &key_path).expect("copy");
    let port = support::free_port();
    let mut process = support::RelayProcess::spawn_with(
        &db,
        port,
        &[
            ("AROMBA_RELAY_TLS_CERT", cert_path.display().to_string()),
            ("AROMBA_RELAY_TLS_KEY", key_path.display().to_string()),
        ],
    );
    let server = Server::new();
    let mut ready = false;
    for _ in 0..400 {
        if dial(&endpoint(port, &server, Some(first_ca.roots())))
            .await
            .is_ok()
        {
            ready = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(ready, "the TLS relay did not come up");
    assert!(
        dial(&endpoint(port, &server, Some(second_ca.roots())))
            .await
            .is_err()
    );

    // A renewed certificate from another CA, then SIGHUP.
    let (cert, key) = second_ca.issue(dir.path(), 2);
    std::fs::copy(&cert, &cert_path).expect("copy");
    std::fs::copy(&key, &key_path).expect("copy");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(process.child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("signal");
    let mut reloaded = false;
    for _ in 0..200 {
        if dial(&endpoint(port, &server, Some(second_ca.roots())))
            .await
            .is_ok()
        {
            reloaded = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(reloaded, "the new certificate was not served after SIGHUP");

    // A broken file and SIGHUP: the certificate in use stays.
    std::fs::write(&cert_path, "not a certificate").expect("write");
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("signal");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        dial(&endpoint(port, &server, Some(second_ca.roots())))
            .await
            .is_ok()
    );
    assert!(
        process.child.try_wait().expect("wait").is_none(),
        "the relay died"
    );
}

#[test]
fn a_key_that_does_not_match_the_certificate_stops_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new("CA");
    let (cert, _) = ca.issue(dir.path(), 1);
    let (_, other_key) = ca.issue(dir.path(), 2);
    let err = aromba_relay::tls::Certificates::load(aromba_relay::config::TlsFiles {
        cert,
        key: other_key,
    })
    .expect_err("a mismatched pair");
    assert!(
        err.to_string().contains("do not make a usable pair"),
        "{err}"
    );
}
