//! A record's columns as both backends store them, and their decoding into a [`Record`]: the
//! fingerprint as its version and hex digest, the headers as a JSON array of `[name, value]`
//! pairs, the body as bytes. Only the time columns differ (SQLite: integer microseconds,
//! PostgreSQL: `timestamptz`); each backend converts them before building a [`Columns`].

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::record::{LeaseToken, Record, State, StoredResponse};
use crate::Fingerprint;

/// The columns [`Columns`] reads, in order.
pub(crate) const SELECT: &str = "state, fingerprint_version, fingerprint, canonical_body, \
     lease_token, lease_until, response_status, response_headers, response_body, resource, \
     expires_at, tombstone_until";

/// One row, undecoded.
#[cfg_attr(feature = "postgres", derive(sqlx::FromRow))]
pub(crate) struct Columns {
    pub state: String,
    pub fingerprint_version: i32,
    pub fingerprint: String,
    pub canonical_body: Option<String>,
    pub lease_token: String,
    pub lease_until: DateTime<Utc>,
    pub response_status: Option<i32>,
    pub response_headers: Option<String>,
    pub response_body: Option<Vec<u8>>,
    pub resource: Option<String>,
    pub expires_at: DateTime<Utc>,
    pub tombstone_until: DateTime<Utc>,
}

impl Columns {
    /// The record, or [`Error::Corrupt`] naming the column that does not decode.
    pub(crate) fn decode(self) -> Result<Record> {
        let state = State::parse(&self.state).ok_or(Error::Corrupt("state"))?;
        let digest = hex::decode(&self.fingerprint)
            .ok()
            .and_then(|d| <[u8; 32]>::try_from(d).ok())
            .ok_or(Error::Corrupt("fingerprint"))?;
        let version = u16::try_from(self.fingerprint_version)
            .map_err(|_| Error::Corrupt("fingerprint_version"))?;
        let response = match (state, self.response_status) {
            (State::Completed, Some(status)) => Some(StoredResponse {
                status: u16::try_from(status).map_err(|_| Error::Corrupt("response_status"))?,
                headers: decode_headers(self.response_headers.as_deref())?,
                body: self.response_body.unwrap_or_default(),
                resource: self.resource.clone(),
            }),
            _ => None,
        };
        Ok(Record {
            state,
            fingerprint: Fingerprint { version, digest },
            canonical_body: self.canonical_body,
            lease_token: LeaseToken(self.lease_token),
            lease_until: self.lease_until,
            response,
            resource: self.resource,
            expires_at: self.expires_at,
            tombstone_until: self.tombstone_until,
        })
    }
}

/// The headers column's value.
pub(crate) fn encode_headers(headers: &[(String, String)]) -> String {
    serde_json::to_string(headers).unwrap_or_else(|_| "[]".into())
}

fn decode_headers(text: Option<&str>) -> Result<Vec<(String, String)>> {
    match text {
        None => Ok(Vec::new()),
        Some(t) => serde_json::from_str(t).map_err(|_| Error::Corrupt("response_headers")),
    }
}
