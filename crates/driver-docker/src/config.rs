//! How the driver is set up: the image, the egress policy, the container's limits, the warm pool.

use std::net::SocketAddr;
use std::time::Duration;

use airlock_policy::{EgressPolicy, Routes};

use crate::spec::Resources;

/// The image tag this version of Airlock expects.
pub fn default_image() -> String {
    format!("airlock-browser:{}", env!("CARGO_PKG_VERSION"))
}

/// How the driver runs tasks.
#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// The browser image.
    pub image: String,
    /// Where the browser may go.
    pub egress: EgressPolicy,
    /// The proxy's limits.
    pub proxy_limits: airlock_proxy::ProxyLimits,
    /// Nameservers for the proxy; empty means the system's.
    pub nameservers: Vec<SocketAddr>,
    /// How allowed destinations are reached: directly, or through the operator's parent
    /// proxies. Every session's proxy starts with them; a task may pick its route by name.
    pub routes: Routes,
    /// Extra CA certificates (DER) the browser trusts beside the public roots, for a parent that
    /// inspects TLS, and the proxy trusts for TLS to an `https://` parent; empty for none.
    pub ca_certs: Vec<Vec<u8>>,
    /// Container limits.
    pub resources: Resources,
    /// The longest one agent-browser command may run.
    pub command_timeout: Duration,
    /// The most output bytes kept from one command. Large enough for the snapshot of a heavy
    /// page (peers report 540 KB); the worker sees a preview and pages the rest.
    pub max_command_output_bytes: usize,
    /// The uid:gid containers run as; `None` (the default) is [`crate::CONTAINER_USER`], which
    /// owns nothing on the host. Never 0, never this process's uid.
    pub user: Option<(u32, u32)>,
    /// How long a container outlives its task's time limit before it exits by itself.
    pub lifetime_grace: Duration,
    /// Chromium's own sandbox. Off only by the user's explicit, logged `--no-browser-sandbox`.
    pub browser_sandbox: bool,
    /// The OCI runtime: `runc` (Docker's default), or `runsc` to run the container under
    /// gVisor's user-space kernel. The daemon must offer it (`check()` says how).
    pub runtime: String,
    /// Sealed browsers kept ready before tasks ask for them.
    pub pool: PoolConfig,
    /// The Docker socket to talk to, such as `airlock-gate`'s; `None` is `DOCKER_HOST` (a
    /// `unix://` one) or the default socket.
    pub docker_socket: Option<std::path::PathBuf>,
    /// What the worker is told about its browser.
    pub guide: crate::Guide,
}

/// The warm pool: how many sealed browsers wait, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// Sessions kept ready at least; 0 for none while no task arrives.
    pub size: usize,
    /// Sessions kept ready at most while tasks arrive (the pool grows with the arrivals of the
    /// last `demand_window` and the tasks that found it empty, and falls back to `size` after a
    /// window with no arrival); `size` or less for a pool of exactly `size`.
    pub max_size: usize,
    /// How far back the pool looks at arrivals.
    pub demand_window: Duration,
    /// A warm session older than this is replaced.
    pub max_age: Duration,
    /// The longest task a warm session may serve (the task time limit), so its container's own
    /// lifetime covers waiting and the task.
    pub task_timeout: Duration,
    /// CDP browsers kept ready for `airlock serve`'s /cdp and `airlock cdp`; 0 for none.
    pub cdp_size: usize,
    /// The longest CDP lease a warm CDP browser may serve.
    pub cdp_lease: Duration,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            size: 0,
            max_size: 0,
            demand_window: Duration::from_secs(60),
            max_age: Duration::from_secs(600),
            task_timeout: Duration::from_secs(300),
            cdp_size: 0,
            cdp_lease: Duration::from_secs(900),
        }
    }
}

impl Default for DriverConfig {
    fn default() -> Self {
        Self {
            image: default_image(),
            egress: EgressPolicy::default(),
            proxy_limits: airlock_proxy::ProxyLimits::default(),
            nameservers: Vec::new(),
            routes: Routes::default(),
            ca_certs: Vec::new(),
            resources: Resources::default(),
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            max_command_output_bytes: 2 * 1024 * 1024,
            user: None,
            lifetime_grace: Duration::from_secs(60),
            browser_sandbox: true,
            runtime: "runc".to_owned(),
            pool: PoolConfig::default(),
            docker_socket: None,
            guide: crate::Guide::default(),
        }
    }
}

/// How long one browser command may take unless the operator says otherwise: the seed's 60 s,
/// room for a slow page and for a `wait` given a longer `--timeout` than agent-browser's 25 s.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// The command that builds the image, quoted when it is missing.
pub(crate) const BUILD_COMMAND: &str = "cargo xtask image";
