//! The warm pool: sealed browsers made before they are asked for, each given to exactly one task
//! and then destroyed. A filler task keeps sessions ready (as many as `demand.rs` asks for now,
//! between the pool's minimum and maximum: more while tasks arrive, the minimum again after a
//! quiet window), replaces any older than `max_age`, and backs off (remembering why) when it
//! cannot make one. Taking checks that the
//! session still answers; a dead one is removed and the next (or a cold start) is used instead,
//! so the task never notices.
//!
//! A refill does not start, and a refill under way does not take its next step (container start,
//! runner, guide, Chromium launch), while a task waits for its first answer (a task that took a
//! session, or one started cold because the pool was empty): making a browser beside that first
//! page load competed with it for the CPU, and a model's thinking time after it is idle CPU the
//! refill can use instead. Here a task's "first answer" includes the command that follows it at
//! once, its first look at the page (`tool::TaskStart`). Chromium's launch, when such a task
//! arrives while it is under way, is frozen (`docker pause`) until the answer comes: even at the
//! lowest CPU weight, a launching Chromium slowed the running page load by 10–20%. Only that step
//! is frozen, and it runs through the session's runner alone: an exec starting in a frozen
//! container never finishes starting. A refill waits at most [`REFILL_WAIT_LIMIT`] before it
//! starts and as long again over its steps, frozen or not, so a slow first page never leaves the
//! pool empty for long.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::demand::Demand;
use crate::refill_wait::{REFILL_WAIT_LIMIT, Unanswered, Yield};
use crate::session::{Kind, Maker, Prepared};
use crate::sync::lock;

/// How long the filler waits after a failure, at first and at most.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Ready sessions and the task that keeps them ready.
pub(crate) struct Pool {
    shared: Arc<Shared>,
    filler: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    maker: Arc<Maker>,
    /// How many to hold, from the tasks seen.
    demand: Mutex<Demand>,
    /// Tasks that found a browser ready, and that did not.
    warm_claims: AtomicU64,
    cold_claims: AtomicU64,
    max_age: Duration,
    /// How long a warm container may live: waiting in the pool, then running a task.
    lifetime: Duration,
    /// The browser each session holds.
    kind: Kind,
    ready: Mutex<VecDeque<Prepared>>,
    /// Wakes the filler when a session is taken.
    taken: Notify,
    /// The first answers of tasks that took a session.
    unanswered: Unanswered,
    stop: CancellationToken,
    last_error: Mutex<Option<String>>,
}

impl Pool {
    /// Start filling: as many sessions as `demand` asks for, each replaced after `max_age`; a
    /// warm container exits by itself after `lifetime` even if nobody removes it (a killed owner).
    pub(crate) fn start(
        maker: Arc<Maker>,
        demand: Demand,
        max_age: Duration,
        lifetime: Duration,
        kind: Kind,
    ) -> Self {
        let stop = CancellationToken::new();
        let shared = Arc::new(Shared {
            maker,
            demand: Mutex::new(demand),
            warm_claims: AtomicU64::new(0),
            cold_claims: AtomicU64::new(0),
            max_age,
            lifetime,
            kind,
            ready: Mutex::new(VecDeque::new()),
            taken: Notify::new(),
            unanswered: Unanswered::new(stop.clone()),
            stop,
            last_error: Mutex::new(None),
        });
        let filler = tokio::spawn(fill(Arc::clone(&shared)));
        Self {
            shared,
            filler: Mutex::new(Some(filler)),
        }
    }

    /// A ready session that still answers, if there is one. Stale or dead ones met on the way
    /// are removed; the filler is woken to make more.
    pub(crate) async fn take(&self) -> Option<Prepared> {
        let taken = self.take_answering().await;
        let claims = if taken.is_some() {
            &self.shared.warm_claims
        } else {
            &self.shared.cold_claims
        };
        claims.fetch_add(1, Ordering::Relaxed);
        lock(&self.shared.demand).arrived(Instant::now(), taken.is_some());
        self.shared.taken.notify_one();
        taken
    }

    async fn take_answering(&self) -> Option<Prepared> {
        loop {
            let candidate = lock(&self.shared.ready).pop_front();
            let mut prepared = candidate?;
            let fresh = prepared.made_at.elapsed() < self.shared.max_age;
            if fresh && prepared.answers(&self.shared.maker).await {
                self.shared.unanswered.add(prepared.first_answer.clone());
                return Some(prepared);
            }
            if fresh {
                tracing::warn!(container = %prepared.name, "a warm session no longer answered; it is replaced");
            }
            self.shared.taken.notify_one();
            prepared.dispose(&self.shared.maker.unasked).await;
        }
    }

    /// A task that found the pool empty starts cold: the refill yields to its first answer too.
    /// Cancel the token at that answer (or when the task ends).
    pub(crate) fn expect_first_answer(&self, first_answer: CancellationToken) {
        self.shared.unanswered.add(first_answer);
    }

    /// Sessions ready now.
    pub(crate) fn ready_count(&self) -> usize {
        lock(&self.shared.ready).len()
    }

    /// Sessions the pool means to hold now.
    pub(crate) fn target(&self) -> usize {
        lock(&self.shared.demand).target(Instant::now())
    }

    /// Tasks that found a browser ready, and tasks that found the pool empty, so far.
    pub(crate) fn claims(&self) -> (u64, u64) {
        (
            self.shared.warm_claims.load(Ordering::Relaxed),
            self.shared.cold_claims.load(Ordering::Relaxed),
        )
    }

    /// How long refills have waited, or stayed frozen, for tasks' first answers so far.
    pub(crate) fn refill_held(&self) -> Duration {
        self.shared.unanswered.held()
    }

    /// Why the last attempt to make a session failed, if it did.
    pub(crate) fn last_error(&self) -> Option<String> {
        lock(&self.shared.last_error).clone()
    }

    /// Stop filling and remove every ready session.
    pub(crate) async fn shutdown(&self) {
        self.shared.stop.cancel();
        let filler = lock(&self.filler).take();
        if let Some(filler) = filler {
            // A session being made when the stop came is finished, then removed, by the filler.
            let _ = filler.await;
        }
        let ready: Vec<Prepared> = lock(&self.shared.ready).drain(..).collect();
        for prepared in ready {
            prepared.dispose(&self.shared.maker.unasked).await;
        }
    }
}

impl Drop for Pool {
    /// A pool dropped without [`Pool::shutdown`] (an error path of its owner) stops filling: its
    /// filler ends at its next step, removing a session it was making, and the ready sessions'
    /// own drops remove their containers.
    fn drop(&mut self) {
        self.shared.stop.cancel();
    }
}

/// Keep the pool full until stopped.
async fn fill(shared: Arc<Shared>) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let expired: Vec<Prepared> = {
            let mut ready = lock(&shared.ready);
            let (old, fresh): (VecDeque<Prepared>, VecDeque<Prepared>) = ready
                .drain(..)
                .partition(|prepared| prepared.made_at.elapsed() >= shared.max_age);
            *ready = fresh;
            old.into()
        };
        for prepared in expired {
            prepared.dispose(&shared.maker.unasked).await;
        }
        let target = lock(&shared.demand).target(Instant::now());
        // Demand fell: the oldest browsers past the target go (each would age out first).
        let surplus: Vec<Prepared> = {
            let mut ready = lock(&shared.ready);
            let extra = ready.len().saturating_sub(target);
            ready.drain(..extra).collect()
        };
        if !surplus.is_empty() {
            tracing::info!(
                target,
                removed = surplus.len(),
                "the warm pool shrinks with demand"
            );
        }
        for prepared in surplus {
            prepared.dispose(&shared.maker.unasked).await;
        }
        if lock(&shared.ready).len() < target {
            // Not raced against the stop: a half-made session would be undone on a task of its
            // own that a closing runtime may never run. Making one is bounded; then it goes.
            let patience = Yield::new(&shared.unanswered, Instant::now() + REFILL_WAIT_LIMIT);
            let began = Instant::now();
            let made = shared
                .maker
                .prepare(shared.lifetime, Some(patience), shared.kind)
                .await;
            if made.is_ok() {
                lock(&shared.demand).made(began.elapsed());
            }
            if shared.stop.is_cancelled() {
                if let Ok(prepared) = made {
                    prepared.dispose(&shared.maker.unasked).await;
                }
                return;
            }
            match made {
                Ok(prepared) => {
                    let name = prepared.name.clone();
                    let ready = {
                        let mut ready = lock(&shared.ready);
                        ready.push_back(prepared);
                        ready.len()
                    };
                    tracing::info!(container = %name, ready, target, kind = ?shared.kind, "a warm browser is ready");
                    *lock(&shared.last_error) = None;
                    backoff = FIRST_BACKOFF;
                }
                Err(error) => {
                    tracing::warn!(%error, "the warm pool could not make a session; retrying in {} s", backoff.as_secs());
                    *lock(&shared.last_error) = Some(error.to_string());
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {}
                        () = shared.stop.cancelled() => return,
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
            continue;
        }
        // Full: wait for a take, for the oldest to age out, for demand to fall, or for the stop.
        let oldest_age = lock(&shared.ready)
            .front()
            .map_or(Duration::ZERO, |prepared| prepared.made_at.elapsed());
        let aged_out = Instant::now() + shared.max_age.saturating_sub(oldest_age);
        let falls = lock(&shared.demand).next_fall(Instant::now());
        tokio::select! {
            () = shared.taken.notified() => {
                let until = Instant::now() + REFILL_WAIT_LIMIT;
                shared.unanswered.settled_until(until).await;
            }
            () = tokio::time::sleep_until(falls.map_or(aged_out, |falls| falls.min(aged_out))) => {}
            () = shared.stop.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A maker whose image does not exist: each attempt fails at once and the filler backs off,
    /// forever unless stopped. No daemon is needed (without one, each attempt fails the same way).
    fn failing_maker() -> Arc<Maker> {
        let docker = bollard::Docker::connect_with_unix_defaults().unwrap();
        let config = crate::DriverConfig {
            image: "airlock-no-such-image:0".to_owned(),
            ..crate::DriverConfig::default()
        };
        Arc::new(Maker {
            docker,
            config,
            owner: crate::owner::this_process(),
            user: (65534, 65534),
            failed_removals: Arc::default(),
            unasked: std::sync::atomic::AtomicU64::default(),
        })
    }

    #[tokio::test]
    async fn a_pool_dropped_without_shutdown_stops_filling() {
        let pool = Pool::start(
            failing_maker(),
            Demand::new(1, 1, Duration::from_secs(60)),
            Duration::from_secs(600),
            Duration::from_secs(60),
            Kind::AgentBrowser,
        );
        let filler = lock(&pool.filler).take().unwrap();
        drop(pool);
        tokio::time::timeout(Duration::from_secs(30), filler)
            .await
            .expect("the filler kept filling after its pool was dropped")
            .unwrap();
    }
}
