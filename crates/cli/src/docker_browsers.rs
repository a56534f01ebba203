//! The service's [`Browsers`] port, filled by the Docker driver: each call passes straight through.

use std::sync::Arc;
use std::time::Duration;

use airlock_driver_docker::{AgentBrowserInput, CdpBrowser, DockerDriver, TOOL_NAME};
use airlock_policy::Scope;
use airlock_service::{Browsers, CdpLease, EgressEvents, PoolClaims, PoolState};
use airlock_worker::{
    BoxFuture, BrowserDriver, BrowserSession, DriverError, TaskContext, ToolDefinition,
};

/// Sealed browsers in Docker containers.
pub(crate) struct DockerBrowsers(pub(crate) Arc<DockerDriver>);

impl BrowserDriver for DockerBrowsers {
    fn check(&self) -> BoxFuture<'_, Result<(), DriverError>> {
        self.0.check()
    }

    fn start(&self, context: TaskContext) -> BoxFuture<'_, Result<BrowserSession, DriverError>> {
        self.0.start(context)
    }
}

impl Browsers for DockerBrowsers {
    fn pools(&self) -> PoolState {
        let claims = self.0.pool_claims();
        PoolState {
            warm_tasks: self.0.warm_sessions(),
            target: self.0.pool_target(),
            warm_cdp: self.0.warm_cdp_browsers(),
            error: self.0.pool_error(),
            claims: PoolClaims {
                warm: claims.warm,
                taken_over: claims.taken_over,
                cold: claims.cold,
            },
            refill_held: self.0.pool_refill_held(),
            unasked_requests: self.0.unasked_requests(),
        }
    }

    fn start_cdp(
        &self,
        lease: Duration,
        scope: Scope,
        route: Option<String>,
    ) -> BoxFuture<'_, Result<Box<dyn CdpLease>, DriverError>> {
        Box::pin(async move {
            let browser = self.0.start_cdp(lease, scope, route.as_deref()).await?;
            Ok(Box::new(DockerCdpLease(browser)) as Box<dyn CdpLease>)
        })
    }

    fn direct_tool(&self) -> ToolDefinition {
        // The service describes the tool in its own words; the name and input are the driver's.
        ToolDefinition::for_input::<AgentBrowserInput>(TOOL_NAME, "")
    }
}

/// A CDP browser in its container.
struct DockerCdpLease(CdpBrowser);

impl CdpLease for DockerCdpLease {
    fn container(&self) -> &str {
        self.0.container()
    }

    fn warm(&self) -> bool {
        self.0.warm()
    }

    fn send<'a>(&'a mut self, message: &'a str) -> BoxFuture<'a, Result<(), DriverError>> {
        Box::pin(async move { self.0.send(message).await.map_err(DriverError::new) })
    }

    fn next_message(&mut self) -> BoxFuture<'_, Option<Result<String, DriverError>>> {
        Box::pin(async move {
            self.0
                .next_message()
                .await
                .map(|message| message.map_err(DriverError::new))
        })
    }

    fn take_egress_events(&self) -> EgressEvents {
        self.0.take_egress_events()
    }

    fn dispose(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(self.0.dispose())
    }
}
