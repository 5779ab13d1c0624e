//! Connections: accepting them, who is on the other end, the pools that
//! bound how many are open, the deadlines of an exchange, and framing.
//!
//! Each socket has its own pool of connection slots, and a connection
//! takes one only once the kernel has said its peer is the one uid the
//! socket serves: whatever the Worker does, the control socket's slots stay
//! root's. A slot, like a running slot, is a guard released when dropped,
//! so no path — an early return, a failed spawn, a panic — can keep one.
//!
//! A request must arrive whole within `request_deadline` of when the Warden
//! starts waiting for it, and an answer must be taken whole within
//! `answer_deadline`. Both are deadlines on the total, not on each read or
//! write: before every call on the socket its timeout is set to the time
//! left, so a peer that trickles one byte at a time, or reads nothing,
//! loses its connection when the time is up.

#![forbid(unsafe_code)]

use super::event::{Deadline, Event, Peer};
use super::pace::{self, Admission};
use super::{Shared, Socket, journal, serve};
use crate::system::{self, PeerCred};
use aromba_warden_proto::{
    FrameError, MAX_REQUEST, MAX_RESPONSE, Response, decode_request, encode_response, read_frame,
    write_frame,
};
use std::io::{self, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// A counting semaphore whose permits are guards.
#[derive(Clone)]
pub(super) struct Slots(Arc<SlotsInner>);

struct SlotsInner {
    free: Mutex<usize>,
    freed: Condvar,
}

/// One slot of a pool, given back when dropped.
pub(super) struct Slot(Arc<SlotsInner>);

impl Drop for Slot {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

impl Slots {
    pub(super) fn new(n: usize) -> Slots {
        Slots(Arc::new(SlotsInner {
            free: Mutex::new(n),
            freed: Condvar::new(),
        }))
    }

    /// A slot if one is free now.
    pub(super) fn try_take(&self) -> Option<Slot> {
        let mut free = self.0.free.lock().unwrap_or_else(|p| p.into_inner());
        if *free == 0 {
            return None;
        }
        *free -= 1;
        Some(Slot(self.0.clone()))
    }

    /// A slot, waiting for one to be freed.
    pub(super) fn take(&self) -> Slot {
        let mut free = self.0.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.0.freed.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
        Slot(self.0.clone())
    }
}

/// The socket under a deadline: before every read or write call its
/// timeout is set to the time left, and past the deadline every call fails
/// with `TimedOut`.
struct Timed<'a> {
    stream: &'a UnixStream,
    deadline: Instant,
}

impl Timed<'_> {
    fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        Ok(left)
    }
}

impl Read for Timed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.set_read_timeout(Some(self.left()?))?;
        let mut s = self.stream;
        s.read(buf)
    }
}

impl Write for Timed<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.set_write_timeout(Some(self.left()?))?;
        let mut s = self.stream;
        s.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A socket timeout, as the kernel reports one (`EAGAIN`) or as `Timed`
/// does.
fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

pub(super) fn accept_loop(shared: Arc<Shared>, listener: UnixListener, socket: Socket) {
    let pool = match socket {
        Socket::Worker => shared.worker_connections.clone(),
        Socket::Control => shared.control_connections.clone(),
    };
    for stream in listener.incoming() {
        if shared.shutdown.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        // Who is calling comes first: a peer the socket does not serve
        // never takes one of its slots.
        let peer = match system::peer_cred(&stream) {
            Ok(p) => p,
            Err(e) => {
                let error = e.to_string();
                pace::journal_quietly(
                    &shared,
                    Event::PeerUnknown {
                        socket,
                        error: &error,
                    },
                );
                continue;
            }
        };
        let allowed_uid = match socket {
            Socket::Worker => shared.options.worker_uid,
            Socket::Control => 0,
        };
        if peer.uid != allowed_uid {
            pace::journal_quietly(
                &shared,
                Event::PeerRefused {
                    peer: Peer::on(&peer, socket),
                },
            );
            refuse_now(
                &stream,
                &format!("the {} socket serves only uid {allowed_uid}", socket.name()),
            );
            continue;
        }
        if socket == Socket::Worker {
            pace::connection_arrived(&shared, &peer);
        }
        let Some(slot) = pool.try_take() else {
            pace::pool_full(&shared, &peer, socket);
            refuse_now(
                &stream,
                "the Warden is serving too many connections; try again",
            );
            continue;
        };
        let for_thread = shared.clone();
        // A failed spawn drops the closure, and with it the slot and the
        // connection.
        let spawned = thread::Builder::new()
            .name(format!("{}-connection", socket.name()))
            .spawn(move || {
                let _slot = slot;
                handle(&for_thread, &stream, &peer, socket);
            });
        if let Err(e) = spawned {
            let error = e.to_string();
            pace::journal_quietly(
                &shared,
                Event::ConnectionThreadFailed {
                    peer: Peer::on(&peer, socket),
                    error: &error,
                },
            );
        }
    }
}

/// Answers a connection that will not be served without ever waiting on
/// it: one non-blocking write into the fresh socket's empty buffer, so a
/// peer that reads nothing cannot hold up the accept loop.
fn refuse_now(stream: &UnixStream, message: &str) {
    let mut frame = Vec::new();
    let response = Response::Error {
        message: message.into(),
    };
    if write_frame(&mut frame, &encode_response(&response), MAX_RESPONSE).is_ok()
        && stream.set_nonblocking(true).is_ok()
    {
        let mut s = stream;
        let _ = s.write(&frame);
    }
}

/// Writes an answer whole within the answer deadline. `false` when the
/// connection is to end: the deadline passed or the peer went away.
fn answer(
    shared: &Shared,
    stream: &UnixStream,
    peer: &PeerCred,
    socket: Socket,
    r: &Response,
) -> bool {
    let mut timed = Timed {
        stream,
        deadline: Instant::now() + shared.options.answer_deadline,
    };
    match write_frame(&mut timed, &encode_response(r), MAX_RESPONSE) {
        Ok(()) => true,
        Err(FrameError::Io(e)) if timed_out(&e) => {
            missed_deadline(shared, peer, socket, Deadline::Answer);
            false
        }
        Err(_) => false,
    }
}

fn missed_deadline(shared: &Shared, peer: &PeerCred, socket: Socket, deadline: Deadline) {
    let allowed = match deadline {
        Deadline::Request => shared.options.request_deadline,
        Deadline::Answer => shared.options.answer_deadline,
    };
    pace::journal_quietly(
        shared,
        Event::DeadlineMissed {
            peer: Peer::on(peer, socket),
            deadline,
            deadline_ms: u64::try_from(allowed.as_millis()).unwrap_or(u64::MAX),
        },
    );
}

fn handle(shared: &Shared, stream: &UnixStream, peer: &PeerCred, socket: Socket) {
    loop {
        if shared.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let mut timed = Timed {
            stream,
            deadline: Instant::now() + shared.options.request_deadline,
        };
        let frame = match read_frame(&mut timed, MAX_REQUEST) {
            Ok(f) => Ok(f),
            Err(FrameError::Closed) => return,
            Err(FrameError::Io(e)) if timed_out(&e) => {
                missed_deadline(shared, peer, socket, Deadline::Request);
                return;
            }
            Err(e) => Err(e),
        };
        let request = match socket {
            Socket::Worker => match pace::admit(shared, peer, frame) {
                Admission::Serve(r) => r,
                Admission::Malformed(why) => {
                    malformed(shared, stream, peer, socket, &why);
                    return;
                }
                Admission::Paced { response, close } => {
                    if !answer(shared, stream, peer, socket, &response) || close {
                        return;
                    }
                    continue;
                }
            },
            Socket::Control => {
                match frame
                    .map_err(|e| e.to_string())
                    .and_then(|f| decode_request(&f).map_err(|e| e.to_string()))
                {
                    Ok(r) => r,
                    Err(why) => {
                        malformed(shared, stream, peer, socket, &why);
                        return;
                    }
                }
            }
        };
        let response = serve(shared, peer, socket, request);
        if !answer(shared, stream, peer, socket, &response) {
            return;
        }
    }
}

/// A request that is not one: journaled (the journal bounds the error,
/// which may echo the request) and answered, and the connection closed.
pub(super) fn malformed(
    shared: &Shared,
    stream: &UnixStream,
    peer: &PeerCred,
    socket: Socket,
    why: &str,
) {
    journal(
        shared,
        Event::Malformed {
            peer: Peer::on(peer, socket),
            error: why,
        },
    );
    answer(
        shared,
        stream,
        peer,
        socket,
        &Response::Error {
            message: format!("malformed request: {why}"),
        },
    );
}
