//! The one writer: a dedicated thread that owns the write connection and commits in groups.
//!
//! Callers hand it a closure over the connection ([`Writer::run`]). The thread takes what is
//! queued (up to [`MAX_BATCH`] jobs) and runs it all inside ONE `BEGIN IMMEDIATE` transaction,
//! each job inside its own `SAVEPOINT`: a job that fails is rolled back to its savepoint alone
//! and gets its own error, the others keep their writes. Then it `COMMIT`s once (one fsync with
//! `synchronous=FULL`) and only then answers every caller. So an acknowledged write is durable,
//! and a rejected one left nothing behind. When the transaction itself fails (it cannot begin,
//! SQLite aborts it, or the commit fails), every job of the batch gets an error and nothing of
//! the batch is kept.
//!
//! Jobs wait in one of two [`Lane`]s. Work already accepted (delivery claims and outcomes,
//! forwarding, retention, management) goes first into every batch and is never refused, so an
//! ingest flood cannot starve deliveries. Intake (new messages and inbound events) fills the
//! rest of each batch, and is refused with [`StoreError::Overloaded`] while the oldest intake
//! job has waited longer than the limit ([`Writer::shed_intake_after`]): past what the disk can
//! commit, callers get a prompt "retry later" instead of an ever longer wait.
//!
//! The thread stops when the [`Writer`] is dropped: the queues close, the thread finishes the
//! jobs already queued, and `Drop` joins it, so the database is closed when the store is gone.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::oneshot;
use vow_store::{StoreError, StoreResult};

use crate::error::{batch_failed, Abandoned, Error, WriterGone};

/// The most jobs one transaction carries. Bounds the latency a batch adds to its first job.
pub(crate) const MAX_BATCH: usize = 256;

/// Which queue a write waits in (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    /// Work already accepted: first into every batch, never refused.
    Work,
    /// New work offered by a client: the rest of each batch; refused while overloaded.
    Intake,
}

/// A queued write.
trait Job: Send {
    /// Runs the write; the answer waits for the batch's commit.
    fn run(self: Box<Self>, conn: &Connection) -> Box<dyn Ran>;
    /// Answers with `err` without running (the transaction could not begin).
    fn abort(self: Box<Self>, err: StoreError);
}

/// A write that ran and awaits the batch's outcome.
trait Ran: Send {
    /// Whether the write itself failed (its savepoint is then rolled back).
    fn failed(&self) -> bool;
    /// Answers the caller: the write's own result if the batch committed, else `commit`'s error.
    fn finish(self: Box<Self>, commit: Result<(), StoreError>);
}

struct Pending<F, T> {
    f: F,
    reply: oneshot::Sender<StoreResult<T>>,
}

struct Done<T> {
    result: StoreResult<T>,
    reply: oneshot::Sender<StoreResult<T>>,
}

impl<F, T> Job for Pending<F, T>
where
    F: FnOnce(&Connection) -> Result<T, Error> + Send + 'static,
    T: Send + 'static,
{
    fn run(self: Box<Self>, conn: &Connection) -> Box<dyn Ran> {
        let Pending { f, reply } = *self;
        let result = f(conn).map_err(Error::into_store);
        Box::new(Done { result, reply })
    }

    fn abort(self: Box<Self>, err: StoreError) {
        // The caller may have gone away; nothing to do then.
        let _ = self.reply.send(Err(err));
    }
}

impl<T: Send + 'static> Ran for Done<T> {
    fn failed(&self) -> bool {
        self.result.is_err()
    }

    fn finish(self: Box<Self>, commit: Result<(), StoreError>) {
        let answer = match commit {
            Ok(()) => self.result,
            Err(e) => Err(e),
        };
        let _ = self.reply.send(answer);
    }
}

/// Counters of what the writer did, for tests and metrics.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Transactions committed.
    pub(crate) batches: AtomicU64,
    /// Jobs run (committed or not).
    pub(crate) jobs: AtomicU64,
    /// Intake jobs refused because the writer was overloaded.
    pub(crate) shed: AtomicU64,
}

/// The two lanes of waiting jobs, intake with the time each was queued.
#[derive(Default)]
struct Lanes {
    work: VecDeque<Box<dyn Job>>,
    intake: VecDeque<(Instant, Box<dyn Job>)>,
    /// No more jobs are taken; the thread finishes what is queued.
    closed: bool,
}

/// What the callers and the thread share.
#[derive(Default)]
struct Queue {
    lanes: Mutex<Lanes>,
    /// Signalled when a job is queued or the queue closes.
    ready: Condvar,
    /// The longest the oldest intake job may wait before new ones are refused, in microseconds;
    /// 0: never refused.
    intake_limit_us: AtomicU64,
}

impl Queue {
    fn lanes(&self) -> MutexGuard<'_, Lanes> {
        // A panic never happens while the lock is held (jobs run outside it).
        self.lanes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits for jobs and takes a batch of them, work first; `None` once closed and drained.
    fn take(&self, batch: &mut Vec<Box<dyn Job>>) -> Option<()> {
        let mut lanes = self.lanes();
        while lanes.work.is_empty() && lanes.intake.is_empty() {
            if lanes.closed {
                return None;
            }
            lanes = self
                .ready
                .wait(lanes)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        let work = lanes.work.len().min(MAX_BATCH);
        batch.extend(lanes.work.drain(..work));
        let intake = lanes.intake.len().min(MAX_BATCH - batch.len());
        batch.extend(lanes.intake.drain(..intake).map(|(_, job)| job));
        Some(())
    }
}

/// Handle to the writer thread.
pub(crate) struct Writer {
    queue: Arc<Queue>,
    thread: Option<JoinHandle<()>>,
    stats: Arc<Stats>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("running", &self.is_running())
            .field("stats", &self.stats)
            .finish()
    }
}

impl Writer {
    /// Starts the writer thread over `conn` (already configured and migrated). Intake is never
    /// refused until [`Writer::shed_intake_after`] sets a limit.
    pub(crate) fn spawn(conn: Connection) -> std::io::Result<Self> {
        let queue = Arc::new(Queue::default());
        let stats = Arc::new(Stats::default());
        let (thread_queue, thread_stats) = (Arc::clone(&queue), Arc::clone(&stats));
        let thread = std::thread::Builder::new()
            .name("vow-sqlite-writer".into())
            .spawn(move || writer_loop(conn, &thread_queue, &thread_stats))?;
        Ok(Writer {
            queue,
            thread: Some(thread),
            stats,
        })
    }

    /// Refuses intake jobs while the oldest one waiting has waited longer than `limit`
    /// (`None`: never).
    pub(crate) fn shed_intake_after(&self, limit: Option<Duration>) {
        let us = limit.map_or(0, |l| {
            u64::try_from(l.as_micros()).unwrap_or(u64::MAX).max(1)
        });
        self.queue.intake_limit_us.store(us, Ordering::Relaxed);
    }

    /// Runs `f` in the next batch and returns its result once the batch is committed.
    pub(crate) async fn run<T, F>(&self, lane: Lane, f: F) -> StoreResult<T>
    where
        F: FnOnce(&Connection) -> Result<T, Error> + Send + 'static,
        T: Send + 'static,
    {
        let answer = self.submit(lane, f)?;
        answer
            .await
            .map_err(|_| StoreError::Backend(Box::new(Abandoned)))?
    }

    /// Queues `f` in `lane` without waiting; the receiver yields its committed result.
    pub(crate) fn submit<T, F>(
        &self,
        lane: Lane,
        f: F,
    ) -> StoreResult<oneshot::Receiver<StoreResult<T>>>
    where
        F: FnOnce(&Connection) -> Result<T, Error> + Send + 'static,
        T: Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: Box<dyn Job> = Box::new(Pending { f, reply });
        {
            let mut lanes = self.queue.lanes();
            if lanes.closed {
                return Err(gone());
            }
            match lane {
                Lane::Work => lanes.work.push_back(job),
                Lane::Intake => {
                    let now = Instant::now();
                    if self.overloaded(&lanes, now) {
                        self.stats.shed.fetch_add(1, Ordering::Relaxed);
                        return Err(StoreError::overloaded());
                    }
                    lanes.intake.push_back((now, job));
                }
            }
        }
        self.queue.ready.notify_one();
        Ok(answer)
    }

    /// Whether the oldest intake job waiting has waited past the limit.
    fn overloaded(&self, lanes: &Lanes, now: Instant) -> bool {
        let limit = self.queue.intake_limit_us.load(Ordering::Relaxed);
        limit != 0
            && lanes.intake.front().is_some_and(|(queued, _)| {
                now.saturating_duration_since(*queued) > Duration::from_micros(limit)
            })
    }

    /// Whether the thread is still alive.
    pub(crate) fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// What the writer did so far.
    pub(crate) fn stats(&self) -> &Stats {
        &self.stats
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Closing the queue lets the thread finish what is queued and return.
        self.queue.lanes().closed = true;
        self.queue.ready.notify_all();
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("the SQLite writer thread panicked");
            }
        }
    }
}

fn gone() -> StoreError {
    StoreError::Unavailable(Box::new(WriterGone))
}

fn writer_loop(conn: Connection, queue: &Queue, stats: &Stats) {
    let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(MAX_BATCH);
    while queue.take(&mut batch).is_some() {
        run_batch(&conn, &mut batch, stats);
    }
    if let Err((_, e)) = conn.close() {
        tracing::warn!(error = %e, "closing the SQLite write connection failed");
    }
}

/// Runs `jobs` in one transaction and answers each (emptying `jobs`).
fn run_batch(conn: &Connection, jobs: &mut Vec<Box<dyn Job>>, stats: &Stats) {
    if let Err(e) = exec(conn, "BEGIN IMMEDIATE") {
        let cause = Arc::new(e);
        tracing::warn!(error = %cause, jobs = jobs.len(), "could not begin a write transaction");
        for job in jobs.drain(..) {
            job.abort(batch_failed(&cause));
        }
        return;
    }
    let mut ran: Vec<Box<dyn Ran>> = Vec::with_capacity(jobs.len());
    let mut lost: Option<Arc<rusqlite::Error>> = None;
    let mut pending = jobs.drain(..);
    for job in pending.by_ref() {
        stats.jobs.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = exec(conn, "SAVEPOINT vow_job") {
            let cause = Arc::new(e);
            job.abort(batch_failed(&cause));
            lost = Some(cause);
            break;
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| job.run(conn)));
        if conn.is_autocommit() {
            // SQLite rolled the whole transaction back (IO error, full disk, ...): every write
            // of this batch is gone, including the ones that already ran.
            let cause = Arc::new(transaction_lost(&outcome));
            if let Ok(done) = outcome {
                ran.push(done);
            }
            lost = Some(cause);
            break;
        }
        let keep = matches!(&outcome, Ok(done) if !done.failed());
        let closed = if keep {
            exec(conn, "RELEASE vow_job")
        } else {
            exec(conn, "ROLLBACK TO vow_job").and_then(|()| exec(conn, "RELEASE vow_job"))
        };
        if let Ok(done) = outcome {
            ran.push(done);
        }
        if let Err(e) = closed {
            lost = Some(Arc::new(e));
            break;
        }
    }
    let rest: Vec<Box<dyn Job>> = pending.collect();
    let commit = match lost {
        Some(cause) => Err(cause),
        None => exec(conn, "COMMIT").map_err(Arc::new),
    };
    match commit {
        Ok(()) => {
            stats.batches.fetch_add(1, Ordering::Relaxed);
            for done in ran {
                done.finish(Ok(()));
            }
        }
        Err(cause) => {
            tracing::warn!(error = %cause, jobs = ran.len() + rest.len(), "a write batch failed");
            if !conn.is_autocommit() {
                if let Err(e) = exec(conn, "ROLLBACK") {
                    tracing::error!(error = %e, "rolling back a failed write batch failed");
                }
            }
            for done in ran {
                done.finish(Err(batch_failed(&cause)));
            }
            for job in rest {
                job.abort(batch_failed(&cause));
            }
        }
    }
}

/// The error to report when SQLite ended the transaction under a job.
/// SQLite rolls a transaction back by itself only after a full disk, an I/O error, busy or out
/// of memory, all of which may pass: `SQLITE_ABORT_ROLLBACK`, which counts as unavailable.
fn transaction_lost(outcome: &std::thread::Result<Box<dyn Ran>>) -> rusqlite::Error {
    let (code, detail) = match outcome {
        Ok(done) if done.failed() => (
            rusqlite::ffi::SQLITE_ABORT_ROLLBACK,
            "SQLite rolled the transaction back after a failed write",
        ),
        _ => (
            rusqlite::ffi::SQLITE_ABORT,
            "the write transaction ended unexpectedly",
        ),
    };
    rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), Some(detail.to_string()))
}

/// Runs one statement without parameters through the statement cache.
fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;
    use crate::error::Error;

    fn writer() -> (Writer, Connection, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t (v INTEGER NOT NULL UNIQUE);")
            .unwrap();
        let reader = Connection::open(&path).unwrap();
        (Writer::spawn(conn).unwrap(), reader, dir)
    }

    fn insert(v: i64) -> impl FnOnce(&Connection) -> Result<(), Error> + Send + 'static {
        move |c| {
            c.execute("INSERT INTO t (v) VALUES (?1)", [v])?;
            Ok(())
        }
    }

    fn values(reader: &Connection) -> Vec<i64> {
        let mut stmt = reader.prepare("SELECT v FROM t ORDER BY v").unwrap();
        let rows = stmt.query_map([], |r| r.get(0)).unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    }

    #[tokio::test]
    async fn a_failing_job_is_rolled_back_alone_and_its_batch_mates_commit() {
        let (w, reader, _dir) = writer();
        // Hold the writer inside a first batch until the next jobs are queued behind it.
        let (open_gate, gate) = mpsc::channel::<()>();
        let (started, has_started) = mpsc::channel::<()>();
        let first = w
            .submit(Lane::Work, move |c| {
                started.send(()).unwrap();
                gate.recv().unwrap();
                insert(1)(c)
            })
            .unwrap();
        has_started.recv().unwrap();
        let second = w.submit(Lane::Work, insert(2)).unwrap();
        // Writes 3, then fails on the duplicate 2: the 3 must go too.
        let bad = w
            .submit(Lane::Work, |c: &Connection| {
                insert(3)(c)?;
                insert(2)(c)
            })
            .unwrap();
        let third = w.submit(Lane::Work, insert(4)).unwrap();
        open_gate.send(()).unwrap();

        first.await.unwrap().unwrap();
        second.await.unwrap().unwrap();
        let err = bad.await.unwrap().unwrap_err();
        assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
        third.await.unwrap().unwrap();

        assert_eq!(values(&reader), vec![1, 2, 4]);
        // The three jobs queued behind the gate shared one transaction.
        assert_eq!(w.stats().batches.load(Ordering::Relaxed), 2);
        assert_eq!(w.stats().jobs.load(Ordering::Relaxed), 4);
    }

    #[tokio::test]
    async fn a_panicking_job_fails_alone_and_the_writer_keeps_going() {
        let (w, reader, _dir) = writer();
        let (open_gate, gate) = mpsc::channel::<()>();
        let hold = w
            .submit(Lane::Work, move |_c: &Connection| {
                gate.recv().unwrap();
                Ok(())
            })
            .unwrap();
        let boom = w
            .submit(Lane::Work, |c: &Connection| -> Result<(), Error> {
                insert(7)(c)?;
                panic!("a bug in a write");
            })
            .unwrap();
        let fine = w.submit(Lane::Work, insert(8)).unwrap();
        open_gate.send(()).unwrap();
        hold.await.unwrap().unwrap();
        assert!(boom.await.is_err(), "a panicked job gets no answer");
        fine.await.unwrap().unwrap();
        assert_eq!(values(&reader), vec![8]);
        assert!(w.is_running());
        w.run(Lane::Work, insert(9)).await.unwrap();
        assert_eq!(values(&reader), vec![8, 9]);
    }

    #[tokio::test]
    async fn dropping_the_writer_finishes_queued_jobs_and_stops_the_thread() {
        let (w, reader, _dir) = writer();
        let answers: Vec<_> = (0..10)
            .map(|v| w.submit(Lane::Work, insert(v)).unwrap())
            .collect();
        drop(w);
        for a in answers {
            a.await.unwrap().unwrap();
        }
        assert_eq!(values(&reader).len(), 10);
    }

    /// Holds the writer inside a first batch until the returned gate is opened.
    fn hold(w: &Writer) -> (mpsc::Sender<()>, oneshot::Receiver<StoreResult<()>>) {
        let (open_gate, gate) = mpsc::channel::<()>();
        let (started, has_started) = mpsc::channel::<()>();
        let held = w
            .submit(Lane::Work, move |_c: &Connection| {
                started.send(()).unwrap();
                gate.recv().unwrap();
                Ok(())
            })
            .unwrap();
        has_started.recv().unwrap();
        (open_gate, held)
    }

    #[tokio::test]
    async fn work_queued_after_intake_is_written_before_it() {
        let (w, reader, _dir) = writer();
        let (open_gate, held) = hold(&w);
        let intake: Vec<_> = (10..13)
            .map(|v| w.submit(Lane::Intake, insert(v)).unwrap())
            .collect();
        // Each work job writes the count of intake rows it found: none, though queued later.
        let work = w
            .submit(Lane::Work, |c: &Connection| {
                let seen: i64 =
                    c.query_row("SELECT count(*) FROM t WHERE v >= 10", [], |r| r.get(0))?;
                insert(100 + seen)(c)
            })
            .unwrap();
        open_gate.send(()).unwrap();
        held.await.unwrap().unwrap();
        work.await.unwrap().unwrap();
        for answer in intake {
            answer.await.unwrap().unwrap();
        }
        assert_eq!(values(&reader), vec![10, 11, 12, 100]);
        assert_eq!(
            w.stats().batches.load(Ordering::Relaxed),
            2,
            "one batch after the hold"
        );
    }

    #[tokio::test]
    async fn intake_is_refused_while_its_oldest_waited_past_the_limit_and_work_never_is() {
        let (w, reader, _dir) = writer();
        w.shed_intake_after(Some(Duration::from_millis(20)));
        let (open_gate, held) = hold(&w);
        let first = w.submit(Lane::Intake, insert(1)).unwrap();
        // Not yet waited past the limit: still taken.
        let second = w.submit(Lane::Intake, insert(2)).unwrap();
        std::thread::sleep(Duration::from_millis(40));
        let refused = w.submit(Lane::Intake, insert(3)).unwrap_err();
        assert!(
            matches!(refused, StoreError::Overloaded { retry_after } if retry_after == StoreError::RETRY_AFTER),
            "{refused:?}"
        );
        let work = w.submit(Lane::Work, insert(4)).unwrap();
        assert_eq!(w.stats().shed.load(Ordering::Relaxed), 1);
        open_gate.send(()).unwrap();
        held.await.unwrap().unwrap();
        for answer in [first, second, work] {
            answer.await.unwrap().unwrap();
        }
        // Drained: intake is taken again, and nothing of the refused write exists.
        w.run(Lane::Intake, insert(5)).await.unwrap();
        assert_eq!(values(&reader), vec![1, 2, 4, 5]);

        w.shed_intake_after(None);
        let (open_gate, held) = hold(&w);
        let queued = w.submit(Lane::Intake, insert(6)).unwrap();
        std::thread::sleep(Duration::from_millis(40));
        let unlimited = w.submit(Lane::Intake, insert(7)).unwrap();
        open_gate.send(()).unwrap();
        held.await.unwrap().unwrap();
        queued.await.unwrap().unwrap();
        unlimited.await.unwrap().unwrap();
        assert_eq!(values(&reader), vec![1, 2, 4, 5, 6, 7]);
    }
}
