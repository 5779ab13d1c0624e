//! Connections: accepting them, who is on the other end, framing, and the
//! slots that bound how many are open.

#![forbid(unsafe_code)]

use super::{Shared, Socket, journal, peer_fields, serve};
use crate::system::{self, PeerCred};
use aromba_warden_proto::{
    FrameError, MAX_REQUEST, MAX_RESPONSE, Response, decode_request, encode_response, read_frame,
    write_frame,
};
use serde_json::{Map, Value};
use std::io;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

/// A counting semaphore.
pub(super) struct Slots {
    free: Mutex<usize>,
    freed: Condvar,
}

impl Slots {
    pub(super) fn new(n: usize) -> Slots {
        Slots {
            free: Mutex::new(n),
            freed: Condvar::new(),
        }
    }

    pub(super) fn try_take(&self) -> bool {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if *free == 0 {
            return false;
        }
        *free -= 1;
        true
    }

    pub(super) fn take(&self) {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
    }

    pub(super) fn give(&self) {
        *self.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.freed.notify_one();
    }
}

pub(super) fn accept_loop(shared: Arc<Shared>, listener: UnixListener, socket: Socket) {
    for stream in listener.incoming() {
        if shared.shutdown.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        if !shared.connections.try_take() {
            let _ = respond(
                &stream,
                &Response::Error {
                    message: "the Warden is serving too many connections; try again".into(),
                },
            );
            continue;
        }
        let shared = shared.clone();
        thread::spawn(move || {
            handle(&shared, stream, socket);
            shared.connections.give();
        });
    }
}

pub(super) fn respond(mut stream: &UnixStream, r: &Response) -> Result<(), FrameError> {
    write_frame(&mut stream, &encode_response(r), MAX_RESPONSE)
}

pub(super) fn handle(shared: &Shared, stream: UnixStream, socket: Socket) {
    let peer = match system::peer_cred(&stream) {
        Ok(p) => p,
        Err(e) => {
            let mut m = Map::new();
            m.insert("socket".into(), Value::from(socket.name()));
            m.insert("error".into(), Value::from(e.to_string()));
            journal(shared, "peer-unknown", m);
            return;
        }
    };
    let allowed_uid = match socket {
        Socket::Worker => shared.options.worker_uid,
        Socket::Control => 0,
    };
    if peer.uid != allowed_uid {
        journal(shared, "peer-refused", peer_fields(&peer, socket));
        let _ = respond(
            &stream,
            &Response::Error {
                message: format!("the {} socket serves only uid {allowed_uid}", socket.name()),
            },
        );
        return;
    }
    let _ = stream.set_read_timeout(Some(shared.options.idle));
    let mut reader = &stream;
    loop {
        if shared.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let frame = match read_frame(&mut reader, MAX_REQUEST) {
            Ok(f) => f,
            Err(FrameError::Closed) => return,
            Err(FrameError::Io(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return;
            }
            Err(e) => {
                malformed(shared, &stream, &peer, socket, &e.to_string());
                return;
            }
        };
        let request = match decode_request(&frame) {
            Ok(r) => r,
            Err(e) => {
                malformed(shared, &stream, &peer, socket, &e.to_string());
                return;
            }
        };
        let response = serve(shared, &peer, socket, request);
        if respond(&stream, &response).is_err() {
            return;
        }
    }
}

pub(super) fn malformed(
    shared: &Shared,
    stream: &UnixStream,
    peer: &PeerCred,
    socket: Socket,
    why: &str,
) {
    let mut m = peer_fields(peer, socket);
    m.insert("error".into(), Value::from(why));
    journal(shared, "malformed", m);
    let _ = respond(
        stream,
        &Response::Error {
            message: format!("malformed request: {why}"),
        },
    );
}
