//! WAL checkpoints off the writer's path.
//!
//! SQLite copies WAL frames back into the database file in a checkpoint, which by default runs
//! inside the commit that crosses 1000 WAL pages: on the one writer thread, stalling every write
//! queued behind it (a fifth of the writer's time under delivery load). This thread runs a
//! `PASSIVE` checkpoint every [`EVERY`] on its own connection, concurrently with the writer, so
//! the writer's own automatic checkpoint (raised to [`WRITER_AUTOCHECKPOINT_PAGES`]) is rare and
//! finds little left to copy. The writer keeps that automatic checkpoint: it runs between two of
//! its transactions, so it can finish the WAL and let the next transaction start it over (a
//! concurrent checkpoint never catches up with a busy writer, and the WAL would only grow).

use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::Duration;

use rusqlite::Connection;

/// The writer's automatic checkpoint threshold, in WAL pages (SQLite's default is 1000). Higher,
/// so that under load the writer rarely checkpoints itself and finds little left to copy when it
/// does; the WAL stays below about 40 MiB.
pub(crate) const WRITER_AUTOCHECKPOINT_PAGES: i64 = 10_000;

/// How often the thread checkpoints.
const EVERY: Duration = Duration::from_millis(50);

/// The running checkpoint thread; dropping it stops the thread.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    _stop: Sender<()>,
}

impl Checkpointer {
    /// Starts checkpointing the database at `path` on a connection set up by `configure`.
    pub(crate) fn spawn(
        path: &Path,
        configure: fn(&Connection) -> rusqlite::Result<()>,
    ) -> std::io::Result<Self> {
        let conn = Connection::open(path)
            .and_then(|c| configure(&c).map(|()| c))
            .map_err(std::io::Error::other)?;
        let (stop, stopped) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("vow-sqlite-ckpt".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(EVERY) {
                    // PASSIVE never waits for readers or the writer; a busy or failed round
                    // leaves the work to the next one (or to the writer's own checkpoint).
                    if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                    {
                        tracing::debug!(error = %e, "background WAL checkpoint failed");
                    }
                }
            })?;
        Ok(Self { _stop: stop })
    }
}
