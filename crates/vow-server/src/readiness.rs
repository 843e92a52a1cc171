//! What `/health/ready` knows that the store cannot tell: whether this process's workers are
//! running and whether it is shutting down.
//!
//! Each worker loop holds a [`Running`] mark while its task runs; the mark drops when the loop
//! returns or panics, so a dead worker makes the process unready instead of silently leaving
//! its share of the work undone. A process started without workers (an API-only node) has no
//! marks and is ready on the store alone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The workers this process runs and whether it is stopping.
#[derive(Debug, Default)]
pub struct Readiness {
    workers: Vec<Worker>,
    stopping: AtomicBool,
}

/// The kinds of worker a process may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerKind {
    /// The delivery workers (outbound attempts).
    Delivery,
    /// The inbound workers (forwarding received events).
    Inbound,
}

impl WorkerKind {
    /// Its name in `/health/ready`'s answer.
    pub fn name(self) -> &'static str {
        match self {
            Self::Delivery => "deliveryWorkers",
            Self::Inbound => "inboundWorkers",
        }
    }
}

/// One kind of worker this process started.
#[derive(Debug)]
struct Worker {
    kind: WorkerKind,
    running: Arc<AtomicBool>,
}

/// Held by a worker loop while it runs; dropping it (return or panic) marks it stopped.
#[derive(Debug)]
pub struct Running(Arc<AtomicBool>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Readiness {
    /// Readiness with the worker `kinds` (none running yet).
    pub fn with_workers(kinds: &[WorkerKind]) -> Self {
        let workers = kinds
            .iter()
            .map(|&kind| Worker {
                kind,
                running: Arc::default(),
            })
            .collect();
        Self {
            workers,
            stopping: AtomicBool::new(false),
        }
    }

    /// Marks the `kind` workers running until the returned mark is dropped.
    ///
    /// # Panics
    /// When `kind` is not one this readiness was made with.
    pub fn running(&self, kind: WorkerKind) -> Running {
        let worker = self
            .workers
            .iter()
            .find(|w| w.kind == kind)
            .unwrap_or_else(|| panic!("{kind:?} workers were not configured"));
        worker.running.store(true, Ordering::Release);
        Running(worker.running.clone())
    }

    /// From now on the process is not ready: it is shutting down.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    /// Whether the process is shutting down.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Each worker kind and whether it runs.
    pub fn workers(&self) -> impl Iterator<Item = (WorkerKind, bool)> + '_ {
        self.workers
            .iter()
            .map(|w| (w.kind, w.running.load(Ordering::Acquire)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_runs_while_its_mark_lives_even_when_its_task_panics() {
        use WorkerKind::{Delivery, Inbound};
        let readiness = Arc::new(Readiness::with_workers(&[Delivery, Inbound]));
        assert!(readiness.workers().all(|(_, running)| !running));
        let mark = readiness.running(Delivery);
        assert_eq!(
            readiness.workers().collect::<Vec<_>>(),
            [(Delivery, true), (Inbound, false)]
        );
        drop(mark);
        assert!(readiness.workers().all(|(_, running)| !running));

        let r = readiness.clone();
        let panicked = std::thread::spawn(move || {
            let _mark = r.running(Inbound);
            panic!("a worker dies");
        })
        .join();
        assert!(panicked.is_err());
        assert!(readiness.workers().all(|(_, running)| !running));
        assert!(!readiness.is_stopping());
        readiness.stop();
        assert!(readiness.is_stopping());
    }
}
