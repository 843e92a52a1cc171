//! The queue, flushers and transaction a group commit runs on ([`Batcher`]): a caller queues a
//! job and waits for its answer; a few flushers (each one connection while it writes) take
//! whatever has queued, up to [`MAX_BATCH`], so one collects while another commits.
//!
//! A batch is written by its kind's [`Writer::write_together`], in one transaction, or with no
//! transaction around it when [`Writer::one_write`] says its writes are one statement (which
//! commits alone: two round trips fewer); if that statement fails on a unique violation (a row
//! it cannot leave out, such as a keyed create's taken `eventId`) or a lock wait past
//! [`LOCK_WAIT`], the batch is written again in a transaction, whose statements can leave the
//! row out, or wait. Each job it wrote is answered after the commit, so an answer means its
//! rows are durable. The jobs it left, and every job of a batch whose
//! statements failed (the cause is then one row, or a lock lost to another transaction), are
//! handed back to their callers, who write each through [`Writer::alone`] in its own
//! transaction on the shared pool (under the intake's permits, never refused: they were
//! accepted), as it would have been written alone; a database that cannot be reached answers
//! the whole batch at once. A job that found every flusher writing and then
//! waited past the intake's limit is refused as overloaded, with nothing written; one that
//! found a flusher free never is. The flushers run on a thread of their own, with a pool of
//! their own that runs nothing but batches ([`FlusherThread`]), which the store keeps running.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use sqlx::{Connection, PgConnection, PgPool, Postgres, Transaction};
use tokio::sync::{mpsc, oneshot, Mutex};
use vow_store::{StoreError, StoreResult};

use crate::error::{db_error, is_contention, is_lock_timeout, is_unique_violation};
use crate::flusher_thread::FlusherThread;
use crate::intake::Intake;

/// The most jobs one batch carries.
pub(crate) const MAX_BATCH: usize = 256;

/// How many batches are written at once: one collects while another commits.
const FLUSHERS: usize = 2;

/// The flushers' connections' bound on a lock wait: a batch's one statement that waits longer
/// (behind a table lock, or a row another transaction is writing) fails whole, and the batch
/// is written in a transaction ([`begin`]), which waits as long as it must. Its statement takes
/// every lock it needs before it claims any key, so without the bound a key whose write waits
/// would not be seen in flight by a retry, which would wait too; in the transaction the claims
/// come first, as in a create alone.
pub(crate) const LOCK_WAIT: &str = "SET lock_timeout = '10ms'";

/// Begins a batch's transaction, whose lock waits are not bounded ([`LOCK_WAIT`]). One round
/// trip, as a plain `BEGIN` is.
pub(crate) async fn begin(conn: &mut PgConnection) -> sqlx::Result<Transaction<'_, Postgres>> {
    conn.begin_with("BEGIN; SET LOCAL lock_timeout = 0").await
}

/// How one kind of job is written: a batch together, or one alone.
pub(crate) trait Writer: Send + Sync + 'static {
    /// What a caller queues.
    type Job: Send + Sync + 'static;
    /// What a caller is answered.
    type Answer: Send + 'static;
    /// What the batch wrote for one job.
    type Written: Send;
    /// What the jobs are, for errors and logs ("message creates").
    const WHAT: &'static str;

    /// Whether [`Writer::write_together`] can write `jobs` in one statement, after reads that
    /// lock nothing, so that statement is their transaction and needs no other around it.
    fn one_write(jobs: &[&Self::Job]) -> bool;

    /// The batch's writes on `conn`: `in_transaction`, in a transaction the caller commits;
    /// otherwise as [`Writer::one_write`]'s one statement, which fails whole with a unique
    /// violation on a row only the transaction's statements can leave out (or past
    /// [`LOCK_WAIT`]). For each job, what was written for it, `None` for a job left to
    /// [`Writer::alone`].
    fn write_together(
        conn: &mut PgConnection,
        jobs: &[&Self::Job],
        in_transaction: bool,
    ) -> impl Future<Output = sqlx::Result<Vec<Option<Self::Written>>>> + Send;

    /// The answer of a job the batch wrote.
    fn answer(job: Self::Job, written: Self::Written) -> Self::Answer;

    /// Writes one job in a transaction of its own.
    fn alone(
        pool: &PgPool,
        job: Self::Job,
    ) -> impl Future<Output = StoreResult<Self::Answer>> + Send;
}

/// The queue the flushers share (one takes a batch at a time).
type Queue<W> =
    Arc<Mutex<mpsc::UnboundedReceiver<Queued<<W as Writer>::Job, <W as Writer>::Answer>>>>;

/// What a flusher gives a caller back: the answer, or the job, to be written alone.
#[derive(Debug)]
enum Outcome<J, A> {
    Answered(StoreResult<A>),
    Alone(J),
}

/// A queued job and where its outcome goes.
#[derive(Debug)]
struct Queued<J, A> {
    job: J,
    answer: oneshot::Sender<Outcome<J, A>>,
    queued: Instant,
    /// Whether every flusher was writing when it was queued (only then can it be late).
    behind: bool,
}

/// The queue of one kind of job and its flushers. Cheap to clone.
pub(crate) struct Batcher<W: Writer> {
    jobs: mpsc::UnboundedSender<Queued<W::Job, W::Answer>>,
    /// How many flushers are writing a batch.
    writing: Arc<AtomicUsize>,
    /// The shared pool, where a job a batch left is written alone, holding one of `intake`'s
    /// permits (it was accepted, so it waits for one rather than being refused).
    pool: PgPool,
    intake: Arc<Intake>,
}

impl<W: Writer> Clone for Batcher<W> {
    fn clone(&self) -> Self {
        Self {
            jobs: self.jobs.clone(),
            writing: self.writing.clone(),
            pool: self.pool.clone(),
            intake: self.intake.clone(),
        }
    }
}

impl<W: Writer> std::fmt::Debug for Batcher<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher").field("what", &W::WHAT).finish()
    }
}

impl<W: Writer> Batcher<W> {
    /// Starts the flushers on `thread`, writing with its pool; they stop once every clone of the
    /// returned handle is gone. A job a batch leaves is written alone on `pool`, under `intake`.
    pub(crate) fn spawn(thread: &FlusherThread, pool: PgPool, intake: Arc<Intake>) -> Self {
        let (jobs, queue) = mpsc::unbounded_channel();
        let queue = Arc::new(Mutex::new(queue));
        let writing = Arc::new(AtomicUsize::new(0));
        for _ in 0..FLUSHERS {
            let flusher = Flusher::<W> {
                pool: thread.pool().clone(),
                intake: intake.clone(),
                queue: queue.clone(),
                writing: writing.clone(),
            };
            thread.spawn(flusher.run());
        }
        Self {
            jobs,
            writing,
            pool,
            intake,
        }
    }

    /// Writes `job` in the next batch, or alone if the batch leaves it: its answer, given once
    /// its rows are durable, or the error of its own row.
    pub(crate) async fn submit(&self, job: W::Job) -> StoreResult<W::Answer> {
        let (answer, answered) = oneshot::channel();
        let queued = Queued {
            job,
            answer,
            queued: Instant::now(),
            behind: self.writing.load(Ordering::Relaxed) >= FLUSHERS,
        };
        self.jobs.send(queued).map_err(|_| {
            StoreError::Unavailable(format!("the group commit of {} has stopped", W::WHAT).into())
        })?;
        let outcome = answered.await.map_err(|_| {
            StoreError::Unavailable(format!("the group commit dropped one of {}", W::WHAT).into())
        })?;
        match outcome {
            Outcome::Answered(answer) => answer,
            Outcome::Alone(job) => {
                let _permit = self.intake.admit_accepted().await;
                W::alone(&self.pool, job).await
            }
        }
    }
}

/// A flusher: takes what has queued (up to [`MAX_BATCH`]) and writes it, until the queue closes.
struct Flusher<W: Writer> {
    pool: PgPool,
    intake: Arc<Intake>,
    queue: Queue<W>,
    writing: Arc<AtomicUsize>,
}

impl<W: Writer> Flusher<W> {
    async fn run(self) {
        loop {
            let mut batch = Vec::new();
            {
                let mut queue = self.queue.lock().await;
                if queue.recv_many(&mut batch, MAX_BATCH).await == 0 {
                    return;
                }
            }
            self.writing.fetch_add(1, Ordering::Relaxed);
            let batch = refuse_late(batch, &self.intake);
            if !batch.is_empty() {
                write::<W>(&self.pool, batch).await;
            }
            self.writing.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Answers the jobs that waited behind busy flushers longer than the intake's limit as
/// overloaded; the rest.
fn refuse_late<J, A>(batch: Vec<Queued<J, A>>, intake: &Intake) -> Vec<Queued<J, A>> {
    let Some(limit) = intake.limit() else {
        return batch;
    };
    let now = Instant::now();
    let (late, timely): (Vec<_>, Vec<_>) = batch
        .into_iter()
        .partition(|job| job.behind && now.duration_since(job.queued) > limit);
    for job in late {
        let _ = job
            .answer
            .send(Outcome::Answered(Err(StoreError::overloaded())));
    }
    timely
}

/// Writes `batch` together, answers the jobs it wrote and hands the rest back to be written
/// alone.
async fn write<W: Writer>(pool: &PgPool, batch: Vec<Queued<W::Job, W::Answer>>) {
    let mut batch: Vec<Option<Queued<W::Job, W::Answer>>> = batch.into_iter().map(Some).collect();
    let together = {
        let jobs: Vec<&W::Job> = batch.iter().flatten().map(|queued| &queued.job).collect();
        write_together::<W>(pool, &jobs).await
    };
    match together {
        Ok(written) => {
            for (slot, written) in batch.iter_mut().zip(written) {
                if let Some(written) = written {
                    let queued = slot.take().expect("each job is answered once");
                    let answer = Ok(W::answer(queued.job, written));
                    let _ = queued.answer.send(Outcome::Answered(answer));
                }
            }
        }
        Err(e) => {
            let contended = is_contention(&e);
            match db_error(e) {
                StoreError::Unavailable(cause) if !contended => {
                    // The database cannot be reached: every job gets that answer at once.
                    let cause = cause.to_string();
                    for queued in batch.iter_mut().filter_map(Option::take) {
                        let unavailable = StoreError::Unavailable(cause.clone().into());
                        let _ = queued.answer.send(Outcome::Answered(Err(unavailable)));
                    }
                }
                e => {
                    // A row the database refused, or a lock lost to another transaction: each
                    // job alone finds out whose it was.
                    tracing::debug!(error = %e, what = W::WHAT, "a batch failed; writing it one by one");
                }
            }
        }
    }
    for queued in batch.into_iter().flatten() {
        let _ = queued.answer.send(Outcome::Alone(queued.job));
    }
}

/// [`Writer::write_together`], committed before it returns: as its one statement when it is
/// [`Writer::one_write`] (in a transaction after all if that fails on a unique violation or
/// waits for a lock past [`LOCK_WAIT`]), or in a transaction of its own.
async fn write_together<W: Writer>(
    pool: &PgPool,
    jobs: &[&W::Job],
) -> sqlx::Result<Vec<Option<W::Written>>> {
    let mut conn = pool.acquire().await?;
    if W::one_write(jobs) {
        match W::write_together(&mut conn, jobs, false).await {
            Err(e) if is_unique_violation(&e) || is_lock_timeout(&e) => {
                // The statement wrote nothing; the transaction leaves the row out, or waits.
                tracing::debug!(error = %e, what = W::WHAT, "a batch's statement failed; writing it in a transaction");
            }
            written => return written,
        }
    }
    let mut tx = begin(&mut conn).await?;
    match W::write_together(&mut tx, jobs, true).await {
        Ok(written) => {
            tx.commit().await?;
            Ok(written)
        }
        Err(e) => {
            // Ended now: the one-job path writes the same rows next, and must not wait on this
            // transaction's locks.
            if let Err(cause) = tx.rollback().await {
                tracing::debug!(error = %cause, "rolling back a failed batch failed");
            }
            Err(e)
        }
    }
}
