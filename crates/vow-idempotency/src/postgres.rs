//! The record store on PostgreSQL (feature `postgres`), times as `timestamptz`. Every function
//! takes a `&mut PgConnection`, so [`fence`] and [`complete`] run inside the host's
//! `sqlx::Transaction` (`&mut *tx`). The host runs [`SCHEMA`] in its migrations.
//!
//! [`begin`] runs on a connection outside any transaction (each statement commits), so the claim
//! is visible at once.
//!
//! # A scope in flight
//! Every statement that inserts or takes over a record first takes the scope's transaction
//! lock without waiting (`pg_try_advisory_xact_lock` of a 64-bit hash of the schema and the
//! scope, in a CTE of the same statement: [`Claim::CTE`]; [`begin`]'s own one-statement
//! transactions take it shared, so they do not see each other as in flight). A claim made inside the host's write transaction holds
//! it until that transaction ends, so another request (on any node sharing the database) that
//! cannot take it knows the scope is in flight at once, instead of waiting on the uncommitted
//! row: its claim claims nothing ([`Recorded::Held`]) and [`begin`] answers
//! [`Begun::InProgress`] (or the committed record's final answer, when it has one). A hash
//! collision between two scopes makes one of them look in flight while the other is: a 409 and
//! a retry, never a second execution (the unique key still decides ownership).

use chrono::{DateTime, Utc};
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::{Arguments, Row};
use sqlx::{PgConnection, Postgres};

use crate::columns::{self, Columns};
use crate::error::{Error, Result};
use crate::record::{
    self, decide, Begun, Decision, LeaseToken, Recorded, Scope, Settings, StoredResponse,
};
use crate::status::{self, KeyStatus, StatusRow};
use crate::Fingerprint;

/// The table and its indexes (idempotent). A record is found by its deadline in one index at a
/// time: `expires_at` until it becomes a tombstone, then `tombstone_until`, so each record holds
/// one deadline entry (a host whose indexes predate the partial ones keeps its full indexes,
/// which answer the same queries). The two bodies, which pass PostgreSQL's compression threshold
/// together once a body is about 1 KiB, are compressed with lz4 where the server has it (14 and
/// later, built with lz4), several times faster than its default pglz.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS idempotency_records (
    principal           text        NOT NULL,
    application         text        NOT NULL,
    method              text        NOT NULL,
    route               text        NOT NULL,
    key                 text        NOT NULL,
    state               text        NOT NULL
                        CHECK (state IN ('in_progress', 'completed', 'tombstone')),
    fingerprint_version integer     NOT NULL,
    fingerprint         text        NOT NULL,
    canonical_body      text,
    lease_token         text        NOT NULL,
    lease_until         timestamptz NOT NULL,
    response_status     integer,
    response_headers    text,
    response_body       bytea,
    resource            text,
    expires_at          timestamptz NOT NULL,
    tombstone_until     timestamptz NOT NULL,
    PRIMARY KEY (principal, application, method, route, key)
);
CREATE INDEX IF NOT EXISTS idempotency_records_expires_at
    ON idempotency_records (expires_at) WHERE state <> 'tombstone';
CREATE INDEX IF NOT EXISTS idempotency_records_tombstone_until
    ON idempotency_records (tombstone_until) WHERE state = 'tombstone';
CREATE INDEX IF NOT EXISTS idempotency_records_in_progress
    ON idempotency_records (lease_until) WHERE state = 'in_progress';
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 140000 THEN
        EXECUTE 'ALTER TABLE idempotency_records
            ALTER COLUMN canonical_body SET COMPRESSION lz4,
            ALTER COLUMN response_body SET COMPRESSION lz4';
    END IF;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'no lz4 on this server: idempotency records stay compressed with pglz';
END $$;
";

/// The scope's transaction lock as a CTE over `$1`..`$5`, `lock AS (SELECT <taken> AS free)`:
/// `free` is whether this transaction holds the scope's advisory lock now (re-entrant within one
/// transaction), taken with `$try` (`pg_try_advisory_xact_lock`, exclusive, for a claim inside
/// a write transaction; `…_shared` for [`begin`]'s own short statements, which conflict only with
/// such a write, not with each other). It never waits. The hash covers the schema, so two vow
/// installations in one database do not see each other's keys. A statement gates its insert or
/// takeover on `free`.
macro_rules! scope_lock {
    ($try:literal) => {
        concat!(
            "lock AS (SELECT ",
            $try,
            "(hashtextextended(concat_ws(E'\\x1f', current_schema(), \
             $1::text, $2::text, $3::text, $4::text, $5::text), 0)) AS free)"
        )
    };
    (write) => {
        scope_lock!("pg_try_advisory_xact_lock")
    };
    (begin) => {
        scope_lock!("pg_try_advisory_xact_lock_shared")
    };
}

/// `$1`..`$5`: the scope.
const WHERE_SCOPE: &str =
    "principal = $1 AND application = $2 AND method = $3 AND route = $4 AND key = $5";

/// Claims the scope for this request, or says why not (see [`Begun`]). Inserts first and reads
/// the row it lost to only then; an expired lease or an ended tombstone is taken over by a
/// conditional `UPDATE` on the old token.
pub async fn begin(
    conn: &mut PgConnection,
    scope: &Scope,
    fingerprint: &Fingerprint,
    canonical_body: &str,
    now: DateTime<Utc>,
    settings: &Settings,
) -> Result<Begun> {
    let d = settings.deadlines(now);
    let fp_hex = fingerprint.hex();
    for _ in 0..record::ATTEMPTS {
        let token = LeaseToken::generate();
        let fresh = |q: Query<'static, Postgres, PgArguments>| {
            q.bind(i32::from(fingerprint.version))
                .bind(fp_hex.clone())
                .bind(canonical_body.to_owned())
                .bind(token.0.clone())
                .bind(d.lease_until)
                .bind(d.expires_at)
                .bind(d.tombstone_until)
        };
        let attempt = insert_in_progress(conn, scope, fingerprint, canonical_body, &token, &d);
        let (free, claimed) = attempt.await?;
        if claimed {
            return Ok(Begun::Owner(token));
        }
        let row = read(conn, scope).await?;
        if !free {
            // Another transaction holds the scope: its outcome is not committed. A committed
            // answer that no transaction can change still stands; anything else is in flight.
            return Ok(
                match row.map(|r| decide(&r, fingerprint, canonical_body, now)) {
                    Some(Decision::Answer(begun)) => begun,
                    _ => record::contended(),
                },
            );
        }
        let Some(row) = row else {
            continue; // released between our insert and read
        };
        match decide(&row, fingerprint, canonical_body, now) {
            Decision::Answer(begun) => return Ok(begun),
            Decision::TakeOver => {
                const TAKE_OVER: &str = concat!(
                    "WITH ",
                    scope_lock!(begin),
                    " UPDATE idempotency_records SET state = 'in_progress', \
                     fingerprint_version = $6, fingerprint = $7, canonical_body = $8, \
                     lease_token = $9, lease_until = $10, expires_at = $11, \
                     tombstone_until = $12, response_status = NULL, response_headers = NULL, \
                     response_body = NULL, resource = NULL \
                     WHERE (SELECT free FROM lock) AND principal = $1 AND application = $2 \
                     AND method = $3 AND route = $4 AND key = $5 AND lease_token = $13 AND \
                     ((state = 'in_progress' AND lease_until <= $14) OR tombstone_until <= $14)"
                );
                let done = fresh(bind(scope, TAKE_OVER))
                    .bind(row.lease_token.0)
                    .bind(now)
                    .execute(&mut *conn)
                    .await?;
                if done.rows_affected() == 1 {
                    return Ok(Begun::TakenOver(token));
                }
            }
        }
    }
    Ok(record::contended())
}

/// Inserts an `in_progress` row for the scope when no other transaction holds it: whether the
/// scope was free of other transactions, and whether the row was inserted.
const INSERT: &str = concat!(
    "WITH ",
    scope_lock!(begin),
    ", claim AS (INSERT INTO idempotency_records (principal, application, method, route, \
     key, state, fingerprint_version, fingerprint, canonical_body, lease_token, lease_until, \
     expires_at, tombstone_until) \
     SELECT $1, $2, $3, $4, $5, 'in_progress', $6, $7, $8, $9, $10, $11, $12 FROM lock \
     WHERE free ON CONFLICT DO NOTHING RETURNING 1) \
     SELECT free, (SELECT count(*) FROM claim) > 0 FROM lock"
);

/// Claims a scope that has no record, for `token` (an `in_progress` row with a fresh lease):
/// [`begin`]'s first step. `false` when the scope has a record, or another transaction holds
/// it (see the module docs): never waits for one.
pub async fn claim(
    conn: &mut PgConnection,
    scope: &Scope,
    fingerprint: &Fingerprint,
    canonical_body: &str,
    token: &LeaseToken,
    now: DateTime<Utc>,
    settings: &Settings,
) -> Result<bool> {
    let d = settings.deadlines(now);
    let attempt = insert_in_progress(conn, scope, fingerprint, canonical_body, token, &d);
    Ok(attempt.await?.1)
}

/// [`INSERT`]: (free, claimed).
async fn insert_in_progress(
    conn: &mut PgConnection,
    scope: &Scope,
    fingerprint: &Fingerprint,
    canonical_body: &str,
    token: &LeaseToken,
    d: &record::Deadlines,
) -> Result<(bool, bool)> {
    let row = bind(scope, INSERT)
        .bind(i32::from(fingerprint.version))
        .bind(fingerprint.hex())
        .bind(canonical_body.to_owned())
        .bind(token.0.clone())
        .bind(d.lease_until)
        .bind(d.expires_at)
        .bind(d.tombstone_until)
        .fetch_one(&mut *conn)
        .await?;
    Ok((row.try_get(0)?, row.try_get(1)?))
}

/// Locks the record, inside the host's transaction and before its business writes, if `token`
/// still owns it: a takeover then waits for the transaction. [`Error::Fenced`] if not.
pub async fn fence(conn: &mut PgConnection, scope: &Scope, token: &LeaseToken) -> Result<()> {
    const SQL: &str = "SELECT 1 FROM idempotency_records \
         WHERE principal = $1 AND application = $2 AND method = $3 AND route = $4 AND key = $5 \
         AND state = 'in_progress' AND lease_token = $6 FOR UPDATE";
    let found = bind(scope, SQL)
        .bind(token.0.clone())
        .fetch_optional(&mut *conn)
        .await?;
    found.map(drop).ok_or(Error::Fenced)
}

/// Stores `response` and marks the record completed, inside the host's transaction with its
/// business writes. [`Error::Fenced`] when `token` no longer owns the record: roll back.
pub async fn complete(
    conn: &mut PgConnection,
    scope: &Scope,
    token: &LeaseToken,
    response: &StoredResponse,
    now: DateTime<Utc>,
    settings: &Settings,
) -> Result<()> {
    const SQL: &str = "UPDATE idempotency_records SET state = 'completed', \
         response_status = $7, response_headers = $8, response_body = $9, resource = $10, \
         expires_at = $11, tombstone_until = $12 \
         WHERE principal = $1 AND application = $2 AND method = $3 AND route = $4 AND key = $5 \
         AND state = 'in_progress' AND lease_token = $6";
    let d = settings.deadlines(now);
    let done = bind(scope, SQL)
        .bind(token.0.clone())
        .bind(i32::from(response.status))
        .bind(columns::encode_headers(&response.headers))
        .bind(response.body.clone())
        .bind(response.resource.clone())
        .bind(d.expires_at)
        .bind(d.tombstone_until)
        .execute(&mut *conn)
        .await?;
    match done.rows_affected() {
        1 => Ok(()),
        _ => Err(Error::Fenced),
    }
}

/// A fresh key's claim, as [`claim_completed`] inserts it: the record as `completed`, with its
/// deadlines, and with the response when the host knows it before its write (else
/// [`store_response`] adds it at the end of the same transaction).
pub struct Claim<'a> {
    /// The record's scope.
    pub scope: &'a Scope,
    /// The request's fingerprint.
    pub fingerprint: &'a Fingerprint,
    /// The request's canonical body.
    pub canonical_body: &'a str,
    /// The new owner's token.
    pub token: &'a LeaseToken,
    /// When the write runs (the deadlines count from here).
    pub now: DateTime<Utc>,
    /// The record lifetimes.
    pub settings: &'a Settings,
    /// The response, when it is known before the write: it must be what the write's success
    /// answers, since a failed write rolls the claim back with it.
    pub response: Option<&'a StoredResponse>,
}

/// The insert of a completed claim, `$1`..`$16` in [`Claim::add_to`]'s order, gated on the
/// scope's lock (a CTE `lock` the statement must hold: `scope_lock!`); a macro, so
/// [`Claim::CTE`] can wrap the same text.
macro_rules! insert_completed {
    () => {
        "INSERT INTO idempotency_records (principal, application, method, route, key, state, \
         fingerprint_version, fingerprint, canonical_body, lease_token, lease_until, expires_at, \
         tombstone_until, response_status, response_headers, response_body, resource) \
         SELECT $1, $2, $3, $4, $5, 'completed', $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, \
         $16 FROM lock WHERE free ON CONFLICT DO NOTHING"
    };
}

/// Many claims as three CTEs, `input AS (…), lock AS (…), claim AS (<insert> RETURNING
/// lease_token)`, over `$1`..`$16` ([`Claim`]'s values as columns: [`Claim::add_many_to`]); a
/// macro, so [`CLAIM_MANY`] and [`Claim::MANY_CTE`] share the text.
macro_rules! claim_many_cte {
    () => {
        "input AS MATERIALIZED (SELECT * FROM UNNEST($1::text[], \
         $2::text[], $3::text[], $4::text[], $5::text[], $6::int4[], $7::text[], $8::text[], \
         $9::text[], $10::timestamptz[], $11::timestamptz[], $12::timestamptz[], $13::int4[], \
         $14::text[], $15::bytea[], $16::text[]) WITH ORDINALITY AS i (principal, application, \
         method, route, key, fingerprint_version, fingerprint, canonical_body, lease_token, \
         lease_until, expires_at, tombstone_until, response_status, response_headers, \
         response_body, resource, n)), \
         lock AS MATERIALIZED (SELECT n, pg_try_advisory_xact_lock(hashtextextended(concat_ws(\
         E'\\x1f', current_schema(), principal, application, method, route, key), 0)) AS free \
         FROM input ORDER BY n), \
         claim AS (INSERT INTO idempotency_records (principal, application, method, route, key, \
         state, fingerprint_version, fingerprint, canonical_body, lease_token, lease_until, \
         expires_at, tombstone_until, response_status, response_headers, response_body, \
         resource) SELECT principal, application, method, route, key, 'completed', \
         fingerprint_version, fingerprint, canonical_body, lease_token, lease_until, expires_at, \
         tombstone_until, response_status, response_headers, response_body, resource \
         FROM input JOIN lock USING (n) WHERE free ORDER BY n ON CONFLICT DO NOTHING \
         RETURNING lease_token)"
    };
}

/// A claim's values after its scope, in [`Claim::add_to`]'s order, derived once for both the
/// one-claim statements and [`claim_many`]'s arrays.
struct ClaimRow<'a> {
    fingerprint_version: i32,
    fingerprint: String,
    canonical_body: &'a str,
    token: &'a str,
    now: DateTime<Utc>,
    expires_at: DateTime<Utc>,
    tombstone_until: DateTime<Utc>,
    status: Option<i32>,
    headers: Option<String>,
    body: Option<&'a [u8]>,
    resource: Option<&'a str>,
}

impl<'a> Claim<'a> {
    /// The values the record is inserted with, after its scope.
    fn row(&self) -> ClaimRow<'a> {
        let d = self.settings.deadlines(self.now);
        let response = self.response;
        ClaimRow {
            fingerprint_version: i32::from(self.fingerprint.version),
            fingerprint: self.fingerprint.hex(),
            canonical_body: self.canonical_body,
            token: self.token.0.as_str(),
            now: self.now,
            expires_at: d.expires_at,
            tombstone_until: d.tombstone_until,
            status: response.map(|r| i32::from(r.status)),
            headers: response.map(|r| columns::encode_headers(&r.headers)),
            body: response.map(|r| r.body.as_slice()),
            resource: response.and_then(|r| r.resource.as_deref()),
        }
    }
}

impl Claim<'_> {
    /// How many parameters the claim takes (`$1`..`$16`): a statement that folds it in
    /// ([`Claim::CTE`]) numbers its own from `PARAMS + 1`.
    pub const PARAMS: usize = 16;

    /// The claim as two CTEs, `lock AS (…), claim AS (<insert> RETURNING 1)`, over `$1`..`$16`:
    /// `claim` yields a row when it claimed the scope, none when the scope has a record
    /// ([`resolve_taken`] then decides it) or another transaction holds the scope's lock
    /// ([`Claim::FREE`] is then false: the scope is in flight, roll back as
    /// [`Recorded::Held`] without waiting). Folded into a statement, the claim waits for every
    /// lock that statement takes, so fold it into one that runs before the host's writes (vow's
    /// message create folds it into the read of the endpoints, which it needs first anyway): it
    /// then claims as early as a statement of its own would, one round trip cheaper.
    pub const CTE: &'static str = concat!(
        scope_lock!(write),
        ", claim AS (",
        insert_completed!(),
        " RETURNING 1)"
    );

    /// Many claims as CTEs for a host that writes the requests of a batch in ONE statement of
    /// its own: `input AS (…), lock AS (…), claim AS (<insert> RETURNING lease_token)`, over
    /// `$1`..`$16` as arrays ([`Claim::add_many_to`]; the host numbers its own from
    /// [`Claim::PARAMS`]` + 1`). `claim` yields the token of each claim that claimed its scope,
    /// as [`claim_many`] does. The host must write each claimed request's rows in the same
    /// statement, or fail it whole: a statement outside a transaction commits as it ends, and
    /// there is no later [`unclaim`].
    pub const MANY_CTE: &'static str = claim_many_cte!();

    /// A boolean expression over [`Claim::CTE`]: whether no other transaction held the scope
    /// (when false, the claim claimed nothing because the scope is in flight).
    pub const FREE: &'static str = "(SELECT free FROM lock)";

    /// Adds the claim's values, `$1`..`$16` in order.
    pub fn add_to(&self, args: &mut PgArguments) -> Result<()> {
        let row = self.row();
        add_scope(args, self.scope)?;
        add(args, row.fingerprint_version)?;
        add(args, row.fingerprint)?;
        add(args, row.canonical_body)?;
        add(args, row.token)?;
        add(args, row.now)?;
        add(args, row.expires_at)?;
        add(args, row.tombstone_until)?;
        add(args, row.status)?;
        add(args, row.headers)?;
        add(args, row.body)?;
        add(args, row.resource)
    }

    /// Adds the values of `claims`, one array per column, `$1`..`$16` in order ([`CLAIM_MANY`],
    /// [`Claim::MANY_CTE`]).
    pub fn add_many_to(claims: &[Claim<'_>], args: &mut PgArguments) -> Result<()> {
        let mut columns = ClaimColumns::default();
        for claim in claims {
            columns.push(claim);
        }
        columns.add_to(args)
    }
}

/// The statement [`claim_many`] runs (`$1` to `$16`: [`Claim`]'s values as columns), for a
/// host that checks the plans of what its transactions run.
pub const CLAIM_MANY: &str = concat!("WITH ", claim_many_cte!(), " SELECT lease_token FROM claim");

/// [`Claim::CTE`] for many claims in ONE statement, for a host that batches the writes of
/// several requests in one transaction: which of `claims` it claimed (`true` at its index).
/// Each is taken as [`Claim::CTE`] takes one: under its scope's lock, taken without waiting,
/// inserted only where no record is. One that claimed nothing (the scope has a record, or
/// another transaction holds it) is left to the caller, whose request should then take the
/// one-claim path ([`claim_completed`] or [`Claim::CTE`]) in a transaction of its own, which
/// resolves it. Two claims of one scope in `claims` claim it once (the first). A claim whose
/// write then does not happen must be deleted in the same transaction ([`unclaim`]).
pub async fn claim_many(conn: &mut PgConnection, claims: &[Claim<'_>]) -> Result<Vec<bool>> {
    let mut args = PgArguments::default();
    Claim::add_many_to(claims, &mut args)?;
    let claimed: std::collections::HashSet<String> = sqlx::query_scalar_with(CLAIM_MANY, args)
        .fetch_all(&mut *conn)
        .await?
        .into_iter()
        .collect();
    Ok(claims
        .iter()
        .map(|c| claimed.contains(&c.token.0))
        .collect())
}

/// The statement [`unclaim`] runs: deletes the records of the scopes `$1` to `$5` (as
/// columns) that still hold the tokens `$6`, each found by its primary key.
pub const UNCLAIM: &str = "DELETE FROM idempotency_records r USING UNNEST($1::text[], \
     $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) \
     AS u (principal, application, method, route, key, lease_token) \
     WHERE (r.principal, r.application, r.method, r.route, r.key) \
     = (u.principal, u.application, u.method, u.route, u.key) AND r.lease_token = u.lease_token";

/// Deletes the records `claims` claimed in this transaction ([`claim_many`]) whose writes did
/// not happen, so the scopes stay free once it commits; how many it deleted. A claim that did
/// not claim its scope deletes nothing (another token holds the scope's record).
pub async fn unclaim(conn: &mut PgConnection, claims: &[Claim<'_>]) -> Result<u64> {
    let mut scope: [Vec<String>; 5] = Default::default();
    let mut tokens = Vec::with_capacity(claims.len());
    for claim in claims {
        push_scope(&mut scope, claim.scope);
        tokens.push(claim.token.0.as_str());
    }
    let [principals, applications, methods, routes, keys] = scope;
    let done = sqlx::query(UNCLAIM)
        .bind(principals)
        .bind(applications)
        .bind(methods)
        .bind(routes)
        .bind(keys)
        .bind(tokens)
        .execute(&mut *conn)
        .await?;
    Ok(done.rows_affected())
}

/// [`claim_many`]'s claims as one array per column.
#[derive(Default)]
struct ClaimColumns<'a> {
    scope: [Vec<String>; 5],
    fingerprint_versions: Vec<i32>,
    fingerprints: Vec<String>,
    canonical_bodies: Vec<&'a str>,
    tokens: Vec<&'a str>,
    nows: Vec<DateTime<Utc>>,
    expires: Vec<DateTime<Utc>>,
    tombstones: Vec<DateTime<Utc>>,
    statuses: Vec<Option<i32>>,
    headers: Vec<Option<String>>,
    bodies: Vec<Option<&'a [u8]>>,
    resources: Vec<Option<&'a str>>,
}

impl<'a> ClaimColumns<'a> {
    fn push(&mut self, claim: &Claim<'a>) {
        push_scope(&mut self.scope, claim.scope);
        let row = claim.row();
        self.fingerprint_versions.push(row.fingerprint_version);
        self.fingerprints.push(row.fingerprint);
        self.canonical_bodies.push(row.canonical_body);
        self.tokens.push(row.token);
        self.nows.push(row.now);
        self.expires.push(row.expires_at);
        self.tombstones.push(row.tombstone_until);
        self.statuses.push(row.status);
        self.headers.push(row.headers);
        self.bodies.push(row.body);
        self.resources.push(row.resource);
    }

    /// Adds the arrays, `$1`..`$16` in order.
    fn add_to(self, args: &mut PgArguments) -> Result<()> {
        for column in self.scope {
            add(args, column)?;
        }
        add(args, self.fingerprint_versions)?;
        add(args, self.fingerprints)?;
        add(args, self.canonical_bodies)?;
        add(args, self.tokens)?;
        add(args, self.nows)?;
        add(args, self.expires)?;
        add(args, self.tombstones)?;
        add(args, self.statuses)?;
        add(args, self.headers)?;
        add(args, self.bodies)?;
        add(args, self.resources)
    }
}

/// Claims the scope at the START of the host's transaction, before its business writes (see
/// [`Claim`]); without the claim's response, [`store_response`] adds it at the end of the same
/// transaction, so nobody ever sees the record without one. A concurrent request with the same
/// key waits on this insert until the transaction ends, and then finds the outcome: the first
/// request to reach its write wins, not the first to finish it. On a conflict, see
/// [`resolve_taken`].
pub async fn claim_completed(conn: &mut PgConnection, claim: &Claim<'_>) -> Result<Recorded> {
    const INSERT: &str = concat!(
        "WITH ",
        scope_lock!(write),
        ", claim AS (",
        insert_completed!(),
        " RETURNING 1) SELECT free, (SELECT count(*) FROM claim) > 0 FROM lock"
    );
    let mut args = PgArguments::default();
    claim.add_to(&mut args)?;
    let row = sqlx::query_with(INSERT, args).fetch_one(&mut *conn).await?;
    let (free, claimed): (bool, bool) = (row.try_get(0)?, row.try_get(1)?);
    match (free, claimed) {
        (_, true) => Ok(Recorded::Fresh),
        // In flight in another transaction: never wait on its uncommitted row.
        (false, _) => Ok(Recorded::Held),
        (true, false) => resolve_taken(conn, claim).await,
    }
}

/// What a claim that found its scope taken gets, in the same transaction: the row is
/// [`decide`]d, and an abandoned one (an expired lease, an ended tombstone: its owner committed
/// nothing) is taken over by a conditional update on its old token, gated on the scope's lock
/// ([`Recorded::TookOver`]); any other, or a scope another transaction holds, is
/// [`Recorded::Held`] (roll back and ask [`begin`]).
pub async fn resolve_taken(conn: &mut PgConnection, claim: &Claim<'_>) -> Result<Recorded> {
    const TAKE_OVER: &str = concat!(
        "WITH ",
        scope_lock!(write),
        " UPDATE idempotency_records SET state = 'completed', \
         fingerprint_version = $6, fingerprint = $7, canonical_body = $8, lease_token = $9, \
         lease_until = $10, expires_at = $11, tombstone_until = $12, response_status = $13, \
         response_headers = $14, response_body = $15, resource = $16 \
         WHERE (SELECT free FROM lock) AND principal = $1 AND application = $2 \
         AND method = $3 AND route = $4 AND key = $5 AND lease_token = $17 AND \
         ((state = 'in_progress' AND lease_until <= $18) OR tombstone_until <= $18)"
    );
    let Some(row) = read(conn, claim.scope).await? else {
        return Ok(Recorded::Held);
    };
    if decide(&row, claim.fingerprint, claim.canonical_body, claim.now) != Decision::TakeOver {
        return Ok(Recorded::Held);
    }
    let mut args = PgArguments::default();
    claim.add_to(&mut args)?;
    add(&mut args, row.lease_token.0)?;
    add(&mut args, claim.now)?;
    let done = sqlx::query_with(TAKE_OVER, args)
        .execute(&mut *conn)
        .await?;
    Ok(match done.rows_affected() {
        1 => Recorded::TookOver,
        _ => Recorded::Held,
    })
}

/// Stores `response` in the record [`claim_completed`] claimed for `token` without one, at the
/// end of the same transaction. It updates no indexed column, so PostgreSQL can make it a HOT
/// update. [`Error::Fenced`] when `token` does not hold the record.
pub async fn store_response(
    conn: &mut PgConnection,
    scope: &Scope,
    token: &LeaseToken,
    response: &StoredResponse,
) -> Result<()> {
    const SQL: &str = "UPDATE idempotency_records SET response_status = $7, \
         response_headers = $8, response_body = $9, resource = $10 \
         WHERE principal = $1 AND application = $2 AND method = $3 AND route = $4 AND key = $5 \
         AND state = 'completed' AND lease_token = $6";
    let done = bind(scope, SQL)
        .bind(token.0.clone())
        .bind(i32::from(response.status))
        .bind(columns::encode_headers(&response.headers))
        .bind(response.body.clone())
        .bind(response.resource.clone())
        .execute(&mut *conn)
        .await?;
    match done.rows_affected() {
        1 => Ok(()),
        _ => Err(Error::Fenced),
    }
}

/// Deletes the `in_progress` record `token` owns, for an outcome that is not final (validation
/// failure, 429, infrastructure 5xx). Whether there was one to delete.
pub async fn release(conn: &mut PgConnection, scope: &Scope, token: &LeaseToken) -> Result<bool> {
    const SQL: &str = "DELETE FROM idempotency_records \
         WHERE principal = $1 AND application = $2 AND method = $3 AND route = $4 AND key = $5 \
         AND state = 'in_progress' AND lease_token = $6";
    let done = bind(scope, SQL)
        .bind(token.0.clone())
        .execute(&mut *conn)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// One cleaning pass of at most `batch` rows per step: completed records past `expires_at`
/// become tombstones (response and request body dropped; scope, fingerprint, resource kept);
/// then tombstones past their end (those just made included), and abandoned `in_progress` rows
/// (lease and record both expired: nothing was committed) are deleted. Rows locked by a running
/// transaction are skipped. The number of rows changed.
pub async fn purge(conn: &mut PgConnection, now: DateTime<Utc>, batch: usize) -> Result<usize> {
    const PICK: &str = "SELECT ctid FROM idempotency_records WHERE";
    let strip = format!(
        "UPDATE idempotency_records SET state = 'tombstone', canonical_body = NULL, \
         response_status = NULL, response_headers = NULL, response_body = NULL \
         WHERE ctid = ANY(ARRAY({PICK} state = 'completed' AND expires_at <= $1 \
                                LIMIT $2 FOR UPDATE SKIP LOCKED))"
    );
    let delete = format!(
        "DELETE FROM idempotency_records \
         WHERE ctid = ANY(ARRAY({PICK} (state = 'tombstone' AND tombstone_until <= $1) \
                                OR (state = 'in_progress' AND expires_at <= $1 \
                                    AND lease_until <= $1) \
                                LIMIT $2 FOR UPDATE SKIP LOCKED))"
    );
    let batch = i64::try_from(batch).unwrap_or(i64::MAX);
    let mut changed = 0;
    for sql in [strip, delete] {
        let done = sqlx::query(&sql)
            .bind(now)
            .bind(batch)
            .execute(&mut *conn)
            .await?;
        changed += done.rows_affected() as usize;
    }
    Ok(changed)
}

/// The scope's row, decoded.
async fn read(conn: &mut PgConnection, scope: &Scope) -> Result<Option<record::Record>> {
    let sql = format!(
        "SELECT {} FROM idempotency_records WHERE {WHERE_SCOPE}",
        columns::SELECT
    );
    let mut q = sqlx::query_as::<_, Columns>(&sql);
    for value in scope_values(scope) {
        q = q.bind(value);
    }
    let row = q.fetch_optional(&mut *conn).await?;
    row.map(Columns::decode).transpose()
}

/// `sql` with the scope bound as `$1`..`$5` (no application is `''`).
fn bind(scope: &Scope, sql: &'static str) -> Query<'static, Postgres, PgArguments> {
    scope_values(scope)
        .into_iter()
        .fold(sqlx::query(sql), |q, value| q.bind(value))
}

/// Adds the scope's five values (no application is `''`).
fn add_scope(args: &mut PgArguments, scope: &Scope) -> Result<()> {
    add(args, scope.principal.as_str())?;
    add(args, scope.application_column())?;
    add(args, scope.method.as_str())?;
    add(args, scope.route.as_str())?;
    add(args, scope.key.as_str())
}

/// Adds one parameter value.
fn add<'q, T>(args: &mut PgArguments, value: T) -> Result<()>
where
    T: 'q + sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres>,
{
    args.add(value)
        .map_err(|e| Error::Postgres(sqlx::Error::Encode(e)))
}

fn scope_values(scope: &Scope) -> [String; 5] {
    [
        scope.principal.clone(),
        scope.application_column().to_owned(),
        scope.method.clone(),
        scope.route.clone(),
        scope.key.as_str().to_owned(),
    ]
}

/// Adds `scope`'s values to its five columns.
fn push_scope(columns: &mut [Vec<String>; 5], scope: &Scope) {
    for (column, value) in columns.iter_mut().zip(scope_values(scope)) {
        column.push(value);
    }
}

/// The scope's [`KeyStatus`] at `now`; `None` when the key is free.
pub async fn status(
    conn: &mut PgConnection,
    scope: &Scope,
    now: DateTime<Utc>,
) -> Result<Option<KeyStatus>> {
    let sql = format!(
        "SELECT {} FROM idempotency_records WHERE {WHERE_SCOPE}",
        status::SELECT
    );
    let mut q = sqlx::query_as::<
        _,
        (
            String,
            Option<String>,
            DateTime<Utc>,
            DateTime<Utc>,
            DateTime<Utc>,
            i32,
        ),
    >(&sql);
    for value in scope_values(scope) {
        q = q.bind(value);
    }
    let row = q.fetch_optional(&mut *conn).await?;
    Ok(row.and_then(
        |(state, resource, lease_until, expires_at, tombstone_until, version)| {
            let row = StatusRow {
                state,
                resource,
                lease_until,
                expires_at,
                tombstone_until,
                fingerprint_version: u16::try_from(version).unwrap_or(0),
            };
            KeyStatus::of(row, now)
        },
    ))
}

/// When the oldest claim still `in_progress` began (its lease's start), if there is one.
pub async fn oldest_in_progress(
    conn: &mut PgConnection,
    settings: &Settings,
) -> Result<Option<DateTime<Utc>>> {
    let until: Option<DateTime<Utc>> = sqlx::query_scalar(
        "SELECT min(lease_until) FROM idempotency_records WHERE state = 'in_progress'",
    )
    .fetch_one(&mut *conn)
    .await?;
    Ok(until.map(|u| status::lease_start(u, settings)))
}
