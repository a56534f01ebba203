//! Admission: at most `max_concurrent_tasks` tasks run; the next ones wait in a bounded queue for
//! at most `queue_timeout`, then are refused with the capacity named. Never an unbounded queue.
//! Draining (SIGTERM) refuses new tasks at once and wakes the waiting ones with the same answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use airlock_worker::{CancellationToken, TaskResult};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use crate::metrics::Metrics;

/// Why a task was not admitted. Each says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Every slot is busy and the queue is full (or queueing is off).
    #[error(
        "this server is at capacity: all {capacity} task slots are busy (max_concurrent_tasks) and {queued} tasks wait already (max_queued_tasks); try again shortly or another server"
    )]
    Full {
        /// Slots.
        capacity: usize,
        /// Tasks waiting.
        queued: usize,
    },
    /// The task waited `queue_timeout` without a slot.
    #[error(
        "no task slot came free within {seconds} s (queue_timeout; all {capacity} slots of max_concurrent_tasks were busy); try again shortly or another server"
    )]
    Waited {
        /// The wait.
        seconds: u64,
        /// Slots.
        capacity: usize,
    },
    /// The server is shutting down.
    #[error("this server is shutting down and takes no new tasks; send it to another server")]
    Draining,
    /// The caller went away while it waited.
    #[error("the task was cancelled while it waited for a slot")]
    Cancelled,
}

impl Refusal {
    /// A short stable word, for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Full { .. } => "full",
            Self::Waited { .. } => "queue_timeout",
            Self::Draining => "draining",
            Self::Cancelled => "cancelled",
        }
    }
}

/// Admission control and metrics, shared by every transport of one server.
pub struct Admission {
    slots: Arc<Semaphore>,
    capacity: usize,
    max_queued: usize,
    queued: AtomicUsize,
    queue_timeout: Duration,
    /// Cancelled when draining starts.
    pub draining: CancellationToken,
    /// Told whenever a slot is given back, so draining can wait for the last one.
    freed: Notify,
    /// What the server counts, for `/metrics`.
    pub metrics: Metrics,
}

/// A running task's slot; the running gauge follows it.
pub struct Slot {
    permit: Option<OwnedSemaphorePermit>,
    admission: Arc<Admission>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        // The permit goes back before anyone is told, so a waiter sees the slot free.
        drop(self.permit.take());
        self.admission.metrics.running.dec();
        self.admission.freed.notify_waiters();
    }
}

/// Counts a waiting task out of the queue however the wait ends.
struct Waiting<'a>(&'a Admission);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.queued.fetch_sub(1, Ordering::SeqCst);
        self.0.metrics.queued.dec();
    }
}

impl Admission {
    /// `capacity` slots, and a queue of `max_queued` that waits at most `queue_timeout`.
    #[must_use]
    pub fn new(capacity: usize, max_queued: usize, queue_timeout: Duration) -> Arc<Self> {
        let metrics = Metrics::new(capacity);
        metrics.ready.set(1);
        Arc::new(Self {
            slots: Arc::new(Semaphore::new(capacity)),
            capacity,
            max_queued,
            queued: AtomicUsize::new(0),
            queue_timeout,
            draining: CancellationToken::new(),
            freed: Notify::new(),
            metrics,
        })
    }

    /// Wait for a slot within the queue's bounds; `cancel` ends the wait.
    pub async fn admit(self: &Arc<Self>, cancel: &CancellationToken) -> Result<Slot, Refusal> {
        let admitted = self.try_admit(cancel).await;
        match &admitted {
            Ok(_) => {
                self.metrics.running.inc();
            }
            Err(refusal) => self.metrics.refused(refusal.reason()),
        }
        admitted.map(|permit| Slot {
            permit: Some(permit),
            admission: Arc::clone(self),
        })
    }

    async fn try_admit(&self, cancel: &CancellationToken) -> Result<OwnedSemaphorePermit, Refusal> {
        if self.draining.is_cancelled() {
            return Err(Refusal::Draining);
        }
        if let Ok(permit) = Arc::clone(&self.slots).try_acquire_owned() {
            return Ok(permit);
        }
        let full = || Refusal::Full {
            capacity: self.capacity,
            queued: self.queued.load(Ordering::SeqCst),
        };
        if self.queue_timeout.is_zero() {
            return Err(full());
        }
        // Take a place in the queue, or refuse if there is none.
        if self
            .queued
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |queued| {
                (queued < self.max_queued).then_some(queued + 1)
            })
            .is_err()
        {
            return Err(full());
        }
        self.metrics.queued.inc();
        let _waiting = Waiting(self);
        tokio::select! {
            permit = Arc::clone(&self.slots).acquire_owned() => {
                // The semaphore is never closed.
                permit.map_err(|_| Refusal::Draining)
            }
            () = tokio::time::sleep(self.queue_timeout) => Err(Refusal::Waited {
                seconds: self.queue_timeout.as_secs(),
                capacity: self.capacity,
            }),
            () = self.draining.cancelled() => Err(Refusal::Draining),
            () = cancel.cancelled() => Err(Refusal::Cancelled),
        }
    }

    /// Count a task that ran.
    pub fn finished(&self, result: &TaskResult) {
        self.metrics.finished(result);
    }

    /// Whether a new task could start now (not draining, a slot or a queue place free).
    pub fn has_room(&self) -> bool {
        self.refusal_now().is_none()
    }

    /// For a caller who will not wait: the refusal a task would get now (counted), or `None`
    /// when it has a slot or a queue place.
    pub fn turn_away(&self) -> Option<Refusal> {
        let refusal = self.refusal_now()?;
        self.metrics.refused(refusal.reason());
        Some(refusal)
    }

    fn refusal_now(&self) -> Option<Refusal> {
        if self.draining.is_cancelled() {
            return Some(Refusal::Draining);
        }
        let queued = self.queued.load(Ordering::SeqCst);
        let room = self.slots.available_permits() > 0
            || (!self.queue_timeout.is_zero() && queued < self.max_queued);
        (!room).then_some(Refusal::Full {
            capacity: self.capacity,
            queued,
        })
    }

    /// Stop taking tasks: new ones and waiting ones are refused.
    pub fn drain(&self) {
        self.metrics.ready.set(0);
        self.draining.cancel();
    }

    /// Resolves when no task holds a slot.
    pub async fn idle(&self) {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            // Registered before the check, so a slot given back in between still wakes us.
            freed.as_mut().enable();
            if self.running() == 0 {
                return;
            }
            freed.await;
        }
    }

    /// The most tasks (and CDP leases) that run at once.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Tasks running now.
    pub fn running(&self) -> usize {
        self.capacity - self.slots.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_full_server_queues_within_bounds_then_refuses_naming_the_capacity() {
        let admission = Admission::new(1, 1, Duration::from_secs(30));
        let never = CancellationToken::new();
        let first = admission.admit(&never).await.unwrap();
        assert_eq!(admission.running(), 1);
        // The second waits; the third finds the queue full.
        let waiting = tokio::spawn({
            let admission = Arc::clone(&admission);
            async move { admission.admit(&CancellationToken::new()).await.map(|_| ()) }
        });
        tokio::task::yield_now().await;
        let third = admission.admit(&never).await.map(|_| ()).unwrap_err();
        assert_eq!(
            third,
            Refusal::Full {
                capacity: 1,
                queued: 1
            }
        );
        assert!(third.to_string().contains("max_concurrent_tasks"));
        // The waiting one times out at queue_timeout.
        let waited = waiting.await.unwrap().unwrap_err();
        assert_eq!(
            waited,
            Refusal::Waited {
                seconds: 30,
                capacity: 1
            }
        );
        drop(first);
        assert!(
            admission.admit(&never).await.is_ok(),
            "a freed slot is taken"
        );
        let text = admission.metrics.encode();
        assert!(
            text.contains("airlock_tasks_refused_total{reason=\"full\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("airlock_tasks_refused_total{reason=\"queue_timeout\"} 1"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_waiting_task_gets_the_freed_slot() {
        let admission = Admission::new(1, 4, Duration::from_secs(30));
        let first = admission.admit(&CancellationToken::new()).await.unwrap();
        let waiting = tokio::spawn({
            let admission = Arc::clone(&admission);
            async move { admission.admit(&CancellationToken::new()).await.is_ok() }
        });
        drop(first);
        assert!(waiting.await.unwrap());
    }

    #[tokio::test]
    async fn idle_resolves_when_the_last_slot_is_given_back() {
        let admission = Admission::new(2, 0, Duration::ZERO);
        let first = admission.admit(&CancellationToken::new()).await.unwrap();
        let second = admission.admit(&CancellationToken::new()).await.unwrap();
        let waiting = tokio::spawn({
            let admission = Arc::clone(&admission);
            async move { admission.idle().await }
        });
        drop(first);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "idle while a task still ran");
        drop(second);
        waiting.await.unwrap();
    }

    #[tokio::test]
    async fn with_no_queue_a_busy_server_refuses_at_once() {
        let admission = Admission::new(1, 4, Duration::ZERO);
        let _first = admission.admit(&CancellationToken::new()).await.unwrap();
        let refused = admission
            .admit(&CancellationToken::new())
            .await
            .map(|_| ())
            .unwrap_err();
        assert!(matches!(refused, Refusal::Full { .. }));
        assert!(!admission.has_room());
    }

    #[tokio::test]
    async fn draining_refuses_new_tasks_and_wakes_waiting_ones() {
        let admission = Admission::new(1, 4, Duration::from_secs(3600));
        let _first = admission.admit(&CancellationToken::new()).await.unwrap();
        let waiting = tokio::spawn({
            let admission = Arc::clone(&admission);
            async move { admission.admit(&CancellationToken::new()).await.map(|_| ()) }
        });
        tokio::task::yield_now().await;
        admission.drain();
        assert_eq!(waiting.await.unwrap().unwrap_err(), Refusal::Draining);
        assert_eq!(
            admission
                .admit(&CancellationToken::new())
                .await
                .map(|_| ())
                .unwrap_err(),
            Refusal::Draining
        );
        assert!(!admission.has_room());
    }
}
