//! Messages, and the fan-out that writes one delivery row per matching endpoint with each
//! message, in the same transaction.
//!
//! The payload is stored as TEXT exactly as the client sent it: JSONB would reorder keys and
//! change what the endpoint's signature covers. With `only`, a message goes to that one endpoint
//! whatever its filters (send-example).

use std::sync::LazyLock;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{PgConnection, Postgres, QueryBuilder};
use vow_core::MessageId;
use vow_core::{AppId, DeliveryId, EndpointId};
use vow_idempotency::postgres as records;
use vow_store::idempotency::{
    Applied, Completion, FreshClaim, ReadyClaim, Record, Recorded, StoredResponse,
};
use vow_store::rows::{FromColumns, Reader};
use vow_store::rules::fan_out::{self, FanOutEndpoint};
use vow_store::Delivery;
use vow_store::MessageCreate;
use vow_store::Messages;
use vow_store::{
    CreatedMessage, Message, MessageFilter, MessageKey, NewMessage, Seek, StoreError, StoreResult,
};

use crate::convert::{self, not_found, read, read_optional, PgColumns};
use crate::error::db_error;
use crate::error::record_error;
use crate::idempotency::{keyed, step, transaction};
use crate::seek::push_seek;
use crate::{application, PgStore};

/// The columns of a [`Message`].
const COLUMNS: &str = Message::COLUMNS;

/// A message create inside the caller's transaction: the application's endpoints are read
/// ([`fan_out`]), then the message and one delivery per match are inserted in one statement
/// ([`insert`]), all in the caller's transaction, which commits them (or, with
/// another write, such as an idempotency record's completion, rolls them back).
pub(crate) async fn create_in(
    tx: &mut PgConnection,
    new: NewMessage,
    only: Option<EndpointId>,
) -> StoreResult<CreatedMessage> {
    let (fan_out, _) = fan_out(tx, &new, only, None).await?;
    insert(tx, &new, &fan_out).await?;
    Ok(CreatedMessage {
        deliveries: fan_out.ids.len(),
        message: new.into_stored(),
    })
}

/// [`create_in`] after creating the application [`MessageCreate::app`] names, if any.
async fn create_with_app(
    tx: &mut PgConnection,
    create: MessageCreate,
) -> StoreResult<CreatedMessage> {
    let MessageCreate { new, only, app } = create;
    if let Some(app) = app {
        application::create(tx, app).await?;
    }
    create_in(tx, new, only).await
}

/// A keyed create's fresh claim with its response rendered before the write
/// ([`Completion::ready_claim`]): the record, the claim, the response.
pub(crate) type ReadyKey = (Record, FreshClaim, StoredResponse);

/// The record [`ReadyKey`] inserts: completed, with its response.
pub(crate) fn claim_of((record, fresh, response): &ReadyKey) -> records::Claim<'_> {
    records::Claim {
        scope: &record.scope,
        fingerprint: &fresh.fingerprint,
        canonical_body: &fresh.canonical_body,
        token: &record.token,
        now: record.now,
        settings: &record.settings,
        response: Some(response),
    }
}

/// A create in a transaction of its own (the group commit's one-message path): with `key`,
/// claiming it ([`create_answering`]).
pub(crate) async fn create_alone(
    tx: &mut PgConnection,
    create: MessageCreate,
    key: Option<ReadyKey>,
) -> StoreResult<Applied<CreatedMessage>> {
    match key {
        Some(key) => create_answering(tx, create, key).await,
        None => Ok((create_with_app(tx, create).await?, None)),
    }
}

/// The hot path of a keyed create ([`Completion::ready_claim`]): the claim carries the
/// response, rendered before the write, and is folded into the read that comes first
/// ([`create_claiming`]).
async fn create_answering(
    tx: &mut PgConnection,
    create: MessageCreate,
    mut key: ReadyKey,
) -> StoreResult<Applied<CreatedMessage>> {
    let MessageCreate { new, only, app } = create;
    if let Some(app) = app {
        application::create(tx, app).await?;
    }
    let (recorded, created) = create_claiming(tx, new, only, &claim_of(&key)).await?;
    key.1.settle(recorded)?;
    Ok((created, Some(key.2)))
}

/// [`create_in`] for a key with no record begun (ADR 6), its response rendered before the write
/// (the row is the request's values): the key is claimed with that response in the same
/// statement that reads the endpoints ([`fan_out`]), before the message is written, so a keyed
/// create makes as many round trips as a plain one and never updates its record. A retry finds
/// the key in flight (the claim's scope lock) even while the insert waits for a lock, and never
/// waits on it. `Fresh` or `TookOver`; a scope with any
/// other record is `Fenced`, with nothing written.
pub(crate) async fn create_claiming(
    tx: &mut PgConnection,
    new: NewMessage,
    only: Option<EndpointId>,
    claim: &records::Claim<'_>,
) -> StoreResult<(Recorded, CreatedMessage)> {
    let (fan_out, claimed) = fan_out(tx, &new, only, Some(claim)).await?;
    let recorded = match claimed {
        Claimed::Yes => Recorded::Fresh,
        // Another transaction holds the scope: in flight, answered without waiting on it.
        Claimed::InFlight => Recorded::Held,
        Claimed::Taken => records::resolve_taken(tx, claim)
            .await
            .map_err(record_error)?,
    };
    if !matches!(recorded, Recorded::Fresh | Recorded::TookOver) {
        return Err(StoreError::Fenced);
    }
    insert(tx, &new, &fan_out).await?;
    let created = CreatedMessage {
        message: new.into_stored(),
        deliveries: fan_out.ids.len(),
    };
    Ok((recorded, created))
}

/// Inserts the message, its channels and its deliveries in ONE statement (the message, and its
/// channels when it has some, in CTEs; the channels and the deliveries over `UNNEST`): `$1`..`$9`
/// the message's columns in [`COLUMNS`] order, `$10`..`$12` the deliveries' ids, endpoints and
/// statuses. No separate check that the application exists: the insert's foreign key does it,
/// and its violation reads as "application not found"; `messages_app_id_event_id_key` →
/// `Conflict`.
async fn insert(tx: &mut PgConnection, new: &NewMessage, fan_out: &FanOut) -> StoreResult<()> {
    // Indexed by `with_channels + 2 * with_deliveries`.
    static SQL: LazyLock<[String; 4]> = LazyLock::new(|| {
        let message =
            format!("INSERT INTO messages ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)");
        let channels = "INSERT INTO message_channels (app_id, channel, msg_id)
             SELECT DISTINCT $2, c, $1 FROM UNNEST($5::text[]) AS c";
        let deliveries = "INSERT INTO deliveries
                 (id, app_id, msg_id, endpoint_id, status, attempts, next_attempt_at, created_at)
             SELECT d.id, $2, $1, d.endpoint_id, d.status, 0, $8, $8
             FROM UNNEST($10::text[], $11::text[], $12::text[]) AS d (id, endpoint_id, status)";
        [
            message.clone(),
            format!("WITH message AS ({message}) {channels}"),
            format!("WITH message AS ({message}) {deliveries}"),
            format!("WITH message AS ({message}), channels AS ({channels}) {deliveries}"),
        ]
    });
    let mut args = PgArguments::default();
    add(&mut args, new.id.to_string())?;
    add(&mut args, new.app_id.to_string())?;
    add(&mut args, new.event_id.as_deref())?;
    add(&mut args, new.event_type.as_str())?;
    add(&mut args, new.channels.as_deref())?;
    add(&mut args, new.payload.as_str())?;
    add(&mut args, new.payload_expires_at)?;
    add(&mut args, new.now)?;
    add(&mut args, new.traceparent.as_deref())?;
    let with_deliveries = !fan_out.ids.is_empty();
    if with_deliveries {
        add(&mut args, &fan_out.ids)?;
        add(&mut args, &fan_out.endpoint_ids)?;
        add(&mut args, &fan_out.statuses)?;
    }
    let with_channels = new.channels.as_ref().is_some_and(|c| !c.is_empty());
    let sql = &SQL[usize::from(with_channels) + 2 * usize::from(with_deliveries)];
    sqlx::query_with(sql.as_str(), args)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// The deliveries a message gets: one per matching endpoint, `held` where it is disabled.
pub(crate) struct FanOut {
    pub(crate) ids: Vec<String>,
    pub(crate) endpoint_ids: Vec<String>,
    pub(crate) statuses: Vec<&'static str>,
}

/// Reads the application's endpoints, key-share locking the application and then them (a
/// concurrent delete waits, then cascades to our rows), and picks the ones the message goes to.
/// With `claim`, the same statement claims the key ([`records::Claim::CTE`]): what it did.
async fn fan_out(
    tx: &mut PgConnection,
    new: &NewMessage,
    only: Option<EndpointId>,
    claim: Option<&records::Claim<'_>>,
) -> StoreResult<(FanOut, Claimed)> {
    // The application first, then its endpoints, both key-share locked: the order its delete
    // takes them in (the row, then the cascade), so the two wait for each other, never deadlock.
    // A claim joins them as one row even when there are no endpoints.
    static SQL: LazyLock<[String; 2]> = LazyLock::new(|| {
        let app = |n: usize| {
            format!("app AS (SELECT id FROM applications WHERE id = ${n} FOR KEY SHARE)")
        };
        let read = |only: usize| {
            format!(
                "SELECT {} FROM endpoints e WHERE e.app_id = (SELECT id FROM app) \
                 AND (${only}::text IS NULL OR e.id = ${only}) ORDER BY e.id FOR KEY SHARE OF e",
                FanOutEndpoint::COLUMNS
            )
        };
        let first = records::Claim::PARAMS + 1;
        [
            format!("WITH {} {}", app(1), read(2)),
            format!(
                "WITH {}, {} SELECT (SELECT count(*) FROM claim) > 0 AS claimed, {} AS free, \
                 e.* FROM (SELECT) AS one LEFT JOIN LATERAL ({}) AS e ON true",
                records::Claim::CTE,
                app(first),
                records::Claim::FREE,
                read(first + 1)
            ),
        ]
    });
    let mut args = PgArguments::default();
    if let Some(claim) = claim {
        claim.add_to(&mut args).map_err(record_error)?;
    }
    add(&mut args, new.app_id.to_string())?;
    add(&mut args, only.map(|ep| ep.to_string()))?;
    let sql = SQL[usize::from(claim.is_some())].as_str();
    let (endpoints, claimed) = if claim.is_some() {
        let rows = sqlx::query_with(sql, args)
            .try_map(claiming_row)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?;
        let claimed = match rows.first() {
            Some((true, _, _)) => Claimed::Yes,
            Some((_, false, _)) => Claimed::InFlight,
            _ => Claimed::Taken,
        };
        (
            rows.into_iter().filter_map(|(_, _, ep)| ep).collect(),
            claimed,
        )
    } else {
        let rows = sqlx::query_with(sql, args)
            .try_map(read::<FanOutEndpoint>)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?;
        (rows, Claimed::Taken)
    };
    if only.is_some() && endpoints.is_empty() {
        // Name what is missing, as the insert's foreign key would for the application.
        let app_exists: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM applications WHERE id = $1)")
                .bind(new.app_id.to_string())
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error)?;
        return Err(not_found(if app_exists {
            "endpoint"
        } else {
            "application"
        }));
    }
    Ok((pick(&endpoints, new, only.is_some()), claimed))
}

/// What the claim folded into [`fan_out`] did (`Taken` too when there was no claim).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claimed {
    /// The key is this transaction's.
    Yes,
    /// The key has a record ([`records::resolve_taken`] decides it).
    Taken,
    /// Another transaction holds the key's lock: its request is in flight.
    InFlight,
}

/// A row of [`fan_out`]'s claiming read: whether it claimed the key, whether the key was free,
/// and an endpoint (`None` when the application has none: its columns are all `NULL`).
fn claiming_row(row: PgRow) -> sqlx::Result<(bool, bool, Option<FanOutEndpoint>)> {
    let columns = PgColumns(&row);
    let mut r = Reader::new(&columns);
    let (claimed, free) = (r.bool()?, r.bool()?);
    Ok((claimed, free, read_optional(&columns, &mut r)?))
}

/// The deliveries `new` gets from the application's `endpoints` (with `only`, the caller read
/// just the endpoint it named, which gets one whatever its filters).
pub(crate) fn pick<'e>(
    endpoints: impl IntoIterator<Item = &'e FanOutEndpoint>,
    new: &NewMessage,
    only: bool,
) -> FanOut {
    let mut fan_out = FanOut {
        ids: Vec::new(),
        endpoint_ids: Vec::new(),
        statuses: Vec::new(),
    };
    for ep in endpoints {
        let Some(status) = fan_out::delivery_status(ep, new, only) else {
            continue;
        };
        fan_out.ids.push(DeliveryId::new().to_string());
        fan_out.endpoint_ids.push(ep.id.clone());
        fan_out.statuses.push(status.as_str());
    }
    fan_out
}

/// Adds one parameter value ([`convert::add`]).
fn add<'q, T>(args: &mut PgArguments, value: T) -> StoreResult<()>
where
    T: 'q + sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres>,
{
    convert::add(args, value).map_err(db_error)
}

/// Restricts a message listing to the messages with a delivery to one endpoint, optionally in
/// one state (an SQL condition over `deliveries`; `$now` stands for the bound time).
pub(crate) struct DeliveredTo {
    pub(crate) endpoint: EndpointId,
    pub(crate) status: Option<&'static str>,
    pub(crate) now: DateTime<Utc>,
}

/// ` AND <msg_column> IN (...)`: only messages of `app` sent on `channel`. The application is
/// bound in the subquery so it runs once, not per row.
pub(crate) fn push_on_channel(
    qb: &mut QueryBuilder<'_, Postgres>,
    msg_column: &str,
    app: AppId,
    channel: &str,
) {
    qb.push(format!(
        " AND {msg_column} IN (SELECT msg_id FROM message_channels WHERE app_id = "
    ))
    .push_bind(app.to_string())
    .push(" AND channel = ")
    .push_bind(channel.to_string())
    .push(")");
}

pub(crate) async fn list<'c>(
    ex: impl sqlx::PgExecutor<'c>,
    app: AppId,
    filter: &MessageFilter,
    delivered_to: Option<&DeliveredTo>,
    seek: &Seek,
) -> StoreResult<Vec<Message>> {
    let mut qb =
        QueryBuilder::<Postgres>::new(format!("SELECT {COLUMNS} FROM messages WHERE app_id = "));
    qb.push_bind(app.to_string());
    // One type is an equality, which reads `messages_app_id_event_type_id_idx` in id order.
    match filter.event_types.as_slice() {
        [] => {}
        [one] => {
            qb.push(" AND event_type = ").push_bind(one.clone());
        }
        several => {
            qb.push(" AND event_type = ANY(")
                .push_bind(several.to_vec())
                .push(")");
        }
    }
    if let Some(channel) = &filter.channel {
        push_on_channel(&mut qb, "id", app, channel);
    }
    if let Some(before) = filter.before {
        qb.push(" AND created_at < ").push_bind(before);
    }
    if let Some(after) = filter.after {
        qb.push(" AND created_at > ").push_bind(after);
    }
    if let Some(to) = delivered_to {
        // The application is bound again rather than taken from `messages`: a subquery that
        // refers to the outer row runs once per message scanned (266 ms for an endpoint's dead
        // letters in an application of 10,000 messages), one that does not runs once (17 ms).
        qb.push(" AND id IN (SELECT msg_id FROM deliveries WHERE app_id = ")
            .push_bind(app.to_string())
            .push(" AND endpoint_id = ")
            .push_bind(to.endpoint.to_string());
        if let Some(status) = to.status {
            let mut parts = status.split("$now");
            qb.push(" AND (").push(parts.next().unwrap_or_default());
            for part in parts {
                qb.push_bind(to.now).push(part);
            }
            qb.push(")");
        }
        qb.push(")");
    }
    push_seek(&mut qb, "id", seek);
    qb.build()
        .try_map(read::<Message>)
        .fetch_all(ex)
        .await
        .map_err(db_error)
}

#[async_trait]
impl Messages for PgStore {
    async fn create_message_keyed(
        &self,
        create: MessageCreate,
        completion: Option<Completion<CreatedMessage>>,
    ) -> StoreResult<Applied<CreatedMessage>> {
        let (ready, completion) = match completion.map(Completion::ready_claim) {
            Some(ReadyClaim::Ready(record, fresh, response)) => {
                (Some((record, fresh, response)), None)
            }
            Some(ReadyClaim::Not(completion)) => (None, Some(completion)),
            None => (None, None),
        };
        if completion.is_none() && create.app.is_none() {
            // The hot path, keyed or not: shares a transaction and its commit with concurrent
            // creates.
            let MessageCreate { new, only, .. } = create;
            return self
                .waking(self.group_commit.create(new, only, ready))
                .await;
        }
        let _permit = self.intake.admit().await?;
        match ready {
            Some(ready) => {
                let answering = step(move |tx| Box::pin(create_answering(tx, create, ready)));
                self.waking(transaction(&self.pool, answering)).await
            }
            None => {
                let write = step(move |tx| Box::pin(create_with_app(tx, create)));
                self.waking(keyed(&self.pool, completion, write)).await
            }
        }
    }

    async fn create_owed_message(&self, new: NewMessage) -> StoreResult<CreatedMessage> {
        let create = MessageCreate {
            new,
            only: None,
            app: None,
        };
        let write = step(move |tx| Box::pin(create_with_app(tx, create)));
        Ok(self.waking(keyed(&self.pool, None, write)).await?.0)
    }

    async fn get_message(&self, app: AppId, key: &MessageKey) -> StoreResult<Option<Message>> {
        let (column, value) = match key {
            MessageKey::Id(id) => ("id", id.to_string()),
            MessageKey::EventId(event_id) => ("event_id", event_id.clone()),
        };
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM messages WHERE app_id = $1 AND {column} = $2"
        ))
        .bind(app.to_string())
        .bind(value)
        .try_map(read::<Message>)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)
    }

    async fn list_messages(
        &self,
        app: AppId,
        filter: &MessageFilter,
        seek: &Seek,
    ) -> StoreResult<Vec<Message>> {
        list(&self.pool, app, filter, None, seek).await
    }

    async fn list_deliveries(&self, app: AppId, msg: MessageId) -> StoreResult<Vec<Delivery>> {
        crate::delivery::list_for_message(&self.pool, app, msg).await
    }
}
