//! An update's claim: the transaction that claims its `update_id` once
//! across replicas, in which what the update queues for a server is
//! written too ([`Claim`]), and which errors let the same update be
//! handled another time ([`HandleError::may_pass`]).

use crate::state::App;
use crate::store;

/// Where an update's claim stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ClaimState {
    Open,
    Committed,
    /// Its commit failed: whether it reached the disk is not known (taken
    /// for not: the update is sent again, and a copy of one kept is
    /// dropped by its id).
    Unknown,
}

/// The transaction that claimed an update, and its place among the claims
/// at the database at once (given back when it commits).
pub(super) struct Claim<'a> {
    tx: Option<sqlx::Transaction<'static, sqlx::Postgres>>,
    permit: Option<tokio::sync::SemaphorePermit<'a>>,
    pub(super) state: ClaimState,
}

impl<'a> Claim<'a> {
    /// Claims bot `bot`'s update `id` in a new transaction, and looks up
    /// the server `chat` is paired with; `None` when the update was claimed
    /// before.
    pub(super) async fn take(
        app: &App,
        permit: Result<tokio::sync::SemaphorePermit<'a>, tokio::sync::AcquireError>,
        bot: i64,
        id: i64,
        chat: Option<i64>,
    ) -> Result<Option<(Claim<'a>, Option<uuid::Uuid>)>, sqlx::Error> {
        let mut tx = app.db.begin().await?;
        // A copy of the update being handled elsewhere waits for that
        // transaction, but not without end.
        store::bound_lock_waits(&mut tx, crate::outbox::LOCK_WAIT).await?;
        let row =
            store::telegram_updates::claim(&mut *tx, bot, id, app.config.clock.now(), chat).await?;
        if !row.claimed {
            return Ok(None);
        }
        let claim = Claim {
            tx: Some(tx),
            permit: permit.ok(),
            state: ClaimState::Open,
        };
        Ok(Some((claim, row.server)))
    }

    /// The claim's transaction, while it is open.
    pub(super) fn conn(&mut self) -> Result<&mut sqlx::PgConnection, HandleError> {
        match self.tx.as_mut() {
            Some(tx) => Ok(&mut **tx),
            None => Err(HandleError::ClaimClosed),
        }
    }

    /// Commits the claim and what was written with it (once; later calls
    /// do nothing).
    pub(super) async fn commit(&mut self) -> Result<(), sqlx::Error> {
        let Some(tx) = self.tx.take() else {
            return Ok(());
        };
        let committed = tx.commit().await;
        self.permit = None;
        match committed {
            Ok(()) => {
                self.state = ClaimState::Committed;
                Ok(())
            }
            Err(e) => {
                self.state = ClaimState::Unknown;
                Err(e)
            }
        }
    }
}

impl HandleError {
    /// Whether the same update may be handled another time: the database
    /// was out of reach, busy or shutting down, or a write was given up for
    /// a lock. A refusal of what the update holds, or anything not known
    /// to pass, is not (an update sent again for ever would hold up the
    /// updates behind it until the poller gives up on it).
    pub(super) fn may_pass(&self) -> bool {
        match self {
            HandleError::Database(e) => database_may_pass(e),
            HandleError::Queue(crate::outbox::OutboxError::Db(e)) => database_may_pass(e),
            HandleError::Outbox(crate::writer::WriterError::Outbox(
                crate::outbox::OutboxError::Db(e),
            )) => database_may_pass(e),
            // The writer reports what the database did to a batch as
            // `Failed` (found by the attack round: taken for a refusal).
            HandleError::Outbox(
                crate::writer::WriterError::Timeout
                | crate::writer::WriterError::Closed
                | crate::writer::WriterError::Outbox(crate::outbox::OutboxError::Failed(_)),
            ) => true,
            _ => false,
        }
    }
}

/// Whether a database error may pass: the database out of reach, a
/// connection lost, a transaction rolled back for a conflict (class 40), a
/// lock not had in time (55P03), resources short (53), the server shutting
/// down or starting (57), a system error (58), a connection failure (08).
pub(super) fn database_may_pass(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_)
        | sqlx::Error::Tls(_) => true,
        sqlx::Error::Database(d) => d.code().is_some_and(|code| {
            code == "55P03"
                || ["08", "40", "53", "57", "58"]
                    .iter()
                    .any(|c| code.starts_with(c))
        }),
        _ => false,
    }
}

/// Why an update could not be handled (never its content).
#[derive(Debug, thiserror::Error)]
pub enum HandleError {
    #[error("the database refused: {0}")]
    Database(#[from] sqlx::Error),
    #[error("the outbox refused: {0}")]
    Outbox(#[from] crate::writer::WriterError),
    #[error("the outbox refused: {0}")]
    Queue(#[from] crate::outbox::OutboxError),
    #[error("the update's claim was used after it closed")]
    ClaimClosed,
    #[error("{0}")]
    Sign(#[from] super::signing::KeyError),
}
