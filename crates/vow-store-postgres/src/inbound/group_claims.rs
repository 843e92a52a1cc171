//! Group commit of inbound claims ([`GroupClaims`]): concurrent claims share one transaction, a
//! few multi-row statements and one commit, as message creates do (`group_commit`, on the same
//! [`Batcher`]).
//!
//! A batch inserts every new event as its id's claim, in one statement: `ON CONFLICT … DO
//! NOTHING` on the claim index, so an id already claimed (in the store, or by an earlier claim
//! of the batch) skips only its own row, and the rows are inserted in key order, so two batches
//! never wait on each other's keys in opposite orders; a row whose source is gone is joined
//! away. Then it records the replay-guard digests of the rows it inserted, one upsert per window
//! length (the upsert moves only a digest whose window has passed, as `digests::remember`
//! does), and deletes again the rows whose digest was accepted within its window, all in one
//! transaction; a batch without replay guards is its insert alone, which commits as it ends.
//! What is left is answered `Received` after the commit.
//!
//! Every other claim goes through the one-claim path ([`events::claim`], its own transaction)
//! after the commit, which answers it as it always did: a duplicate, a quarantined payload, a
//! refused replay, a missing source. A claim whose digest an earlier claim of the batch has too
//! goes there without being tried, so no upsert meets one digest twice.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, LazyLock};

use sqlx::{PgConnection, PgPool};
use vow_store::inbound::claim_target::ClaimTarget;
use vow_store::inbound::{Claim, InboundEvent, NewInboundEvent};
use vow_store::StoreResult;

use super::events::{self, EventRow, COLUMNS};
use crate::batcher::{Batcher, Writer};
use crate::convert;
use crate::flusher_thread::FlusherThread;
use crate::intake::Intake;

/// Inbound claims, batched. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct GroupClaims(Batcher<Claims>);

impl GroupClaims {
    /// Starts the flushers on `thread`; they stop once every clone of the returned handle is
    /// gone. A claim a batch leaves is written alone on `pool`.
    pub(crate) fn spawn(thread: &FlusherThread, pool: PgPool, intake: Arc<Intake>) -> Self {
        Self(Batcher::spawn(thread, pool, intake))
    }

    /// Claims `new` in the next batch; answered once what it wrote is durable.
    pub(crate) async fn claim(&self, new: NewInboundEvent) -> StoreResult<Claim> {
        self.0.submit(new).await
    }
}

/// The writer of inbound claims.
struct Claims;

impl Writer for Claims {
    type Job = NewInboundEvent;
    type Answer = Claim;
    type Written = InboundEvent;
    const WHAT: &'static str = "inbound claims";

    /// Without replay guards, a batch's one write is its insert.
    fn one_write(jobs: &[&NewInboundEvent]) -> bool {
        jobs.iter().all(|new| new.replay_guard.is_none())
    }

    /// The same statements in a transaction or not (their insert skips a taken id).
    async fn write_together(
        conn: &mut PgConnection,
        jobs: &[&NewInboundEvent],
        _in_transaction: bool,
    ) -> sqlx::Result<Vec<Option<InboundEvent>>> {
        write_together(conn, jobs).await
    }

    fn answer(_: NewInboundEvent, event: InboundEvent) -> Claim {
        Claim::Received(event)
    }

    async fn alone(pool: &PgPool, new: NewInboundEvent) -> StoreResult<Claim> {
        events::claim(pool, new).await
    }
}

/// The batch's claims on `conn` (in a transaction when it has replay guards): for each job, the
/// event it was received as, `None` for those left to the one-claim path.
async fn write_together(
    conn: &mut PgConnection,
    jobs: &[&NewInboundEvent],
) -> sqlx::Result<Vec<Option<InboundEvent>>> {
    let mut digests = HashSet::new();
    let tried: Vec<&NewInboundEvent> = jobs
        .iter()
        .copied()
        .filter(|new| match &new.replay_guard {
            Some(guard) => digests.insert((new.source_id, guard.digest.as_str())),
            None => true,
        })
        .collect();
    let mut received: HashMap<String, InboundEvent> = insert(conn, &tried)
        .await?
        .into_iter()
        .map(|row| (row.id.clone(), row.into_event()))
        .collect();
    let refused = remember_digests(conn, &tried, &received).await?;
    if !refused.is_empty() {
        sqlx::query(DELETE)
            .bind(&refused)
            .execute(&mut *conn)
            .await?;
        for id in &refused {
            received.remove(id);
        }
    }
    Ok(jobs
        .iter()
        .map(|new| received.remove(&new.id.to_string()))
        .collect())
}

/// Deletes the events `$1` again.
const DELETE: &str = "DELETE FROM inbound_events WHERE id = ANY($1::text[])";

/// Inserts the claims `$1` to `$11` (as columns) in key order, each unless its id is claimed
/// or its source is gone: the rows inserted.
static INSERT: LazyLock<String> = LazyLock::new(|| {
    let target = ClaimTarget::Claim;
    format!(
        "INSERT INTO inbound_events (id, source_id, account, event_id, state, sha256, size, \
           payload, headers, version, entity, received_at, updated_at, next_attempt_at) \
         SELECT n.id, n.source_id, n.account, n.event_id, '{}', n.sha256, n.size, n.payload, \
           n.headers::jsonb, n.version, n.entity, n.now, n.now, n.now \
         FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], \
           $6::int8[], $7::bytea[], $8::text[], $9::text[], $10::text[], \
           $11::timestamptz[]) WITH ORDINALITY \
           AS n (id, source_id, account, event_id, sha256, size, payload, headers, version, \
             entity, now, position) \
         JOIN sources s ON s.id = n.source_id \
         ORDER BY n.source_id, n.account, n.event_id, n.position \
         ON CONFLICT ({}) WHERE {} DO NOTHING \
         RETURNING {COLUMNS}",
        target.state().as_str(),
        target.columns(),
        target.rows()
    )
});

/// Inserts each of `claims` as its id's claim (see the module docs): the rows inserted.
async fn insert(
    conn: &mut PgConnection,
    claims: &[&NewInboundEvent],
) -> sqlx::Result<Vec<EventRow>> {
    let headers = column(claims, |n| {
        serde_json::to_string(&n.headers).expect("header pairs are always JSON")
    });
    sqlx::query_as::<_, EventRow>(INSERT.as_str())
        .bind(column(claims, |n| n.id.to_string()))
        .bind(column(claims, |n| n.source_id.to_string()))
        .bind(column(claims, |n| n.account.as_str()))
        .bind(column(claims, |n| n.event_id.as_deref()))
        .bind(column(claims, |n| n.sha256.as_str()))
        .bind(column(claims, |n| convert::bigint_param(n.payload.len())))
        .bind(column(claims, |n| n.payload.as_slice()))
        .bind(headers)
        .bind(column(claims, |n| n.version.as_deref()))
        .bind(column(claims, |n| n.entity.as_deref()))
        .bind(column(claims, |n| n.now))
        .fetch_all(&mut *conn)
        .await
}

/// Records the digests `$2` of the events `$3` seen at `$4` from the sources `$1`, in key order:
/// each new, or moved when its window (`$5` microseconds) has passed; the events whose digest it
/// recorded.
const REMEMBER: &str = "INSERT INTO inbound_digests (source_id, digest, event_id, seen_at) \
     SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::timestamptz[]) \
       AS d (source_id, digest, event_id, seen_at) \
     ORDER BY d.source_id, d.digest \
     ON CONFLICT (source_id, digest) DO UPDATE \
       SET event_id = excluded.event_id, seen_at = excluded.seen_at \
       WHERE inbound_digests.seen_at <= excluded.seen_at - $5 * interval '1 microsecond' \
     RETURNING event_id";

/// Records the digests of the guarded claims among `claims` that were `received`, one upsert
/// per window length: the ids of the events whose digest was accepted within its window (to be
/// deleted again).
async fn remember_digests(
    tx: &mut PgConnection,
    claims: &[&NewInboundEvent],
    received: &HashMap<String, InboundEvent>,
) -> sqlx::Result<Vec<String>> {
    let mut by_window: BTreeMap<i64, Vec<(&NewInboundEvent, &str)>> = BTreeMap::new();
    for new in claims {
        let Some(guard) = &new.replay_guard else {
            continue;
        };
        if received.contains_key(&new.id.to_string()) {
            let window = guard.window.num_microseconds().unwrap_or(i64::MAX);
            let digest = guard.digest.as_str();
            by_window.entry(window).or_default().push((new, digest));
        }
    }
    let mut refused = Vec::new();
    for (window, guarded) in by_window {
        let moved: HashSet<String> = sqlx::query_scalar(REMEMBER)
            .bind(column(&guarded, |(n, _)| n.source_id.to_string()))
            .bind(column(&guarded, |(_, digest)| digest))
            .bind(column(&guarded, |(n, _)| n.id.to_string()))
            .bind(column(&guarded, |(n, _)| n.now))
            .bind(window)
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .collect();
        refused.extend(
            guarded
                .iter()
                .map(|(n, _)| n.id.to_string())
                .filter(|id| !moved.contains(id)),
        );
    }
    Ok(refused)
}

/// One column of `rows`, for an `UNNEST` parameter.
fn column<R: Copy, T>(rows: &[R], value: impl Fn(R) -> T) -> Vec<T> {
    rows.iter().map(|&row| value(row)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kept_plans::tests::assert_index_reads_any_join;

    /// On an empty store, where a kept plan goes wrong, every statement a batch may run reads
    /// each table by an index condition (the group commits' connections keep their plans so).
    #[tokio::test]
    async fn the_batchs_kept_plans_read_by_index_conditions_only() {
        let (store, _url) = crate::testing::fresh_store().await;
        let mut conn = store.conn().await.unwrap();
        let insert_types = "text[], text[], text[], text[], text[], int8[], bytea[], text[], \
             text[], text[], timestamptz[]";
        let insert_args = "'{evt_1}', '{src_1}', '{a}', '{e}', '{h}', '{1}', \
             ARRAY['\\x00'::bytea], '{\"[]\"}', '{null}', '{null}', ARRAY[now()]";
        let statements = [
            ("insert", INSERT.as_str(), insert_types, insert_args),
            (
                "digests",
                REMEMBER,
                "text[], text[], text[], timestamptz[], int8",
                "'{src_1}', '{d}', '{evt_1}', ARRAY[now()], 1",
            ),
            ("delete", DELETE, "text[]", "'{evt_1}'"),
        ];
        assert_index_reads_any_join(&mut conn, "empty", &statements).await;
    }
}
