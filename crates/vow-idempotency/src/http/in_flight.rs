//! The keyed requests running on this node right now, by scope: a duplicate of one of them
//! learns "in flight" here, before it touches the store, and a `Prefer: wait` duplicate is woken
//! when the first one finishes instead of polling the store.
//!
//! A request [`InFlight::enter`]s its scope before it runs; the [`Running`] guard it gets
//! leaves (and wakes every waiter) when the request's answer is decided, however it ends (a
//! panic or a dropped task included). One registry per service (its state holds it, and hands it
//! to [`super::flow::run`]): no global state. Its cost on the hot path is one short mutex
//! section and a map insert and remove.
//!
//! The registry only says that a request with the scope is running here; the store's record
//! still decides ownership and answers. On SQLite it is what keeps a duplicate out of the one
//! writer's queue, which a blocked first write holds up; across nodes (PostgreSQL) the store's
//! scope lock says the same (`crate::postgres`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::record::Scope;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The scopes of the keyed requests running on this node.
#[derive(Debug, Default)]
pub struct InFlight {
    running: Mutex<HashMap<Scope, CancellationToken>>,
}

/// What [`InFlight::enter`] found.
#[derive(Debug)]
pub enum Entered {
    /// The scope was free here: this request runs, and leaves when the guard drops.
    Running(Running),
    /// Another request with the scope runs here; [`Busy::finished_by`] waits for it.
    Busy(Busy),
}

/// The guard of a running request: dropping it leaves the registry and wakes the waiters.
#[derive(Debug)]
pub struct Running {
    registry: Arc<InFlight>,
    scope: Scope,
    done: CancellationToken,
}

/// Another request with the same scope, running on this node.
#[derive(Debug)]
pub struct Busy {
    done: CancellationToken,
}

impl InFlight {
    /// Enters `scope`, or says that another request with it is running here.
    pub fn enter(self: &Arc<Self>, scope: &Scope) -> Entered {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(done) = running.get(scope) {
            return Entered::Busy(Busy { done: done.clone() });
        }
        let done = CancellationToken::new();
        running.insert(scope.clone(), done.clone());
        Entered::Running(Running {
            registry: Arc::clone(self),
            scope: scope.clone(),
            done,
        })
    }

    /// Whether no keyed request runs here (for the tests: nothing outside reads it).
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }
}

impl Busy {
    /// Waits, holding nothing, until the other request finishes or `deadline` passes: whether it
    /// finished.
    pub async fn finished_by(&self, deadline: Instant) -> bool {
        tokio::time::timeout_at(deadline, self.done.cancelled())
            .await
            .is_ok()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut running = self
            .registry
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        running.remove(&self.scope);
        drop(running);
        self.done.cancel();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn scope(key: &str) -> Scope {
        Scope {
            principal: "admin".into(),
            application: Some("app_1".into()),
            method: "POST".into(),
            route: "/api/v1/app/{app_id}/msg".into(),
            key: crate::IdempotencyKey::parse(key).unwrap(),
        }
    }

    #[tokio::test]
    async fn a_duplicate_is_busy_until_the_first_request_leaves_and_is_woken_then() {
        let registry = Arc::new(InFlight::default());
        let Entered::Running(first) = registry.enter(&scope("k")) else {
            panic!("the scope was free")
        };
        assert!(matches!(
            registry.enter(&scope("other")),
            Entered::Running(_)
        ));
        let Entered::Busy(busy) = registry.enter(&scope("k")) else {
            panic!("the scope is running")
        };
        let soon = Instant::now() + Duration::from_millis(10);
        assert!(
            !busy.finished_by(soon).await,
            "still running at the deadline"
        );
        let waiter = tokio::spawn(async move {
            busy.finished_by(Instant::now() + Duration::from_secs(60))
                .await
        });
        tokio::task::yield_now().await;
        drop(first);
        assert!(waiter.await.unwrap(), "woken when the first one left");
        assert!(registry.is_empty());
        assert!(matches!(registry.enter(&scope("k")), Entered::Running(_)));
    }
}
