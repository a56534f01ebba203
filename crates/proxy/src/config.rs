//! How a proxy is set up: its limits and what it talks to.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use airlock_policy::{EgressPolicy, Routes};

use crate::ProxyError;
use crate::events::EventSink;
use crate::network::{Connector, HickoryResolver, Resolver, TcpConnector};

/// hyper's smallest read buffer; a smaller header cap would make it panic.
const MIN_HEADER_BYTES: usize = 8 * 1024;

/// The proxy's limits. Every one has a default chosen for one browser doing one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyLimits {
    /// How long a client may take to send a request head.
    pub header_read_timeout: Duration,
    /// The largest request head accepted; larger ones get `431`. At least 8 KiB.
    pub max_header_bytes: usize,
    /// How long a name lookup may take.
    pub resolve_timeout: Duration,
    /// How long connecting to one address may take (`504` after it).
    pub connect_timeout: Duration,
    /// How long a tunnel, forwarded exchange or client connection may go without a byte moving.
    pub idle_timeout: Duration,
    /// The most bytes (both directions together) one upstream connection may carry.
    pub max_bytes_per_connection: u64,
    /// The most client connections open at once; more get `503`.
    pub max_connections: usize,
}

impl Default for ProxyLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            max_header_bytes: MIN_HEADER_BYTES,
            resolve_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_bytes_per_connection: 512 * 1024 * 1024,
            max_connections: 256,
        }
    }
}

impl ProxyLimits {
    /// Check every limit, naming the one that is out of range.
    pub fn validate(&self) -> Result<(), ProxyError> {
        let zero = Duration::ZERO;
        let checks: [(&'static str, bool, &'static str); 7] = [
            (
                "header_read_timeout",
                self.header_read_timeout > zero,
                "must be more than zero",
            ),
            (
                "max_header_bytes",
                self.max_header_bytes >= MIN_HEADER_BYTES,
                "must be at least 8192",
            ),
            (
                "resolve_timeout",
                self.resolve_timeout > zero,
                "must be more than zero",
            ),
            (
                "connect_timeout",
                self.connect_timeout > zero,
                "must be more than zero",
            ),
            (
                "idle_timeout",
                self.idle_timeout > zero,
                "must be more than zero",
            ),
            (
                "max_bytes_per_connection",
                self.max_bytes_per_connection > 0,
                "must be more than zero",
            ),
            (
                "max_connections",
                self.max_connections > 0,
                "must be at least 1",
            ),
        ];
        match checks.iter().find(|(_, ok, _)| !ok) {
            Some(&(limit, _, why)) => Err(ProxyError::Limit { limit, why }),
            None => Ok(()),
        }
    }
}

/// Everything a proxy needs to start.
#[derive(Clone)]
pub struct ProxyConfig {
    /// What may be reached.
    pub policy: EgressPolicy,
    /// How what may be reached is reached: directly, or through the operator's parent proxies.
    pub routes: Routes,
    /// Time-outs and caps.
    pub limits: ProxyLimits,
    /// The resolver; `None` uses hickory with the system's nameservers.
    pub resolver: Option<Arc<dyn Resolver>>,
    /// How connections are made; plain TCP by default.
    pub connector: Arc<dyn Connector>,
    /// CA certificates (DER) trusted besides the public roots for TLS to `https://` parents.
    pub parent_cas: Vec<Vec<u8>>,
    /// Who hears about every decision.
    pub events: Option<EventSink>,
    /// Where the private socket directory is made; the system temp dir by default.
    pub socket_parent: Option<PathBuf>,
    /// A short tag naming who made the proxy, put into the private directory's name
    /// (`airlock-egress-<tag>-XXXXXX`), so the maker can find its directories after a crash.
    pub dir_tag: Option<String>,
}

impl std::fmt::Debug for ProxyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyConfig")
            .field("policy", &self.policy)
            .field("routes", &self.routes)
            .field("limits", &self.limits)
            .field("custom_resolver", &self.resolver.is_some())
            .field("parent_cas", &self.parent_cas.len())
            .field("events", &self.events.is_some())
            .field("socket_parent", &self.socket_parent)
            .field("dir_tag", &self.dir_tag)
            .finish_non_exhaustive()
    }
}

impl ProxyConfig {
    /// Default limits, the system resolver, plain TCP, no events.
    pub fn new(policy: EgressPolicy) -> Self {
        Self {
            policy,
            routes: Routes::default(),
            limits: ProxyLimits::default(),
            resolver: None,
            connector: Arc::new(TcpConnector),
            parent_cas: Vec::new(),
            events: None,
            socket_parent: None,
            dir_tag: None,
        }
    }

    /// Reach allowed destinations by these routes instead of directly.
    #[must_use]
    pub fn with_routes(mut self, routes: Routes) -> Self {
        self.routes = routes;
        self
    }

    /// Trust these CA certificates (DER) besides the public roots when speaking TLS to an
    /// `https://` parent (a company's proxy is usually signed by the company's CA).
    #[must_use]
    pub fn with_parent_cas(mut self, certs: Vec<Vec<u8>>) -> Self {
        self.parent_cas = certs;
        self
    }

    /// Resolve with exactly these nameservers instead of the system's.
    pub fn with_nameservers(mut self, servers: &[SocketAddr]) -> Result<Self, ProxyError> {
        self.resolver = Some(Arc::new(HickoryResolver::with_nameservers(servers)?));
        Ok(self)
    }

    /// Use another resolver (tests use a stand-in network).
    #[must_use]
    pub fn with_resolver(mut self, resolver: Arc<dyn Resolver>) -> Self {
        self.resolver = Some(resolver);
        self
    }

    /// Use another connector (tests use a stand-in network).
    #[must_use]
    pub fn with_connector(mut self, connector: Arc<dyn Connector>) -> Self {
        self.connector = connector;
        self
    }

    /// Deliver every decision to `sink`.
    #[must_use]
    pub fn with_events(mut self, sink: EventSink) -> Self {
        self.events = Some(sink);
        self
    }

    /// Name the private directory `airlock-egress-<tag>-XXXXXX`. The tag is up to 48 ASCII letters,
    /// digits and dashes (checked at start), so socket paths stay short.
    #[must_use]
    pub fn with_dir_tag(mut self, tag: impl Into<String>) -> Self {
        self.dir_tag = Some(tag.into());
        self
    }

    /// Use these limits.
    #[must_use]
    pub fn with_limits(mut self, limits: ProxyLimits) -> Self {
        self.limits = limits;
        self
    }
}
