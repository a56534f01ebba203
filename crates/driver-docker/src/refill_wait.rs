//! How a pool's refill yields to tasks' first answers: it waits (bounded) between its steps while
//! any task that took a session (or started cold) waits for its first answer, and freezes its
//! container (`docker pause`) through the longest step, Chromium's launch, until that answer.
//! A task that finds the pool empty takes the refill over: from then on it yields to nobody, as a
//! cold start does not. See `pool.rs` for why.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use airlock_worker::DriverError;
use bollard::Docker;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::DockerError;
use crate::sync::lock;

/// The longest a refill waits for first answers before it starts, and again over its steps.
pub(crate) const REFILL_WAIT_LIMIT: Duration = Duration::from_secs(3);

/// The first answers a pool's refill waits for: one per task that took a session and has not had
/// one yet (cancelled tokens: answered, or the task ended).
pub(crate) struct Unanswered {
    waiting: Mutex<Vec<CancellationToken>>,
    /// Told whenever a task starts waiting.
    added: Notify,
    /// The pool's stop, which ends any wait at once.
    stop: CancellationToken,
    /// How long refills have waited (or stayed frozen) for first answers so far, in µs.
    held_micros: AtomicU64,
}

impl Unanswered {
    pub(crate) fn new(stop: CancellationToken) -> Self {
        Self {
            waiting: Mutex::new(Vec::new()),
            added: Notify::new(),
            stop,
            held_micros: AtomicU64::new(0),
        }
    }

    pub(crate) fn add(&self, first_answer: CancellationToken) {
        let mut waiting = lock(&self.waiting);
        waiting.retain(|token| !token.is_cancelled());
        waiting.push(first_answer);
        self.added.notify_waiters();
    }

    /// Whether a task waits for its first answer now.
    pub(crate) fn any_waiting(&self) -> bool {
        lock(&self.waiting)
            .iter()
            .any(|token| !token.is_cancelled())
    }

    /// Return once every task that took a session has had its first answer, at `until` at the
    /// latest, or at once when the pool stops or the refill is `taken_over`.
    pub(crate) async fn settled_until(&self, until: Instant, taken_over: &CancellationToken) {
        let waiting: Vec<CancellationToken> = lock(&self.waiting)
            .iter()
            .filter(|token| !token.is_cancelled())
            .cloned()
            .collect();
        if waiting.is_empty() {
            return;
        }
        let began = Instant::now();
        let all = futures_util::future::join_all(waiting.iter().map(CancellationToken::cancelled));
        tokio::select! {
            _ = all => {}
            () = tokio::time::sleep_until(until) => {}
            () = self.stop.cancelled() => {}
            () = taken_over.cancelled() => {}
        }
        let held = u64::try_from(began.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.held_micros.fetch_add(held, Ordering::Relaxed);
    }

    /// How long refills have waited, or stayed frozen, for tasks' first answers so far: the
    /// price of the rule that a refill never slows a first page load.
    pub(crate) fn held(&self) -> Duration {
        Duration::from_micros(self.held_micros.load(Ordering::Relaxed))
    }
}

/// How long a refill under way yields to first answers: until `until`, or until a task takes the
/// refill over, then it goes on regardless.
#[derive(Clone, Copy)]
pub(crate) struct Yield<'a> {
    unanswered: &'a Unanswered,
    until: Instant,
    taken_over: &'a CancellationToken,
}

impl<'a> Yield<'a> {
    /// Patience until `until` for the first answers in `unanswered`, ended early by `taken_over`.
    pub(crate) fn new(
        unanswered: &'a Unanswered,
        until: Instant,
        taken_over: &'a CancellationToken,
    ) -> Self {
        Self {
            unanswered,
            until,
            taken_over,
        }
    }

    /// Wait (within this refill's patience) until no task that took a session waits for its first
    /// answer.
    pub(crate) async fn to_first_answers(self) {
        self.unanswered
            .settled_until(self.until, self.taken_over)
            .await;
    }

    /// Cancelled when a task takes this refill over.
    pub(crate) fn taken_over(self) -> &'a CancellationToken {
        self.taken_over
    }

    /// Patience spent, a task waits for this refill itself, or the pool stops: it yields no more.
    fn spent(self) -> bool {
        Instant::now() >= self.until
            || self.taken_over.is_cancelled()
            || self.unanswered.stop.is_cancelled()
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
                        () = self.taken_over.cancelled() => return Ok(()),
                    }
                }
                if self.spent() {
                    // The step goes on beside the task (or for the task that took it over).
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
                    () = self.unanswered.settled_until(self.until, self.taken_over) => {}
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

/// A refill's container, frozen with Docker's pause (the cgroup freezer) while a task waits for
/// its first answer.
pub(crate) struct Freezable<'a> {
    pub(crate) docker: &'a Docker,
    pub(crate) name: &'a str,
}

impl Freeze for Freezable<'_> {
    async fn freeze(&self) -> Result<(), DriverError> {
        self.docker
            .pause_container(self.name)
            .await
            .map_err(|e| DockerError::PauseContainer(e).into())
    }

    async fn thaw(&self) -> Result<(), DriverError> {
        self.docker
            .unpause_container(self.name)
            .await
            .map_err(|e| DockerError::UnpauseContainer(e).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Sleeper, docker};

    #[tokio::test(start_paused = true)]
    async fn a_refill_waits_for_every_first_answer_but_not_past_the_limit() {
        let unanswered = Unanswered::new(CancellationToken::new());
        let mine = CancellationToken::new();
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
            unanswered.settled_until(Instant::now() + REFILL_WAIT_LIMIT, &mine),
            answers
        );
        // Settled with the second answer (200 ms), not the first.
        assert_eq!(started.elapsed(), Duration::from_millis(200));
        assert_eq!(unanswered.held(), Duration::from_millis(200));
        // With no task waiting, nothing is held.
        unanswered
            .settled_until(Instant::now() + REFILL_WAIT_LIMIT, &mine)
            .await;
        assert_eq!(unanswered.held(), Duration::from_millis(200));

        let never = CancellationToken::new();
        unanswered.add(never);
        let started = tokio::time::Instant::now();
        unanswered
            .settled_until(started + REFILL_WAIT_LIMIT, &mine)
            .await;
        assert_eq!(started.elapsed(), REFILL_WAIT_LIMIT);
        assert_eq!(
            unanswered.held(),
            Duration::from_millis(200) + REFILL_WAIT_LIMIT
        );
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
        let container = Freezable {
            docker: &docker,
            name: &name,
        };
        let unanswered = Unanswered::new(CancellationToken::new());
        let mine = CancellationToken::new();
        let patient = || Yield::new(&unanswered, Instant::now() + Duration::from_secs(60), &mine);

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
        let short = Yield::new(
            &unanswered,
            Instant::now() + Duration::from_millis(1500),
            &mine,
        );
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

        // Taken over by a task that found the pool empty: thawed at once although tasks still
        // wait (and the patience is long), and not frozen again.
        let step_done = CancellationToken::new();
        let taken_over = CancellationToken::new();
        let script = async {
            unanswered.add(CancellationToken::new());
            assert_eq!(next(&mut events).await, "pause");
            taken_over.cancel();
            assert_eq!(next(&mut events).await, "unpause");
            unanswered.add(CancellationToken::new());
            assert!(!paused(&docker, &name).await);
            step_done.cancel();
        };
        let taken = Yield::new(
            &unanswered,
            Instant::now() + Duration::from_secs(60),
            &taken_over,
        );
        let (frozen, ()) = tokio::join!(taken.freezing(&container, step_done.cancelled()), script);
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
            // Through the API, so a removal that did not happen fails here, not at the thaw.
            let force = bollard::query_parameters::RemoveContainerOptionsBuilder::default()
                .force(true)
                .build();
            docker
                .remove_container(&name, Some(force))
                .await
                .expect("removing the frozen container");
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
        unanswered
            .settled_until(started + REFILL_WAIT_LIMIT, &CancellationToken::new())
            .await;
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_that_takes_the_refill_over_ends_its_yielding() {
        let unanswered = Unanswered::new(CancellationToken::new());
        unanswered.add(CancellationToken::new());
        let taken_over = CancellationToken::new();
        let started = tokio::time::Instant::now();
        let patience = Yield::new(&unanswered, started + REFILL_WAIT_LIMIT, &taken_over);
        let task_arrives = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            taken_over.cancel();
        };
        tokio::join!(patience.to_first_answers(), task_arrives);
        assert_eq!(started.elapsed(), Duration::from_millis(100));
        // Taken over, it waits no more although the task still waits for its first answer.
        patience.to_first_answers().await;
        assert_eq!(started.elapsed(), Duration::from_millis(100));
    }
}
