//! `airlock serve`: Airlock as a network service, one process per host.
//!
//! - `/mcp`: MCP over streamable HTTP (rmcp), the same tools as `airlock mcp`.
//! - `POST /v1/tasks`, `GET /v1/schema`: the task as plain JSON; `/v1/tasks/{id}` (and its
//!   `events` and `record`) to follow a task, cancel it and read its record;
//!   `/v1/openapi.json`: the whole `/v1` API.
//! - `/healthz` (alive), `/readyz` (Docker answers, image present, room for a task; 503 when
//!   full or draining), `/metrics` (Prometheus text).
//!
//! Every request passes the [`callers::Callers`] first (Host, Origin, then a bearer token for all
//! but the probes). Tasks pass [`crate::capacity::Admission`]: bounded concurrency, a bounded queue with a
//! time limit, refusal while draining. SIGTERM or SIGINT drains: `/readyz` turns 503, running
//! tasks get `--drain-timeout` to finish and are then cancelled, and the process exits only
//! after every container is gone.

mod callers;
mod callers_error;
mod cdp;
mod connections;
mod endpoints;
mod hand_back;
mod lease_view;
mod leases;
mod live;
mod local_watch;
mod openapi;
mod origin;
mod readiness;
mod sessions;
mod sign_in_limit;
mod sign_ins;
mod task_body;
mod task_by_id;
mod tasks_api;
mod ui;
mod ui_pages;
mod write_deadline;

pub use callers::{Callers, CallersError};
pub use cdp::LeaseLimits;
pub use connections::{Listening, Stopping};
pub use local_watch::{LocalWatch, LocalWatchError, start as watch_locally};

use std::sync::Arc;
use std::time::Duration;

use airlock_worker::{CancellationToken, TaskRunner};
use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio_util::task::TaskTracker;

use crate::capacity::Admission;
use crate::{Browsers, TaskSettings};
use endpoints::{cdp_router, metrics_router, router};

/// How `/mcp` serves.
#[derive(Debug, Clone, Copy, Default)]
pub struct McpMode {
    /// `agent_browser` with a browser per MCP session, instead of `browser_task`.
    pub direct: bool,
    /// No server-side MCP sessions.
    pub stateless: bool,
}

/// Which endpoints a server offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoints {
    /// `airlock serve`: MCP, the task API, and CDP.
    All,
    /// `airlock cdp`: CDP alone.
    CdpOnly,
}

impl Endpoints {
    /// The name the server logs under.
    pub fn name(self) -> &'static str {
        match self {
            Self::All => "airlock serve",
            Self::CdpOnly => "airlock cdp",
        }
    }
}

/// An MCP session with no traffic for this long ends (its browser too, with --direct).
const SESSION_IDLE: Duration = Duration::from_secs(300);

/// What every handler shares.
#[derive(Clone)]
pub struct App {
    /// MCP without server-side sessions (`--stateless`).
    stateless: bool,
    /// Served over TLS (so /json/version names wss://).
    tls: bool,
    /// How long CDP leases last.
    cdp: cdp::LeaseLimits,
    callers: Arc<Callers>,
    admission: Arc<Admission>,
    runner: Option<TaskRunner>,
    browsers: Arc<dyn Browsers>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    sessions: Arc<LocalSessionManager>,
    max_sessions: usize,
    /// MCP sessions being opened now, counted with the open ones against `max_sessions`.
    opening: Arc<sessions::Opening>,
    /// `/` is the CDP endpoint (`airlock cdp`), so it takes a token in its query too.
    root_is_cdp: bool,
    /// The last answer of `/readyz`'s Docker check, shared by every probe.
    readiness: Arc<readiness::Readiness>,
    /// The secrets callers may name (`--secret`).
    secrets: airlock_worker::Secrets,
    /// The most a request may download (`--max-download-bytes`).
    max_download_bytes: Option<u64>,
    /// The routes a request may pick (`--route`).
    routes: crate::scope_request::RouteNames,
    /// The largest viewport a request may set (`--max-viewport`).
    max_viewport: (u32, u32),
    /// The tasks of `/v1/tasks`, each token's own.
    book: Arc<crate::task_book::TaskBook>,
    /// The open CDP leases, each its token's own.
    leases: Arc<leases::LeaseBook>,
    /// The dashboard's signed-in browsers.
    sign_ins: Arc<sign_ins::SignIns>,
}

/// What a server keeps of finished tasks, per token.
#[derive(Debug, Clone, Copy)]
pub struct Keeping {
    /// Finished tasks kept.
    pub tasks: usize,
    /// Bytes of their results kept.
    pub bytes: usize,
}

impl Default for Keeping {
    fn default() -> Self {
        Self {
            tasks: 1,
            bytes: 1 << 20,
        }
    }
}

/// Everything a server is built from.
pub struct ServerParts {
    /// Which endpoints it offers.
    pub endpoints: Endpoints,
    /// How `/mcp` serves.
    pub mcp: McpMode,
    /// Served over TLS.
    pub tls: bool,
    /// How long CDP leases last.
    pub cdp: cdp::LeaseLimits,
    /// The checks every request passes first.
    pub callers: Callers,
    /// Bounded concurrency and queue, shared by tasks, MCP browsers and CDP leases.
    pub admission: Arc<Admission>,
    /// The worker, unless only browsers are offered (`--direct`, `airlock cdp`).
    pub runner: Option<TaskRunner>,
    /// Where browsers come from.
    pub browsers: Arc<dyn Browsers>,
    /// The most MCP sessions open at once.
    pub max_sessions: usize,
    /// What every task is held to.
    pub tasks: TaskSettings,
    /// What is kept of finished tasks.
    pub keeping: Keeping,
}

/// A built server: its routes, and the handles its drain needs.
pub struct Built {
    /// Every endpoint but metrics.
    pub router: Router,
    /// `/metrics` alone, for a separate listener.
    pub metrics_router: Router,
    /// Every task, lease and session's browser, so the drain can wait for them.
    pub tracker: TaskTracker,
    /// Cancels what still runs when the drain's time is up.
    pub shutdown: CancellationToken,
}

/// Build the routes over `parts`.
#[must_use]
pub fn build(parts: ServerParts) -> Built {
    let tracker = TaskTracker::new();
    let shutdown = CancellationToken::new();
    let mut sessions = LocalSessionManager::default();
    // A `--direct` session's browser outlives a quiet spell as long as the operator allows: the
    // MCP session that holds it must too.
    let idle = if parts.mcp.direct {
        SESSION_IDLE.max(parts.tasks.direct.idle)
    } else {
        SESSION_IDLE
    };
    sessions.session_config.keep_alive = Some(idle);
    let tasks = Arc::new(parts.tasks);
    let app = App {
        stateless: parts.mcp.stateless,
        tls: parts.tls,
        cdp: parts.cdp,
        callers: Arc::new(parts.callers),
        admission: parts.admission,
        runner: parts.runner,
        browsers: parts.browsers,
        tracker: tracker.clone(),
        shutdown: shutdown.clone(),
        sessions: Arc::new(sessions),
        max_sessions: parts.max_sessions,
        opening: Arc::default(),
        root_is_cdp: parts.endpoints == Endpoints::CdpOnly,
        readiness: Arc::default(),
        secrets: tasks.secrets.clone(),
        max_download_bytes: tasks.max_download_bytes,
        routes: tasks.routes.clone(),
        max_viewport: tasks.max_viewport,
        book: crate::task_book::TaskBook::new(parts.keeping.tasks, parts.keeping.bytes),
        leases: Arc::default(),
        sign_ins: Arc::new(sign_ins::SignIns::new(parts.tls)),
    };
    let metrics_router = metrics_router(app.clone());
    let router = match parts.endpoints {
        Endpoints::All => router(app, tasks),
        Endpoints::CdpOnly => cdp_router(app),
    };
    Built {
        router,
        metrics_router,
        tracker,
        shutdown,
    }
}
