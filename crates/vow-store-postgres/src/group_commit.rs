//! Group commit of message creates, keyed or not: concurrent creates share one transaction, a
//! few multi-row statements and one commit, as SQLite's writer batches them.
//!
//! A create ([`GroupCommit::create`]) queues a job on a [`Batcher`] and waits for its answer.
//! Each batch (up to [`MAX_BATCH`](crate::batcher::MAX_BATCH) creates) is written with one
//! read and one to three writes: one statement reads the batch's applications and their
//! endpoints, the fan-out is picked here (as the one-message path picks it, [`message::pick`]),
//! one statement claims the `Idempotency-Key`s of the keyed creates with their responses
//! ([`records::claim_many`], before any message is written, as a keyed create alone claims
//! first), and one statement inserts every message with its channels and deliveries (`ON
//! CONFLICT DO NOTHING`, so a duplicate `eventId` skips only its own message). A key claimed for
//! a message that was then not written is deleted again before the commit
//! ([`records::unclaim`]). A batch with keys is one transaction; one without is its insert
//! alone, which commits as it ends. The read locks nothing: an application or endpoint deleted
//! after it fails the insert on its foreign key, and with it the batch. Each job is answered
//! after the commit, so an answer means its rows (and its key's record) are durable.
//!
//! What the batch does not write goes through the one-message path ([`message::create_alone`],
//! in its own transaction) after the commit, which answers it exactly as it always did: a
//! message whose application or endpoint was not found or whose `eventId` was taken, a keyed
//! one whose key has a record or is held by another transaction (there it is taken over or
//! fenced), and every message of a batch whose statements failed (the cause is then one row,
//! and it fails only its own request).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, LazyLock};

use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgPool};
use vow_core::EndpointId;
use vow_idempotency::postgres as records;
use vow_store::idempotency::Applied;
use vow_store::rows::{FromColumns, Reader};
use vow_store::rules::fan_out::FanOutEndpoint;
use vow_store::{CreatedMessage, Message, MessageCreate, NewMessage, StoreResult};

use crate::batcher::{Batcher, Writer};

use crate::convert::{read_optional, PgColumns};
use crate::flusher_thread::FlusherThread;
use crate::idempotency::{step, transaction};
use crate::intake::Intake;
use crate::message::{self, ReadyKey};

/// Message creates, batched. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct GroupCommit(Batcher<Creates>);

/// One queued create.
#[derive(Debug)]
struct Create {
    new: NewMessage,
    only: Option<EndpointId>,
    /// A keyed create's claim, with the response it records.
    key: Option<ReadyKey>,
}

impl GroupCommit {
    /// Starts the flushers on `thread`; they stop once every clone of the returned handle is
    /// gone. A create a batch leaves is written alone on `pool`.
    pub(crate) fn spawn(thread: &FlusherThread, pool: PgPool, intake: Arc<Intake>) -> Self {
        Self(Batcher::spawn(thread, pool, intake))
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
        self.0.submit(Create { new, only, key }).await
    }
}

/// The writer of message creates.
struct Creates;

impl Writer for Creates {
    type Job = Create;
    type Answer = Applied<CreatedMessage>;
    type Written = usize;
    const WHAT: &'static str = "message creates";

    /// Without keys, a batch's one write is its insert.
    fn one_write(jobs: &[&Create]) -> bool {
        jobs.iter().all(|job| job.key.is_none())
    }

    async fn write_together(
        conn: &mut PgConnection,
        jobs: &[&Create],
    ) -> sqlx::Result<Vec<Option<usize>>> {
        write_together(conn, jobs).await
    }

    fn answer(job: Create, deliveries: usize) -> Applied<CreatedMessage> {
        let created = CreatedMessage {
            message: job.new.into_stored(),
            deliveries,
        };
        (created, job.key.map(|(_, _, response)| response))
    }

    async fn alone(pool: &PgPool, job: Create) -> StoreResult<Applied<CreatedMessage>> {
        let Create { new, only, key } = job;
        let create = MessageCreate {
            new,
            only,
            app: None,
        };
        let alone = step(move |tx| Box::pin(message::create_alone(tx, create, key)));
        transaction(pool, alone).await
    }
}

/// The batch's writes on `conn` (in a transaction when it has keys): for each job, how many
/// deliveries its message got, `None` for those left to the one-message path (application or
/// endpoint not found, key not claimed, `eventId` taken).
async fn write_together(
    conn: &mut PgConnection,
    jobs: &[&Create],
) -> sqlx::Result<Vec<Option<usize>>> {
    let endpoints = read_endpoints(conn, jobs).await?;
    let mut fan_outs: Vec<Option<message::FanOut>> = jobs
        .iter()
        .map(|job| {
            endpoints
                .get(job.new.app_id.to_string().as_str())
                .and_then(|eps| fan_out(eps, job))
        })
        .collect();
    let claimed = claim_keys(conn, jobs, &mut fan_outs).await?;
    let mut rows = Rows::default();
    for (job, fan_out) in jobs.iter().zip(&fan_outs) {
        if let Some(fan_out) = fan_out {
            rows.push(&job.new, fan_out);
        }
    }
    let inserted: BTreeSet<String> = if rows.is_empty() {
        BTreeSet::new()
    } else {
        rows.insert(conn).await?
    };
    let written: Vec<Option<usize>> = jobs
        .iter()
        .zip(fan_outs)
        .map(|(job, f)| f.filter(|_| inserted.contains(&job.new.id.to_string())))
        .map(|f| f.map(|f| f.ids.len()))
        .collect();
    let unwritten: Vec<records::Claim<'_>> = claimed
        .iter()
        .filter(|&&i| written[i].is_none())
        .filter_map(|&i| jobs[i].key.as_ref().map(message::claim_of))
        .collect();
    if !unwritten.is_empty() {
        records::unclaim(conn, &unwritten)
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
    jobs: &[&Create],
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
fn fan_out(endpoints: &[FanOutEndpoint], job: &Create) -> Option<message::FanOut> {
    let Some(only) = job.only.map(|ep| ep.to_string()) else {
        return Some(message::pick(endpoints, &job.new, false));
    };
    let named = endpoints.iter().filter(|ep| ep.id == only);
    let fan_out = message::pick(named, &job.new, true);
    (!fan_out.ids.is_empty()).then_some(fan_out)
}

/// Reads the applications `$1` and their endpoints, each application's in id order.
static APPS_AND_ENDPOINTS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT app.id, e.* FROM applications app LEFT JOIN LATERAL (SELECT {} FROM endpoints e \
         WHERE e.app_id = app.id ORDER BY e.id) AS e ON true \
         WHERE app.id = ANY($1::text[])",
        FanOutEndpoint::COLUMNS
    )
});

/// Reads the batch's applications and their endpoints ([`APPS_AND_ENDPOINTS`]): the endpoints
/// of each application found, by its id.
async fn read_endpoints(
    conn: &mut PgConnection,
    jobs: &[&Create],
) -> sqlx::Result<HashMap<String, Vec<FanOutEndpoint>>> {
    let apps: BTreeSet<String> = jobs.iter().map(|j| j.new.app_id.to_string()).collect();
    let apps: Vec<String> = apps.into_iter().collect();
    let rows = sqlx::query(APPS_AND_ENDPOINTS.as_str())
        .bind(apps)
        .try_map(app_endpoint)
        .fetch_all(&mut *conn)
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

/// Inserts the messages `$1` to `$9` (as columns; one whose `eventId` is taken is skipped),
/// the channels of those inserted and their deliveries `$10` to `$13`: the ids inserted.
static INSERT: LazyLock<String> = LazyLock::new(|| {
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
    /// deliveries of those inserted, in one statement ([`INSERT`]): the ids inserted.
    async fn insert(self, conn: &mut PgConnection) -> sqlx::Result<BTreeSet<String>> {
        let ids: Vec<String> = sqlx::query_scalar(INSERT.as_str())
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
            .fetch_all(&mut *conn)
            .await?;
        Ok(ids.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kept_plans::tests::assert_index_reads_any_join;
    use crate::testing::{deliveries_to_ep_1, ONE_APP_AND_ENDPOINT};

    /// On an empty store (where a kept plan goes wrong) and on an analyzed one of 1,000
    /// applications, every statement a batch may run reads each table by an index condition.
    #[tokio::test]
    async fn the_batchs_kept_plans_read_by_index_conditions_only() {
        let (store, _url) = crate::testing::fresh_store().await;
        let mut conn = store.conn().await.unwrap();
        let text = |n: usize| vec!["text[]"; n].join(", ");
        let insert_types = format!(
            "{}, timestamptz[], timestamptz[], text[], {}",
            text(6),
            text(4)
        );
        let insert_args = "'{msg_1}', '{app_1}', '{null}', '{t}', '{null}', '{\"{}\"}', \
             ARRAY[now()], ARRAY[now()], '{null}', '{dlv_1}', '{msg_1}', '{ep_1}', '{pending}'";
        let claim_types = format!(
            "{}, int4[], {}, timestamptz[], timestamptz[], timestamptz[], int4[], text[], \
             bytea[], text[]",
            text(5),
            text(3)
        );
        let claim_args = "'{p}', '{a}', '{POST}', '{r}', '{k}', '{1}', '{f}', '{c}', '{t}', \
             ARRAY[now()], ARRAY[now()], ARRAY[now()], '{202}', '{h}', ARRAY['\\x00'::bytea], \
             '{msg_1}'";
        let unclaim_types = text(6);
        let unclaim_args = "'{p}', '{a}', '{POST}', '{r}', '{k}', '{t}'";
        let statements = [
            (
                "applications and endpoints",
                APPS_AND_ENDPOINTS.as_str(),
                "text[]",
                "'{app_1}'",
            ),
            (
                "key claims",
                records::CLAIM_MANY,
                claim_types.as_str(),
                claim_args,
            ),
            (
                "insert",
                INSERT.as_str(),
                insert_types.as_str(),
                insert_args,
            ),
            (
                "key unclaims",
                records::UNCLAIM,
                unclaim_types.as_str(),
                unclaim_args,
            ),
        ];
        let many_apps = "INSERT INTO applications (id, name, metadata, created_at, updated_at)
             SELECT 'app_' || i, 'a', '{}', now(), now() FROM generate_series(2, 1000) AS i;
             ANALYZE applications, endpoints, messages, deliveries;";
        for (state, fill) in [
            ("empty", String::new()),
            (
                "1,000 applications",
                format!(
                    "{ONE_APP_AND_ENDPOINT} {} {many_apps}",
                    deliveries_to_ep_1(1, 100, "'pending'")
                ),
            ),
        ] {
            sqlx::raw_sql(&fill).execute(&mut *conn).await.unwrap();
            assert_index_reads_any_join(&mut conn, state, &statements).await;
        }
    }
}
