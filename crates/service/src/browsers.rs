//! The service's port to whatever runs browsers: the worker's [`BrowserDriver`] for tasks, plus
//! CDP leases and the warm pools' state. The binary fills it with Docker; the service's own tests
//! with a browser that needs no Docker. Nothing here names a container runtime.

use std::time::Duration;

use airlock_policy::Scope;
use airlock_proxy::EgressEvents;
use airlock_worker::{BoxFuture, BrowserDriver, DriverError, ToolDefinition};

/// Everything the service asks of browsers.
pub trait Browsers: BrowserDriver {
    /// The warm pools as they are now (for `/readyz`, `/metrics` and the dashboard).
    fn pools(&self) -> PoolState;

    /// Lease a browser to a CDP client for at most `lease`, its egress confined to `scope` and
    /// leaving by the route named `route` (`None`: the operator's default).
    fn start_cdp(
        &self,
        lease: Duration,
        scope: Scope,
        route: Option<String>,
    ) -> BoxFuture<'_, Result<Box<dyn CdpLease>, DriverError>>;

    /// The tool a calling agent drives a browser with itself (`agent_browser`, `--direct`).
    fn direct_tool(&self) -> ToolDefinition;
}

/// The warm pools at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolState {
    /// Task browsers ready now.
    pub warm_tasks: usize,
    /// Task browsers the pool keeps ready.
    pub target: usize,
    /// CDP browsers ready now.
    pub warm_cdp: usize,
    /// Why the pool cannot refill, when it cannot.
    pub error: Option<String>,
    /// How the tasks that asked the pool started.
    pub claims: PoolClaims,
    /// How long refills have waited for tasks' first answers, in all.
    pub refill_held: Duration,
    /// Requests the pool's browsers made that no task asked for (a warm page's own traffic).
    pub unasked_requests: u64,
}

/// How the tasks that asked a pool for a browser started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolClaims {
    /// With one that was ready.
    pub warm: u64,
    /// With the one a refill under way was making, when none was ready.
    pub taken_over: u64,
    /// Cold: none ready and no refill under way.
    pub cold: u64,
}

/// A browser leased to one CDP client: messages in, messages out, disposed of at the end.
pub trait CdpLease: Send {
    /// Its container's (or process's) name, for logs.
    fn container(&self) -> &str;
    /// Whether it came from the warm pool.
    fn warm(&self) -> bool;
    /// Send one message to the browser.
    fn send<'a>(&'a mut self, message: &'a str) -> BoxFuture<'a, Result<(), DriverError>>;
    /// The next message from the browser; `None` once it has exited.
    fn next_message(&mut self) -> BoxFuture<'_, Option<Result<String, DriverError>>>;
    /// What its egress proxy refused or failed since the last call.
    fn take_egress_events(&self) -> EgressEvents;
    /// End it: nothing of it is left afterwards.
    fn dispose(self: Box<Self>) -> BoxFuture<'static, ()>;
}
