//! The read side: a few connections that read while the writer writes (WAL allows it).
//!
//! A read takes a permit from a [`Semaphore`] (one per connection), then runs on tokio's blocking
//! pool with a connection popped from the [`Mutex`]ed stack, and puts it back afterwards, even
//! when the read panics. Every reader is `query_only`, so a bug cannot write around the writer.
//! Statements are prepared through each connection's cache (`prepare_cached`).

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::Connection;
use tokio::sync::Semaphore;
use vow_store::{StoreError, StoreResult};

use crate::error::{Error, ReadTaskFailed};

/// The read connections.
#[derive(Debug)]
pub(crate) struct Readers {
    conns: Mutex<Vec<Connection>>,
    permits: Arc<Semaphore>,
}

impl Readers {
    /// Opens `n` read connections to the database at `path`.
    pub(crate) fn open(
        path: &Path,
        n: usize,
        configure: impl Fn(&Connection) -> rusqlite::Result<()>,
    ) -> rusqlite::Result<Arc<Self>> {
        let mut conns = Vec::with_capacity(n);
        for _ in 0..n {
            let conn = Connection::open(path)?;
            configure(&conn)?;
            conn.pragma_update(None, "query_only", true)?;
            conns.push(conn);
        }
        Ok(Arc::new(Readers {
            conns: Mutex::new(conns),
            permits: Arc::new(Semaphore::new(n)),
        }))
    }

    /// Runs `f` on a read connection.
    pub(crate) async fn run<T, F>(self: &Arc<Self>, f: F) -> StoreResult<T>
    where
        F: FnOnce(&Connection) -> Result<T, Error> + Send + 'static,
        T: Send + 'static,
    {
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|e| StoreError::Unavailable(Box::new(e)))?;
        let this = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let lease = Lease::take(&this)?;
            f(lease.conn()).map_err(Error::into_store)
        })
        .await
        .map_err(|e| StoreError::Backend(Box::new(ReadTaskFailed(e))))?
    }
}

/// A connection out of the stack; goes back on drop.
struct Lease<'a> {
    readers: &'a Readers,
    conn: Option<Connection>,
}

impl<'a> Lease<'a> {
    fn take(readers: &'a Readers) -> StoreResult<Self> {
        let conn = readers
            .conns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        match conn {
            Some(conn) => Ok(Lease {
                readers,
                conn: Some(conn),
            }),
            // Cannot happen while permits match connections; report rather than panic.
            None => Err(StoreError::Backend(
                "no read connection free despite a permit".into(),
            )),
        }
    }

    fn conn(&self) -> &Connection {
        self.conn
            .as_ref()
            .expect("a lease holds its connection until dropped")
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.readers
                .conns
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(conn);
        }
    }
}
