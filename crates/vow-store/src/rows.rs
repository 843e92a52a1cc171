//! Row mapping, written once for every backend: how a stored row reads back as a model.
//!
//! A backend implements [`Columns`] once for its result row (SQLite's `rusqlite::Row`,
//! PostgreSQL's `PgRow`): the handful of typed reads the models need, by position. How each
//! store lays a value out (SQLite: times as INTEGER microseconds, lists and maps as JSON text;
//! PostgreSQL: `timestamptz`, `text[]`, `jsonb`) lives in those two impls only.
//!
//! Each model implements [`FromColumns`] here, against that trait: its `COLUMNS` (the select list
//! both backends use, in order) and how a [`Reader`] walks them. A query selects
//! `{COLUMNS}` first, then any columns of its own, which its caller reads on from
//! [`Reader::at`]. [`read`] checks, in debug builds, that a model read exactly its columns.
//!
//! A value that does not convert (an id without its prefix, a negative counter, an unknown
//! state) is corrupt data or a schema this binary does not know: the backend's
//! [`Columns::corrupt`] error, naming the column, which the backend reports as
//! [`crate::StoreError::Backend`].

mod dead_letters;
mod inbound;
mod outbound;
mod overview;
mod read;
mod session;

pub use inbound::{destination_key, event_with_content, PULL, SOURCE_FIELDS};
pub use outbound::{delivery_state, DELIVERY_STATE_COLUMNS};
pub use read::{read, width, Columns, FromColumns, Reader};
