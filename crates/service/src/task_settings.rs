//! What a server's tasks start from: the operator's limits, scope, secrets, downloads and routes.

use airlock_policy::Scope;
use airlock_worker::{DirectLimits, Secrets, TaskLimits};

/// The operator's settings every task of a server is held to.
#[derive(Debug, Clone)]
pub struct TaskSettings {
    /// The task limits.
    pub limits: TaskLimits,
    /// The ceiling of the sites a request may narrow.
    pub scope: Scope,
    /// What callers may ask for by name (values loaded, never shown).
    pub secrets: Secrets,
    /// The most a request may ask to download (`None`: off).
    pub max_download_bytes: Option<u64>,
    /// The routes a request may pick by name.
    pub routes: crate::scope_request::RouteNames,
    /// How long a `--direct` session's browser lasts.
    pub direct: DirectLimits,
    /// The largest viewport (width, height) a request may set (`--max-viewport`).
    pub max_viewport: (u32, u32),
}
