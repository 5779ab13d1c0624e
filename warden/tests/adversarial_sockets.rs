//! A hostile Worker against the Warden's sockets, through a real Warden on
//! real sockets: slow-loris connections, answers never read, connection
//! floods. Whatever the Worker does on its socket, root's control socket
//! keeps its own slots, every exchange ends at its deadline, and a flood
//! moves the ladder and is journaled without filling the journal.

use aromba_testkit::warden as support;

use aromba_warden_proto::{
    MAX_RESPONSE, Request, Response, decode_response, encode_request, read_frame, write_frame,
};
use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::Warden;

fn worker(w: &Warden) -> UnixStream {
    UnixStream::connect(w.layout().worker_socket()).expect("connects")
}

/// A bound on waiting for something that must happen; never a measure.
const PATIENCE: Duration = Duration::from_secs(60);

/// Keeps writing one byte a time to each connection until dropped, as a
/// slow-loris client does. Each connection first gets the start of a frame
/// announcing a long note, so the Warden is always waiting for more.
struct Loris {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Loris {
    fn start(mut conns: Vec<UnixStream>) -> Loris {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let body = encode_request(&Request::Note {
            text: "n".repeat(4000),
        });
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        let thread = std::thread::spawn(move || {
            let mut at = 0;
            while !flag.load(Ordering::SeqCst) && at < frame.len() {
                for c in &mut conns {
                    let _ = c.write(&frame[at..at + 1]);
                }
                at += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Loris {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Loris {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the Warden says on a fresh Worker connection to a ping, if it
/// answers at all.
fn ping(w: &Warden) -> Option<Response> {
    let mut s = worker(w);
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A refused connection is answered before the ping is read, and closed.
    let _ = write_frame(&mut s, &encode_request(&Request::Ping), 1 << 16);
    decode_response(&read_frame(&mut s, MAX_RESPONSE).ok()?).ok()
}

fn refused_for_a_full_pool(r: &Option<Response>) -> bool {
    matches!(r, Some(Response::Error { message }) if message.contains("too many connections"))
}

#[test]
fn slow_loris_connections_filling_the_worker_pool_do_not_lock_root_out() {
    let w = Warden::start("loris-root", false, &[]);
    // More than any pool of the Warden has ever held, both sockets
    // together; each trickles a request one byte at a time.
    let conns: Vec<UnixStream> = (0..80).map(|_| worker(&w)).collect();
    let _loris = Loris::start(conns);
    // The Worker's pool is full…
    assert!(
        refused_for_a_full_pool(&ping(&w)),
        "the slow connections did not fill the Worker's pool"
    );
    // …and root's status is answered all the same, more than once.
    for _ in 0..3 {
        let st = w.status();
        assert!(!st.ladder_name.is_empty());
    }
}

#[test]
fn a_slow_loris_request_is_cut_off_at_the_request_deadline_however_it_trickles() {
    let w = Warden::start_with("loris-deadline", false, &[], |o| {
        o.max_worker_connections = 1;
        o.request_deadline = Duration::from_secs(2);
    });
    let held = worker(&w);
    let mut probe = held.try_clone().unwrap();
    let _loris = Loris::start(vec![held]);
    // The one slot is held while the bytes trickle in…
    assert!(refused_for_a_full_pool(&ping(&w)));
    // …until the deadline for the whole request: the Warden closes the
    // connection although a byte arrives every 50 ms (the whole note would
    // take minutes).
    probe.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut buf = [0u8; 1];
    // Closed with trickled bytes still unread on its side, the connection
    // may read as reset rather than ended; waiting out PATIENCE is not.
    let closed = match probe.read(&mut buf) {
        Ok(n) => n == 0,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    };
    assert!(closed, "the trickling connection was not closed");
    // The slot is free again: a ping is answered.
    let start = Instant::now();
    loop {
        match ping(&w) {
            Some(Response::Pong) => break,
            other => assert!(start.elapsed() < PATIENCE, "no slot came free: {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(w.journal().contains("\"kind\":\"deadline-missed\""));
}

#[test]
fn a_worker_that_never_reads_a_large_answer_loses_its_slot_at_the_answer_deadline() {
    let w = Warden::start_with("unread-answer", false, &[], |o| {
        o.max_worker_connections = 1;
        o.answer_deadline = Duration::from_secs(2);
    });
    // A read whose answer (the output cap, as hex) is far larger than the
    // socket's buffers; the Worker never reads it.
    let mut s = worker(&w);
    write_frame(
        &mut s,
        &encode_request(&Request::Read {
            cmd: "du".into(),
            args: vec!["-a".into(), "/usr".into()],
        }),
        1 << 16,
    )
    .unwrap();
    // Once the command has run and the answer stalls, the slot must come
    // free at the deadline.
    let start = Instant::now();
    let mut refused_while_held = false;
    loop {
        match ping(&w) {
            Some(Response::Pong) => break,
            r if refused_for_a_full_pool(&r) => refused_while_held = true,
            other => panic!("{other:?}"),
        }
        assert!(
            start.elapsed() < PATIENCE,
            "the unread answer kept the Worker's only slot"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(refused_while_held, "the slot was never held");
    // The Warden gave up on the answer; what the Worker did get is short.
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    assert!(
        read_frame(&mut got.as_slice(), MAX_RESPONSE).is_err(),
        "the whole answer arrived after all"
    );
    let journal = w.journal();
    assert!(
        journal.contains("\"kind\":\"deadline-missed\"") && journal.contains("\"answer\""),
        "the missed answer deadline was not journaled"
    );
}

fn lines_of_kind(journal: &str, kind: &str) -> usize {
    journal
        .lines()
        .filter(|l| l.contains(&format!("\"kind\":\"{kind}\"")))
        .count()
}

#[test]
fn a_connection_flood_that_fills_the_pool_moves_the_ladder_and_is_journaled_once() {
    let w = Warden::start("flood-pool", false, &[]);
    assert_eq!(w.ladder(), 0);
    // Connections held open, far past any pool, and more refused after.
    let held: Vec<UnixStream> = (0..80).map(|_| worker(&w)).collect();
    let refused: Vec<Option<Response>> = (0..200).map(|_| ping(&w)).collect();
    assert!(refused.iter().all(refused_for_a_full_pool));
    let st = w.status();
    assert!(st.ladder_step >= 1, "the flood did not move the ladder");
    assert!(
        st.ladder_reason.contains("full pool"),
        "{}",
        st.ladder_reason
    );
    let journal = w.journal();
    assert!(journal.contains("too-many-commands"));
    // Hundreds of refusals, a handful of lines: the flood cannot fill the
    // journal.
    assert_eq!(lines_of_kind(&journal, "connection-refused"), 1);
    assert_eq!(lines_of_kind(&journal, "ladder-signal"), 1);
    drop(held);
}

#[test]
fn connections_opened_and_closed_past_the_threshold_move_the_ladder() {
    let w = Warden::start("flood-rate", false, &[]);
    // One at a time, each closed before the next: the pool never fills.
    // Past the threshold of connections in ten minutes the ladder moves.
    for _ in 0..=aromba_warden::server::CONNECTION_THRESHOLD {
        let mut s = worker(&w);
        s.shutdown(Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "a connection was refused: the pool filled");
    }
    let st = w.status();
    assert!(st.ladder_step >= 1, "the flood did not move the ladder");
    assert!(
        st.ladder_reason.contains("connections in"),
        "{}",
        st.ladder_reason
    );
    assert!(w.journal().contains("too-many-commands"));
}

#[test]
fn a_flood_of_pings_and_events_moves_the_ladder_and_they_still_pass_at_slow() {
    let w = Warden::start("flood-requests", false, &[]);
    // Requests of every kind but commands, as fast as the socket takes
    // them, past the request threshold: the ladder moves…
    let mut s = worker(&w);
    for i in 0..=aromba_warden::server::REQUEST_THRESHOLD {
        let r = if i % 2 == 0 {
            Request::Ping
        } else {
            Request::Events { after: 0 }
        };
        write_frame(&mut s, &encode_request(&r), 1 << 16).unwrap();
        let _ = read_frame(&mut s, MAX_RESPONSE).unwrap();
    }
    let st = w.status();
    assert!(
        st.ladder_step >= 1,
        "the request flood did not move the ladder"
    );
    assert!(
        st.ladder_reason.contains("requests in"),
        "{}",
        st.ladder_reason
    );
    // …and pings and events still pass at Slow: the Worker learns of it.
    write_frame(
        &mut s,
        &encode_request(&Request::Events { after: 0 }),
        1 << 16,
    )
    .unwrap();
    let Response::Events { events } =
        decode_response(&read_frame(&mut s, MAX_RESPONSE).unwrap()).unwrap()
    else {
        panic!("events not answered at Slow")
    };
    assert!(!events.is_empty());
}
