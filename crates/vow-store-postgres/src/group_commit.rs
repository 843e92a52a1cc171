//! Group commit of message creates, keyed or not: concurrent creates share one statement and
//! its commit, as SQLite's writer batches them.
//!
//! A create ([`GroupCommit::create`]) queues a job on a [`Batcher`] and waits for its answer.
//! Each batch (up to [`MAX_BATCH`](crate::batcher::MAX_BATCH) creates) is written in two round
//! trips, with no transaction around them: one statement reads the batch's applications and
//! their endpoints (locking nothing), the fan-out is picked here (as the one-message path picks
//! it, [`message::pick`]), and one statement claims the `Idempotency-Key`s of the keyed creates
//! with their responses ([`records::Claim::MANY_CTE`]) and inserts every message with its
//! channels and deliveries: an unkeyed message, or a keyed one whose key it claimed. It commits
//! as it ends, so the record of a key commits with its message. Without keys, a message whose
//! `eventId` is taken is skipped; with keys, any such message fails the statement (no claim may
//! commit without its message), and the batch is written again in a transaction: keys claimed
//! ([`records::claim_many`]), messages inserted with those whose `eventId` is taken skipped,
//! and the keys of the skipped ones deleted again ([`records::unclaim`]) before the commit. So
//! is a batch whose one statement would wait for a lock
//! ([`LOCK_WAIT`](crate::batcher::LOCK_WAIT)): the statement takes its locks before it claims,
//! and in the transaction the claims come first, so a retry sees the key in flight while the
//! write waits. An application or endpoint deleted after the read fails the insert on its
//! foreign key, and with it the batch. Each job is answered after the commit, so an answer
//! means its rows (and its key's record) are durable.
//!
//! What the batch does not write goes through the one-message path ([`message::create_alone`],
//! in its own transaction) after the commit, which answers it exactly as it always did: a
//! message whose application or endpoint was not found or whose `eventId` was taken, a keyed
//! one whose key has a record or is held by another transaction (there it is taken over or
//! fenced), and every message of a batch whose statements failed (the cause is then one row,
//! and it fails only its own request).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, LazyLock};

use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{PgConnection, PgPool};
use vow_core::EndpointId;
use vow_idempotency::postgres as records;
use vow_store::idempotency::Applied;
use vow_store::rows::{FromColumns, Reader};
use vow_store::rules::fan_out::FanOutEndpoint;
use vow_store::{CreatedMessage, Message, MessageCreate, NewMessage, StoreResult};

use crate::batcher::{Batcher, Writer};

use crate::convert::{add, read_optional, PgColumns};
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

    /// A batch's one write is its insert, which claims its keys.
    fn one_write(_: &[&Create]) -> bool {
        true
    }

    async fn write_together(
        conn: &mut PgConnection,
        jobs: &[&Create],
        in_transaction: bool,
    ) -> sqlx::Result<Vec<Option<usize>>> {
        let fan_outs = fan_outs(conn, jobs).await?;
        if in_transaction {
            claim_insert_unclaim(conn, jobs, fan_outs).await
        } else {
            claim_and_insert(conn, jobs, fan_outs).await
        }
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

/// Reads the batch's applications and endpoints: for each job, its message's deliveries, `None`
/// for one left to the one-message path (application or endpoint not found).
async fn fan_outs(
    conn: &mut PgConnection,
    jobs: &[&Create],
) -> sqlx::Result<Vec<Option<message::FanOut>>> {
    let endpoints = read_endpoints(conn, jobs).await?;
    Ok(jobs
        .iter()
        .map(|job| {
            endpoints
                .get(job.new.app_id.to_string().as_str())
                .and_then(|eps| fan_out(eps, job))
        })
        .collect())
}

/// The batch's one statement, outside any transaction: it claims the keys of the keyed jobs
/// with a fan-out and inserts the messages of the unkeyed ones and of those whose keys it
/// claimed ([`Insert::Claiming`], or without a claim when none is keyed). With keys, a message
/// whose `eventId` is taken fails it whole, claims and all (a unique violation: the batch is
/// then written in a transaction, [`claim_insert_unclaim`]); without, it is skipped. For each
/// job, how many deliveries its message got, `None` for one it left.
async fn claim_and_insert(
    conn: &mut PgConnection,
    jobs: &[&Create],
    fan_outs: Vec<Option<message::FanOut>>,
) -> sqlx::Result<Vec<Option<usize>>> {
    let mut rows = Rows::default();
    let mut claims = Vec::new();
    for (job, fan_out) in jobs.iter().zip(&fan_outs) {
        if let Some(fan_out) = fan_out {
            let token = job
                .key
                .as_ref()
                .map(|(record, _, _)| record.token.0.as_str());
            rows.push(&job.new, fan_out, token);
            claims.extend(job.key.as_ref().map(message::claim_of));
        }
    }
    let inserted = rows.insert(conn, &claims).await?;
    Ok(written(jobs, fan_outs, &inserted))
}

/// The batch's writes in a transaction: the keys of the keyed jobs with a fan-out claimed
/// ([`claim_keys`]), the messages of the unkeyed ones and of those whose keys it claimed
/// inserted (one whose `eventId` is taken skipped), and the key of each keyed message not
/// inserted deleted again ([`records::unclaim`]). For each job, how many deliveries its message
/// got, `None` for one it left.
async fn claim_insert_unclaim(
    conn: &mut PgConnection,
    jobs: &[&Create],
    mut fan_outs: Vec<Option<message::FanOut>>,
) -> sqlx::Result<Vec<Option<usize>>> {
    let claimed = claim_keys(conn, jobs, &mut fan_outs).await?;
    let mut rows = Rows::default();
    for (job, fan_out) in jobs.iter().zip(&fan_outs) {
        if let Some(fan_out) = fan_out {
            rows.push(&job.new, fan_out, None);
        }
    }
    let inserted = rows.insert(conn, &[]).await?;
    let written = written(jobs, fan_outs, &inserted);
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

/// For each job, how many deliveries its message got if it was `inserted`.
fn written(
    jobs: &[&Create],
    fan_outs: Vec<Option<message::FanOut>>,
    inserted: &BTreeSet<String>,
) -> Vec<Option<usize>> {
    jobs.iter()
        .zip(fan_outs)
        .map(|(job, f)| f.filter(|_| inserted.contains(&job.new.id.to_string())))
        .map(|f| f.map(|f| f.ids.len()))
        .collect()
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

/// The batch's insert, one statement per [`Insert`]: it inserts the messages `$1` to `$9` (as
/// columns), the channels of those inserted and their deliveries `$10` to `$13`, and yields the
/// ids inserted. [`Insert::SkipTaken`] skips a message whose `eventId` is taken.
/// [`Insert::Claiming`] first claims keys ([`records::Claim::MANY_CTE`], `$1` to `$16`), then
/// does the same with every number after those, and with the messages' claim tokens (`$30`,
/// `NULL` for an unkeyed one): a keyed message is inserted only if its key was claimed, and any
/// message whose `eventId` is taken fails the statement (no claim may commit without its
/// message).
static INSERT: LazyLock<[String; 3]> = LazyLock::new(|| Insert::ALL.map(insert));

/// Which [`INSERT`] a batch runs; its discriminant is its statement's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Insert {
    /// No key to claim, and no message carries an `eventId`, so none can be taken: a plain
    /// insert (every batch, when clients send no `eventId`s). `ON CONFLICT` would make each row
    /// a speculative insertion: every unique index of `messages` probed before the row is
    /// written, a speculative lock, and a confirmation logged after.
    Fresh = 0,
    /// No key to claim; a message whose `eventId` is taken is skipped (`ON CONFLICT DO NOTHING`).
    SkipTaken = 1,
    /// Keys claimed first, in the same statement.
    Claiming = 2,
}

impl Insert {
    /// Every insert, in discriminant order.
    const ALL: [Self; 3] = [Self::Fresh, Self::SkipTaken, Self::Claiming];

    /// The insert for a batch that claims keys or not, with `event_ids` (whether any message
    /// carries one).
    fn of(claiming: bool, event_ids: bool) -> Self {
        match (claiming, event_ids) {
            (true, _) => Self::Claiming,
            (false, true) => Self::SkipTaken,
            (false, false) => Self::Fresh,
        }
    }

    /// Its statement.
    fn sql(self) -> &'static str {
        INSERT[self as usize].as_str()
    }
}

/// The text of `which` [`INSERT`].
fn insert(which: Insert) -> String {
    let claiming = which == Insert::Claiming;
    let first = if claiming { records::Claim::PARAMS } else { 0 };
    let p = |n: usize| format!("${}", first + n);
    let (claims, token, gate, skip) = match which {
        Insert::Fresh => (String::new(), String::new(), "", ""),
        Insert::SkipTaken => (String::new(), String::new(), "", "ON CONFLICT DO NOTHING "),
        Insert::Claiming => (
            format!("{}, ", records::Claim::MANY_CTE),
            format!(", {}::text[]", p(14)),
            "WHERE n.token IS NULL OR n.token IN (SELECT lease_token FROM claim) ",
            "",
        ),
    };
    format!(
        "WITH {claims}message AS (INSERT INTO messages ({}) \
           SELECT n.id, n.app_id, n.event_id, n.event_type, \
             CASE WHEN n.channels IS NULL THEN NULL \
               ELSE ARRAY(SELECT jsonb_array_elements_text(n.channels::jsonb)) END, \
             n.payload, n.expires, n.now, n.traceparent \
           FROM UNNEST({}::text[], {}::text[], {}::text[], {}::text[], {}::text[], \
             {}::text[], {}::timestamptz[], {}::timestamptz[], {}::text[]{token}) \
             AS n (id, app_id, event_id, event_type, channels, payload, expires, now, \
               traceparent{}) \
           {gate}{skip}RETURNING id, app_id, channels, created_at), \
         channels AS (INSERT INTO message_channels (app_id, channel, msg_id) \
           SELECT DISTINCT m.app_id, c, m.id FROM message m, UNNEST(m.channels) AS c), \
         deliveries AS (INSERT INTO deliveries \
           (id, app_id, msg_id, endpoint_id, status, attempts, next_attempt_at, \
            created_at) \
           SELECT d.id, m.app_id, m.id, d.endpoint_id, d.status, 0, m.created_at, \
             m.created_at \
           FROM UNNEST({}::text[], {}::text[], {}::text[], {}::text[]) \
             AS d (id, msg_id, endpoint_id, status) \
           JOIN message m ON m.id = d.msg_id) \
         SELECT id FROM message",
        Message::COLUMNS,
        p(1),
        p(2),
        p(3),
        p(4),
        p(5),
        p(6),
        p(7),
        p(8),
        p(9),
        if claiming { ", token" } else { "" },
        p(10),
        p(11),
        p(12),
        p(13),
    )
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
    /// The claim token of each keyed message.
    tokens: Vec<Option<&'j str>>,
    delivery_ids: Vec<String>,
    delivery_msgs: Vec<String>,
    delivery_endpoints: Vec<String>,
    delivery_statuses: Vec<&'static str>,
}

impl<'j> Rows<'j> {
    fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Adds `new` (keyed, with its claim's `token`) and its deliveries.
    fn push(&mut self, new: &'j NewMessage, fan_out: &message::FanOut, token: Option<&'j str>) {
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
        self.tokens.push(token);
    }

    /// Inserts every message, the channels and deliveries of those inserted, in one statement:
    /// without `claims`, skipping one whose `eventId` is taken ([`Insert::Fresh`] when none
    /// carries one, else [`Insert::SkipTaken`]); with them, claiming them first
    /// ([`Insert::Claiming`]: a keyed message is inserted only if its key was claimed). The ids
    /// inserted.
    async fn insert(
        self,
        conn: &mut PgConnection,
        claims: &[records::Claim<'_>],
    ) -> sqlx::Result<BTreeSet<String>> {
        if self.is_empty() {
            return Ok(BTreeSet::new());
        }
        let claiming = !claims.is_empty();
        let which = Insert::of(claiming, self.event_ids.iter().any(Option::is_some));
        let mut args = PgArguments::default();
        if claiming {
            records::Claim::add_many_to(claims, &mut args).map_err(postgres_error)?;
        }
        add(&mut args, self.ids)?;
        add(&mut args, self.app_ids)?;
        add(&mut args, self.event_ids)?;
        add(&mut args, self.event_types)?;
        add(&mut args, self.channels)?;
        add(&mut args, self.payloads)?;
        add(&mut args, self.expires)?;
        add(&mut args, self.nows)?;
        add(&mut args, self.traceparents)?;
        add(&mut args, self.delivery_ids)?;
        add(&mut args, self.delivery_msgs)?;
        add(&mut args, self.delivery_endpoints)?;
        add(&mut args, self.delivery_statuses)?;
        if claiming {
            add(&mut args, self.tokens)?;
        }
        let ids: Vec<String> = sqlx::query_scalar_with(which.sql(), args)
            .fetch_all(&mut *conn)
            .await?;
        Ok(ids.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::is_unique_violation;
    use crate::kept_plans::tests::assert_index_reads_any_join;
    use crate::testing::{deliveries_to_ep_1, ONE_APP_AND_ENDPOINT};
    use sqlx::Connection;
    use vow_core::{AppId, MessageId};
    use vow_store::idempotency::{
        Fingerprint, FreshClaim, LeaseToken, Record, Scope, Settings, StoredResponse,
    };

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
        let claim_and_insert_types = format!("{claim_types}, {insert_types}, text[]");
        let claim_and_insert_args = format!("{claim_args}, {insert_args}, '{{t}}'");
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
                Insert::Fresh.sql(),
                insert_types.as_str(),
                insert_args,
            ),
            (
                "insert skipping taken eventIds",
                Insert::SkipTaken.sql(),
                insert_types.as_str(),
                insert_args,
            ),
            (
                "key claims and insert",
                Insert::Claiming.sql(),
                claim_and_insert_types.as_str(),
                claim_and_insert_args.as_str(),
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

    /// A batch's one statement writes its keyed and unkeyed creates with a record for each key;
    /// a keyed create whose `eventId` is taken fails it whole, with nothing written (no claim
    /// commits without its message), and the batch in a transaction then writes the rest and
    /// leaves that create, and its key, out.
    #[tokio::test]
    async fn one_statement_claims_and_inserts_and_a_taken_event_id_needs_the_transaction() {
        let (store, _url) = crate::testing::fresh_store().await;
        let mut conn = store.conn().await.unwrap();
        let app = app_with_an_endpoint(&mut conn).await;

        let first = [
            create(app, Some("taken"), None),
            create(app, None, Some("k1")),
        ];
        let refs: Vec<&Create> = first.iter().collect();
        let written = Creates::write_together(&mut conn, &refs, false).await;
        assert_eq!(written.unwrap(), [Some(1), Some(1)]);
        assert_eq!(count(&mut conn).await, (2, 2, 1));

        let second = [
            create(app, None, Some("k2")),
            create(app, Some("taken"), Some("k3")),
            create(app, None, None),
        ];
        let refs: Vec<&Create> = second.iter().collect();
        let failed = Creates::write_together(&mut conn, &refs, false).await;
        assert!(
            failed.as_ref().is_err_and(is_unique_violation),
            "{failed:?}"
        );
        assert_eq!(count(&mut conn).await, (2, 2, 1), "nothing written");

        let mut tx = conn.begin().await.unwrap();
        let written = Creates::write_together(&mut tx, &refs, true).await;
        tx.commit().await.unwrap();
        assert_eq!(written.unwrap(), [Some(1), None, Some(1)]);
        assert_eq!(count(&mut conn).await, (4, 4, 2), "k3 has no record");
    }

    /// Without keys, a batch in which no message carries an `eventId` is a plain insert; one in
    /// which some do skips a message whose `eventId` is taken and writes the rest, in or out of
    /// a transaction.
    #[tokio::test]
    async fn an_unkeyed_batch_skips_a_taken_event_id_and_one_without_event_ids_writes_all() {
        let (store, _url) = crate::testing::fresh_store().await;
        let mut conn = store.conn().await.unwrap();
        let app = app_with_an_endpoint(&mut conn).await;

        let fresh = [create(app, None, None), create(app, None, None)];
        assert_eq!(
            Insert::of(false, false),
            Insert::Fresh,
            "no eventId: a plain insert"
        );
        let refs: Vec<&Create> = fresh.iter().collect();
        let written = Creates::write_together(&mut conn, &refs, false).await;
        assert_eq!(written.unwrap(), [Some(1), Some(1)]);
        assert_eq!(count(&mut conn).await, (2, 2, 0));

        for in_transaction in [false, true] {
            let taken = format!("taken-{in_transaction}");
            let first = [create(app, Some(&taken), None)];
            let refs: Vec<&Create> = first.iter().collect();
            let written = Creates::write_together(&mut conn, &refs, in_transaction).await;
            assert_eq!(written.unwrap(), [Some(1)]);
            let second = [
                create(app, None, None),
                create(app, Some(&taken), None),
                create(app, Some(&format!("new-{in_transaction}")), None),
            ];
            let refs: Vec<&Create> = second.iter().collect();
            let written = Creates::write_together(&mut conn, &refs, in_transaction).await;
            assert_eq!(
                written.unwrap(),
                [Some(1), None, Some(1)],
                "{in_transaction}"
            );
        }
        assert_eq!(count(&mut conn).await, (8, 8, 0), "the taken ones left out");
    }

    /// How many messages, deliveries and key records are stored.
    async fn count(conn: &mut PgConnection) -> (i64, i64, i64) {
        sqlx::query_as(
            "SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM deliveries), \
             (SELECT count(*) FROM idempotency_records)",
        )
        .fetch_one(conn)
        .await
        .unwrap()
    }

    /// Adds an application with one endpoint, `ep_1`.
    async fn app_with_an_endpoint(conn: &mut PgConnection) -> AppId {
        let app = AppId::new();
        sqlx::raw_sql(&format!(
            "INSERT INTO applications (id, name, metadata, created_at, updated_at)
               VALUES ('{app}', 'a', '{{}}', now(), now());
             INSERT INTO endpoints (id, app_id, url, description, disabled, metadata, headers,
                                    created_at, updated_at)
               VALUES ('ep_1', '{app}', 'https://example.com/', '', false, '{{}}', '{{}}',
                       now(), now());"
        ))
        .execute(conn)
        .await
        .unwrap();
        app
    }

    /// A create of one message to `app` (with `event_id`), keyed with `key` as the server's hot
    /// path keys it: the response rendered before the write.
    fn create(app: AppId, event_id: Option<&str>, key: Option<&str>) -> Create {
        let now = chrono::Utc::now();
        let new = NewMessage {
            id: MessageId::new(),
            app_id: app,
            event_id: event_id.map(str::to_string),
            event_type: "t".into(),
            channels: None,
            payload: "{}".into(),
            payload_expires_at: now,
            now,
            traceparent: None,
        };
        let key = key.map(|key| {
            let record = Record {
                scope: Scope {
                    principal: "admin".into(),
                    application: Some(app.to_string()),
                    method: "POST".into(),
                    route: "/api/v1/app/{app_id}/msg".into(),
                    key: vow_idempotency::IdempotencyKey::parse(key).unwrap(),
                },
                token: LeaseToken::generate(),
                fresh: None,
                now,
                settings: Settings::default(),
            };
            let fresh = FreshClaim {
                fingerprint: Fingerprint::of("POST", "/api/v1/app/{app_id}/msg", key.as_bytes()),
                canonical_body: key.into(),
                on_takeover: None,
            };
            let response = StoredResponse {
                resource: Some(new.id.to_string()),
                ..StoredResponse::json(202, &serde_json::json!({ "id": new.id.to_string() }))
            };
            (record, fresh, response)
        });
        Create {
            new,
            only: None,
            key,
        }
    }
}
