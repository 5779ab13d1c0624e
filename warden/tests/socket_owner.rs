//! `socket_owner`: the Warden says which uid serves a socket on this
//! machine for the Worker's connection, from the kernel's tables read in
//! the host's namespaces (the Worker's unit sees other uids as `nobody`).

use aromba_testkit::warden as support;

use aromba_warden_proto::{Request, Response};
use support::Warden;

#[test]
fn the_warden_names_the_uid_serving_a_loopback_socket() {
    let w = Warden::start("socket-owner", false, &[]);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let peer = listener.local_addr().expect("addr");
    let stream = std::net::TcpStream::connect(peer).expect("connect");
    let local = stream.local_addr().expect("local");
    let answer = w.ask(&Request::SocketOwner {
        local: local.to_string(),
        peer: peer.to_string(),
    });
    // The test runs as root, as the listener does.
    assert_eq!(answer, Response::Served { uid: 0 });
}

#[test]
fn the_warden_refuses_to_say_who_serves_another_machine_or_nobody() {
    let w = Warden::start("socket-owner-refused", false, &[]);
    for (local, peer) in [
        ("127.0.0.1:40000", "192.0.2.7:11434"),
        ("127.0.0.1:40000", "not an address"),
    ] {
        let answer = w.ask(&Request::SocketOwner {
            local: local.into(),
            peer: peer.into(),
        });
        assert!(
            matches!(answer, Response::Refused { .. }),
            "{peer}: {answer:?}"
        );
    }
    // A port nothing listens on: nobody serves it.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    match w.ask(&Request::SocketOwner {
        local: "127.0.0.1:40000".into(),
        peer: free.to_string(),
    }) {
        Response::Refused { reason, .. } => assert!(reason.starts_with("no socket"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(w.ladder(), 0, "asking is no signal");
}
