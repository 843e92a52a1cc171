//! Browser sessions and app-portal tokens: who may use the console or one application's portal,
//! until when.
//!
//! A session is stored by the SHA-256 of its secret (the cookie or bearer value the client
//! holds), never the secret itself, so a copy of the database opens nothing. Each carries the
//! CSRF token its forms must echo. A portal session may be read-only (Svix's `readOnly`): its
//! token reads its application but changes nothing. An expired session reads as absent;
//! retention purges it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use vow_core::AppId;

use crate::StoreResult;

/// What a session may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionScope {
    /// The operator console: everything, as the admin token.
    Console,
    /// One application's portal (and its API routes), for that application's customer.
    Portal(AppId),
}

impl SessionScope {
    /// The stored `kind` column.
    pub fn kind(&self) -> &'static str {
        match self {
            SessionScope::Console => "console",
            SessionScope::Portal(_) => "portal",
        }
    }

    /// The stored `app_id` column (`None` for the console).
    pub fn app_id(&self) -> Option<AppId> {
        match self {
            SessionScope::Console => None,
            SessionScope::Portal(app) => Some(*app),
        }
    }

    /// The scope a stored (`kind`, `app_id`) pair describes, if it is one.
    pub fn from_columns(kind: &str, app_id: Option<AppId>) -> Option<Self> {
        match (kind, app_id) {
            ("console", None) => Some(SessionScope::Console),
            ("portal", Some(app)) => Some(SessionScope::Portal(app)),
            _ => None,
        }
    }
}

/// One session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The SHA-256 of the session's secret, hex.
    pub id_hash: String,
    /// What it may reach.
    pub scope: SessionScope,
    /// The token every state-changing form of this session must carry.
    pub csrf: String,
    /// When it began.
    pub created_at: DateTime<Utc>,
    /// When it ends.
    pub expires_at: DateTime<Utc>,
    /// Whether it may only read (a portal session; a console session never is).
    pub read_only: bool,
}

/// Sessions of the console and the app portal.
#[async_trait]
pub trait Sessions: Send + Sync + 'static {
    /// Stores a new session. For a portal session, `NotFound("application")` when its
    /// application does not exist. A read-only console session is refused (`Backend`: the
    /// schema does not allow it).
    async fn create_session(&self, session: Session) -> StoreResult<Session>;

    /// The session whose secret hashes to `id_hash`, if it exists and has not expired at `now`.
    async fn session(&self, id_hash: &str, now: DateTime<Utc>) -> StoreResult<Option<Session>>;

    /// Ends a session at once; whether there was one.
    async fn end_session(&self, id_hash: &str) -> StoreResult<bool>;

    /// Deletes up to `batch` sessions that expired before `now`; how many.
    async fn purge_sessions(&self, now: DateTime<Utc>, batch: usize) -> StoreResult<usize>;
}
