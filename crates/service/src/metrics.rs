//! `/metrics`: Prometheus text from a `prometheus-client` registry. Labels carry only fixed
//! words (outcomes, classes, kinds), never tokens, tasks or URLs.

use airlock_worker::{Ended, TaskResult};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use std::sync::atomic::AtomicU64;

/// One label, `name="value"`, with a value from a fixed set.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Reason {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Class {
    class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Kind {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Verdict {
    verdict: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Direction {
    direction: &'static str,
    /// The operator's route (at most `airlock_policy::MAX_ROUTES` of them: bounded).
    route: String,
}

/// How a task's browser started: `warm` (from the pool) or `cold` (the pool was empty).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Start {
    start: &'static str,
}

/// The Chromium version the browser image carries.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Chromium {
    chromium: String,
}

impl Metrics {
    /// The browser image's Chromium and build time (read once, at start).
    pub fn set_image(&self, chromium: Option<&str>, built_unix_seconds: Option<u64>) {
        let chromium = chromium.unwrap_or("unknown").to_owned();
        self.own
            .image_chromium
            .get_or_create(&Chromium { chromium })
            .set(1);
        let built = built_unix_seconds.unwrap_or(0);
        self.own
            .image_built
            .set(i64::try_from(built).unwrap_or(i64::MAX));
    }

    /// The warm pools now, as the port says.
    pub fn set_pools(&self, pools: &crate::PoolState) {
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.warm_sessions.set(count(pools.warm_tasks));
        self.warm_pool_target.set(count(pools.target));
        self.set_pool_claims(pools.claims);
        self.set_pool_refill_held(pools.refill_held);
        self.warm_cdp_browsers.set(count(pools.warm_cdp));
        self.warm_pool_failing.set(i64::from(pools.error.is_some()));
        self.unasked_requests
            .set(i64::try_from(pools.unasked_requests).unwrap_or(i64::MAX));
    }

    /// The pool's claims so far (the driver counts them; a counter only moves forward).
    fn set_pool_claims(&self, claims: crate::PoolClaims) {
        let starts = [
            ("warm", claims.warm),
            ("taken_over", claims.taken_over),
            ("cold", claims.cold),
        ];
        for (start, total) in starts {
            let counter = self.warm_pool_claims.get_or_create(&Start { start });
            counter.inc_by(total.saturating_sub(counter.get()));
        }
    }

    /// How long the pool's refills have waited for tasks' first answers (the driver's total).
    fn set_pool_refill_held(&self, held: std::time::Duration) {
        let counter = &self.warm_pool_refill_held;
        let more = held.as_secs_f64() - counter.get();
        if more > 0.0 {
            counter.inc_by(more);
        }
    }
}

/// Every metric the server exports.
pub struct Metrics {
    registry: Registry,
    pub(crate) running: Gauge,
    pub(crate) queued: Gauge,
    pub(crate) capacity: Gauge,
    pub(crate) ready: Gauge,
    pub(crate) direct_sessions: Gauge,
    pub(crate) warm_sessions: Gauge,
    /// What the warm pool means to hold now (it grows with demand up to `--pool-max`).
    pub warm_pool_target: Gauge,
    /// Tasks that asked the warm pool, by whether they found a browser.
    pub warm_pool_claims: Family<Start, Counter>,
    /// Seconds the pool's refills waited, or stayed frozen, for tasks' first answers.
    warm_pool_refill_held: Counter<f64, AtomicU64>,
    pub(crate) warm_cdp_browsers: Gauge,
    /// 1 while a warm pool's last attempt to make a browser failed (the reason is in `/readyz`
    /// for a caller with a token, and in the log).
    pub warm_pool_failing: Gauge,
    /// Requests browsers made before a task or client took them: Chromium's own traffic.
    pub unasked_requests: Gauge,
    /// Connections the listener could not accept (out of descriptors, aborted by the peer).
    pub accept_failures: Counter,
    pub(crate) cdp_leases: Gauge,
    cdp_ended: Family<Reason, Counter>,
    cdp_verdicts: Family<Verdict, Counter>,
    finished: Family<Outcome, Counter>,
    pub(crate) refused: Family<Reason, Counter>,
    egress_refusals: Family<Class, Counter>,
    egress_failures: Family<Class, Counter>,
    egress_bytes: Family<Direction, Counter>,
    tokens: Family<Kind, Counter>,
    chars_shown: Counter,
    image_bytes_shown: Counter,
    duration: Histogram,
    own: OwnGauges,
}

/// What the server reports of itself: its browser image, and its own memory.
#[derive(Default)]
struct OwnGauges {
    image_chromium: Family<Chromium, Gauge>,
    image_built: Gauge,
    heap_allocated: Gauge,
    heap_resident: Gauge,
}

impl Metrics {
    /// The metrics of a server with `capacity` slots.
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        let mut registry = Registry::with_prefix("airlock");
        let metrics = Self {
            running: Gauge::default(),
            queued: Gauge::default(),
            capacity: Gauge::default(),
            ready: Gauge::default(),
            direct_sessions: Gauge::default(),
            warm_sessions: Gauge::default(),
            warm_pool_target: Gauge::default(),
            warm_pool_claims: Family::default(),
            warm_pool_refill_held: Counter::default(),
            warm_cdp_browsers: Gauge::default(),
            warm_pool_failing: Gauge::default(),
            unasked_requests: Gauge::default(),
            accept_failures: Counter::default(),
            cdp_leases: Gauge::default(),
            cdp_ended: Family::default(),
            cdp_verdicts: Family::default(),
            finished: Family::default(),
            refused: Family::default(),
            egress_refusals: Family::default(),
            egress_failures: Family::default(),
            egress_bytes: Family::default(),
            tokens: Family::default(),
            chars_shown: Counter::default(),
            image_bytes_shown: Counter::default(),
            // 1 s to about 68 min, doubling.
            duration: Histogram::new(exponential_buckets(1.0, 2.0, 13)),
            own: OwnGauges::default(),
            registry: Registry::default(),
        };
        metrics
            .capacity
            .set(i64::try_from(capacity).unwrap_or(i64::MAX));
        registry.register(
            "tasks_running",
            "Tasks and CDP leases running now (each holds a slot)",
            metrics.running.clone(),
        );
        registry.register(
            "tasks_queued",
            "Tasks waiting for a slot now",
            metrics.queued.clone(),
        );
        registry.register(
            "task_capacity",
            "Tasks this server runs at once (max_concurrent_tasks)",
            metrics.capacity.clone(),
        );
        registry.register(
            "ready",
            "1 while the server takes new tasks, 0 while draining",
            metrics.ready.clone(),
        );
        metrics.register_image_and_heap(&mut registry);
        metrics.register_pools(&mut registry);
        metrics.register_cdp(&mut registry);
        registry.register(
            "tasks_finished",
            "Tasks that ran, by how they ended",
            metrics.finished.clone(),
        );
        registry.register(
            "tasks_refused",
            "Tasks refused before they ran, by reason",
            metrics.refused.clone(),
        );
        metrics.register_egress(&mut registry);
        registry.register(
            "task_tokens",
            "Model tokens tasks used, by kind",
            metrics.tokens.clone(),
        );
        registry.register(
            "worker_chars_shown",
            "Characters of tool output shown to workers",
            metrics.chars_shown.clone(),
        );
        registry.register(
            "worker_image_bytes_shown",
            "Bytes of images shown to workers",
            metrics.image_bytes_shown.clone(),
        );
        registry.register(
            "task_duration_seconds",
            "Time from a task's start to its result",
            metrics.duration.clone(),
        );
        Self {
            registry,
            ..metrics
        }
    }

    fn register_egress(&self, registry: &mut Registry) {
        registry.register(
            "egress_refusals",
            "Destinations the egress proxy refused, by class",
            self.egress_refusals.clone(),
        );
        registry.register(
            "egress_failures",
            "Allowed destinations the egress proxy could not reach (or whose route's parent said no), by class",
            self.egress_failures.clone(),
        );
        registry.register(
            "egress_bytes",
            "Bytes the egress proxies carried, by direction and route",
            self.egress_bytes.clone(),
        );
    }

    /// Count a task that ran.
    pub fn finished(&self, result: &TaskResult) {
        let outcome = match result.ended {
            Ended::Completed => "completed",
            Ended::StepLimit => "step_limit",
            Ended::TokenBudget => "token_budget",
            Ended::TimedOut => "timed_out",
            Ended::Cancelled => "cancelled",
            Ended::Failed => "failed",
            Ended::NoValidAnswer => "no_valid_answer",
        };
        self.finished.get_or_create(&Outcome { outcome }).inc();
        self.egress(
            &result.egress_failures,
            &result.egress_refusals_by_class,
            result.egress_bytes,
            &result.egress_bytes_by_route,
        );
        let usage = &result.usage;
        for (kind, value) in [
            ("input", usage.input_tokens),
            ("cache_read", usage.cache_read_tokens),
            ("cache_write", usage.cache_write_tokens),
            ("output", usage.output_tokens),
            ("thinking", usage.thinking_tokens),
        ] {
            self.tokens.get_or_create(&Kind { kind }).inc_by(value);
        }
        self.chars_shown.inc_by(result.context.chars_shown);
        self.image_bytes_shown
            .inc_by(result.context.image_bytes_shown);
        #[allow(clippy::cast_precision_loss)] // milliseconds of a task fit an f64 exactly
        self.duration
            .observe(result.timings.total_ms as f64 / 1000.0);
    }

    /// A task's egress: its failures and refusals by class, its bytes by direction and route.
    fn egress(
        &self,
        failures: &[airlock_worker::EgressFailure],
        refusals_by_class: &std::collections::BTreeMap<String, u64>,
        bytes: airlock_worker::EgressBytes,
        bytes_by_route: &std::collections::BTreeMap<String, airlock_worker::EgressBytes>,
    ) {
        for failure in failures {
            // The proxy's fixed classes only, so the label set stays fixed.
            let class = airlock_proxy::FAILURE_CLASSES
                .iter()
                .find(|known| **known == failure.class)
                .map_or("other", |known| *known);
            self.egress_failures
                .get_or_create(&Class {
                    class: class.to_owned(),
                })
                .inc_by(failure.count);
        }
        // Every refusal, by class: the listed ones are only the first distinct destinations.
        for (class, count) in refusals_by_class {
            self.egress_refusals
                .get_or_create(&Class {
                    class: class.clone(),
                })
                .inc_by(*count);
        }
        // A driver that knows no routes dialled directly.
        let direct = std::collections::BTreeMap::from([(airlock_policy::DIRECT.to_owned(), bytes)]);
        let by_route = if bytes_by_route.is_empty() {
            &direct
        } else {
            bytes_by_route
        };
        for (route, bytes) in by_route {
            for (direction, value) in [("up", bytes.up), ("down", bytes.down)] {
                self.egress_bytes
                    .get_or_create(&Direction {
                        direction,
                        route: route.clone(),
                    })
                    .inc_by(value);
            }
        }
    }
    /// The browser image's age and the server's own memory.
    fn register_image_and_heap(&self, registry: &mut Registry) {
        registry.register(
            "browser_image_chromium",
            "1, labelled with the Chromium version the browser image carries",
            self.own.image_chromium.clone(),
        );
        registry.register(
            "browser_image_built_timestamp_seconds",
            "When the browser image was built (Unix time; 0 when unlabelled): rebuild with cargo xtask image when it is old",
            self.own.image_built.clone(),
        );
        registry.register(
            "heap_allocated_bytes",
            "Bytes the server holds allocated now (its live heap, as jemalloc counts it)",
            self.own.heap_allocated.clone(),
        );
        registry.register(
            "heap_resident_bytes",
            "Bytes of the allocator's pages resident now (the live heap and its slack)",
            self.own.heap_resident.clone(),
        );
    }

    /// The warm pools' metrics.
    fn register_pools(&self, registry: &mut Registry) {
        registry.register(
            "direct_sessions",
            "MCP sessions holding a sealed browser (--direct)",
            self.direct_sessions.clone(),
        );
        registry.register(
            "warm_sessions",
            "Sealed browsers ready in the warm pool",
            self.warm_sessions.clone(),
        );
        registry.register(
            "warm_pool_target",
            "Sealed browsers the warm pool means to hold now: from --pool-size up to --pool-max with the last minute's tasks",
            self.warm_pool_target.clone(),
        );
        registry.register(
            "warm_pool_claims",
            "Tasks that asked the warm pool for a browser, by start: warm (one was ready), taken_over (it was empty and the task took the browser being made) or cold (nothing was being made)",
            self.warm_pool_claims.clone(),
        );
        registry.register_with_unit(
            "warm_pool_refill_held",
            "Time the warm pool's refills waited, or stayed frozen, so as not to slow a task's first page load",
            Unit::Seconds,
            self.warm_pool_refill_held.clone(),
        );
        registry.register(
            "accept_failures",
            "Connections the listener could not accept (out of descriptors, aborted by the peer)",
            self.accept_failures.clone(),
        );
        registry.register(
            "warm_pool_failing",
            "1 while a warm pool cannot make browsers (why: /readyz with a token, or the log)",
            self.warm_pool_failing.clone(),
        );
        registry.register(
            "browser_unasked_requests",
            "Requests browsers made before a task or client took them, since start: Chromium's own traffic, 0 with the image's policy and flags (each is logged)",
            self.unasked_requests.clone(),
        );
    }

    /// The CDP endpoint's metrics.
    fn register_cdp(&self, registry: &mut Registry) {
        registry.register(
            "warm_cdp_browsers",
            "CDP browsers ready in the warm CDP pool",
            self.warm_cdp_browsers.clone(),
        );
        registry.register(
            "cdp_leases",
            "Sealed browsers leased to CDP clients now",
            self.cdp_leases.clone(),
        );
        registry.register(
            "cdp_leases_ended",
            "CDP leases that ended, by how",
            self.cdp_ended.clone(),
        );
        registry.register(
            "cdp_guard_verdicts",
            "CDP client messages judged by the guard, by verdict",
            self.cdp_verdicts.clone(),
        );
    }

    /// Count a CDP lease that ended (`start_failed` when its browser never started).
    pub fn cdp_ended(&self, reason: &'static str) {
        self.cdp_ended.get_or_create(&Reason { reason }).inc();
    }

    /// Count one guard verdict on a CDP message.
    pub fn cdp_verdict(&self, verdict: &'static str) {
        self.cdp_verdicts.get_or_create(&Verdict { verdict }).inc();
    }

    /// Count a destination the egress proxy refused a CDP browser.
    pub fn cdp_egress_refusal(&self, class: &'static str, count: u64) {
        self.egress_refusals
            .get_or_create(&Class {
                class: class.to_owned(),
            })
            .inc_by(count);
    }

    /// Count a task refused before it ran.
    pub fn refused(&self, reason: &'static str) {
        self.refused.get_or_create(&Reason { reason }).inc();
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        if let Some(heap) = crate::heap::stats() {
            self.own
                .heap_allocated
                .set(i64::try_from(heap.allocated).unwrap_or(i64::MAX));
            self.own
                .heap_resident
                .set(i64::try_from(heap.resident).unwrap_or(i64::MAX));
        }
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            // Writing into a String cannot fail; say so rather than serve half a page.
            return "# the metrics could not be encoded\n".to_owned();
        }
        text
    }
}

/// For the generated reference: a family shows in the text only once it has a series.
impl Metrics {
    pub(crate) fn with_a_series_in_every_family(&self) {
        self.finished
            .get_or_create(&Outcome {
                outcome: "completed",
            })
            .inc_by(0);
        self.egress_bytes
            .get_or_create(&Direction {
                direction: "up",
                route: airlock_policy::DIRECT.to_owned(),
            })
            .inc_by(0);
        self.egress_failures
            .get_or_create(&Class {
                class: "connect-failed".to_owned(),
            })
            .inc_by(0);
        self.tokens.get_or_create(&Kind { kind: "input" }).inc_by(0);
        self.refused("full");
        self.cdp_ended("closed");
        self.cdp_verdict("allowed");
        self.cdp_egress_refusal("private", 0);
        self.set_pool_claims(crate::PoolClaims {
            warm: 0,
            taken_over: 0,
            cold: 0,
        });
        self.set_image(None, None);
    }
}

#[cfg(test)]
mod tests;
