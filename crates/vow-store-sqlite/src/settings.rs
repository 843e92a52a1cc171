//! Process-wide settings: a key/value table (today only the admin token's hash).

use rusqlite::{Connection, OptionalExtension};

use crate::error::Result;

const ADMIN_TOKEN_HASH: &str = "admin_token_hash";

/// Stores `hash` unless a hash is stored already, and returns the one in force. Runs in the
/// writer, so two concurrent first starts agree on one hash.
pub(crate) fn init_admin_token_hash(conn: &Connection, hash: &str) -> Result<String> {
    conn.prepare_cached(
        "INSERT INTO settings (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
    )?
    .execute([ADMIN_TOKEN_HASH, hash])?;
    Ok(conn
        .prepare_cached("SELECT value FROM settings WHERE key = ?1")?
        .query_row([ADMIN_TOKEN_HASH], |r| r.get(0))?)
}

pub(crate) fn admin_token_hash(conn: &Connection) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT value FROM settings WHERE key = ?1")?
        .query_row([ADMIN_TOKEN_HASH], |r| r.get(0))
        .optional()?)
}
