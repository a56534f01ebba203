//! What the egress proxy refused or could not reach during a task, kept within bounds: a page
//! that loops `fetch('http://10.1.2.3/')` makes a refusal per request, and neither the task's
//! memory nor what its caller reads may grow with it. The first [`EGRESS_LIST_LIMIT`] distinct
//! destinations (by class) are listed, each with how often it recurred; every refusal is counted by
//! class; what the list leaves out is counted. A destination is text the page chose: it is cut to
//! [`TARGET_CHARS`] characters, and whoever shows it quotes it as data.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

/// Distinct refusals (and, apart, failures) a task lists.
pub const EGRESS_LIST_LIMIT: usize = 100;
/// The longest destination kept, in characters.
pub(crate) const TARGET_CHARS: usize = 300;
/// Classes counted apart; past this, further classes count under `other` (classes are the
/// proxy's fixed words, so this only guards against a driver that makes them up).
const CLASS_LIMIT: usize = 64;

fn one() -> u64 {
    1
}

/// The one log line of a refusal, worded the same from every way in (a task's, a CDP lease's):
/// the destination, its class and the reason. The caller scrubs what a page could have put in
/// them, and logs each distinct destination once (a page can ask for one in a loop).
pub fn log_refusal(target: &str, class: &str, reason: &str) {
    tracing::info!(target = %target, class = %class, reason = %reason, "the egress proxy refused a request");
}

/// A destination the egress proxy refused during the task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EgressRefusal {
    /// When, in milliseconds since the Unix epoch.
    pub at_unix_ms: u128,
    /// The destination as the browser asked for it.
    pub target: String,
    /// Why it was refused.
    pub reason: String,
    /// Why, as a short stable class (`loopback`, `private`, `metadata`, `port`, …).
    #[serde(default)]
    pub class: String,
    /// How many times this destination was refused for this class (the first time's `at`).
    #[serde(default = "one")]
    pub count: u64,
    /// The step whose command reported it, the first time: the request came during that
    /// command, or while the worker thought before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
}

impl EgressRefusal {
    /// A refusal happening now.
    pub fn now(
        target: impl Into<String>,
        class: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            at_unix_ms: now_unix_ms(),
            target: target.into(),
            reason: reason.into(),
            class: class.into(),
            count: 1,
            step: None,
        }
    }
}

/// Milliseconds since the Unix epoch (0 on a clock set before it).
fn now_unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Bytes the egress proxy carried for a task.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct EgressBytes {
    /// From the browser to destinations.
    pub up: u64,
    /// From destinations to the browser.
    pub down: u64,
}

impl EgressBytes {
    /// Add `other`'s bytes to these (saturating: a counter never wraps).
    pub fn add(&mut self, other: Self) {
        self.up = self.up.saturating_add(other.up);
        self.down = self.down.saturating_add(other.down);
    }
}

/// A destination the egress proxy allowed but could not reach during the task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EgressFailure {
    /// When, in milliseconds since the Unix epoch.
    pub at_unix_ms: u128,
    /// The destination as the browser asked for it.
    pub target: String,
    /// What the proxy saw, as a short class (`no-dns-answer`, `connect-refused`, …).
    pub class: String,
    /// What the proxy saw, as a person reads it.
    pub reason: String,
    /// How many times this destination failed this way (the first time's `at`).
    #[serde(default = "one")]
    pub count: u64,
    /// The step whose command reported it, the first time (as for a refusal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
}

impl EgressFailure {
    /// A failure happening now.
    pub fn now(
        target: impl Into<String>,
        class: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            at_unix_ms: now_unix_ms(),
            target: target.into(),
            class: class.into(),
            reason: reason.into(),
            count: 1,
            step: None,
        }
    }
}

/// A destination the egress proxy allowed during the task: its connections and what they carried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EgressAllowed {
    /// `host:port` for a tunnel (`CONNECT`), `http://host:port` for forwarded requests.
    pub destination: String,
    /// Connections opened to it (a tunnel, or one forwarded request's own connection).
    pub connections: u64,
    /// Bytes sent to it by its connections, counted as each closed.
    pub up: u64,
    /// Bytes received from it, likewise.
    pub down: u64,
    /// The step whose command reported its first connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    /// The route its connections left by (`direct`, or a parent's).
    #[serde(default = "direct")]
    pub route: String,
}

fn direct() -> String {
    airlock_policy::DIRECT.to_owned()
}

impl EgressAllowed {
    /// `connections` more to `destination`, which carried `bytes`, directly.
    pub fn new(destination: impl Into<String>, connections: u64, bytes: EgressBytes) -> Self {
        Self {
            destination: destination.into(),
            connections,
            up: bytes.up,
            down: bytes.down,
            step: None,
            route: direct(),
        }
    }

    /// The same, left by the route named `route`.
    #[must_use]
    pub fn by_route(mut self, route: impl Into<String>) -> Self {
        self.route = route.into();
        self
    }
}

/// Add `allowed` to a bounded list of destinations: onto its entry (which keeps the step it was
/// first seen at), else a new entry while the list has [`EGRESS_LIST_LIMIT`], else its
/// connections counted in `not_listed`. The destination is cut to [`TARGET_CHARS`]. The driver's
/// tally between two looks and the task's record both keep their lists this way.
pub fn tally_allowed(
    listed: &mut Vec<EgressAllowed>,
    not_listed: &mut u64,
    mut allowed: EgressAllowed,
) {
    allowed.destination = cut_chars(&allowed.destination, TARGET_CHARS);
    if let Some(same) = listed
        .iter_mut()
        .find(|entry| entry.destination == allowed.destination)
    {
        same.connections = same.connections.saturating_add(allowed.connections);
        same.up = same.up.saturating_add(allowed.up);
        same.down = same.down.saturating_add(allowed.down);
    } else if listed.len() < EGRESS_LIST_LIMIT {
        listed.push(allowed);
    } else {
        *not_listed = not_listed.saturating_add(allowed.connections);
    }
}

/// A task's egress record: bounded lists and the counts of everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EgressRecord {
    /// The first distinct refused destinations (by class), each with its count.
    pub refusals: Vec<EgressRefusal>,
    /// Refusals of destinations past the list's limit, counted only.
    pub refusals_not_listed: u64,
    /// Every refusal, by class.
    pub refusals_by_class: BTreeMap<String, u64>,
    /// The first distinct destinations that could not be reached (by class), each with its count.
    pub failures: Vec<EgressFailure>,
    /// Failures past the list's limit, counted only.
    pub failures_not_listed: u64,
    /// The first distinct allowed destinations, each with its connections and bytes.
    #[serde(default)]
    pub allowed: Vec<EgressAllowed>,
    /// Connections to allowed destinations past the list's limit, counted only (their bytes
    /// are in the task's totals).
    #[serde(default)]
    pub allowed_not_listed: u64,
    /// What each route carried (every connection, listed or not), by the route's name.
    #[serde(default)]
    pub bytes_by_route: BTreeMap<String, EgressBytes>,
}

impl EgressRecord {
    /// Count a refusal; list it if its destination is new and the list has room.
    pub fn refused(&mut self, refusal: EgressRefusal) {
        self.count_class(&refusal.class, 1);
        list(&mut self.refusals, &mut self.refusals_not_listed, refusal);
    }

    /// Count refusals that were never held one by one (a driver's own bound).
    pub fn refused_unlisted(&mut self, class: &str, count: u64) {
        if count == 0 {
            return;
        }
        self.count_class(class, count);
        self.refusals_not_listed = self.refusals_not_listed.saturating_add(count);
    }

    /// Count a failure; list it if its destination is new and the list has room.
    pub fn failed(&mut self, failure: EgressFailure) {
        list(&mut self.failures, &mut self.failures_not_listed, failure);
    }

    /// Count failures that were never held one by one.
    pub fn failed_unlisted(&mut self, count: u64) {
        self.failures_not_listed = self.failures_not_listed.saturating_add(count);
    }

    /// Add connections and bytes to an allowed destination (see [`tally_allowed`]).
    pub fn allowed(&mut self, allowed: EgressAllowed) {
        tally_allowed(&mut self.allowed, &mut self.allowed_not_listed, allowed);
    }

    /// Add what connections on `route` carried. Routes are the operator's (at most
    /// [`airlock_policy::MAX_ROUTES`]), so the map stays small.
    pub fn route_bytes(&mut self, route: &str, bytes: EgressBytes) {
        self.bytes_by_route
            .entry(route.to_owned())
            .or_default()
            .add(bytes);
    }

    /// Count connections to allowed destinations that were never held one by one.
    pub fn allowed_unlisted(&mut self, connections: u64) {
        self.allowed_not_listed = self.allowed_not_listed.saturating_add(connections);
    }

    /// Add `count` refusals of `class`, under `other` once the classes are at their bound.
    fn count_class(&mut self, class: &str, count: u64) {
        let class = if self.refusals_by_class.len() < CLASS_LIMIT
            || self.refusals_by_class.contains_key(class)
        {
            class.to_owned()
        } else {
            "other".to_owned()
        };
        let by_class = self.refusals_by_class.entry(class).or_default();
        *by_class = by_class.saturating_add(count);
    }
}

/// A refusal or a failure, as a bounded list holds it.
trait Entry {
    /// Its destination, which is cut to [`TARGET_CHARS`].
    fn target_mut(&mut self) -> &mut String;
    /// Whether it is the same destination for the same reason as `other`.
    fn same_as(&self, other: &Self) -> bool;
    /// How often it happened.
    fn count_mut(&mut self) -> &mut u64;
}

impl Entry for EgressRefusal {
    fn target_mut(&mut self) -> &mut String {
        &mut self.target
    }
    fn same_as(&self, other: &Self) -> bool {
        self.target == other.target && self.class == other.class
    }
    fn count_mut(&mut self) -> &mut u64 {
        &mut self.count
    }
}

impl Entry for EgressFailure {
    fn target_mut(&mut self) -> &mut String {
        &mut self.target
    }
    fn same_as(&self, other: &Self) -> bool {
        self.target == other.target && self.class == other.class
    }
    fn count_mut(&mut self) -> &mut u64 {
        &mut self.count
    }
}

/// Count `entry` on the listed one it repeats, else list it while there is room, else count it
/// as not listed.
fn list<T: Entry>(listed: &mut Vec<T>, not_listed: &mut u64, mut entry: T) {
    let target = cut_chars(entry.target_mut(), TARGET_CHARS);
    *entry.target_mut() = target;
    if let Some(same) = listed.iter_mut().find(|listed| listed.same_as(&entry)) {
        let count = same.count_mut();
        *count = count.saturating_add(1);
    } else if listed.len() < EGRESS_LIST_LIMIT {
        listed.push(entry);
    } else {
        *not_listed = not_listed.saturating_add(1);
    }
}

/// `text` cut to `max` characters, marked when cut.
fn cut_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_that_loops_refused_requests_is_counted_not_listed_without_end() {
        let mut record = EgressRecord::default();
        // The same destination 10,000 times: one entry with its count.
        for _ in 0..10_000 {
            record.refused(EgressRefusal::now(
                "http://10.1.2.3/",
                "private",
                "private address",
            ));
        }
        assert_eq!(record.refusals.len(), 1);
        assert_eq!(record.refusals[0].count, 10_000);
        // 10,000 distinct destinations: the first hundred listed, the rest counted.
        for n in 0..10_000 {
            record.refused(EgressRefusal::now(
                format!("http://10.1.{}.{}/{}", n / 256, n % 256, "x".repeat(1_000)),
                "private",
                "private address",
            ));
        }
        assert_eq!(record.refusals.len(), EGRESS_LIST_LIMIT);
        assert_eq!(record.refusals_not_listed, 10_000 - 99);
        assert_eq!(record.refusals_by_class["private"], 20_000);
        assert!(
            record
                .refusals
                .iter()
                .all(|r| r.target.chars().count() <= TARGET_CHARS + 1)
        );
        // Failures likewise.
        for n in 0..500 {
            record.failed(EgressFailure::now(
                format!("site{n}.test:443"),
                "no-dns-answer",
                "no answer",
            ));
        }
        assert_eq!(record.failures.len(), EGRESS_LIST_LIMIT);
        assert_eq!(record.failures_not_listed, 400);
    }

    #[test]
    fn allowed_destinations_add_up_and_stay_bounded() {
        let mut record = EgressRecord::default();
        let bytes = |up, down| EgressBytes { up, down };
        let mut first = EgressAllowed::new("lab.test:443", 1, bytes(0, 0));
        first.step = Some(2);
        record.allowed(first);
        // Its bytes come when it closes, after a later step began: they add to the entry,
        // which keeps the step of its first connection.
        let mut closed = EgressAllowed::new("lab.test:443", 0, bytes(700, 9_000));
        closed.step = Some(5);
        record.allowed(closed);
        record.allowed(EgressAllowed::new("lab.test:443", 2, bytes(10, 20)));
        assert_eq!(record.allowed.len(), 1);
        let entry = &record.allowed[0];
        assert_eq!(
            (entry.connections, entry.up, entry.down, entry.step),
            (3, 710, 9_020, Some(2))
        );
        for n in 0..500 {
            record.allowed(EgressAllowed::new(
                format!("site{n}.test:443"),
                2,
                bytes(1, 1),
            ));
        }
        assert_eq!(record.allowed.len(), EGRESS_LIST_LIMIT);
        assert_eq!(record.allowed_not_listed, 2 * (500 - 99));
    }

    #[test]
    fn classes_a_driver_makes_up_are_bounded_too() {
        let mut record = EgressRecord::default();
        for n in 0..1_000 {
            record.refused(EgressRefusal::now(
                "http://x.test/",
                format!("class-{n}"),
                "why",
            ));
        }
        assert_eq!(record.refusals_by_class.len(), CLASS_LIMIT + 1);
        assert_eq!(
            record.refusals_by_class["other"],
            1_000 - CLASS_LIMIT as u64
        );
    }
}
