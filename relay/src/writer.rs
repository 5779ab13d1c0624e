//! The outbox's writers on this replica: group commit for enqueues,
//! acknowledgements and connection generations.
//!
//! A row is durable only once its transaction's commit reached the disk,
//! and that wait, not the statement, is what an outbox write costs. So
//! each kind of write has one task here: it takes whatever is waiting
//! (up to [`MAX_BATCH`]), writes it in one transaction, and meanwhile the
//! next batch gathers. One writer alone waits for one commit, as before;
//! many share each commit.
//!
//! An enqueue's caller waits for its commit (the id it gets is durable), as
//! a new connection waits for its generation (a commit, with a `NOTIFY` to
//! every replica: ten thousand servers back after a restart share a few
//! hundred commits, not ten thousand).
//! An acknowledgement's connection does not wait: the row is deleted in
//! the next batch, and one the database refused is retried with the next
//! batch, so a body outlives its acknowledgement only while the database
//! is unreachable. If the relay stops before it is deleted, the server is
//! sent it again and drops it by its id.
//!
//! Nothing here waits without end or for another server: a transaction
//! gives up on a row held elsewhere after [`outbox::LOCK_WAIT`] and on a
//! database that stops answering after `BATCH_DEADLINE`; a caller waits at
//! most `CALLER_DEADLINE`; and a batch the database refused is written
//! again a server at a time, so one server's trouble is its own.

use crate::clock::Clock;
use crate::metrics::WriterMetrics as Metrics;
use crate::outbox::{self, Enqueue, Enqueued, OutboxError};
use aromba_relay_proto::frame::Delivery;
use chrono::{DateTime, Utc};
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use uuid::Uuid;

/// Rows one transaction writes at most.
pub const MAX_BATCH: usize = 256;
/// Writes waiting for a writer at most; past it, callers wait.
const QUEUE: usize = 8_192;
/// Acknowledgements kept for a retry while the database refuses them.
const MAX_CARRIED: usize = 100_000;
/// The pause after a refused batch.
const RETRY_AFTER: Duration = Duration::from_millis(200);
/// How long one transaction may take, answer included: a database that
/// stops answering mid-batch (a partition, a frozen host: no reset, no
/// error) must not hold the writer, and every caller behind it, for as
/// long as TCP takes to notice.
const BATCH_DEADLINE: Duration = Duration::from_secs(10);
/// How long a caller waits for its write, queue included.
const CALLER_DEADLINE: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    #[error("the relay is shutting down")]
    Closed,
    #[error("the database did not answer in time")]
    Timeout,
}

/// `write` within [`BATCH_DEADLINE`]; past it the transaction is given up
/// (dropped, so never committed by us) and reported as failed.
async fn within<T>(
    write: impl std::future::Future<Output = Result<T, OutboxError>>,
) -> Result<T, OutboxError> {
    tokio::time::timeout(BATCH_DEADLINE, write)
        .await
        .unwrap_or_else(|_| {
            Err(OutboxError::Failed(
                "the database did not answer in time".into(),
            ))
        })
}

/// Waits at most [`CALLER_DEADLINE`] for the whole exchange.
async fn bounded<T>(
    exchange: impl std::future::Future<Output = Result<T, WriterError>>,
) -> Result<T, WriterError> {
    tokio::time::timeout(CALLER_DEADLINE, exchange)
        .await
        .unwrap_or(Err(WriterError::Timeout))
}

type Reply = oneshot::Sender<Result<(i64, u64), WriterError>>;

struct Job {
    enqueue: Enqueue,
    reply: Reply,
}

struct GenerationJob {
    server: Uuid,
    reply: GenerationReply,
}

/// The handle connections and the chat side write through.
#[derive(Clone)]
pub struct Writer {
    enqueues: mpsc::Sender<Job>,
    acks: mpsc::Sender<(Uuid, i64)>,
    generations: mpsc::Sender<GenerationJob>,
}

/// The writer tasks, to be drained when the relay stops.
pub struct Tasks {
    closing: watch::Sender<bool>,
    enqueues: tokio::task::JoinHandle<()>,
    acks: tokio::task::JoinHandle<()>,
    generations: tokio::task::JoinHandle<()>,
}

impl Writer {
    /// Starts the two writer tasks; [`Tasks::drain`] ends them once what
    /// was queued is written.
    pub fn start(
        db: PgPool,
        metrics: Metrics,
        clock: Arc<dyn Clock>,
        max_pending: i64,
    ) -> (Writer, Tasks) {
        let (enqueues, enqueue_rx) = mpsc::channel(QUEUE);
        let (acks, ack_rx) = mpsc::channel(QUEUE);
        let (generations, generation_rx) = mpsc::channel(QUEUE);
        let (closing, closed) = watch::channel(false);
        let tasks = Tasks {
            closing,
            enqueues: tokio::spawn(write_enqueues(
                db.clone(),
                metrics.clone(),
                Queue::new(enqueue_rx, closed.clone()),
                max_pending,
            )),
            generations: tokio::spawn(write_generations(
                db.clone(),
                Queue::new(generation_rx, closed.clone()),
            )),
            acks: tokio::spawn(write_acks(db, metrics, clock, Queue::new(ack_rx, closed))),
        };
        (
            Writer {
                enqueues,
                acks,
                generations,
            },
            tasks,
        )
    }

    /// Queues `delivery` for `server` and waits for its commit: returns the
    /// row's id and how many older rows the bound dropped.
    pub async fn enqueue(
        &self,
        server: Uuid,
        delivery: Delivery,
        now: DateTime<Utc>,
    ) -> Result<(i64, u64), WriterError> {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            enqueue: Enqueue {
                server,
                delivery,
                now,
            },
            reply,
        };
        bounded(async {
            self.enqueues
                .send(job)
                .await
                .map_err(|_| WriterError::Closed)?;
            answer.await.map_err(|_| WriterError::Closed)?
        })
        .await
    }

    /// Takes `server`'s next connection generation (told to every replica)
    /// and waits for its commit.
    pub async fn next_generation(&self, server: Uuid) -> Result<i64, WriterError> {
        let (reply, answer) = oneshot::channel();
        bounded(async {
            self.generations
                .send(GenerationJob { server, reply })
                .await
                .map_err(|_| WriterError::Closed)?;
            answer.await.map_err(|_| WriterError::Closed)?
        })
        .await
    }

    /// Hands over row `id` of `server` for deletion; waits only while the
    /// writer's queue is full, and not past the caller's deadline.
    pub async fn acknowledge(&self, server: Uuid, id: i64) -> Result<(), WriterError> {
        bounded(async {
            self.acks
                .send((server, id))
                .await
                .map_err(|_| WriterError::Closed)
        })
        .await
    }
}

impl Tasks {
    /// Takes no more writes, and waits (at most `deadline`) for the
    /// writers to write what was queued. A write handed over later is
    /// refused as [`WriterError::Closed`].
    pub async fn drain(self, deadline: Duration) {
        let _ = self.closing.send(true);
        let both = async {
            let _ = self.enqueues.await;
            let _ = self.generations.await;
            let _ = self.acks.await;
        };
        if tokio::time::timeout(deadline, both).await.is_err() {
            tracing::warn!("the outbox writers did not finish in time");
        }
    }
}

/// A writer's inbox, which closes (what is in it is still taken) once the
/// relay stops.
struct Queue<T> {
    rx: mpsc::Receiver<T>,
    closing: watch::Receiver<bool>,
    closed: bool,
}

impl<T> Queue<T> {
    fn new(rx: mpsc::Receiver<T>, closing: watch::Receiver<bool>) -> Queue<T> {
        Queue {
            rx,
            closing,
            closed: false,
        }
    }

    async fn next(&mut self) -> Option<T> {
        if !self.closed {
            tokio::select! {
                item = self.rx.recv() => return item,
                // Told to close, or the relay dropped the switch.
                _ = self.closing.changed() => {
                    self.closed = true;
                    self.rx.close();
                }
            }
        }
        self.rx.recv().await
    }

    /// Takes the first waiting item (unless `into` holds some carried
    /// over), then whatever else is already there; false once closed and
    /// empty.
    async fn gather(&mut self, into: &mut Vec<T>, max: usize) -> bool {
        if into.is_empty() {
            match self.next().await {
                Some(first) => into.push(first),
                None => return false,
            }
        }
        while into.len() < max {
            match self.rx.try_recv() {
                Ok(next) => into.push(next),
                Err(_) => break,
            }
        }
        true
    }
}

async fn write_enqueues(db: PgPool, metrics: Metrics, mut queue: Queue<Job>, max_pending: i64) {
    let mut jobs = Vec::with_capacity(MAX_BATCH);
    while queue.gather(&mut jobs, MAX_BATCH).await {
        let (batch, replies): (Vec<Enqueue>, Vec<Reply>) =
            jobs.drain(..).map(|j| (j.enqueue, j.reply)).unzip();
        match within(outbox::enqueue_batch(&db, &batch, max_pending)).await {
            Ok(done) => answer_enqueues(&metrics, done, &batch, replies),
            // The database refused the batch (a deadlock with the sweep, a
            // row held elsewhere past the lock bound): what one delivery
            // ran into must not fail the others, so each is written alone
            // and gets its own answer.
            Err(e) if e.refused_by_database() && batch.len() > 1 => {
                tracing::warn!(error = %e, rows = batch.len(), "outbox batch refused; writing each server's alone");
                let jobs = batch
                    .into_iter()
                    .zip(replies)
                    .map(|(enqueue, reply)| Job { enqueue, reply });
                let groups = per_server(jobs, |j| j.enqueue.server);
                apart(groups, |jobs| {
                    let (db, metrics) = (db.clone(), metrics.clone());
                    async move {
                        let (one, replies): (Vec<Enqueue>, Vec<Reply>) =
                            jobs.into_iter().map(|j| (j.enqueue, j.reply)).unzip();
                        match within(outbox::enqueue_batch(&db, &one, max_pending)).await {
                            Ok(done) => answer_enqueues(&metrics, done, &one, replies),
                            Err(e) => refuse_all(&e, replies),
                        }
                    }
                })
                .await;
            }
            Err(e) => {
                // Nothing of the batch was committed; each caller is told.
                tracing::warn!(error = %e, rows = batch.len(), "outbox enqueue failed");
                refuse_all(&e, replies);
            }
        }
    }
}

fn answer_enqueues(
    metrics: &Metrics,
    done: outbox::BatchEnqueued,
    batch: &[Enqueue],
    replies: Vec<Reply>,
) {
    if done.dropped > 0 {
        metrics.outbox_dropped.inc_by(done.dropped);
        tracing::info!(dropped = done.dropped, "outbox bound reached");
    }
    for ((reply, fate), e) in replies.into_iter().zip(done.each).zip(batch) {
        let answer = match fate {
            Enqueued::Queued(id) => Ok((id, done.dropped)),
            Enqueued::UnknownServer => {
                Err(WriterError::Outbox(OutboxError::UnknownServer(e.server)))
            }
            Enqueued::Refused(why) => Err(WriterError::Outbox(OutboxError::Content(why))),
        };
        let _ = reply.send(answer);
    }
}

/// Tells each caller that its write failed with `e`.
fn refuse_all<T>(e: &OutboxError, replies: Vec<oneshot::Sender<Result<T, WriterError>>>) {
    let shown = e.to_string();
    for reply in replies {
        let _ = reply.send(Err(WriterError::Outbox(OutboxError::Failed(shown.clone()))));
    }
}

async fn write_generations(db: PgPool, mut queue: Queue<GenerationJob>) {
    let mut jobs = Vec::with_capacity(MAX_BATCH);
    while queue.gather(&mut jobs, MAX_BATCH).await {
        let (servers, replies): (Vec<Uuid>, Vec<_>) =
            jobs.drain(..).map(|j| (j.server, j.reply)).unzip();
        match within(outbox::next_generations(&db, &servers)).await {
            Ok(each) => answer_generations(each, &servers, replies),
            // As for enqueues: one server's refusal is not the others'.
            Err(e) if e.refused_by_database() && servers.len() > 1 => {
                tracing::warn!(error = %e, servers = servers.len(), "connection generations refused; taking each server's alone");
                let jobs = servers
                    .into_iter()
                    .zip(replies)
                    .map(|(server, reply)| GenerationJob { server, reply });
                let groups = per_server(jobs, |j| j.server);
                apart(groups, |jobs| {
                    let db = db.clone();
                    async move {
                        let (servers, replies): (Vec<Uuid>, Vec<_>) =
                            jobs.into_iter().map(|j| (j.server, j.reply)).unzip();
                        match within(outbox::next_generations(&db, &servers)).await {
                            Ok(each) => answer_generations(each, &servers, replies),
                            Err(e) => refuse_all(&e, replies),
                        }
                    }
                })
                .await;
            }
            Err(e) => {
                tracing::warn!(error = %e, servers = servers.len(), "connection generations failed");
                refuse_all(&e, replies);
            }
        }
    }
}

/// How many servers' writes of a refused batch run at once.
const APART: usize = 16;

/// `jobs` grouped by server, each group in the order given (a server's
/// enqueues keep their order).
fn per_server<J>(jobs: impl Iterator<Item = J>, server: impl Fn(&J) -> Uuid) -> Vec<Vec<J>> {
    let mut groups: Vec<Vec<J>> = Vec::new();
    let mut index: std::collections::HashMap<Uuid, usize> = std::collections::HashMap::new();
    for job in jobs {
        let at = *index.entry(server(&job)).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[at].push(job);
    }
    groups
}

/// Writes each server's group of a refused batch as its own transaction,
/// [`APART`] at once: a server whose row is held elsewhere waits out its
/// lock bound beside the others, not before them. Returns once all are
/// answered, so a later batch never overtakes a server's earlier writes.
async fn apart<J, F>(groups: Vec<Vec<J>>, write: impl Fn(Vec<J>) -> F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(tokio::sync::Semaphore::new(APART));
    let mut running = tokio::task::JoinSet::new();
    for group in groups {
        let slots = slots.clone();
        let write = write(group);
        running.spawn(async move {
            let _slot = slots.acquire_owned().await;
            write.await;
        });
    }
    while running.join_next().await.is_some() {}
}

type GenerationReply = oneshot::Sender<Result<i64, WriterError>>;

fn answer_generations(each: Vec<Option<i64>>, servers: &[Uuid], replies: Vec<GenerationReply>) {
    for ((reply, generation), server) in replies.into_iter().zip(each).zip(servers) {
        let _ =
            reply.send(generation.ok_or(WriterError::Outbox(OutboxError::UnknownServer(*server))));
    }
}

async fn write_acks(
    db: PgPool,
    metrics: Metrics,
    clock: Arc<dyn Clock>,
    mut queue: Queue<(Uuid, i64)>,
) {
    let mut acks = Vec::with_capacity(MAX_BATCH);
    loop {
        let max = acks.len() + MAX_BATCH;
        if !queue.gather(&mut acks, max).await {
            return;
        }
        let now = clock.now();
        match within(outbox::acknowledge_batch(&db, &acks)).await {
            Ok(enqueued) => {
                for at in enqueued {
                    let secs = (now - at).num_milliseconds().max(0) as f64 / 1000.0;
                    metrics.delivery_latency.observe(secs);
                }
                acks.clear();
            }
            // A row held elsewhere past the lock bound: each server's
            // acknowledgements are written apart, and only what is still
            // refused is kept for the next round.
            Err(e) if e.refused_by_database() && acks.len() > 1 => {
                tracing::warn!(error = %e, rows = acks.len(), "outbox acknowledgements refused; writing each server's alone");
                let groups = per_server(acks.drain(..), |a| a.0);
                let kept = Arc::new(std::sync::Mutex::new(Vec::new()));
                apart(groups, |one| {
                    let (db, metrics, kept) = (db.clone(), metrics.clone(), kept.clone());
                    async move {
                        match within(outbox::acknowledge_batch(&db, &one)).await {
                            Ok(enqueued) => {
                                for at in enqueued {
                                    let secs = (now - at).num_milliseconds().max(0) as f64 / 1000.0;
                                    metrics.delivery_latency.observe(secs);
                                }
                            }
                            Err(_) => {
                                if let Ok(mut kept) = kept.lock() {
                                    kept.extend(one);
                                }
                            }
                        }
                    }
                })
                .await;
                if let Ok(mut kept) = kept.lock() {
                    acks.append(&mut kept);
                }
                if !acks.is_empty() {
                    tokio::time::sleep(RETRY_AFTER).await;
                }
            }
            Err(e) => {
                // Kept for the next batch; past the bound the oldest go
                // (their rows are sent again on the server's next
                // connection, or erased by the sweep).
                tracing::warn!(error = %e, rows = acks.len(), "outbox acknowledgements failed; retrying");
                if acks.len() > MAX_CARRIED {
                    let over = acks.len() - MAX_CARRIED;
                    acks.drain(..over);
                    metrics.acks_lost.inc_by(over as u64);
                }
                tokio::time::sleep(RETRY_AFTER).await;
            }
        }
    }
}
