//! The one writer: a dedicated thread that owns the write connection and commits in groups.
//!
//! Callers hand it a closure over the connection ([`Writer::run`]). The thread takes one job,
//! drains whatever else is queued (up to [`MAX_BATCH`]), and runs them all inside ONE
//! `BEGIN IMMEDIATE` transaction, each inside its own `SAVEPOINT`: a job that fails is rolled back
//! to its savepoint alone and gets its own error, the others keep their writes. Then it
//! `COMMIT`s once (one fsync with `synchronous=FULL`) and only then answers every caller. So an
//! acknowledged write is durable, and a rejected one left nothing behind. When the transaction
//! itself fails (it cannot begin, SQLite aborts it, or the commit fails), every job of the batch
//! gets an error and nothing of the batch is kept.
//!
//! The thread stops when the [`Writer`] is dropped: the channel closes, the thread finishes the
//! jobs already queued, and `Drop` joins it, so the database is closed when the store is gone.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use rusqlite::Connection;
use tokio::sync::oneshot;
use vow_store::{StoreError, StoreResult};

use crate::error::{batch_failed, Abandoned, Error, WriterGone};

/// The most jobs one transaction carries. Bounds the latency a batch adds to its first job.
pub(crate) const MAX_BATCH: usize = 256;

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
}

/// Handle to the writer thread.
pub(crate) struct Writer {
    queue: Option<mpsc::Sender<Box<dyn Job>>>,
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
    /// Starts the writer thread over `conn` (already configured and migrated).
    pub(crate) fn spawn(conn: Connection) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Box<dyn Job>>();
        let stats = Arc::new(Stats::default());
        let thread_stats = Arc::clone(&stats);
        let thread = std::thread::Builder::new()
            .name("vow-sqlite-writer".into())
            .spawn(move || writer_loop(conn, rx, &thread_stats))?;
        Ok(Writer {
            queue: Some(tx),
            thread: Some(thread),
            stats,
        })
    }

    /// Runs `f` in the next batch and returns its result once the batch is committed.
    pub(crate) async fn run<T, F>(&self, f: F) -> StoreResult<T>
    where
        F: FnOnce(&Connection) -> Result<T, Error> + Send + 'static,
        T: Send + 'static,
    {
        let answer = self.submit(f)?;
        answer
            .await
            .map_err(|_| StoreError::Backend(Box::new(Abandoned)))?
    }

    /// Queues `f` without waiting; the receiver yields its committed result.
    pub(crate) fn submit<T, F>(&self, f: F) -> StoreResult<oneshot::Receiver<StoreResult<T>>>
    where
        F: FnOnce(&Connection) -> Result<T, Error> + Send + 'static,
        T: Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: Box<dyn Job> = Box::new(Pending { f, reply });
        let queue = self.queue.as_ref().ok_or_else(gone)?;
        queue.send(job).map_err(|_| gone())?;
        Ok(answer)
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
        self.queue.take();
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

fn writer_loop(conn: Connection, queue: mpsc::Receiver<Box<dyn Job>>, stats: &Stats) {
    let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(MAX_BATCH);
    while let Ok(first) = queue.recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
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
fn transaction_lost(outcome: &std::thread::Result<Box<dyn Ran>>) -> rusqlite::Error {
    let detail = match outcome {
        Ok(done) if done.failed() => "SQLite rolled the transaction back after a failed write",
        _ => "the write transaction ended unexpectedly",
    };
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
        Some(detail.to_string()),
    )
}

/// Runs one statement without parameters through the statement cache.
fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

#[cfg(test)]
mod tests {
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
            .submit(move |c| {
                started.send(()).unwrap();
                gate.recv().unwrap();
                insert(1)(c)
            })
            .unwrap();
        has_started.recv().unwrap();
        let second = w.submit(insert(2)).unwrap();
        // Writes 3, then fails on the duplicate 2: the 3 must go too.
        let bad = w
            .submit(|c: &Connection| {
                insert(3)(c)?;
                insert(2)(c)
            })
            .unwrap();
        let third = w.submit(insert(4)).unwrap();
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
            .submit(move |_c: &Connection| {
                gate.recv().unwrap();
                Ok(())
            })
            .unwrap();
        let boom = w
            .submit(|c: &Connection| -> Result<(), Error> {
                insert(7)(c)?;
                panic!("a bug in a write");
            })
            .unwrap();
        let fine = w.submit(insert(8)).unwrap();
        open_gate.send(()).unwrap();
        hold.await.unwrap().unwrap();
        assert!(boom.await.is_err(), "a panicked job gets no answer");
        fine.await.unwrap().unwrap();
        assert_eq!(values(&reader), vec![8]);
        assert!(w.is_running());
        w.run(insert(9)).await.unwrap();
        assert_eq!(values(&reader), vec![8, 9]);
    }

    #[tokio::test]
    async fn dropping_the_writer_finishes_queued_jobs_and_stops_the_thread() {
        let (w, reader, _dir) = writer();
        let answers: Vec<_> = (0..10).map(|v| w.submit(insert(v)).unwrap()).collect();
        drop(w);
        for a in answers {
            a.await.unwrap().unwrap();
        }
        assert_eq!(values(&reader).len(), 10);
    }
}
