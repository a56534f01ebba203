//! `airlock serve`: Airlock as a network service, one process per host.
//!
//! - `/mcp`: MCP over streamable HTTP (rmcp), the same tools as `airlock mcp`.
//! - `POST /v1/tasks`, `GET /v1/schema`: the task as plain JSON; `/v1/tasks/{id}` (and its
//!   `events` and `record`) to follow a task, cancel it and read its record;
//!   `/v1/openapi.json`: the whole `/v1` API.
//! - `/healthz` (alive), `/readyz` (Docker answers, image present, room for a task; 503 when
//!   full or draining), `/metrics` (Prometheus text).
//!
//! Every request passes the [`guard::Guard`] first (Host, Origin, then a bearer token for all
//! but the probes). Tasks pass [`crate::capacity::Admission`]: bounded concurrency, a bounded queue with a
//! time limit, refusal while draining. SIGTERM or SIGINT drains: `/readyz` turns 503, running
//! tasks get `--drain-timeout` to finish and are then cancelled, and the process exits only
//! after every container is gone.

mod args;
mod cdp;
mod connections;
mod guard;
mod hand_back;
mod lease_view;
mod leases;
mod live;
pub(crate) mod local_watch;
mod openapi;
mod origin;
mod readiness;
mod routes;
mod sessions;
mod sign_in_limit;
mod task_body;
mod task_by_id;
mod tasks_api;
mod tls;
mod token_scope;
mod ui;
mod ui_pages;
mod ui_sessions;
mod write_deadline;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use airlock_driver_docker::DockerDriver;
use airlock_worker::{BrowserDriver, CancellationToken, TaskRunner};
use anyhow::Context;
use clap::ArgMatches;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio::net::TcpListener;
use tokio_util::task::TaskTracker;

pub(crate) use args::{CdpArgs, ServeArgs};

use crate::capacity::Admission;
use args::{ServiceArgs, tokens};
use connections::{Listening, Stopping, bind_metrics};
use routes::{cdp_router, metrics_router, router};

use crate::scope_request::Ceiling;
use crate::settings::Settings;
use guard::Guard;

/// How `/mcp` serves.
#[derive(Debug, Clone, Copy, Default)]
struct McpMode {
    /// `agent_browser` with a browser per MCP session, instead of `browser_task`.
    direct: bool,
    /// No server-side MCP sessions.
    stateless: bool,
}

/// Which endpoints a server offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoints {
    /// `airlock serve`: MCP, the task API, and CDP.
    All,
    /// `airlock cdp`: CDP alone.
    CdpOnly,
}

impl Endpoints {
    /// The name the server logs under.
    fn name(self) -> &'static str {
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
pub(crate) struct App {
    /// MCP without server-side sessions (`--stateless`).
    stateless: bool,
    /// Served over TLS (so /json/version names wss://).
    tls: bool,
    /// How long CDP leases last.
    cdp: cdp::LeaseLimits,
    guard: Arc<Guard>,
    admission: Arc<Admission>,
    runner: Option<TaskRunner>,
    driver: Arc<DockerDriver>,
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
    /// The tasks of `/v1/tasks`, each token's own.
    book: Arc<crate::task_book::TaskBook>,
    /// The open CDP leases, each its token's own.
    leases: Arc<leases::LeaseBook>,
    /// The dashboard's signed-in browsers.
    ui: Arc<ui_sessions::UiSessions>,
}

/// What `serve` keeps of finished tasks, per token.
#[derive(Debug, Clone, Copy)]
struct Keeping {
    tasks: usize,
    bytes: usize,
}

impl Keeping {
    fn from_args(args: &ServeArgs) -> anyhow::Result<Self> {
        if !(1..=1000).contains(&args.keep_tasks) {
            anyhow::bail!(
                "--keep-tasks {} is out of range: keep 1 to 1000 finished tasks per token (AIRLOCK_KEEP_TASKS)",
                args.keep_tasks
            );
        }
        if !(1 << 20..=4 << 30).contains(&args.keep_task_bytes) {
            anyhow::bail!(
                "--keep-task-bytes {} is out of range: give 1048576 (1 MiB) to 4294967296 (4 GiB) (AIRLOCK_KEEP_TASK_BYTES)",
                args.keep_task_bytes
            );
        }
        Ok(Self {
            tasks: args.keep_tasks,
            bytes: args.keep_task_bytes,
        })
    }
}

impl Default for Keeping {
    fn default() -> Self {
        Self {
            tasks: 1,
            bytes: 1 << 20,
        }
    }
}

/// Serve until SIGTERM or SIGINT, then drain and exit 0 with nothing left behind.
pub(crate) async fn run(args: &ServeArgs, matches: &ArgMatches) -> anyhow::Result<u8> {
    if args.direct && args.stateless {
        return Err(crate::bad_input(anyhow::anyhow!(
            "--direct and --stateless cannot go together: --direct keeps a sealed browser in one server's MCP session, so every request of that session must reach the same server, and --stateless keeps no sessions. Behind a load balancer, run --direct with session affinity on the Mcp-Session-Id header, or use browser_task with --stateless"
        )));
    }
    let mcp = McpMode {
        direct: args.direct,
        stateless: args.stateless,
    };
    let keeping = Keeping::from_args(args).map_err(crate::bad_input)?;
    serve(
        args.listen,
        &args.service,
        matches,
        (Endpoints::All, keeping),
        mcp,
    )
    .await
}

/// `airlock cdp`: the guarded CDP endpoint alone, until SIGTERM or SIGINT.
pub(crate) async fn run_cdp(args: &CdpArgs, matches: &ArgMatches) -> anyhow::Result<u8> {
    serve(
        args.listen,
        &args.service,
        matches,
        (Endpoints::CdpOnly, Keeping::default()),
        McpMode::default(),
    )
    .await
}

/// The lease limits, checked.
fn lease_limits(args: &ServiceArgs) -> anyhow::Result<cdp::LeaseLimits> {
    if !(10..=86_400).contains(&args.cdp_timeout) {
        anyhow::bail!(
            "--cdp-timeout {} is out of range: use 10 to 86400 seconds (AIRLOCK_CDP_TIMEOUT)",
            args.cdp_timeout
        );
    }
    if !(5..=args.cdp_timeout).contains(&args.cdp_idle_timeout) {
        anyhow::bail!(
            "--cdp-idle-timeout {} is out of range: use 5 seconds up to --cdp-timeout ({}) (AIRLOCK_CDP_IDLE_TIMEOUT)",
            args.cdp_idle_timeout,
            args.cdp_timeout
        );
    }
    Ok(cdp::LeaseLimits {
        lease: Duration::from_secs(args.cdp_timeout),
        idle: Duration::from_secs(args.cdp_idle_timeout),
    })
}

/// The settings, with each endpoint set's default pools, and the CDP lease limits.
fn service_settings(
    args: &ServiceArgs,
    matches: &ArgMatches,
    endpoints: Endpoints,
) -> anyhow::Result<(Settings, cdp::LeaseLimits)> {
    // `serve` keeps one task browser warm, `cdp` one CDP browser.
    let mut settings = Settings::resolve(&args.settings, Some(matches))?
        .with_default_pool(usize::from(endpoints == Endpoints::All));
    let limits = lease_limits(args)?;
    let cdp_pool_size = args
        .cdp_pool_size
        .unwrap_or(usize::from(endpoints == Endpoints::CdpOnly));
    if cdp_pool_size > 8 {
        anyhow::bail!(
            "--cdp-pool-size {cdp_pool_size} is over 8: each warm browser holds a container's memory; use 0 to 8 (AIRLOCK_CDP_POOL_SIZE)"
        );
    }
    settings.driver.pool.cdp_size = cdp_pool_size;
    settings.driver.pool.cdp_lease = limits.lease;
    Ok((settings, limits))
}

async fn serve(
    listen: SocketAddr,
    args: &ServiceArgs,
    matches: &ArgMatches,
    (endpoints, keeping): (Endpoints, Keeping),
    mcp: McpMode,
) -> anyhow::Result<u8> {
    let (settings, limits) =
        service_settings(args, matches, endpoints).map_err(crate::bad_input)?;
    // Bound first, so the Host check knows the real port (with --listen …:0, the kernel's pick).
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("--listen {listen}: cannot listen there"))
        .map_err(crate::bad_input)?;
    let local = listener.local_addr().unwrap_or(listen);
    let metrics_listener = bind_metrics(args.metrics_listen).await?;
    let tokens = tokens(args).map_err(crate::bad_input)?;
    let ceilings = token_scope::ceilings(&tokens, &settings.scope, &settings.secrets)
        .map_err(crate::bad_input)?;
    let guard = Guard::new(
        local,
        tokens.into_iter().map(|(entry, _)| entry.token).collect(),
        &args.allowed_hosts,
        &args.allowed_origins,
    )
    .map_err(crate::bad_input)?
    .with_ceilings(ceilings, Arc::new(Ceiling::server(settings.scope.clone())));
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls::acceptor(cert, key).map_err(crate::bad_input)?),
        _ => None,
    };
    let admission = admission_for(args, settings.limits.max_concurrent_tasks);
    // The model first: a bad one is bad input, found before any browser starts warming.
    let model = if mcp.direct || endpoints == Endpoints::CdpOnly {
        None
    } else {
        Some(crate::boot::model(&settings).map_err(crate::bad_input)?)
    };
    let driver = crate::boot::ready_driver(&settings).await?;
    announce_image(&driver, endpoints, &admission.metrics).await;
    let runner = match model {
        None => None,
        Some(model) => Some(TaskRunner::new(
            Arc::clone(&driver) as Arc<dyn BrowserDriver>,
            model,
            settings.limits,
        )?),
    };
    let terminated = crate::signals::terminated();
    let tracker = TaskTracker::new();
    let shutdown = CancellationToken::new();
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(SESSION_IDLE);
    let sessions = Arc::new(sessions);
    let app = App {
        stateless: mcp.stateless,
        tls: tls.is_some(),
        cdp: limits,
        guard: Arc::new(guard),
        admission: Arc::clone(&admission),
        runner,
        driver: Arc::clone(&driver),
        tracker: tracker.clone(),
        shutdown: shutdown.clone(),
        sessions,
        max_sessions: args.max_sessions,
        opening: Arc::default(),
        root_is_cdp: endpoints == Endpoints::CdpOnly,
        readiness: Arc::default(),
        secrets: settings.secrets.clone(),
        max_download_bytes: settings.max_download_bytes,
        book: crate::task_book::TaskBook::new(keeping.tasks, keeping.bytes),
        leases: Arc::default(),
        ui: Arc::new(ui_sessions::UiSessions::new(tls.is_some())),
    };
    let metrics_router = metrics_router(app.clone());
    let router = match endpoints {
        Endpoints::All => router(app, Arc::new(settings)),
        Endpoints::CdpOnly => cdp_router(app),
    };
    let name = announce(endpoints, tls.is_some(), local);
    let listening = Listening::start(
        (listener, tls, router),
        metrics_listener.map(|listener| (listener, metrics_router)),
        name,
        &admission.metrics.accept_failures,
    );

    terminated.await;
    let stopping = Stopping {
        name,
        admission,
        drain_timeout: Duration::from_secs(args.drain_timeout),
        shutdown,
        tracker,
        listening,
    };
    stopping.run().await;
    driver.shutdown().await;
    eprintln!("{name}: stopped");
    Ok(0)
}

/// Say which Chromium the browser image carries and how old it is, and put both in the metrics.
async fn announce_image(
    driver: &DockerDriver,
    endpoints: Endpoints,
    metrics: &crate::metrics::Metrics,
) {
    match driver.image_age().await {
        Ok(age) => {
            // The warning when stale came from `ready_driver`; this is the start's own line.
            eprintln!(
                "{}: {}",
                endpoints.name(),
                age.describe(std::time::SystemTime::now())
            );
            metrics.set_image(&age);
        }
        Err(error) => tracing::warn!("the browser image's age is unknown: {error}"),
    }
}

/// Admission: `capacity` slots and a queue (twice that unless set).
fn admission_for(args: &ServiceArgs, capacity: usize) -> Arc<Admission> {
    Admission::new(
        capacity,
        args.max_queued_tasks.unwrap_or(capacity * 2),
        Duration::from_secs(args.queue_timeout),
    )
}

/// Say where the server listens (tests and scripts wait for this line); the name it logs under.
fn announce(endpoints: Endpoints, tls: bool, local: SocketAddr) -> &'static str {
    let scheme = if tls { "https" } else { "http" };
    let name = endpoints.name();
    match endpoints {
        Endpoints::All => eprintln!(
            "{name}: listening on {scheme}://{local} (mcp at /mcp, tasks at /v1/tasks, cdp at /cdp, dashboard at /ui)"
        ),
        Endpoints::CdpOnly => eprintln!(
            "{name}: listening on {scheme}://{local} (cdp at /cdp; discovery at /json/version)"
        ),
    }
    name
}
