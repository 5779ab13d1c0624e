//! Answers from servers to the Mini App's asks, from whichever replica
//! holds the server's connection to whichever holds the page's request.
//!
//! The page's request waits here under a fresh request id, with the server
//! it asked; the server's `app_answer` frame goes out as `NOTIFY`s on
//! [`CHANNEL`] (in pieces: a notification holds less than 8000 bytes), each
//! naming the server whose connection it came on — never kept in a table.
//! Every replica listens and hands a whole answer to its waiter, if it has
//! one and the server is the one it asked: a server cannot answer another
//! server's page.

use aromba_relay_proto::frame::AppAnswer;
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::oneshot;
use uuid::Uuid;

/// The channel answers travel on.
pub const CHANNEL: &str = "aromba_app_answers";

/// Bytes of an answer's JSON in one notification.
const PIECE: usize = 6000;

/// Pages waiting at once on one replica; past it a page is told to try
/// again.
pub const MAX_WAITING: usize = 1024;

/// Pages waiting at once for one server (its person's: one account pairs
/// one server), so that no person can hold the others' room (found by the
/// attack round: one launch, replayed from many addresses at a server kept
/// silent, filled every place).
pub const MAX_WAITING_PER_SERVER: usize = 4;

/// Why a page cannot wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// This server's pages wait already, as many as it may have.
    Server,
    /// This replica waits for as many pages as it holds.
    Replica,
}

/// Pieces one answer may come in (an answer's text is at most 4096
/// characters).
const MAX_PIECES: usize = 8;

struct Waiting {
    server: Uuid,
    pieces: Vec<Option<String>>,
    tx: Option<oneshot::Sender<AppAnswer>>,
}

/// The pages waiting on this replica.
#[derive(Default)]
pub struct Waiters(Mutex<HashMap<Uuid, Waiting>>);

impl Waiters {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Waiting>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for `server`'s answer to `request`, unless too many wait.
    pub fn wait(&self, request: Uuid, server: Uuid) -> Result<oneshot::Receiver<AppAnswer>, Full> {
        let mut map = self.map();
        if map.values().filter(|w| w.server == server).count() >= MAX_WAITING_PER_SERVER {
            return Err(Full::Server);
        }
        if map.len() >= MAX_WAITING {
            return Err(Full::Replica);
        }
        let (tx, rx) = oneshot::channel();
        map.insert(
            request,
            Waiting {
                server,
                pieces: Vec::new(),
                tx: Some(tx),
            },
        );
        Ok(rx)
    }

    /// The page stopped waiting.
    pub fn forget(&self, request: Uuid) {
        self.map().remove(&request);
    }

    /// One notification: a piece of an answer, handed over when whole.
    pub fn piece(&self, payload: &str) {
        let Some((request, server, index, count, piece)) = parse(payload) else {
            return;
        };
        let mut map = self.map();
        let Some(w) = map.get_mut(&request) else {
            return;
        };
        if w.server != server || count == 0 || count > MAX_PIECES || index >= count {
            return;
        }
        if w.pieces.len() != count {
            w.pieces = vec![None; count];
        }
        w.pieces[index] = Some(piece.to_string());
        if w.pieces.iter().all(Option::is_some) {
            let json: String = w.pieces.iter().flatten().map(String::as_str).collect();
            let tx = w.tx.take();
            map.remove(&request);
            if let (Some(tx), Ok(answer)) = (tx, serde_json::from_str::<AppAnswer>(&json)) {
                let _ = tx.send(answer);
            }
        }
    }
}

fn parse(payload: &str) -> Option<(Uuid, Uuid, usize, usize, &str)> {
    let mut parts = payload.splitn(5, ':');
    let request = Uuid::try_parse(parts.next()?).ok()?;
    let server = Uuid::try_parse(parts.next()?).ok()?;
    let index = parts.next()?.parse().ok()?;
    let count = parts.next()?.parse().ok()?;
    Some((request, server, index, count, parts.next()?))
}

/// The notifications that carry `answer` to `request`'s page, from
/// `server`'s connection: its JSON cut at character boundaries.
pub fn payloads(request: Uuid, server: Uuid, answer: &AppAnswer) -> Vec<String> {
    let json = serde_json::to_string(answer).unwrap_or_default();
    let mut pieces = Vec::new();
    let mut rest = json.as_str();
    while !rest.is_empty() {
        let mut end = rest.len().min(PIECE);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        pieces.push(&rest[..end]);
        rest = &rest[end..];
    }
    let count = pieces.len();
    pieces
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{request}:{server}:{i}:{count}:{p}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aromba_relay_proto::frame::AppAnswerKind;

    fn answer(text: &str) -> AppAnswer {
        AppAnswer {
            kind: AppAnswerKind::Proposal,
            text: text.into(),
            sections: Vec::new(),
        }
    }

    #[test]
    fn a_long_answer_comes_whole_in_pieces_in_any_order() {
        let waiters = Waiters::default();
        let (request, server) = (Uuid::new_v4(), Uuid::new_v4());
        let mut rx = waiters.wait(request, server).unwrap();
        let long = "é".repeat(4000);
        let mut all = payloads(request, server, &answer(&long));
        assert!(all.len() > 1 && all.iter().all(|p| p.len() < 8000));
        all.reverse();
        for p in &all {
            waiters.piece(p);
        }
        assert_eq!(rx.try_recv().unwrap(), answer(&long));
    }

    #[test]
    fn another_server_cannot_answer_a_page() {
        let waiters = Waiters::default();
        let (request, server) = (Uuid::new_v4(), Uuid::new_v4());
        let mut rx = waiters.wait(request, server).unwrap();
        for p in payloads(request, Uuid::new_v4(), &answer("forged")) {
            waiters.piece(&p);
        }
        assert!(rx.try_recv().is_err());
        for p in payloads(request, server, &answer("mine")) {
            waiters.piece(&p);
        }
        assert_eq!(rx.try_recv().unwrap(), answer("mine"));
    }

    #[test]
    fn one_server_cannot_hold_every_place() {
        let waiters = Waiters::default();
        let busy = Uuid::new_v4();
        for _ in 0..MAX_WAITING_PER_SERVER {
            assert!(waiters.wait(Uuid::new_v4(), busy).is_ok());
        }
        assert_eq!(waiters.wait(Uuid::new_v4(), busy).err(), Some(Full::Server));
        assert!(waiters.wait(Uuid::new_v4(), Uuid::new_v4()).is_ok());
    }

    #[test]
    fn junk_notifications_are_ignored() {
        let waiters = Waiters::default();
        let (request, server) = (Uuid::new_v4(), Uuid::new_v4());
        let mut rx = waiters.wait(request, server).unwrap();
        for junk in [
            "",
            "x",
            &format!("{request}:{server}:0:0:{{}}"),
            &format!("{request}:{server}:9:2:{{}}"),
            &format!("{request}:{server}:0:99:{{}}"),
            &format!("{request}:{server}:0:1:not json"),
        ] {
            waiters.piece(junk);
        }
        assert!(rx.try_recv().is_err());
    }
}
