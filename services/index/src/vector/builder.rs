//! The background thread that builds HNSW graphs, so that neither `open`
//! nor `commit` waits for one (tens of seconds for tens of thousands of
//! 384-dimension vectors on two cores).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, RwLock, Weak};
use std::thread;

use super::set::{VectorSet, build_graph};
use crate::{HnswParams, IndexError};

type Job = Weak<RwLock<VectorSet>>;

/// Handle to the builder thread; dropping it cancels outstanding builds.
pub(crate) struct GraphBuilder {
    jobs: Mutex<Option<Sender<Job>>>,
    state: Arc<State>,
}

struct State {
    /// Jobs queued or running.
    pending: Mutex<usize>,
    idle: Condvar,
    cancel: AtomicBool,
}

impl GraphBuilder {
    pub(crate) fn start(params: HnswParams) -> Result<Self, IndexError> {
        let (tx, rx) = mpsc::channel();
        let state = Arc::new(State {
            pending: Mutex::new(0),
            idle: Condvar::new(),
            cancel: AtomicBool::new(false),
        });
        let worker = Arc::clone(&state);
        thread::Builder::new()
            .name("index-graphs".into())
            .spawn(move || run(&rx, &worker, &params))
            .map_err(IndexError::Thread)?;
        Ok(GraphBuilder {
            jobs: Mutex::new(Some(tx)),
            state,
        })
    }

    /// Queues a graph build for `set` (which must want one).
    pub(crate) fn request(&self, set: &Arc<RwLock<VectorSet>>) {
        *lock(&self.state.pending) += 1;
        let sent = lock(&self.jobs)
            .as_ref()
            .is_some_and(|tx| tx.send(Arc::downgrade(set)).is_ok());
        if !sent {
            // The thread is gone: the set stays exact, which is still correct.
            tracing::warn!("graph builder unavailable; sub-index stays on exact search");
            self.state.finish();
        }
    }

    /// Blocks until every queued build has finished.
    pub(crate) fn wait_idle(&self) {
        let mut pending = lock(&self.state.pending);
        while *pending > 0 {
            pending = match self.state.idle.wait(pending) {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            };
        }
    }
}

impl Drop for GraphBuilder {
    fn drop(&mut self) {
        self.state.cancel.store(true, Ordering::Relaxed);
        lock(&self.jobs).take();
    }
}

impl State {
    fn finish(&self) {
        let mut pending = lock(&self.pending);
        *pending = pending.saturating_sub(1);
        if *pending == 0 {
            self.idle.notify_all();
        }
    }
}

fn run(jobs: &Receiver<Job>, state: &State, params: &HnswParams) {
    while let Ok(job) = jobs.recv() {
        if !state.cancel.load(Ordering::Relaxed)
            && let Some(set) = job.upgrade()
        {
            let built = catch_unwind(AssertUnwindSafe(|| build_into(&set, params, &state.cancel)));
            if built.is_err() {
                tracing::error!("graph build panicked; sub-index stays on exact search");
            }
        }
        state.finish();
    }
}

/// Snapshot, build off-lock, install; again if a compaction intervened.
fn build_into(set: &RwLock<VectorSet>, params: &HnswParams, cancel: &AtomicBool) {
    loop {
        let Some(snapshot) = set.read().ok().and_then(|set| set.snapshot()) else {
            return;
        };
        let Some(graph) = build_graph(&snapshot, params, cancel) else {
            return;
        };
        let Ok(mut set) = set.write() else {
            return;
        };
        if set.install(&snapshot, graph) || !set.wants_graph() {
            return;
        }
    }
}

/// Locks, ignoring poison: the guarded values here are replaced whole.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
