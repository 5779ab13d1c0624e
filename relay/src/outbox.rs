//! What waits for a server, in PostgreSQL: the one source of truth.
//!
//! A delivery is a row until the server acknowledges it (then it is
//! deleted) or for 24 hours at most (the sweep). Enqueueing notifies every
//! replica with ids only (`server:row`); the replica that holds the
//! server's socket wakes that connection, which reads its rows. At least
//! once, by id: the server drops what it has seen.

use crate::store;
use aromba_relay_proto::frame::Delivery;
use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

/// The channel every replica listens on for deliveries (`server:row`).
pub const CHANNEL: &str = "aromba_outbox";
/// The channel for new connections (`server:generation`).
pub const CONNECTIONS: &str = "aromba_connection";
/// How long a batch waits for a row another transaction holds (another
/// replica's batch frozen mid-way, the sweep, an operator's session) before
/// it gives up: a batch is every server's on this replica, and one row must
/// not hold them all.
pub const LOCK_WAIT: &str = "2s";

/// Takes the server's next connection generation and tells every replica.
pub async fn next_generation(db: &PgPool, server: Uuid) -> Result<i64, OutboxError> {
    next_generations(db, &[server])
        .await?
        .first()
        .copied()
        .flatten()
        .ok_or(OutboxError::UnknownServer(server))
}

/// Takes the next connection generation of each server in `servers` (one
/// per entry: a server named twice gets two, the later entry the higher)
/// and tells every replica, in one transaction. The rows are locked in id
/// order first, as [`enqueue_batch`] locks them, so the two never deadlock.
/// Returns each entry's generation, or `None` for an unknown server.
pub async fn next_generations(
    db: &PgPool,
    servers: &[Uuid],
) -> Result<Vec<Option<i64>>, OutboxError> {
    if servers.is_empty() {
        return Ok(Vec::new());
    }
    let mut sorted = servers.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut tx = db.begin().await?;
    store::bound_lock_waits(&mut tx, LOCK_WAIT).await?;
    store::servers::lock_in_id_order(&mut tx, &sorted).await?;
    let rows = store::servers::bump_generations(&mut tx, servers, CONNECTIONS).await?;
    tx.commit().await?;
    let mut newest: std::collections::HashMap<Uuid, i64> =
        rows.into_iter().map(|r| (r.id, r.generation)).collect();
    // Hand the generations out newest last: walking the entries backwards,
    // each takes the highest left.
    let mut each = vec![None; servers.len()];
    for (slot, server) in each.iter_mut().zip(servers).rev() {
        if let Some(g) = newest.get_mut(server) {
            *slot = Some(*g);
            *g -= 1;
        }
    }
    Ok(each)
}

/// The server's current connection generation.
pub async fn generation(db: &PgPool, server: Uuid) -> Result<i64, OutboxError> {
    store::servers::generation(db, server)
        .await?
        .ok_or(OutboxError::UnknownServer(server))
}

#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    #[error("no server {0} is registered")]
    UnknownServer(Uuid),
    #[error("the database refused the outbox operation")]
    Db(#[from] sqlx::Error),
    #[error("the database refused the outbox write: {0}")]
    Failed(String),
    #[error("a delivery the server would refuse is not queued: {0}")]
    Content(aromba_relay_proto::frame::ContentError),
    #[error("a stored delivery is not a delivery")]
    Corrupt(#[from] serde_json::Error),
}

/// One delivery to queue.
pub struct Enqueue {
    pub server: Uuid,
    pub delivery: Delivery,
    pub now: DateTime<Utc>,
}

/// Where one queued delivery went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    /// Its row id.
    Queued(i64),
    /// No such server is registered.
    UnknownServer,
    /// Its content fails the check the server makes (it is not queued, and
    /// the rest of the batch is).
    Refused(aromba_relay_proto::frame::ContentError),
}

/// What a batch did: each delivery's fate, in the order given, and how
/// many older rows the per-server bound dropped.
#[derive(Debug)]
pub struct BatchEnqueued {
    pub each: Vec<Enqueued>,
    pub dropped: u64,
}

/// Queues `delivery` for `server`; past `max_pending` rows the oldest go.
/// Returns the row's id and how many were dropped.
pub async fn enqueue(
    db: &PgPool,
    server: Uuid,
    delivery: &Delivery,
    now: DateTime<Utc>,
    max_pending: i64,
) -> Result<(i64, u64), OutboxError> {
    let mut tx = db.begin().await?;
    let queued = enqueue_in(&mut tx, server, delivery, now, max_pending).await?;
    tx.commit().await?;
    Ok(queued)
}

/// Queues a batch in one transaction (one commit, one wait for the disk,
/// however many deliveries): the group commit that lets many writers share
/// the cost of making a row durable. Past `max_pending` rows a server's
/// oldest go.
///
/// The servers' rows are locked first, in id order (so two batches never
/// deadlock), and only then are the row ids taken: enqueues for one server
/// take their ids and commit in the same order, so a connection that has
/// sent up to id N never misses a row below N that commits later. Within
/// the batch, an earlier delivery gets a smaller id.
pub async fn enqueue_batch(
    db: &PgPool,
    batch: &[Enqueue],
    max_pending: i64,
) -> Result<BatchEnqueued, OutboxError> {
    if batch.is_empty() {
        return Ok(BatchEnqueued {
            each: Vec::new(),
            dropped: 0,
        });
    }
    let mut tx = db.begin().await?;
    let done = enqueue_batch_in(&mut tx, batch, max_pending).await?;
    tx.commit().await?;
    Ok(done)
}

/// Queues `delivery` for `server` in the caller's transaction, so that it
/// commits with what the caller wrote there, or not at all (an update from
/// Telegram and its claim: see `telegram/inbound.rs`). The row's id and
/// how many older rows were dropped.
pub(crate) async fn enqueue_in(
    conn: &mut sqlx::PgConnection,
    server: Uuid,
    delivery: &Delivery,
    now: DateTime<Utc>,
    max_pending: i64,
) -> Result<(i64, u64), OutboxError> {
    let one = [Enqueue {
        server,
        delivery: delivery.clone(),
        now,
    }];
    let done = enqueue_batch_in(conn, &one, max_pending).await?;
    match done.each.first() {
        Some(Enqueued::Queued(id)) => Ok((*id, done.dropped)),
        Some(Enqueued::Refused(e)) => Err(OutboxError::Content(*e)),
        _ => Err(OutboxError::UnknownServer(server)),
    }
}

/// [`enqueue_batch`] in the caller's transaction (nothing is written when
/// nothing of the batch is wanted).
async fn enqueue_batch_in(
    tx: &mut sqlx::PgConnection,
    batch: &[Enqueue],
    max_pending: i64,
) -> Result<BatchEnqueued, OutboxError> {
    let mut servers: Vec<Uuid> = batch.iter().map(|e| e.server).collect();
    servers.sort_unstable();
    servers.dedup();
    let mut bodies = Vec::with_capacity(batch.len());
    for e in batch {
        bodies.push(serde_json::to_value(&e.delivery)?);
    }
    store::bound_lock_waits(tx, LOCK_WAIT).await?;
    let known = store::servers::lock_in_id_order(tx, &servers).await?;
    let known: std::collections::HashSet<Uuid> = known.into_iter().collect();
    // What is refused is left out on its own; the batch goes on.
    let fate = |e: &Enqueue| match e.delivery.check() {
        Err(refused) => Some(Enqueued::Refused(refused)),
        Ok(()) if !known.contains(&e.server) => Some(Enqueued::UnknownServer),
        Ok(()) => None,
    };
    let wanted = batch.iter().filter(|e| fate(e).is_none()).count();
    if wanted == 0 {
        return Ok(BatchEnqueued {
            each: batch.iter().filter_map(fate).collect(),
            dropped: 0,
        });
    }
    let mut ids = store::outbox::take_ids(tx, i32::try_from(wanted).unwrap_or(i32::MAX)).await?;
    ids.sort_unstable();
    let mut each = Vec::with_capacity(batch.len());
    let (mut row_ids, mut row_servers, mut row_bodies, mut row_times) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut next = ids.into_iter();
    // The newest row per server, for its notification.
    let mut newest: std::collections::BTreeMap<Uuid, i64> = std::collections::BTreeMap::new();
    for (e, body) in batch.iter().zip(bodies) {
        if let Some(not_queued) = fate(e) {
            each.push(not_queued);
            continue;
        }
        let Some(id) = next.next() else {
            return Err(OutboxError::Db(sqlx::Error::RowNotFound));
        };
        each.push(Enqueued::Queued(id));
        newest.insert(e.server, id);
        row_ids.push(id);
        row_servers.push(e.server);
        row_bodies.push(body);
        row_times.push(e.now);
    }
    let (notify_servers, notify_ids): (Vec<Uuid>, Vec<i64>) = newest.into_iter().unzip();
    // The rows and their notifications (ids only) in one statement; the
    // notifications go out when the transaction commits.
    store::outbox::insert_and_notify(
        tx,
        store::outbox::Rows {
            ids: &row_ids,
            servers: &row_servers,
            deliveries: &row_bodies,
            created: &row_times,
            channel: CHANNEL,
            notify_servers: &notify_servers,
            notify_ids: &notify_ids,
        },
    )
    .await?;
    // The bound, now that the new rows are there to count.
    let dropped = store::outbox::drop_past_bound(tx, &notify_servers, max_pending.max(1)).await?;
    Ok(BatchEnqueued {
        each,
        dropped: u64::try_from(dropped).unwrap_or(0),
    })
}

/// A delivery read back for sending.
pub struct Pending {
    pub id: i64,
    pub delivery: Delivery,
}

/// The server's rows after `after`, oldest first, at most `limit` of them
/// read.
pub struct PendingBatch {
    pub rows: Vec<Pending>,
    /// As many rows were read as asked for: there may be more.
    pub full: bool,
}

/// The server's rows after `after`, oldest first, at most `limit`. A row
/// this relay cannot read (a delivery of a kind an older relay queued and
/// this one no longer has) is erased and skipped: left, it would end every
/// connection of its server at the same row, and nothing behind it would
/// ever be delivered.
pub async fn pending_after(
    db: &PgPool,
    server: Uuid,
    after: i64,
    limit: i64,
) -> Result<PendingBatch, OutboxError> {
    let rows = store::outbox::after(db, server, after, limit).await?;
    let full = i64::try_from(rows.len()).unwrap_or(i64::MAX) >= limit;
    let mut pending = Vec::with_capacity(rows.len());
    let mut unreadable = Vec::new();
    for r in rows {
        match serde_json::from_value(r.delivery) {
            Ok(delivery) => pending.push(Pending { id: r.id, delivery }),
            Err(_) => unreadable.push((server, r.id)),
        }
    }
    if !unreadable.is_empty() {
        tracing::warn!(
            server = %server,
            rows = unreadable.len(),
            "deliveries of a kind this relay does not know were erased"
        );
        acknowledge_batch(db, &unreadable).await?;
    }
    Ok(PendingBatch {
        rows: pending,
        full,
    })
}

/// The server acknowledged row `id`: its body goes now. Returns when it was
/// enqueued, if it was still there (a duplicate ack finds nothing).
pub async fn acknowledge(
    db: &PgPool,
    server: Uuid,
    id: i64,
) -> Result<Option<DateTime<Utc>>, OutboxError> {
    Ok(acknowledge_batch(db, &[(server, id)])
        .await?
        .into_iter()
        .next())
}

/// Deletes every acknowledged row of `acks` (server, row) in one
/// statement; returns when each row still there was enqueued. A row is
/// deleted only with its own server's id: a server cannot acknowledge
/// another's. Rows are locked in id order, as the bound and the sweep lock
/// them, so none of them deadlock.
pub async fn acknowledge_batch(
    db: &PgPool,
    acks: &[(Uuid, i64)],
) -> Result<Vec<DateTime<Utc>>, OutboxError> {
    if acks.is_empty() {
        return Ok(Vec::new());
    }
    let (servers, ids): (Vec<Uuid>, Vec<i64>) = acks.iter().copied().unzip();
    let mut tx = db.begin().await?;
    store::bound_lock_waits(&mut tx, LOCK_WAIT).await?;
    let enqueued = store::outbox::delete_acknowledged(&mut tx, &servers, &ids).await?;
    tx.commit().await?;
    Ok(enqueued)
}

impl OutboxError {
    /// The database answered and refused this write (a deadlock, a lock
    /// held too long, a constraint): another write may well succeed. Not
    /// so when it could not be reached.
    pub fn refused_by_database(&self) -> bool {
        matches!(self, OutboxError::Db(sqlx::Error::Database(_)))
    }
}

/// Deliveries waiting, all servers.
pub async fn depth(db: &PgPool) -> Result<i64, OutboxError> {
    Ok(store::outbox::count(db).await?)
}

/// Parses a notification's payload, `server:row`.
pub fn parse_notification(payload: &str) -> Option<(Uuid, i64)> {
    let (server, id) = payload.split_once(':')?;
    Some((server.parse().ok()?, id.parse().ok()?))
}
