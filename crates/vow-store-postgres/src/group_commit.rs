//! Group commit of message creates, keyed or not: concurrent creates share one transaction, a
//! few multi-row statements and one commit, as SQLite's writer batches them.
//!
//! A create ([`GroupCommit::create`]) queues a job and waits for its answer. A few flushers
//! (each one connection) take whatever has queued, up to [`MAX_BATCH`], and write it: one
//! statement reads and key-share locks the batch's applications and their endpoints, the fan-out
//! is picked here (as the one-message path picks it, [`message::pick`]), one statement claims
//! the `Idempotency-Key`s of the keyed creates with their responses ([`records::claim_many`],
//! before any message is written, as a keyed create alone claims first), and one statement
//! inserts every message with its channels and deliveries (`ON CONFLICT DO NOTHING`, so a
//! duplicate `eventId` skips only its own message). A key claimed for a message that was then
//! not written is deleted again before the commit ([`records::unclaim`]). Each job is answered
//! after the commit, so an answer means its rows (and its key's record) are durable.
//!
//! What the batch does not write goes through the one-message path ([`message::create_alone`],
//! in its own transaction) after the commit, which answers it exactly as it always did: a
//! message whose application or endpoint was not found or whose `eventId` was taken, a keyed
//! one whose key has a record or is held by another transaction (there it is taken over or
//! fenced), and every message of a batch whose statements failed (the cause is then one row,
//! and it fails only its own request). A job that found every flusher writing and then waited past the intake's limit is
//! refused as overloaded, with nothing written; one that found a flusher free never is.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgPool};
use tokio::sync::{mpsc, oneshot, Mutex};
use vow_core::EndpointId;
use vow_idempotency::postgres as records;
use vow_store::idempotency::{Applied, LeaseToken};
use vow_store::rows::{FromColumns, Reader};
use vow_store::rules::fan_out::FanOutEndpoint;
use vow_store::{CreatedMessage, Message, MessageCreate, NewMessage, StoreError, StoreResult};

use crate::convert::{read_optional, PgColumns};
use crate::error::{db_error, is_contention};
use crate::idempotency::{step, transaction};
use crate::intake::Intake;
use crate::message::{self, ReadyKey};

/// The most creates one transaction carries.
const MAX_BATCH: usize = 256;

/// How many batches are written at once (each holds one connection while it writes): one
/// collects while another commits.
const FLUSHERS: usize = 2;

/// The queue of message creates and its flushers. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct GroupCommit {
    jobs: mpsc::UnboundedSender<Job>,
    /// How many flushers are writing a batch.
    writing: Arc<AtomicUsize>,
}

/// One queued create and where its answer goes.
#[derive(Debug)]
struct Job {
    new: NewMessage,
    only: Option<EndpointId>,
    /// A keyed create's claim, with the response it records.
    key: Option<ReadyKey>,
    queued: Instant,
    /// Whether every flusher was writing when it was queued (only then can it be late).
    behind: bool,
    answer: oneshot::Sender<StoreResult<Applied<CreatedMessage>>>,
}

impl GroupCommit {
    /// Starts the flushers on `pool`; they stop once every clone of the returned handle is gone.
    pub(crate) fn spawn(pool: PgPool, intake: Arc<Intake>) -> Self {
        let (jobs, queue) = mpsc::unbounded_channel();
        let queue = Arc::new(Mutex::new(queue));
        let writing = Arc::new(AtomicUsize::new(0));
        for _ in 0..FLUSHERS {
            let flusher = Flusher {
                pool: pool.clone(),
                intake: intake.clone(),
                queue: queue.clone(),
                writing: writing.clone(),
            };
            tokio::spawn(flusher.run());
        }
        Self { jobs, writing }
    }

    /// Creates `new` (with `only`, for that one endpoint; with `key`, claiming that key) in
    /// the next batch; answered once it is durable (with `key`'s response), or with the error
    /// of its own row.
    pub(crate) async fn create(
        &self,
        new: NewMessage,
        only: Option<EndpointId>,
        key: Option<ReadyKey>,
    ) -> StoreResult<Applied<CreatedMessage>> {
        let (answer, answered) = oneshot::channel();
        let job = Job {
            new,
            only,
            key,
            queued: Instant::now(),
            behind: self.writing.load(Ordering::Relaxed) >= FLUSHERS,
            answer,
        };
        self.jobs
            .send(job)
            .map_err(|_| StoreError::Unavailable("the group commit has stopped".into()))?;
        answered
            .await
            .map_err(|_| StoreError::Unavailable("the group commit dropped a create".into()))?
    }
}

/// A flusher: takes what has queued (up to [`MAX_BATCH`]) and writes it, until the queue closes.
struct Flusher {
    pool: PgPool,
    intake: Arc<Intake>,
    queue: Arc<Mutex<mpsc::UnboundedReceiver<Job>>>,
    writing: Arc<AtomicUsize>,
}

impl Flusher {
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
                write(&self.pool, batch).await;
            }
            self.writing.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Answers the jobs that waited behind busy flushers longer than the intake's limit as
/// overloaded; the rest.
fn refuse_late(batch: Vec<Job>, intake: &Intake) -> Vec<Job> {
    let Some(limit) = intake.limit() else {
        return batch;
    };
    let now = Instant::now();
    let (late, timely): (Vec<_>, Vec<_>) = batch
        .into_iter()
        .partition(|job| job.behind && now.duration_since(job.queued) > limit);
    for job in late {
        let _ = job.answer.send(Err(StoreError::overloaded()));
    }
    timely
}

/// Writes `batch` in one transaction, then the jobs it left through the one-message path.
async fn write(pool: &PgPool, batch: Vec<Job>) {
    let mut batch: Vec<Option<Job>> = batch.into_iter().map(Some).collect();
    match write_in_one_transaction(pool, &batch).await {
        Ok(written) => {
            for (slot, deliveries) in batch.iter_mut().zip(written) {
                if let Some(deliveries) = deliveries {
                    let job = slot.take().expect("each job is answered once");
                    let created = CreatedMessage {
                        message: job.new.into_stored(),
                        deliveries,
                    };
                    let response = job.key.map(|(_, _, response)| response);
                    let _ = job.answer.send(Ok((created, response)));
                }
            }
        }
        Err(e) => {
            let contended = is_contention(&e);
            match db_error(e) {
                StoreError::Unavailable(cause) if !contended => {
                    // The database cannot be reached: every job gets that answer at once.
                    let cause = cause.to_string();
                    for job in batch.iter_mut().filter_map(Option::take) {
                        let unavailable = StoreError::Unavailable(cause.clone().into());
                        let _ = job.answer.send(Err(unavailable));
                    }
                }
                e => {
                    // A row the database refused, or a lock lost to another transaction: each
                    // message alone finds out whose it was.
                    tracing::debug!(error = %e, "a batch of creates failed; writing them one by one");
                }
            }
        }
    }
    for job in batch.into_iter().flatten() {
        let Job {
            new,
            only,
            key,
            answer,
            ..
        } = job;
        let create = MessageCreate {
            new,
            only,
            app: None,
        };
        let alone = step(move |tx| Box::pin(message::create_alone(tx, create, key)));
        let _ = answer.send(transaction(pool, alone).await);
    }
}

/// [`write_together`] in a transaction of its own, committed before it returns.
async fn write_in_one_transaction(
    pool: &PgPool,
    batch: &[Option<Job>],
) -> sqlx::Result<Vec<Option<usize>>> {
    let mut tx = pool.begin().await?;
    match write_together(&mut tx, batch).await {
        Ok(created) => {
            tx.commit().await?;
            Ok(created)
        }
        Err(e) => {
            // Ended now: the one-message path writes the same rows next, and must not wait on
            // this transaction's locks.
            if let Err(cause) = tx.rollback().await {
                tracing::debug!(error = %cause, "rolling back a failed batch failed");
            }
            Err(e)
        }
    }
}

/// The batch's writes in `tx`: for each job, how many deliveries its message got, `None` for
/// those left to the one-message path (application or endpoint not found, key not claimed,
/// `eventId` taken).
async fn write_together(
    tx: &mut PgConnection,
    batch: &[Option<Job>],
) -> sqlx::Result<Vec<Option<usize>>> {
    let jobs: Vec<&Job> = batch.iter().flatten().collect();
    let endpoints = read_endpoints(tx, &jobs).await?;
    let mut fan_outs: Vec<Option<message::FanOut>> = jobs
        .iter()
        .map(|job| {
            endpoints
                .get(job.new.app_id.to_string().as_str())
                .and_then(|eps| fan_out(eps, job))
        })
        .collect();
    let claimed = claim_keys(tx, &jobs, &mut fan_outs).await?;
    let mut rows = Rows::default();
    for (job, fan_out) in jobs.iter().zip(&fan_outs) {
        if let Some(fan_out) = fan_out {
            rows.push(&job.new, fan_out);
        }
    }
    let inserted: BTreeSet<String> = if rows.is_empty() {
        BTreeSet::new()
    } else {
        rows.insert(tx).await?
    };
    let written: Vec<Option<usize>> = jobs
        .iter()
        .zip(fan_outs)
        .map(|(job, f)| f.filter(|_| inserted.contains(&job.new.id.to_string())))
        .map(|f| f.map(|f| f.ids.len()))
        .collect();
    let unwritten: Vec<&LeaseToken> = claimed
        .iter()
        .filter(|&&i| written[i].is_none())
        .filter_map(|&i| jobs[i].key.as_ref().map(|(record, _, _)| &record.token))
        .collect();
    if !unwritten.is_empty() {
        records::unclaim(tx, &unwritten)
            .await
            .map_err(postgres_error)?;
    }
    Ok(written)
}

/// Claims the keys of the keyed jobs that have a fan-out, in one statement; a job whose key it
/// did not claim loses its fan-out (the one-message path resolves it). The indexes of the jobs
/// whose keys it claimed.
async fn claim_keys(
    tx: &mut PgConnection,
    jobs: &[&Job],
    fan_outs: &mut [Option<message::FanOut>],
) -> sqlx::Result<Vec<usize>> {
    let keyed: Vec<(usize, &ReadyKey)> = jobs
        .iter()
        .enumerate()
        .filter(|(i, _)| fan_outs[*i].is_some())
        .filter_map(|(i, job)| job.key.as_ref().map(|key| (i, key)))
        .collect();
    if keyed.is_empty() {
        return Ok(Vec::new());
    }
    let claims: Vec<records::Claim<'_>> = keyed
        .iter()
        .map(|(_, key)| message::claim_of(key))
        .collect();
    let took = records::claim_many(tx, &claims)
        .await
        .map_err(postgres_error)?;
    let mut claimed = Vec::with_capacity(keyed.len());
    for ((i, _), took) in keyed.iter().zip(took) {
        if took {
            claimed.push(*i);
        } else {
            fan_outs[*i] = None;
        }
    }
    Ok(claimed)
}

/// The PostgreSQL error of a record statement (the only kind [`records::claim_many`] and
/// [`records::unclaim`] fail with).
fn postgres_error(e: vow_idempotency::Error) -> sqlx::Error {
    match e {
        vow_idempotency::Error::Postgres(e) => e,
        other => sqlx::Error::Protocol(other.to_string()),
    }
}

/// The deliveries of `job`'s message among its application's `endpoints` (with `only`, to that
/// one); `None` when `only` names an endpoint that is not among them.
fn fan_out(endpoints: &[FanOutEndpoint], job: &Job) -> Option<message::FanOut> {
    let Some(only) = job.only.map(|ep| ep.to_string()) else {
        return Some(message::pick(endpoints, &job.new, false));
    };
    let named = endpoints.iter().filter(|ep| ep.id == only);
    let fan_out = message::pick(named, &job.new, true);
    (!fan_out.ids.is_empty()).then_some(fan_out)
}

/// Reads and key-share locks the batch's applications, then their endpoints (the order an
/// application's delete takes them in, so the two wait for each other, never deadlock): the
/// endpoints of each application found, by its id.
async fn read_endpoints(
    tx: &mut PgConnection,
    jobs: &[&Job],
) -> sqlx::Result<HashMap<String, Vec<FanOutEndpoint>>> {
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "WITH app AS (SELECT id FROM applications WHERE id = ANY($1::text[]) \
             ORDER BY id FOR KEY SHARE) \
             SELECT app.id, e.* FROM app LEFT JOIN LATERAL (SELECT {} FROM endpoints e \
             WHERE e.app_id = app.id ORDER BY e.id FOR KEY SHARE OF e) AS e ON true",
            FanOutEndpoint::COLUMNS
        )
    });
    let apps: BTreeSet<String> = jobs.iter().map(|j| j.new.app_id.to_string()).collect();
    let apps: Vec<String> = apps.into_iter().collect();
    let rows = sqlx::query(SQL.as_str())
        .bind(apps)
        .try_map(app_endpoint)
        .fetch_all(&mut *tx)
        .await?;
    let mut endpoints: HashMap<String, Vec<FanOutEndpoint>> = HashMap::new();
    for (app, endpoint) in rows {
        let of_app = endpoints.entry(app).or_default();
        of_app.extend(endpoint);
    }
    Ok(endpoints)
}

/// A row of [`read_endpoints`]: an application and one of its endpoints (`None` when it has
/// none: the endpoint's columns are all `NULL`).
fn app_endpoint(row: PgRow) -> sqlx::Result<(String, Option<FanOutEndpoint>)> {
    let columns = PgColumns(&row);
    let mut r = Reader::new(&columns);
    let app = r.text()?;
    Ok((app, read_optional(&columns, &mut r)?))
}

/// The batch's messages and deliveries as column arrays, for one `UNNEST` insert; the text
/// borrowed from the jobs.
#[derive(Default)]
struct Rows<'j> {
    ids: Vec<String>,
    app_ids: Vec<String>,
    event_ids: Vec<Option<&'j str>>,
    event_types: Vec<&'j str>,
    /// JSON arrays (channel lists differ in length, so they cannot be one SQL array).
    channels: Vec<Option<String>>,
    payloads: Vec<&'j str>,
    expires: Vec<chrono::DateTime<chrono::Utc>>,
    nows: Vec<chrono::DateTime<chrono::Utc>>,
    traceparents: Vec<Option<&'j str>>,
    delivery_ids: Vec<String>,
    delivery_msgs: Vec<String>,
    delivery_endpoints: Vec<String>,
    delivery_statuses: Vec<&'static str>,
}

impl<'j> Rows<'j> {
    fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Adds `new` and its deliveries.
    fn push(&mut self, new: &'j NewMessage, fan_out: &message::FanOut) {
        let id = new.id.to_string();
        self.delivery_ids.extend_from_slice(&fan_out.ids);
        self.delivery_msgs
            .extend(std::iter::repeat_n(&id, fan_out.ids.len()).cloned());
        self.delivery_endpoints
            .extend_from_slice(&fan_out.endpoint_ids);
        self.delivery_statuses.extend_from_slice(&fan_out.statuses);
        self.ids.push(id);
        self.app_ids.push(new.app_id.to_string());
        self.event_ids.push(new.event_id.as_deref());
        self.event_types.push(&new.event_type);
        let channels = new
            .channels
            .as_ref()
            .map(|c| serde_json::to_string(c).expect("a list of strings is always JSON"));
        self.channels.push(channels);
        self.payloads.push(&new.payload);
        self.expires.push(new.payload_expires_at);
        self.nows.push(new.now);
        self.traceparents.push(new.traceparent.as_deref());
    }

    /// Inserts every message (one whose `eventId` is taken is skipped), the channels and
    /// deliveries of those inserted, in one statement: the ids inserted.
    async fn insert(self, tx: &mut PgConnection) -> sqlx::Result<BTreeSet<String>> {
        static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
            format!(
                "WITH message AS (INSERT INTO messages ({}) \
                   SELECT n.id, n.app_id, n.event_id, n.event_type, \
                     CASE WHEN n.channels IS NULL THEN NULL \
                       ELSE ARRAY(SELECT jsonb_array_elements_text(n.channels::jsonb)) END, \
                     n.payload, n.expires, n.now, n.traceparent \
                   FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], \
                     $6::text[], $7::timestamptz[], $8::timestamptz[], $9::text[]) \
                     AS n (id, app_id, event_id, event_type, channels, payload, expires, now, \
                       traceparent) \
                   ON CONFLICT DO NOTHING \
                   RETURNING id, app_id, channels, created_at), \
                 channels AS (INSERT INTO message_channels (app_id, channel, msg_id) \
                   SELECT DISTINCT m.app_id, c, m.id FROM message m, UNNEST(m.channels) AS c), \
                 deliveries AS (INSERT INTO deliveries \
                   (id, app_id, msg_id, endpoint_id, status, attempts, next_attempt_at, \
                    created_at) \
                   SELECT d.id, m.app_id, m.id, d.endpoint_id, d.status, 0, m.created_at, \
                     m.created_at \
                   FROM UNNEST($10::text[], $11::text[], $12::text[], $13::text[]) \
                     AS d (id, msg_id, endpoint_id, status) \
                   JOIN message m ON m.id = d.msg_id) \
                 SELECT id FROM message",
                Message::COLUMNS
            )
        });
        let ids: Vec<String> = sqlx::query_scalar(SQL.as_str())
            .bind(self.ids)
            .bind(self.app_ids)
            .bind(self.event_ids)
            .bind(self.event_types)
            .bind(self.channels)
            .bind(self.payloads)
            .bind(self.expires)
            .bind(self.nows)
            .bind(self.traceparents)
            .bind(self.delivery_ids)
            .bind(self.delivery_msgs)
            .bind(self.delivery_endpoints)
            .bind(self.delivery_statuses)
            .fetch_all(&mut *tx)
            .await?;
        Ok(ids.into_iter().collect())
    }
}
