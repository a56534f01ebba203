//! Airlock's egress proxy: the sealed browser's only way out.
//!
//! The proxy serves HTTP/1.1 on a Unix socket in a fresh private directory (mode 0700). The
//! browser's container has no network; the directory's `sockets` folder, bind-mounted into it, is
//! its one way out. The container runs as a uid of its own, so the folder and its sockets are open
//! to any uid (0711, 0666), and only the private directory around them keeps the host's other
//! users out: a mount is reached without passing through its parent.
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

mod accept;
mod bounded;
mod client;
mod closing;
mod config;
mod connection;
mod events;
mod http;
mod network;
mod parent;
mod parent_tls;
mod policy_cell;
mod request;
mod slot;
mod stop;
mod tunnel;
mod upstream;
mod vet;

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use airlock_policy::{EgressPolicy, Scope};

use tokio::net::UnixListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use config::{ProxyConfig, ProxyLimits};
pub use events::{EgressEvents, EventSink, FAILURE_CLASSES, Outcome, ProxyEvent, ProxyStats, Via};
pub use network::{BoxFuture, Connector, HickoryResolver, ResolveError, Resolver, TcpConnector};

use accept::accept_loop;
use connection::Shared;
use events::Counters;

/// The response header that carries the reason for a refusal.
pub const REFUSED_HEADER: &str = "x-airlock-refused";

/// How every private directory's name starts.
pub const DIR_PREFIX: &str = "airlock-egress-";

/// The socket's file name inside the private directory.
const SOCKET_NAME: &str = "proxy.sock";

/// The hand-off socket's file name inside the private directory.
pub const HANDOFF_SOCKET_NAME: &str = "handoff.sock";

/// The folder inside the private directory that holds the sockets and is mounted into a container.
pub const SOCKETS_DIR: &str = "sockets";

/// The sockets of a private directory: any uid may connect (the container's own uid is not this
/// process's), and only the 0700 directory above them admits anyone on the host.
const SHARED_SOCKET_MODE: u32 = 0o666;
/// A socket at a path the caller chose: this user only.
const PRIVATE_SOCKET_MODE: u32 = 0o600;

/// How long a stop waits for open tunnels and forwarded connections to end.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

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
    /// A directory tag that is not 1 to 48 ASCII letters, digits and dashes.
    #[error("the directory tag `{tag}` must be 1 to 48 ASCII letters, digits and dashes")]
    DirTag {
        /// The tag given.
        tag: String,
    },
    /// A limit out of range.
    #[error("proxy limit `{limit}` {why}")]
    Limit {
        /// The limit's name.
        limit: &'static str,
        /// What it must be.
        why: &'static str,
    },
    /// A CA given for TLS to parents does not parse.
    #[error(
        "CA certificate {} for the parents' TLS does not parse ({reason}): give the CA's certificate as PEM",
        index + 1
    )]
    ParentCa {
        /// Which one (from 0, in the order given).
        index: usize,
        /// What was wrong with it.
        reason: String,
    },
    /// The TLS library refused its own defaults for parents (a build of rustls without them).
    #[error("TLS to parents cannot be set up ({0}): rebuild with rustls' ring provider")]
    ParentTls(String),
}

/// A running egress proxy. Stop it with [`EgressProxy::stop`]; dropping it also ends every
/// connection and removes the socket and its directory.
pub struct EgressProxy {
    socket_path: PathBuf,
    handoff_path: Option<PathBuf>,
    private_dir: Option<tempfile::TempDir>,
    shutdown: CancellationToken,
    accept: Option<JoinHandle<()>>,
    tasks: TaskTracker,
    counters: Arc<Counters>,
    policy: Arc<policy_cell::PolicyCell>,
}

/// Sets a running proxy's scope (see [`EgressProxy::scope_handle`]); requests already judged
/// stand, every later one meets the new scope.
#[derive(Clone)]
pub struct ScopeHandle(Arc<policy_cell::PolicyCell>);

impl std::fmt::Debug for ScopeHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopeHandle").finish_non_exhaustive()
    }
}

impl ScopeHandle {
    /// Confine every request from now on to `scope`; open tunnels to what it refuses close.
    pub fn set_scope(&self, scope: Scope) {
        self.0.set_scope(scope);
    }
}

impl std::fmt::Debug for EgressProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressProxy")
            .field("socket_path", &self.socket_path)
            .finish_non_exhaustive()
    }
}

impl EgressProxy {
    /// Start on `proxy.sock` and `handoff.sock` in the `sockets` folder of a fresh private
    /// directory (mode 0700, owned by this user). Call it inside a Tokio runtime: the proxy runs
    /// on the runtime's tasks.
    pub fn start(config: ProxyConfig) -> Result<Self, ProxyError> {
        let parent = config
            .socket_parent
            .clone()
            .unwrap_or_else(std::env::temp_dir);
        let prefix = match &config.dir_tag {
            Some(tag)
                if !tag.is_empty()
                    && tag.len() <= 48
                    && tag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') =>
            {
                format!("{DIR_PREFIX}{tag}-")
            }
            Some(tag) => return Err(ProxyError::DirTag { tag: tag.clone() }),
            None => DIR_PREFIX.to_owned(),
        };
        let dir = tempfile::Builder::new()
            .prefix(&prefix)
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
        let sockets = dir.path().join(SOCKETS_DIR);
        std::fs::create_dir(&sockets)
            .and_then(|()| {
                std::fs::set_permissions(&sockets, std::fs::Permissions::from_mode(0o711))
            })
            .map_err(|source| ProxyError::Io {
                action: "create the sockets folder",
                path: sockets.clone(),
                source,
            })?;
        let socket_path = sockets.join(SOCKET_NAME);
        let handoff_path = sockets.join(HANDOFF_SOCKET_NAME);
        Self::spawn(
            socket_path,
            Some(handoff_path),
            Some(dir),
            SHARED_SOCKET_MODE,
            config,
        )
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
            PRIVATE_SOCKET_MODE,
            config,
        )
    }

    fn spawn(
        socket_path: PathBuf,
        handoff_path: Option<PathBuf>,
        private_dir: Option<tempfile::TempDir>,
        socket_mode: u32,
        config: ProxyConfig,
    ) -> Result<Self, ProxyError> {
        config.limits.validate()?;
        let parent_tls = parent_tls::ParentTls::new(&config.parent_cas)?;
        let resolver: Arc<dyn Resolver> = match config.resolver {
            Some(resolver) => resolver,
            None => Arc::new(HickoryResolver::system()?),
        };
        let listener = listen(&socket_path, socket_mode)?;
        let handoff = match &handoff_path {
            Some(path) => match listen(path, socket_mode) {
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
        let tasks = TaskTracker::new();
        let policy = Arc::new(policy_cell::PolicyCell::new(config.policy, config.routes));
        let shared = Arc::new(Shared {
            policy: Arc::clone(&policy),
            limits: config.limits,
            resolver,
            connector: config.connector,
            parent_tls,
            events: config.events,
            counters: Arc::clone(&counters),
            shutdown: shutdown.clone(),
            tasks: tasks.clone(),
        });
        let accept = tokio::spawn(accept_loop(listener, handoff, shared));
        Ok(Self {
            socket_path,
            handoff_path,
            private_dir,
            shutdown,
            accept: Some(accept),
            tasks,
            counters,
            policy,
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

    /// The private directory [`Self::start`] made (removed with the proxy); `None` for
    /// [`Self::start_at`].
    pub fn private_dir(&self) -> Option<&Path> {
        self.private_dir.as_ref().map(tempfile::TempDir::path)
    }

    /// Confine every request from now on to `scope` (a warm browser's proxy, once a task with
    /// a scope takes it). The address rule and the rest of the policy stay as they were.
    pub fn set_scope(&self, scope: Scope) {
        self.scope_handle().set_scope(scope);
    }

    /// Send every destination no route's sites name by the configured route `name` from now on
    /// (a task's choice, made before its first request); open tunnels on another route close.
    ///
    /// # Errors
    /// When no route has that name (the error lists those there are).
    pub fn choose_route(&self, name: &str) -> Result<(), airlock_policy::RouteError> {
        self.policy.choose_route(name)
    }

    /// The name of the route destinations no route's sites name take now.
    pub fn default_route(&self) -> String {
        self.policy.routes().default_name().to_owned()
    }

    /// A handle that narrows this proxy's scope later, held by whoever must do it mid-task.
    pub fn scope_handle(&self) -> ScopeHandle {
        ScopeHandle(Arc::clone(&self.policy))
    }

    /// The policy requests are judged by now.
    pub fn policy(&self) -> Arc<EgressPolicy> {
        self.policy.get()
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
        // Tunnels and forwarded connections end on the same cancellation; waiting for them
        // delivers their closing events before `stop` returns. Bounded, though a task that
        // ignored the cancellation would be a bug here.
        self.tasks.close();
        if tokio::time::timeout(STOP_WAIT, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("egress proxy connections did not end within 5 s of the stop");
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

/// The longest path a Unix socket address holds (`sun_path` is 108 bytes with its NUL).
const SUN_PATH_MAX: usize = 107;

/// Listen on `path` with `mode`.
fn listen(path: &Path, mode: u32) -> Result<UnixListener, ProxyError> {
    let listener = bind_any_length(path).map_err(|source| ProxyError::Io {
        action: "listen on",
        path: path.to_owned(),
        source,
    })?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|source| {
        let _ = std::fs::remove_file(path);
        ProxyError::Io {
            action: "restrict",
            path: path.to_owned(),
            source,
        }
    })?;
    Ok(listener)
}

/// Bind a Unix socket at `path` however deep its directory is. A path past the 108 bytes a
/// socket address holds (a deep `TMPDIR`, as CI runners and test harnesses have) is bound
/// through the directory's descriptor instead (`/proc/self/fd/N/NAME`, which the kernel resolves
/// to the same directory), so the socket lands at `path` all the same. Clients in a container
/// reach it by the short path it is mounted at.
fn bind_any_length(path: &Path) -> io::Result<UnixListener> {
    if path.as_os_str().len() <= SUN_PATH_MAX {
        return UnixListener::bind(path);
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return UnixListener::bind(path);
    };
    let dir = std::fs::File::open(dir)?;
    let short = Path::new("/proc/self/fd")
        .join(std::os::fd::AsRawFd::as_raw_fd(&dir).to_string())
        .join(name);
    // The descriptor stays open until the bind has resolved the path through it.
    let listener = UnixListener::bind(&short);
    drop(dir);
    listener
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
