//! The warm pool: sealed browsers made before they are asked for, each given to exactly one task
//! and then destroyed. A filler task keeps `size` sessions ready, replaces any older than
//! `max_age`, and backs off (remembering why) when it cannot make one. Taking checks that the
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
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::{DriverError, Kind, Maker, Prepared};

/// How long the filler waits after a failure, at first and at most.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The longest a refill waits for first answers before it starts, and again over its steps.
pub(crate) const REFILL_WAIT_LIMIT: Duration = Duration::from_secs(3);

/// Ready sessions and the task that keeps them ready.
pub(crate) struct Pool {
    shared: Arc<Shared>,
    filler: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    maker: Arc<Maker>,
    size: usize,
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

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Pool {
    /// Start filling: `size` sessions, each replaced after `max_age`; a warm container exits by
    /// itself after `lifetime` even if nobody removes it (a killed owner).
    pub(crate) fn start(
        maker: Arc<Maker>,
        size: usize,
        max_age: Duration,
        lifetime: Duration,
        kind: Kind,
    ) -> Self {
        let stop = CancellationToken::new();
        let shared = Arc::new(Shared {
            maker,
            size,
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
        loop {
            let candidate = lock(&self.shared.ready).pop_front();
            let Some(mut prepared) = candidate else {
                self.shared.taken.notify_one();
                return None;
            };
            let fresh = prepared.made_at.elapsed() < self.shared.max_age;
            if fresh && prepared.answers(&self.shared.maker).await {
                self.shared.unanswered.add(prepared.first_answer.clone());
                self.shared.taken.notify_one();
                return Some(prepared);
            }
            if fresh {
                tracing::warn!(container = %prepared.name, "a warm session no longer answered; it is replaced");
            }
            self.shared.taken.notify_one();
            prepared.dispose().await;
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
            prepared.dispose().await;
        }
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
            prepared.dispose().await;
        }
        if lock(&shared.ready).len() < shared.size {
            // Not raced against the stop: a half-made session would be undone on a task of its
            // own that a closing runtime may never run. Making one is bounded; then it goes.
            let patience = Yield {
                unanswered: &shared.unanswered,
                until: Instant::now() + REFILL_WAIT_LIMIT,
            };
            let made = shared
                .maker
                .prepare(shared.lifetime, Some(patience), shared.kind)
                .await;
            if shared.stop.is_cancelled() {
                if let Ok(prepared) = made {
                    prepared.dispose().await;
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
                    tracing::info!(container = %name, ready, kind = ?shared.kind, "a warm browser is ready");
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
        // Full: wait for a take, for the oldest to age out, or for the stop.
        let oldest_age = lock(&shared.ready)
            .front()
            .map_or(Duration::ZERO, |prepared| prepared.made_at.elapsed());
        tokio::select! {
            () = shared.taken.notified() => {
                let until = Instant::now() + REFILL_WAIT_LIMIT;
                shared.unanswered.settled_until(until).await;
            }
            () = tokio::time::sleep(shared.max_age.saturating_sub(oldest_age)) => {}
            () = shared.stop.cancelled() => return,
        }
    }
}

/// The first answers a pool's refill waits for: one per task that took a session and has not had
/// one yet (cancelled tokens: answered, or the task ended).
pub(crate) struct Unanswered {
    waiting: Mutex<Vec<CancellationToken>>,
    /// Told whenever a task starts waiting.
    added: Notify,
    /// The pool's stop, which ends any wait at once.
    stop: CancellationToken,
}

impl Unanswered {
    fn new(stop: CancellationToken) -> Self {
        Self {
            waiting: Mutex::new(Vec::new()),
            added: Notify::new(),
            stop,
        }
    }

    fn add(&self, first_answer: CancellationToken) {
        let mut waiting = lock(&self.waiting);
        waiting.retain(|token| !token.is_cancelled());
        waiting.push(first_answer);
        self.added.notify_waiters();
    }

    /// Whether a task waits for its first answer now.
    fn any_waiting(&self) -> bool {
        lock(&self.waiting)
            .iter()
            .any(|token| !token.is_cancelled())
    }

    /// Return once every task that took a session has had its first answer, at `until` at the
    /// latest, or at once when the pool stops.
    async fn settled_until(&self, until: Instant) {
        let waiting: Vec<CancellationToken> = lock(&self.waiting)
            .iter()
            .filter(|token| !token.is_cancelled())
            .cloned()
            .collect();
        let all = futures_util::future::join_all(waiting.iter().map(CancellationToken::cancelled));
        tokio::select! {
            _ = all => {}
            () = tokio::time::sleep_until(until) => {}
            () = self.stop.cancelled() => {}
        }
    }
}

/// How long a refill under way yields to first answers: until `until`, then it goes on regardless.
#[derive(Clone, Copy)]
pub(crate) struct Yield<'a> {
    unanswered: &'a Unanswered,
    until: Instant,
}

impl Yield<'_> {
    /// Wait (within this refill's patience) until no task that took a session waits for its first
    /// answer.
    pub(crate) async fn to_first_answers(self) {
        self.unanswered.settled_until(self.until).await;
    }

    /// Run `step`, work of the refill inside its running container. Whenever a task waits for
    /// its first answer while it runs, the container is frozen until that answer comes (within
    /// this refill's patience): a yield between steps cannot hold a step already under way, and
    /// Chromium's launch is the longest. Returns once the step is done and the container runs
    /// again; an error only if it could not be thawed (the session is then unusable).
    pub(crate) async fn freezing<T>(
        self,
        container: &impl Freeze,
        step: impl Future<Output = T>,
    ) -> Result<T, DriverError> {
        let done = CancellationToken::new();
        let stepped = async {
            let output = step.await;
            done.cancel();
            output
        };
        let freezer = async {
            loop {
                let took = self.unanswered.added.notified();
                tokio::pin!(took);
                // Registered before the check, so a take between the two is not missed.
                took.as_mut().enable();
                if !self.unanswered.any_waiting() {
                    tokio::select! {
                        () = &mut took => {}
                        () = done.cancelled() => return Ok::<(), DriverError>(()),
                    }
                }
                if Instant::now() >= self.until {
                    // Patience spent: the step goes on beside the task.
                    return Ok(());
                }
                if done.is_cancelled() {
                    return Ok(());
                }
                if let Err(error) = container.freeze().await {
                    // Not fatal: the step goes on at its low CPU weight, as without freezing.
                    tracing::debug!(%error, "a refill could not freeze its container");
                    container.thaw().await.ok();
                    return Ok(());
                }
                tokio::select! {
                    () = self.unanswered.settled_until(self.until) => {}
                    // Only a host-side timeout ends a frozen step.
                    () = done.cancelled() => {}
                }
                container.thaw().await?;
            }
        };
        let (output, thawed) = tokio::join!(stepped, freezer);
        thawed?;
        Ok(output)
    }
}

/// A container a refill can freeze while a task waits for its first answer.
pub(crate) trait Freeze {
    /// Stop every process in it (the cgroup freezer).
    async fn freeze(&self) -> Result<(), DriverError>;
    /// Let them run again.
    async fn thaw(&self) -> Result<(), DriverError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Sleeper, docker};

    #[tokio::test(start_paused = true)]
    async fn a_refill_waits_for_every_first_answer_but_not_past_the_limit() {
        let unanswered = Unanswered::new(CancellationToken::new());
        let (first, second) = (CancellationToken::new(), CancellationToken::new());
        unanswered.add(first.clone());
        unanswered.add(second.clone());
        let started = tokio::time::Instant::now();
        let answers = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            first.cancel();
            tokio::time::sleep(Duration::from_millis(100)).await;
            second.cancel();
        };
        tokio::join!(
            unanswered.settled_until(Instant::now() + REFILL_WAIT_LIMIT),
            answers
        );
        // Settled with the second answer (200 ms), not the first.
        assert_eq!(started.elapsed(), Duration::from_millis(200));

        let never = CancellationToken::new();
        unanswered.add(never);
        let started = tokio::time::Instant::now();
        unanswered.settled_until(started + REFILL_WAIT_LIMIT).await;
        assert_eq!(started.elapsed(), REFILL_WAIT_LIMIT);
        assert_eq!(
            lock(&unanswered.waiting).len(),
            1,
            "answered ones are dropped"
        );
    }

    /// Docker's pause and unpause events for `name` from now on.
    fn freezes(
        docker: &bollard::Docker,
        name: &str,
    ) -> impl futures_util::Stream<Item = String> + Unpin + use<> {
        use futures_util::StreamExt as _;
        let filters = std::collections::HashMap::from([
            ("container", vec![name]),
            ("event", vec!["pause", "unpause"]),
        ]);
        let options = bollard::query_parameters::EventsOptionsBuilder::default()
            .filters(&filters)
            .build();
        docker
            .events(Some(options))
            .map(|event| event.unwrap().action.unwrap_or_default())
            .boxed()
    }

    /// The next of those events; a missing one fails the test rather than hanging it.
    async fn next(events: &mut (impl futures_util::Stream<Item = String> + Unpin)) -> String {
        use futures_util::StreamExt as _;
        tokio::time::timeout(Duration::from_secs(30), events.next())
            .await
            .expect("no pause or unpause within 30 s")
            .expect("the event stream ended")
    }

    async fn paused(docker: &bollard::Docker, name: &str) -> bool {
        let info = docker.inspect_container(name, None).await.unwrap();
        info.state.unwrap().paused.unwrap()
    }

    /// With the real daemon: a refill's step is frozen while a task waits for its first answer
    /// and thawed at that answer, at the end of the refill's patience, or when the step ends
    /// frozen (a host-side timeout); a container gone while frozen is an error, not a hang.
    #[tokio::test]
    async fn a_refill_step_is_frozen_while_a_task_waits_for_its_first_answer() {
        if !airlock_testkit::docker::docker_ready() {
            return;
        }
        let docker = docker().await;
        let name = format!("airlock-freeze-test-{}", std::process::id());
        let sleeper = Sleeper::start(&docker, &name).await;
        let container = crate::Freezable {
            docker: &docker,
            name: &name,
        };
        let unanswered = Unanswered::new(CancellationToken::new());
        let patient = || Yield {
            unanswered: &unanswered,
            until: Instant::now() + Duration::from_secs(60),
        };

        // A take while the step runs freezes it; the task's first answer thaws it.
        let mut events = freezes(&docker, &name);
        let step_done = CancellationToken::new();
        let script = async {
            let first = CancellationToken::new();
            unanswered.add(first.clone());
            assert_eq!(next(&mut events).await, "pause");
            assert!(paused(&docker, &name).await);
            first.cancel();
            assert_eq!(next(&mut events).await, "unpause");
            step_done.cancel();
        };
        let (frozen, ()) = tokio::join!(
            patient().freezing(&container, step_done.cancelled()),
            script
        );
        frozen.unwrap();
        assert!(!paused(&docker, &name).await);

        // Patience spent: thawed although the task still waits, and not frozen again.
        let step_done = CancellationToken::new();
        let short = Yield {
            unanswered: &unanswered,
            until: Instant::now() + Duration::from_millis(1500),
        };
        let script = async {
            unanswered.add(CancellationToken::new());
            assert_eq!(next(&mut events).await, "pause");
            assert_eq!(next(&mut events).await, "unpause");
            unanswered.add(CancellationToken::new());
            step_done.cancel();
        };
        let (frozen, ()) = tokio::join!(short.freezing(&container, step_done.cancelled()), script);
        frozen.unwrap();
        assert!(!paused(&docker, &name).await);

        // A step that ends while frozen (the host gave up on it) returns only once thawed.
        let step_done = CancellationToken::new();
        let script = async {
            assert_eq!(next(&mut events).await, "pause");
            step_done.cancel();
        };
        let (frozen, ()) = tokio::join!(
            patient().freezing(&container, step_done.cancelled()),
            script
        );
        frozen.unwrap();
        assert_eq!(next(&mut events).await, "unpause");
        assert!(!paused(&docker, &name).await);

        // A container removed while frozen: the thaw fails and says so.
        let step_done = CancellationToken::new();
        let script = async {
            assert_eq!(next(&mut events).await, "pause");
            drop(Sleeper::named(&name));
            step_done.cancel();
        };
        let (frozen, ()) = tokio::join!(
            patient().freezing(&container, step_done.cancelled()),
            script
        );
        let error = frozen.unwrap_err().to_string();
        assert!(
            error.contains("unpausing a warm container failed"),
            "{error}"
        );
        drop(sleeper);
    }

    #[tokio::test(start_paused = true)]
    async fn the_pools_stop_ends_the_wait() {
        let stop = CancellationToken::new();
        let unanswered = Unanswered::new(stop.clone());
        unanswered.add(CancellationToken::new());
        stop.cancel();
        let started = tokio::time::Instant::now();
        unanswered.settled_until(started + REFILL_WAIT_LIMIT).await;
        assert_eq!(started.elapsed(), Duration::ZERO);
    }
}
