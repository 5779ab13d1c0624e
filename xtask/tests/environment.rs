//! What the test suite needs from the machine. `scripts/test` installs and
//! starts it; these fail — never skip — when it is not there, so a test run
//! that silently lacks PostgreSQL or bubblewrap cannot pass.

use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

#[test]
fn postgres_answers_at_database_url() {
    let url = std::env::var("DATABASE_URL")
        .expect("DATABASE_URL is not set: run the suite with scripts/test");
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
        .expect("DATABASE_URL is a postgres:// URL");
    let authority = rest.split('/').next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let addr = host_port
        .to_socket_addrs()
        .expect("DATABASE_URL names host:port")
        .next()
        .expect("DATABASE_URL's host resolves");
    TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("PostgreSQL does not answer at {host_port}: {e}"));
}

#[test]
fn bubblewrap_is_installed() {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .map(|dir| dir.join("bwrap"))
        .chain([Path::new("/usr/bin/bwrap").to_path_buf()])
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        });
    assert!(
        found.is_some(),
        "bwrap is not installed: run the suite with scripts/test"
    );
}
