//! What the proxy reports: one event per decision, one when an allowed connection closes, and
//! running counters.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use crate::bounded::ByteCounters;

/// How the browser asked for a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `CONNECT host:port` (HTTPS, WebSockets).
    Connect,
    /// An absolute-form request (`GET http://host/path`).
    Forward,
}

impl Via {
    /// `CONNECT` or `FORWARD`, for logs.
    pub const fn label(self) -> &'static str {
        match self {
            Self::Connect => "CONNECT",
            Self::Forward => "FORWARD",
        }
    }
}

/// What became of one request, or (`Closed`) of the connection an allowed one opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Connected to a vetted address.
    Allowed {
        /// The address actually connected to (through a parent, the vetted address it was asked
        /// for; for a name the parent resolved, the parent's own).
        address: SocketAddr,
        /// The route it left by (`direct`, or a parent's).
        route: String,
    },
    /// Refused by the egress policy (`403`).
    Refused {
        /// The policy's reason, as a person reads it (for the host: logs, the caller's record).
        reason: String,
        /// What the page was told: the reason without the addresses a refused name resolved
        /// to. Whatever reads the browser (the worker, a CDP client) gets this one.
        page_reason: String,
        /// A short stable class (`loopback`, `port`, `never-opened`, …).
        class: &'static str,
    },
    /// The connection an `Allowed` request opened has ended, however it ended (the same `via`
    /// and `target`); what it carried.
    Closed {
        /// Bytes sent to the destination.
        up: u64,
        /// Bytes received from it.
        down: u64,
        /// The route it left by.
        route: String,
    },
    /// Allowed, but the destination could not be reached (`502`/`504`), or the request was
    /// malformed (`4xx`).
    Failed {
        /// The HTTP status answered.
        status: u16,
        /// What the proxy saw, as a short stable class: one of [`FAILURE_CLASSES`].
        class: &'static str,
        /// Why, as a person reads it.
        reason: String,
    },
}

/// Every class an [`Outcome::Failed`] may carry: a fixed set, which a metric may use as a label.
pub const FAILURE_CLASSES: [&str; 16] = [
    "bad-request",
    "no-dns-answer",
    "dns-failed",
    "dns-timeout",
    "no-address",
    "connect-refused",
    "connect-failed",
    "connect-timeout",
    "upstream-failed",
    "upstream-timeout",
    "parent-unreachable",
    "parent-credentials",
    "parent-refused",
    "parent-failed",
    "parent-tls",
    "parent-timeout",
];

/// One decision of the proxy, delivered to whoever started it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyEvent {
    /// When it was decided.
    pub at: SystemTime,
    /// How it was asked for.
    pub via: Via,
    /// The destination as the browser wrote it (`host:port` or the URL without its query).
    pub target: String,
    /// What became of it.
    pub outcome: Outcome,
}

impl ProxyEvent {
    /// Whether the egress policy refused it.
    pub fn is_refusal(&self) -> bool {
        matches!(self.outcome, Outcome::Refused { .. })
    }
}

/// Receives every event. Called on the proxy's tasks: keep it quick and never block.
pub type EventSink = Arc<dyn Fn(ProxyEvent) + Send + Sync>;

/// A snapshot of the proxy's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Client connections accepted.
    pub connections: u64,
    /// Client connections open now.
    pub active_connections: u64,
    /// Client connections turned away because too many were open.
    pub busy_rejections: u64,
    /// Of `connections`, those handed off by a relay on the hand-off socket.
    pub handed_off: u64,
    /// Hand-off messages refused (not exactly one connected TCP socket); each closes its channel.
    pub handoff_refusals: u64,
    /// CONNECT tunnels opened.
    pub tunnels: u64,
    /// Absolute-form requests forwarded.
    pub forwarded: u64,
    /// Bytes sent to destinations.
    pub bytes_up: u64,
    /// Bytes received from destinations.
    pub bytes_down: u64,
    /// Refusals, counted by class.
    pub refusals: BTreeMap<String, u64>,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) connections: AtomicU64,
    pub(crate) active_connections: AtomicU64,
    pub(crate) busy_rejections: AtomicU64,
    pub(crate) handed_off: AtomicU64,
    pub(crate) handoff_refusals: AtomicU64,
    pub(crate) tunnels: AtomicU64,
    pub(crate) forwarded: AtomicU64,
    pub(crate) upstream: UpstreamCounters,
    refusals: Mutex<BTreeMap<String, u64>>,
}

#[derive(Debug, Default)]
pub(crate) struct UpstreamCounters {
    bytes_up: Arc<AtomicU64>,
    bytes_down: Arc<AtomicU64>,
}

impl Counters {
    /// The counters of one new upstream connection: the totals, and its own.
    pub(crate) fn upstream_bytes(&self) -> ByteCounters {
        ByteCounters {
            read: Arc::clone(&self.upstream.bytes_down),
            written: Arc::clone(&self.upstream.bytes_up),
            own: Some(Arc::default()),
        }
    }

    pub(crate) fn count_refusal(&self, class: &str) {
        // A poisoned map only means another thread panicked mid-increment; the counts stay usable.
        let mut refusals = self.refusals.lock().unwrap_or_else(PoisonError::into_inner);
        *refusals.entry(class.to_owned()).or_default() += 1;
    }

    pub(crate) fn snapshot(&self) -> ProxyStats {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        ProxyStats {
            connections: load(&self.connections),
            active_connections: load(&self.active_connections),
            busy_rejections: load(&self.busy_rejections),
            handed_off: load(&self.handed_off),
            handoff_refusals: load(&self.handoff_refusals),
            tunnels: load(&self.tunnels),
            forwarded: load(&self.forwarded),
            bytes_up: load(&self.upstream.bytes_up),
            bytes_down: load(&self.upstream.bytes_down),
            refusals: self
                .refusals
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        }
    }
}

/// What a proxy refused or failed since someone last looked (allowed requests are not kept).
#[derive(Debug, Default)]
pub struct EgressEvents {
    /// The first events, whole.
    pub events: Vec<ProxyEvent>,
    /// Refusals past them, by class.
    pub more_refused: Vec<(&'static str, u64)>,
    /// Failures past them.
    pub more_failed: u64,
}
