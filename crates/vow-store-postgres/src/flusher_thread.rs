//! The thread the group commits' flushers run on, with a runtime and a pool of their own.
//!
//! A batch is a few round trips (a read and an insert; with keys or replay guards also `BEGIN`,
//! more writes and `COMMIT`), and between two of them its flusher must run again to send the
//! next statement. On the process's shared runtime it then queued behind every ready request
//! handler and delivery task: with the cores busy, a batch's transaction was found idle waiting
//! for vow about twice as often as PostgreSQL was found working on it (BENCHMARKS.md, issue
//! 18's nineteenth part), and every request in it waited for that. On a thread of its own, a
//! flusher that wakes runs once the kernel gives its thread a core (the thread sleeps while
//! PostgreSQL works, so it is let in ahead of busy threads), and its connections' replies are
//! read by its own runtime's driver.

use std::sync::Arc;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;
use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// How many of `max_connections` the group commits' flushers get: one each at the default 16
/// (two for message creates, two for inbound claims), fewer in a smaller pool, at least one.
pub(crate) fn connections(max_connections: u32) -> u32 {
    (max_connections / 4).clamp(1, 4)
}

/// The flushers' runtime and pool. The thread ends once every clone is gone.
#[derive(Debug, Clone)]
pub(crate) struct FlusherThread {
    runtime: Handle,
    pool: PgPool,
    /// Dropped with the last clone, which ends the thread's runtime.
    _running: Arc<oneshot::Sender<()>>,
}

impl FlusherThread {
    /// Starts the thread, with a pool made by `pool` (lazily connecting with `options`) on its
    /// runtime.
    pub(crate) async fn start(
        pool: PgPoolOptions,
        options: PgConnectOptions,
    ) -> std::io::Result<Self> {
        let (started, up) = oneshot::channel();
        let (running, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("vow-group-commit".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = started.send(Err(e));
                        return;
                    }
                };
                // The pool's upkeep tasks, and the connections it opens, belong to this runtime.
                let pool = {
                    let _entered = runtime.enter();
                    pool.connect_lazy_with(options)
                };
                let _ = started.send(Ok((runtime.handle().clone(), pool)));
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })?;
        let (runtime, pool) = up
            .await
            .map_err(|_| std::io::Error::other("the group commit's thread stopped at start"))??;
        Ok(Self {
            runtime,
            pool,
            _running: Arc::new(running),
        })
    }

    /// The flushers' own pool.
    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Runs `flusher` on the thread.
    pub(crate) fn spawn(&self, flusher: impl std::future::Future<Output = ()> + Send + 'static) {
        self.runtime.spawn(flusher);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reports when it is dropped: when the runtime that holds it ends.
    struct Dropped(Option<oneshot::Sender<()>>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            if let Some(dropped) = self.0.take() {
                let _ = dropped.send(());
            }
        }
    }

    #[tokio::test]
    async fn flushers_run_on_a_thread_of_their_own_until_the_last_handle_is_gone() {
        let options = PgConnectOptions::new().host("127.0.0.1").port(1);
        let thread = FlusherThread::start(PgPoolOptions::new(), options)
            .await
            .unwrap();
        let (named, name) = oneshot::channel();
        thread.spawn(async move {
            let _ = named.send(std::thread::current().name().map(str::to_owned));
        });
        assert_eq!(name.await.unwrap().as_deref(), Some("vow-group-commit"));

        let (dropped, gone) = oneshot::channel();
        let (started, running) = oneshot::channel();
        thread.spawn(async move {
            let _guard = Dropped(Some(dropped));
            let _ = started.send(());
            std::future::pending::<()>().await;
        });
        running.await.unwrap();
        let clone = thread.clone();
        drop(thread);
        tokio::task::yield_now().await;
        drop(clone);
        let ended = tokio::time::timeout(std::time::Duration::from_secs(5), gone).await;
        assert!(ended.is_ok(), "the thread's runtime still runs its tasks");
    }

    #[test]
    fn the_group_commits_get_a_quarter_of_the_pool_from_one_to_four() {
        let given: Vec<u32> = [1, 2, 4, 7, 8, 16, 100].map(connections).into();
        assert_eq!(given, [1, 1, 1, 1, 2, 4, 4]);
    }
}
