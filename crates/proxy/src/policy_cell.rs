//! The policy a running proxy judges by: swapped whole when a task narrows its scope (each
//! request judges one snapshot), with a signal on every swap so connections opened before it
//! (tunnels, which outlive the request that judged them) can be judged again.

use std::sync::{Arc, PoisonError, RwLock};

use airlock_policy::{Decision, EgressPolicy, Scope};
use tokio::sync::watch;

/// The current policy and the swap signal.
#[derive(Debug)]
pub(crate) struct PolicyCell {
    current: RwLock<Arc<EgressPolicy>>,
    swapped: watch::Sender<u64>,
}

impl PolicyCell {
    pub(crate) fn new(policy: EgressPolicy) -> Self {
        Self {
            current: RwLock::new(Arc::new(policy)),
            swapped: watch::Sender::new(0),
        }
    }

    /// The policy as it stands now.
    pub(crate) fn get(&self) -> Arc<EgressPolicy> {
        // A writer only swaps an Arc, so a poisoned lock still holds a whole policy.
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Judge every request from now on within `scope`, and tell open connections.
    pub(crate) fn set_scope(&self, scope: Scope) {
        {
            let mut policy = self.current.write().unwrap_or_else(PoisonError::into_inner);
            *policy = Arc::new((**policy).clone().with_scope(scope));
        }
        self.swapped.send_modify(|count| *count += 1);
    }

    /// What [`Self::refuses_later`] watches: taken before a request is judged, so no swap
    /// between the judgement and the watch goes unseen.
    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.swapped.subscribe()
    }

    /// Resolves once the policy, as swapped after `swapped` was taken, refuses `authority` (a
    /// tunnel's `host:port`); never while it allows it.
    pub(crate) async fn refuses_later(&self, mut swapped: watch::Receiver<u64>, authority: &str) {
        while swapped.changed().await.is_ok() {
            if matches!(self.get().decide_authority(authority), Decision::Refuse(_)) {
                return;
            }
        }
        // The cell outlives every connection; should its sender go, nothing changes again.
        std::future::pending::<()>().await;
    }
}
