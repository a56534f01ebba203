//! The two ways the proxy touches the network, as small traits so tests can stand in for them:
//! resolving a name, and opening a TCP connection to an address the policy vetted.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;

use hickory_resolver::TokioResolver;
use hickory_resolver::config::{NameServerConfig, ResolveHosts, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use tokio::net::TcpStream;

/// A boxed future, so the traits stay object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a name has no addresses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// The name does not exist or has no A/AAAA records.
    #[error("`{name}` does not resolve")]
    NotFound {
        /// The name.
        name: String,
    },
    /// The lookup itself failed (no answer from the nameservers, a time-out, …).
    #[error("looking up `{name}` failed: {message}")]
    Failed {
        /// The name.
        name: String,
        /// What the resolver said.
        message: String,
    },
}

/// Resolves a name to every address it has. Called at most once per request.
pub trait Resolver: Send + Sync + 'static {
    /// All A and AAAA answers for `name`.
    fn resolve<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Vec<IpAddr>, ResolveError>>;
}

/// Opens a connection to one address. Only ever called with an address the policy vetted.
///
/// A real TCP socket, even in tests (which route a destination to a loopback listener): a
/// tunnel's bytes move between socket descriptors in the kernel (`splice`).
pub trait Connector: Send + Sync + 'static {
    /// Connect to `address`.
    fn connect(&self, address: SocketAddr) -> BoxFuture<'_, io::Result<TcpStream>>;
}

/// The real connector: a plain TCP connection with `TCP_NODELAY`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpConnector;

impl Connector for TcpConnector {
    fn connect(&self, address: SocketAddr) -> BoxFuture<'_, io::Result<TcpStream>> {
        Box::pin(async move {
            let stream = TcpStream::connect(address).await?;
            // Small request/response exchanges dominate browsing; Nagle only adds latency here.
            stream.set_nodelay(true)?;
            Ok(stream)
        })
    }
}

/// The real resolver: hickory, with the system's nameservers or the ones given.
///
/// It never reads the host's `/etc/hosts` and uses no search domains, so the browser sees the
/// public DNS view of a name, not names that only mean something on this machine.
#[derive(Clone)]
pub struct HickoryResolver {
    inner: TokioResolver,
}

impl std::fmt::Debug for HickoryResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HickoryResolver").finish_non_exhaustive()
    }
}

impl HickoryResolver {
    /// Use the system's nameservers (`/etc/resolv.conf`).
    pub fn system() -> Result<Self, ResolveError> {
        let (config, _) = hickory_resolver::system_conf::read_system_conf().map_err(|e| {
            ResolveError::Failed {
                name: "/etc/resolv.conf".into(),
                message: e.to_string(),
            }
        })?;
        let (_, _, servers) = config.into_parts();
        Self::from_servers(servers)
    }

    /// Use exactly these nameservers (UDP, then TCP), for example a lab resolver.
    pub fn with_nameservers(servers: &[SocketAddr]) -> Result<Self, ResolveError> {
        let servers = servers
            .iter()
            .map(|server| {
                let mut config = NameServerConfig::udp_and_tcp(server.ip());
                for connection in &mut config.connections {
                    connection.port = server.port();
                }
                config
            })
            .collect();
        Self::from_servers(servers)
    }

    fn from_servers(servers: Vec<NameServerConfig>) -> Result<Self, ResolveError> {
        let config = ResolverConfig::from_parts(None, Vec::new(), servers);
        let mut options = ResolverOpts::default();
        options.use_hosts_file = ResolveHosts::Never;
        options.ndots = 0;
        let inner = TokioResolver::builder_with_config(config, TokioRuntimeProvider::default())
            .with_options(options)
            .build()
            .map_err(|e| ResolveError::Failed {
                name: "resolver configuration".into(),
                message: e.to_string(),
            })?;
        Ok(Self { inner })
    }
}

impl Resolver for HickoryResolver {
    fn resolve<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Vec<IpAddr>, ResolveError>> {
        Box::pin(async move {
            // A trailing dot makes the name absolute, so no search rules apply.
            let absolute = format!("{name}.");
            match self.inner.lookup_ip(absolute.as_str()).await {
                Ok(lookup) => {
                    let addresses: Vec<IpAddr> = lookup.iter().collect();
                    if addresses.is_empty() {
                        Err(ResolveError::NotFound {
                            name: name.to_owned(),
                        })
                    } else {
                        Ok(addresses)
                    }
                }
                Err(error) if error.is_nx_domain() || error.is_no_records_found() => {
                    Err(ResolveError::NotFound {
                        name: name.to_owned(),
                    })
                }
                Err(error) => Err(ResolveError::Failed {
                    name: name.to_owned(),
                    message: error.to_string(),
                }),
            }
        })
    }
}
