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
//!
//! A task that arrives while a refill is under way and finds the pool empty takes that refill
//! over instead of starting cold: the refill stops yielding (a cold start yields to nobody
//! either) and the task waits for it. Starting its own browser beside the refill would do the
//! same work twice on the same cores, and the refill is further along.

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
    /// Tasks that found a browser ready, that took over a refill, and that started cold.
    warm_claims: AtomicU64,
    taken_over_claims: AtomicU64,
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
    /// The refill under way, if one is and nobody has taken it over: cancelled by the task that
    /// takes it over, which removes it from here.
    refilling: Mutex<Option<UnderWay>>,
    /// Refills begun so far, which numbers them.
    refills: AtomicU64,
    /// Told when a refill under way ends, with a session made or not.
    refilled: Notify,
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
            taken_over_claims: AtomicU64::new(0),
            cold_claims: AtomicU64::new(0),
            max_age,
            lifetime,
            kind,
            ready: Mutex::new(VecDeque::new()),
            taken: Notify::new(),
            unanswered: Unanswered::new(stop.clone()),
            refilling: Mutex::new(None),
            refills: AtomicU64::new(0),
            refilled: Notify::new(),
            stop,
            last_error: Mutex::new(None),
        });
        let filler = tokio::spawn(fill(Arc::clone(&shared)));
        Self {
            shared,
            filler: Mutex::new(Some(filler)),
        }
    }

    /// A ready session that still answers, if there is one, or else the one a refill under way
    /// is making. Stale or dead ones met on the way are removed; the filler is woken to make more.
    pub(crate) async fn take(&self) -> Option<Prepared> {
        // Only a refill under way when the task arrived is worth taking over: one begun since
        // (after a dead session found on the way) is no further along than a cold start.
        let under_way = lock(&self.shared.refilling)
            .as_ref()
            .map(|refill| refill.number);
        let mut taken = self.take_answering().await;
        let ready = taken.is_some();
        if let (false, Some(number)) = (ready, under_way) {
            taken = self.take_over_refill(number).await;
        }
        let claims = match (ready, taken.is_some()) {
            (true, _) => &self.shared.warm_claims,
            (false, true) => &self.shared.taken_over_claims,
            (false, false) => &self.shared.cold_claims,
        };
        claims.fetch_add(1, Ordering::Relaxed);
        // A take-over found the pool empty too: the pool was that much too small.
        lock(&self.shared.demand).arrived(Instant::now(), ready);
        self.shared.taken.notify_one();
        taken
    }

    /// The session of refill `number`, which stops yielding to other tasks' first answers and
    /// is waited for (its steps are bounded); `None` when it has ended without a session left
    /// for this task, another task has already taken it over (one taker per refill, so a burst's
    /// later tasks start cold at once rather than after it), it failed, or another task took
    /// what it made.
    async fn take_over_refill(&self, number: u64) -> Option<Prepared> {
        let refilled = self.shared.refilled.notified();
        tokio::pin!(refilled);
        // Registered before the look, so a refill ending between the two is not missed.
        refilled.as_mut().enable();
        let refill = {
            let mut refilling = lock(&self.shared.refilling);
            match refilling.take() {
                Some(refill) if refill.number == number => Some(refill),
                other => {
                    *refilling = other;
                    None
                }
            }
        };
        let Some(refill) = refill else {
            // It ended: perhaps with a session since the pool was found empty.
            return self.take_answering().await;
        };
        refill.taken_over.cancel();
        tokio::select! {
            () = refilled => {}
            () = self.shared.stop.cancelled() => return None,
        }
        self.take_answering().await
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

    /// How tasks have started so far.
    pub(crate) fn claims(&self) -> PoolClaims {
        PoolClaims {
            warm: self.shared.warm_claims.load(Ordering::Relaxed),
            taken_over: self.shared.taken_over_claims.load(Ordering::Relaxed),
            cold: self.shared.cold_claims.load(Ordering::Relaxed),
        }
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

/// How the tasks that asked a pool for a session started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolClaims {
    /// With a session that was ready.
    pub warm: u64,
    /// With the session a refill under way was making, when none was ready.
    pub taken_over: u64,
    /// Cold: no session ready and no refill under way (or it failed).
    pub cold: u64,
}

/// A refill under way that no task has taken over.
struct UnderWay {
    number: u64,
    taken_over: CancellationToken,
}

/// Marks a refill under way until dropped, then tells tasks waiting to take it over that it
/// ended (after what it made, if anything, is in the ready queue).
struct Refilling<'a> {
    shared: &'a Shared,
    taken_over: CancellationToken,
}

impl<'a> Refilling<'a> {
    fn start(shared: &'a Shared) -> Self {
        let taken_over = CancellationToken::new();
        let number = shared.refills.fetch_add(1, Ordering::Relaxed);
        *lock(&shared.refilling) = Some(UnderWay {
            number,
            taken_over: taken_over.clone(),
        });
        Self { shared, taken_over }
    }
}

impl Drop for Refilling<'_> {
    fn drop(&mut self) {
        *lock(&self.shared.refilling) = None;
        self.shared.refilled.notify_waiters();
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
    // Whether a task has just taken a session: the refill first waits for its first answer.
    let mut just_taken = false;
    loop {
        let after_take = std::mem::take(&mut just_taken);
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
            let refilling = Refilling::start(&shared);
            let patience = || {
                let until = Instant::now() + REFILL_WAIT_LIMIT;
                Yield::new(&shared.unanswered, until, &refilling.taken_over)
            };
            if after_take {
                patience().to_first_answers().await;
            }
            let began = Instant::now();
            let made = shared
                .maker
                .prepare(shared.lifetime, Some(patience()), shared.kind, Vec::new())
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
                    drop(refilling);
                    tracing::info!(container = %name, ready, target, kind = ?shared.kind, "a warm browser is ready");
                    *lock(&shared.last_error) = None;
                    backoff = FIRST_BACKOFF;
                }
                Err(error) => {
                    // A task waiting to take it over starts cold now, not after the backoff.
                    drop(refilling);
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
            () = shared.taken.notified() => just_taken = true,
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
