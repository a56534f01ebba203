//! Airlock's egress proxy: the sealed browser's only way out.
//!
//! The proxy serves HTTP/1.1 on a Unix socket in a fresh private directory (mode 0700). The
//! browser's container has no network; the directory, bind-mounted into it, is its one way out.
//! Beside `proxy.sock` is `handoff.sock`, where the container's relay passes each of the
//! browser's TCP connections itself (see [`airlock_relay`]); the proxy serves those sockets
//! exactly like connections made to `proxy.sock`, with no relay copying bytes in between.
//!
//! - `CONNECT host:port` opens a tunnel (HTTPS, WebSockets); absolute-form requests
//!   (`GET http://host/path`) are forwarded in origin form, each on its own upstream connection,
//!   without hop-by-hop or `Proxy-*` headers. Anything else gets a clear `4xx`.
//! - Every request is judged by the [`EgressPolicy`](airlock_policy::EgressPolicy): the authority
//!   first, then every address the proxy's own resolver returned. The proxy connects only to an
//!   address it vetted and never resolves twice for one request, so DNS rebinding reaches nothing.
//! - A refusal answers `403` with an [`REFUSED_HEADER`] header naming the reason; a name that does
//!   not resolve `502`; a connect time-out `504`. Every decision is also a [`ProxyEvent`].
//!
//! ```
//! use airlock_policy::EgressPolicy;
//! use airlock_proxy::{EgressProxy, ProxyConfig};
//!
//! # let runtime = tokio::runtime::Runtime::new().unwrap();
//! # runtime.block_on(async {
//! let proxy = EgressProxy::start(ProxyConfig::new(EgressPolicy::default())).unwrap();
//! let socket = proxy.socket_path().to_owned();
//! assert!(socket.exists()); // point the browser (through a relay) at this socket
//! proxy.stop().await;
//! assert!(!socket.exists()); // the socket and its private directory are gone
//! # });
//! ```

mod events;
mod guard;
mod network;
mod server;

use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use airlock_policy::EgressPolicy;
use tokio::net::UnixListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use events::{EventSink, Outcome, ProxyEvent, ProxyStats, Via};
pub use network::{
    BoxFuture, Connector, HickoryResolver, ResolveError, Resolver, TcpConnector, Upstream,
};

use events::Counters;
use server::{Shared, accept_loop};

/// The response header that carries the reason for a refusal.
pub const REFUSED_HEADER: &str = "x-airlock-refused";

/// The socket's file name inside the private directory.
pub const SOCKET_NAME: &str = "proxy.sock";

/// The hand-off socket's file name inside the private directory.
pub const HANDOFF_SOCKET_NAME: &str = "handoff.sock";

/// hyper's smallest read buffer; a smaller header cap would make it panic.
const MIN_HEADER_BYTES: usize = 8 * 1024;

/// The proxy's limits. Every one has a default chosen for one browser doing one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
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

impl Default for Limits {
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

impl Limits {
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
    /// Time-outs and caps.
    pub limits: Limits,
    /// The resolver; `None` uses hickory with the system's nameservers.
    pub resolver: Option<Arc<dyn Resolver>>,
    /// How connections are made; plain TCP by default.
    pub connector: Arc<dyn Connector>,
    /// Who hears about every decision.
    pub events: Option<EventSink>,
    /// Where the private socket directory is made; the system temp dir by default.
    pub socket_parent: Option<PathBuf>,
}

impl std::fmt::Debug for ProxyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyConfig")
            .field("policy", &self.policy)
            .field("limits", &self.limits)
            .field("custom_resolver", &self.resolver.is_some())
            .field("events", &self.events.is_some())
            .field("socket_parent", &self.socket_parent)
            .finish_non_exhaustive()
    }
}

impl ProxyConfig {
    /// Default limits, the system resolver, plain TCP, no events.
    pub fn new(policy: EgressPolicy) -> Self {
        Self {
            policy,
            limits: Limits::default(),
            resolver: None,
            connector: Arc::new(TcpConnector),
            events: None,
            socket_parent: None,
        }
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

    /// Use these limits.
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
}

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// A file-system or socket operation failed.
    #[error("could not {action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// On what.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Something already exists where the socket should go.
    #[error("{} already exists: remove it, or choose another path", path.display())]
    SocketExists {
        /// The path.
        path: PathBuf,
    },
    /// The resolver could not be set up.
    #[error(transparent)]
    Resolver(#[from] ResolveError),
    /// A limit out of range.
    #[error("proxy limit `{limit}` {why}")]
    Limit {
        /// The limit's name.
        limit: &'static str,
        /// What it must be.
        why: &'static str,
    },
}

/// A running egress proxy. Stop it with [`EgressProxy::stop`]; dropping it also ends every
/// connection and removes the socket and its directory.
pub struct EgressProxy {
    socket_path: PathBuf,
    handoff_path: Option<PathBuf>,
    private_dir: Option<tempfile::TempDir>,
    shutdown: CancellationToken,
    accept: Option<JoinHandle<()>>,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for EgressProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressProxy")
            .field("socket_path", &self.socket_path)
            .finish_non_exhaustive()
    }
}

impl EgressProxy {
    /// Start on `proxy.sock` and `handoff.sock` in a fresh private directory (mode 0700, owned by
    /// this user). Call it inside a Tokio runtime: the proxy runs on the runtime's tasks.
    pub fn start(config: ProxyConfig) -> Result<Self, ProxyError> {
        let parent = config
            .socket_parent
            .clone()
            .unwrap_or_else(std::env::temp_dir);
        let dir = tempfile::Builder::new()
            .prefix("airlock-egress-")
            .tempdir_in(&parent)
            .map_err(|source| ProxyError::Io {
                action: "create a private directory in",
                path: parent.clone(),
                source,
            })?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).map_err(
            |source| ProxyError::Io {
                action: "restrict",
                path: dir.path().to_owned(),
                source,
            },
        )?;
        let socket_path = dir.path().join(SOCKET_NAME);
        let handoff_path = dir.path().join(HANDOFF_SOCKET_NAME);
        Self::spawn(socket_path, Some(handoff_path), Some(dir), config)
    }

    /// Start on an explicit socket path (for `airlock proxy --socket`), and take handed-off
    /// connections on `handoff_path` if given. Neither path may exist. Call it inside a Tokio
    /// runtime.
    pub fn start_at(
        socket_path: &Path,
        handoff_path: Option<&Path>,
        config: ProxyConfig,
    ) -> Result<Self, ProxyError> {
        for path in std::iter::once(socket_path).chain(handoff_path) {
            if path.symlink_metadata().is_ok() {
                return Err(ProxyError::SocketExists {
                    path: path.to_owned(),
                });
            }
        }
        Self::spawn(
            socket_path.to_owned(),
            handoff_path.map(Path::to_owned),
            None,
            config,
        )
    }

    fn spawn(
        socket_path: PathBuf,
        handoff_path: Option<PathBuf>,
        private_dir: Option<tempfile::TempDir>,
        config: ProxyConfig,
    ) -> Result<Self, ProxyError> {
        config.limits.validate()?;
        let resolver: Arc<dyn Resolver> = match config.resolver {
            Some(resolver) => resolver,
            None => Arc::new(HickoryResolver::system()?),
        };
        let listener = listen_private(&socket_path)?;
        let handoff = match &handoff_path {
            Some(path) => match listen_private(path) {
                Ok(listener) => Some(listener),
                Err(error) => {
                    // Do not leave the first socket behind when the second cannot be made.
                    let _ = std::fs::remove_file(&socket_path);
                    return Err(error);
                }
            },
            None => None,
        };
        let counters = Arc::new(Counters::default());
        let shutdown = CancellationToken::new();
        let shared = Arc::new(Shared {
            policy: config.policy,
            limits: config.limits,
            resolver,
            connector: config.connector,
            events: config.events,
            counters: Arc::clone(&counters),
            shutdown: shutdown.clone(),
        });
        let accept = tokio::spawn(accept_loop(listener, handoff, shared));
        Ok(Self {
            socket_path,
            handoff_path,
            private_dir,
            shutdown,
            accept: Some(accept),
            counters,
        })
    }

    /// The socket to connect to.
    pub fn socket_path(&self) -> &Path {
        &self.socket_path
    }

    /// The hand-off socket, if this proxy has one (it always does when made by [`Self::start`]).
    pub fn handoff_path(&self) -> Option<&Path> {
        self.handoff_path.as_deref()
    }

    /// The directory holding the socket, which is what a container bind-mounts.
    pub fn socket_dir(&self) -> &Path {
        self.socket_path.parent().unwrap_or(Path::new("/"))
    }

    /// The counters now.
    pub fn stats(&self) -> ProxyStats {
        self.counters.snapshot()
    }

    /// Stop accepting, end every open connection and tunnel, and remove the socket (and the
    /// private directory). Waits until all of that is done.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(accept) = self.accept.take() {
            // The loop ends on cancellation; a panic in it has nothing left to clean up.
            let _ = accept.await;
        }
        self.remove_files();
    }

    fn remove_files(&mut self) {
        match self.private_dir.take() {
            Some(dir) => {
                let path = dir.path().to_owned();
                if let Err(error) = dir.close() {
                    tracing::warn!(%error, path = %path.display(), "could not remove the proxy's directory");
                }
            }
            None => {
                for path in std::iter::once(&self.socket_path).chain(&self.handoff_path) {
                    if let Err(error) = std::fs::remove_file(path)
                        && error.kind() != io::ErrorKind::NotFound
                    {
                        tracing::warn!(%error, path = %path.display(), "could not remove a proxy socket");
                    }
                }
            }
        }
    }
}

/// Listen on `path`, which only this user (and a container running as this user) may connect to.
fn listen_private(path: &Path) -> Result<UnixListener, ProxyError> {
    let listener = UnixListener::bind(path).map_err(|source| ProxyError::Io {
        action: "listen on",
        path: path.to_owned(),
        source,
    })?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(|source| {
        let _ = std::fs::remove_file(path);
        ProxyError::Io {
            action: "restrict",
            path: path.to_owned(),
            source,
        }
    })?;
    Ok(listener)
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(accept) = self.accept.take() {
            accept.abort();
        }
        self.remove_files();
    }
}
