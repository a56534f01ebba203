//! The policy a running proxy judges by, and the routes it leaves by: each swapped whole when a
//! task narrows its scope or picks its route (each request judges one snapshot), with a signal on
//! every swap so connections opened before it (tunnels, which outlive the request that judged
//! them) can be judged again.

use std::sync::{Arc, PoisonError, RwLock};

use airlock_policy::{Decision, EgressPolicy, RouteError, Routes, Scope};
use tokio::sync::watch;

/// The current policy and routes, and the swap signal.
#[derive(Debug)]
pub(crate) struct PolicyCell {
    current: RwLock<Arc<EgressPolicy>>,
    /// The operator's routes, as configured: a task's choice is always made from these.
    configured: Routes,
    routes: RwLock<Arc<Routes>>,
    swapped: watch::Sender<u64>,
}

impl PolicyCell {
    pub(crate) fn new(policy: EgressPolicy, routes: Routes) -> Self {
        Self {
            current: RwLock::new(Arc::new(policy)),
            routes: RwLock::new(Arc::new(routes.clone())),
            configured: routes,
            swapped: watch::Sender::new(0),
        }
    }

    /// The policy as it stands now.
    pub(crate) fn get(&self) -> Arc<EgressPolicy> {
        // A writer only swaps an Arc, so a poisoned lock still holds a whole policy.
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The routes as they stand now.
    pub(crate) fn routes(&self) -> Arc<Routes> {
        // As above: a writer only swaps an Arc.
        Arc::clone(&self.routes.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Judge every request from now on within `scope`, and tell open connections.
    pub(crate) fn set_scope(&self, scope: Scope) {
        {
            let mut policy = self.current.write().unwrap_or_else(PoisonError::into_inner);
            *policy = Arc::new((**policy).clone().with_scope(scope));
        }
        self.swapped.send_modify(|count| *count += 1);
    }

    /// Send every destination no route's sites name by the route `name` from now on, and tell
    /// open connections.
    pub(crate) fn choose_route(&self, name: &str) -> Result<(), RouteError> {
        let chosen = self.configured.choosing(name)?;
        *self.routes.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(chosen);
        self.swapped.send_modify(|count| *count += 1);
        Ok(())
    }

    /// The route a tunnel to `authority` takes now (its name).
    pub(crate) fn route_for(&self, authority: &str) -> String {
        let name = match self.get().decide_authority(authority) {
            Decision::Resolve { name, .. } => Some(name),
            _ => None,
        };
        self.routes().for_host(name.as_deref()).name.clone()
    }

    /// What [`Self::changes_later`] watches: taken before a request is judged, so no swap
    /// between the judgement and the watch goes unseen.
    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.swapped.subscribe()
    }

    /// Resolves once the policy, as swapped after `swapped` was taken, refuses `authority` (a
    /// tunnel's `host:port`), or sends it by a route other than `route`; never while neither.
    pub(crate) async fn changes_later(
        &self,
        mut swapped: watch::Receiver<u64>,
        authority: &str,
        route: &str,
    ) {
        while swapped.changed().await.is_ok() {
            if matches!(self.get().decide_authority(authority), Decision::Refuse(_))
                || self.route_for(authority) != route
            {
                return;
            }
        }
        // The cell outlives every connection; should its sender go, nothing changes again.
        std::future::pending::<()>().await;
    }
}
