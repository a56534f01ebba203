//! `airlock serve`: Airlock as a network service, one process per host.
//!
//! - `/mcp`: MCP over streamable HTTP (rmcp), the same tools as `airlock mcp`.
//! - `POST /v1/tasks`, `GET /v1/schema`: the task as plain JSON.
//! - `/healthz` (alive), `/readyz` (Docker answers, image present, room for a task; 503 when
//!   full or draining), `/metrics` (Prometheus text).
//!
//! Every request passes the [`guard::Guard`] first (Host, Origin, then a bearer token for all
//! but the probes). Tasks pass the [`gate::Gate`]: bounded concurrency, a bounded queue with a
//! time limit, refusal while draining. SIGTERM or SIGINT drains: `/readyz` turns 503, running
//! tasks get `--drain-timeout` to finish and are then cancelled, and the process exits only
//! after every container is gone.

mod cdp;
mod gate;
mod guard;
mod metrics;
mod tasks_api;
mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use airlock_driver_docker::DockerDriver;
use airlock_worker::{BrowserDriver, CancellationToken, TaskRunner};
use anyhow::Context;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::routing::{get, post};
use clap::{ArgMatches, Args};
use http::{Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::sync::{Mutex, Semaphore};
use tokio_util::task::TaskTracker;

pub(crate) use gate::{Gate, Slot};

use crate::mcp_cmd::{Direct, Mode, Server};
use crate::settings::{SettingFlags, Settings};
use guard::{Guard, json_response, refuse};

/// Arguments of `airlock serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where to listen. A non-loopback address needs tokens.
    #[arg(long, env = "AIRLOCK_LISTEN", default_value = "127.0.0.1:8700")]
    listen: SocketAddr,
    /// Offer `agent_browser` on /mcp (one sealed browser per MCP session, removed when the session
    /// ends or idles out) instead of `browser_task`.
    #[arg(long)]
    direct: bool,
    /// Serve MCP without server-side sessions: every request stands alone, so any replica behind
    /// a plain load balancer can answer any request (progress still streams in the response).
    /// Not with --direct, whose browser lives in one server's session.
    #[arg(long, env = "AIRLOCK_STATELESS")]
    stateless: bool,
    #[command(flatten)]
    service: ServiceArgs,
}

/// Arguments of `airlock cdp`: the CDP endpoint alone.
#[derive(Debug, Args)]
pub struct CdpArgs {
    /// Where to listen (Chromium's usual DevTools port by default). A non-loopback address needs
    /// tokens.
    #[arg(long, env = "AIRLOCK_CDP_LISTEN", default_value = "127.0.0.1:9222")]
    listen: SocketAddr,
    #[command(flatten)]
    service: ServiceArgs,
}

/// What `serve` and `cdp` share: who may call, how many run, how they end.
#[derive(Debug, Args)]
pub struct ServiceArgs {
    /// A file of bearer tokens, one per line (# comments and blank lines ignored). Tokens may also
    /// come from AIRLOCK_TOKENS, comma-separated; several allow rotation.
    #[arg(long, env = "AIRLOCK_TOKENS_FILE", value_name = "FILE")]
    tokens_file: Option<PathBuf>,
    /// A name clients use for this server in the Host header (`name` or `name:port`;
    /// repeatable). Default: the listen address, and localhost on loopback. `*`: any.
    #[arg(
        long = "allowed-host",
        env = "AIRLOCK_ALLOWED_HOSTS",
        value_name = "HOST",
        value_delimiter = ','
    )]
    allowed_hosts: Vec<String>,
    /// A web origin allowed to call (`scheme://host[:port]`; repeatable). Default: none, so a
    /// request that a web page makes through a browser is refused.
    #[arg(
        long = "allowed-origin",
        env = "AIRLOCK_ALLOWED_ORIGINS",
        value_name = "ORIGIN",
        value_delimiter = ','
    )]
    allowed_origins: Vec<String>,
    /// TLS certificate chain (PEM, leaf first); with --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// TLS private key (PEM); with --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Seconds a task or CDP client may wait for a slot when all are busy (0: refuse at once).
    #[arg(
        long,
        env = "AIRLOCK_QUEUE_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = 30
    )]
    queue_timeout: u64,
    /// Tasks that may wait for a slot at once (default: twice max_concurrent_tasks).
    #[arg(long, env = "AIRLOCK_MAX_QUEUED_TASKS", value_name = "N")]
    max_queued_tasks: Option<usize>,
    /// Seconds running tasks and CDP leases get to finish after SIGTERM before they are ended.
    #[arg(
        long,
        env = "AIRLOCK_DRAIN_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = 60
    )]
    drain_timeout: u64,
    /// MCP sessions open at once; a new one past this is refused (503).
    #[arg(
        long,
        env = "AIRLOCK_MAX_SESSIONS",
        value_name = "N",
        default_value_t = 64
    )]
    max_sessions: usize,
    /// Seconds a CDP client may keep its sealed browser (10–86400).
    #[arg(
        long,
        env = "AIRLOCK_CDP_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = 900
    )]
    cdp_timeout: u64,
    /// Seconds a CDP connection may pass no message either way before it ends (5 up to
    /// --cdp-timeout).
    #[arg(
        long,
        env = "AIRLOCK_CDP_IDLE_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = 300
    )]
    cdp_idle_timeout: u64,
    /// CDP browsers kept ready before clients connect (0–8; default 0 for `serve`, 1 for `cdp`).
    #[arg(long, env = "AIRLOCK_CDP_POOL_SIZE", value_name = "N")]
    cdp_pool_size: Option<usize>,
    #[command(flatten)]
    settings: SettingFlags,
}

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

/// Connections open at once; the next waits in the kernel's backlog.
const MAX_CONNECTIONS: usize = 512;
/// A client must send its request head within this.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// A client must send a request's body within this.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// The TLS handshake must finish within this.
const TLS_TIMEOUT: Duration = Duration::from_secs(10);
/// An MCP session with no traffic for this long ends (its browser too, with --direct).
const SESSION_IDLE: Duration = Duration::from_secs(300);
/// After draining, open connections (SSE streams) get this long to close.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

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
    gate: Arc<Gate>,
    runner: Option<TaskRunner>,
    driver: Arc<DockerDriver>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    sessions: Arc<LocalSessionManager>,
    max_sessions: usize,
}

fn tokens(args: &ServiceArgs) -> anyhow::Result<Vec<String>> {
    let mut tokens: Vec<String> = std::env::var("AIRLOCK_TOKENS")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect();
    if let Some(path) = &args.tokens_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--tokens-file {}: cannot read it", path.display()))?;
        tokens.extend(
            text.lines()
                .map(str::trim)
                .filter(|line| !line.is_empty() && !line.starts_with('#'))
                .map(str::to_owned),
        );
    }
    Ok(tokens)
}

/// Serve until SIGTERM or SIGINT, then drain and exit 0 with nothing left behind.
pub async fn run(args: &ServeArgs, matches: &ArgMatches) -> anyhow::Result<u8> {
    if args.direct && args.stateless {
        return Err(crate::bad_input(anyhow::anyhow!(
            "--direct and --stateless cannot go together: --direct keeps a sealed browser in one server's MCP session, so every request of that session must reach the same server, and --stateless keeps no sessions. Behind a load balancer, run --direct with session affinity on the Mcp-Session-Id header, or use browser_task with --stateless"
        )));
    }
    let mcp = McpMode {
        direct: args.direct,
        stateless: args.stateless,
    };
    serve(args.listen, &args.service, matches, Endpoints::All, mcp).await
}

/// `airlock cdp`: the guarded CDP endpoint alone, until SIGTERM or SIGINT.
pub async fn run_cdp(args: &CdpArgs, matches: &ArgMatches) -> anyhow::Result<u8> {
    serve(
        args.listen,
        &args.service,
        matches,
        Endpoints::CdpOnly,
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
    endpoints: Endpoints,
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
    let guard = Guard::new(
        local,
        tokens(args).map_err(crate::bad_input)?,
        &args.allowed_hosts,
        &args.allowed_origins,
    )
    .map_err(crate::bad_input)?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls::acceptor(cert, key).map_err(crate::bad_input)?),
        _ => None,
    };
    let capacity = settings.limits.max_concurrent_tasks;
    let gate = Gate::new(
        capacity,
        args.max_queued_tasks.unwrap_or(capacity * 2),
        Duration::from_secs(args.queue_timeout),
    );
    // The model first: a bad one is bad input, found before any browser starts warming.
    let model = if mcp.direct || endpoints == Endpoints::CdpOnly {
        None
    } else {
        Some(crate::task_cmd::model(&settings).map_err(crate::bad_input)?)
    };
    let driver = crate::task_cmd::ready_driver(&settings).await?;
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
        gate: Arc::clone(&gate),
        runner,
        driver: Arc::clone(&driver),
        tracker: tracker.clone(),
        shutdown: shutdown.clone(),
        sessions,
        max_sessions: args.max_sessions,
    };
    let router = match endpoints {
        Endpoints::All => router(app, Arc::new(settings)),
        Endpoints::CdpOnly => cdp_router(app),
    };
    let stop_accepting = CancellationToken::new();
    let connections = TaskTracker::new();
    let name = announce(endpoints, tls.is_some(), local);
    let accepting = tokio::spawn(accept_loop(
        listener,
        tls,
        router,
        stop_accepting.clone(),
        connections.clone(),
    ));

    terminated.await;
    let stopping = Stopping {
        name,
        gate,
        drain_timeout: Duration::from_secs(args.drain_timeout),
        shutdown,
        tracker,
        stop_accepting,
        connections,
    };
    stopping.run(accepting).await;
    driver.shutdown().await;
    eprintln!("{name}: stopped");
    Ok(0)
}

/// Say where the server listens (tests and scripts wait for this line); the name it logs under.
fn announce(endpoints: Endpoints, tls: bool, local: SocketAddr) -> &'static str {
    let scheme = if tls { "https" } else { "http" };
    match endpoints {
        Endpoints::All => {
            eprintln!(
                "airlock serve: listening on {scheme}://{local} (mcp at /mcp, tasks at /v1/tasks, cdp at /cdp)"
            );
            "airlock serve"
        }
        Endpoints::CdpOnly => {
            eprintln!(
                "airlock cdp: listening on {scheme}://{local} (cdp at /cdp; discovery at /json/version)"
            );
            "airlock cdp"
        }
    }
}

/// What a stop ends, in order.
struct Stopping {
    name: &'static str,
    gate: Arc<Gate>,
    drain_timeout: Duration,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    stop_accepting: CancellationToken,
    connections: TaskTracker,
}

impl Stopping {
    /// Drain: refuse new work and give running tasks and leases the drain time; stop accepting
    /// and let each open connection finish the answer it is writing; then end what still runs
    /// and wait for its cleanup.
    async fn run(self, accepting: tokio::task::JoinHandle<()>) {
        let name = self.name;
        self.gate.drain();
        eprintln!("{name}: draining (new tasks and CDP clients are refused; /readyz answers 503)");
        let drained = tokio::time::timeout(self.drain_timeout, self.gate.idle()).await;
        if drained.is_err() {
            eprintln!(
                "{name}: {} tasks or CDP leases still ran after --drain-timeout {} s; ending them",
                self.gate.running(),
                self.drain_timeout.as_secs()
            );
        }
        // A task that finished has freed its slot before its result is written to its client:
        // each connection finishes the answer it is on (bounded), and only then is anything
        // cancelled, or a stream would end without the result it was about to carry.
        self.stop_accepting.cancel();
        let _ = accepting.await;
        self.connections.close();
        let _ = tokio::time::timeout(CLOSE_GRACE, self.connections.wait()).await;
        // Cancels what still runs, ends every --direct session's browser, every CDP lease and
        // the MCP streams still open.
        self.shutdown.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

fn router(app: App, settings: Arc<Settings>) -> Router {
    let mcp = mcp_service(&app, settings);
    let routes = common_routes()
        .route("/v1/schema", get(|| async { tasks_api::schema() }))
        .route("/v1/tasks", post(tasks))
        .nest_service("/mcp", mcp)
        .fallback(|| async {
            refuse(
                StatusCode::NOT_FOUND,
                "no such path: the endpoints are /mcp, /v1/tasks, /v1/schema, /cdp, /json/version, /healthz, /readyz and /metrics",
            )
        });
    guarded(routes, app)
}

/// `airlock cdp`: the CDP endpoint, its discovery, and the probes.
fn cdp_router(app: App) -> Router {
    let routes = common_routes()
        .route("/", get(cdp::connect))
        .fallback(|| async {
            refuse(
                StatusCode::NOT_FOUND,
                "no such path: this is `airlock cdp`; the endpoints are /cdp (WebSocket), /json/version, /healthz, /readyz and /metrics",
            )
        });
    guarded(routes, app)
}

/// What both servers offer: the probes, the metrics, and the CDP endpoint with its discovery.
fn common_routes() -> Router<App> {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/cdp", get(cdp::connect))
        .route("/cdp/json/version", get(cdp::version))
        .route("/cdp/json/version/", get(cdp::version))
        .route("/json/version", get(cdp::version))
        .route("/json/version/", get(cdp::version))
}

/// Every route behind the checks and the body time limit.
fn guarded(routes: Router<App>, app: App) -> Router {
    routes
        .layer(middleware::from_fn_with_state(app.clone(), checks))
        // Every body (a task's, an MCP message's) must arrive within the time limit: a client
        // that trickles one holds a connection no longer than that.
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            BODY_TIMEOUT,
        ))
        .with_state(app)
}

/// Host, Origin and token checks, and the MCP session cap, before any handler.
async fn checks(State(app): State<App>, request: Request, next: Next) -> Response<Body> {
    let headers = request.headers();
    let path = request.uri().path();
    // The probes answer whatever the Host: engines call them by a pod's or container's address,
    // and they tell nothing but whether this server is up and has room.
    let probe = path == "/healthz" || path == "/readyz";
    if !probe && let Some(refused) = app.guard.check_site(headers) {
        return refused;
    }
    // CDP clients cannot always add a header: their endpoints also take `?token=`.
    let from_query = (cdp::is_cdp_path(path) || path == "/")
        .then(|| cdp::with_query_token(headers, request.uri().query()))
        .flatten();
    let token_headers = from_query.as_ref().unwrap_or(headers);
    if !probe && let Some(refused) = app.guard.check_token(token_headers) {
        return refused;
    }
    let new_session = path.starts_with("/mcp")
        && request.method() == http::Method::POST
        && !headers.contains_key("mcp-session-id");
    if new_session && app.sessions.sessions.read().await.len() >= app.max_sessions {
        let mut refused = refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "this server has as many MCP sessions open as it allows (--max-sessions); end one, or try again shortly",
        );
        refused.headers_mut().insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("5"),
        );
        return refused;
    }
    next.run(request).await
}

async fn readyz(State(app): State<App>) -> Response<Body> {
    let why_not = if app.gate.draining.is_cancelled() {
        Some("draining: the server is shutting down".to_owned())
    } else if !app.gate.has_room() {
        Some("full: every task slot is busy and the queue is full".to_owned())
    } else if let Err(error) = app.driver.check().await {
        Some(format!("the browser cannot start: {error}"))
    } else {
        None
    };
    let body = serde_json::json!({
        "ready": why_not.is_none(),
        "reason": why_not,
        "running": app.gate.running(),
    });
    let status = if why_not.is_none() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json_response(status, &body)
}

async fn metrics(State(app): State<App>) -> Response<Body> {
    let warm = app.driver.warm_sessions();
    app.gate
        .metrics
        .warm_sessions
        .set(i64::try_from(warm).unwrap_or(i64::MAX));
    let warm_cdp = app.driver.warm_cdp_browsers();
    app.gate
        .metrics
        .warm_cdp_browsers
        .set(i64::try_from(warm_cdp).unwrap_or(i64::MAX));
    let mut response = Response::new(Body::from(app.gate.metrics.encode()));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

async fn tasks(State(app): State<App>, request: Request) -> Response<Body> {
    let Some(runner) = app.runner.clone() else {
        return refuse(
            StatusCode::NOT_FOUND,
            "this server runs with --direct: it offers agent_browser on /mcp, not tasks",
        );
    };
    let (parts, body) = request.into_parts();
    let too_large = || {
        refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!(
                "the body is over {} bytes: a task is a short text and a URL",
                tasks_api::MAX_TASK_BODY_BYTES
            ),
        )
    };
    // A declared length over the limit is refused before any of the body is read.
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > tasks_api::MAX_TASK_BODY_BYTES as u64) {
        return too_large();
    }
    let body = match tokio::time::timeout(
        BODY_TIMEOUT,
        axum::body::to_bytes(body, tasks_api::MAX_TASK_BODY_BYTES),
    )
    .await
    {
        Ok(Ok(body)) => body,
        Ok(Err(_)) => return too_large(),
        Err(_) => {
            return refuse(
                StatusCode::REQUEST_TIMEOUT,
                &format!(
                    "the body did not arrive within {} s",
                    BODY_TIMEOUT.as_secs()
                ),
            );
        }
    };
    tasks_api::run(
        &parts.headers,
        body,
        runner,
        app.gate,
        app.tracker,
        app.shutdown,
    )
    .await
}

/// The MCP endpoint: one [`Server`] per MCP session, sharing the runner, the gate and the
/// tracker. A session's tasks (and its --direct browser) end with the session.
fn mcp_service(
    app: &App,
    settings: Arc<Settings>,
) -> StreamableHttpService<Server, LocalSessionManager> {
    let shutdown = app.shutdown.child_token();
    let sessions = Arc::clone(&app.sessions);
    let app = app.clone();
    let factory = move || {
        let session = app.shutdown.child_token();
        let mode = match &app.runner {
            Some(runner) => Mode::Task(runner.clone()),
            None => Mode::Direct(Arc::new(Direct {
                driver: Arc::clone(&app.driver),
                session: Mutex::new(None),
                tracker: app.tracker.clone(),
                gate: Some(Arc::clone(&app.gate)),
                slot: std::sync::Mutex::new(None),
            })),
        };
        Ok(Server {
            mode,
            settings: Arc::clone(&settings),
            tracker: app.tracker.clone(),
            shutdown: session.clone(),
            gate: Some(Arc::clone(&app.gate)),
            _session_end: Some(Arc::new(session.drop_guard())),
        })
    };
    // Host and Origin are checked by `checks` for every path; rmcp's own copies are off.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(1024 * 1024)
        // Stateless: a fresh `Server` per request, which ends with its response.
        .with_legacy_session_mode(!app.stateless)
        .with_cancellation_token(shutdown);
    StreamableHttpService::new(factory, sessions, config)
}

/// Accept connections until `stop`, each served by hyper (HTTP/1.1 with upgrades for /cdp, a
/// header time limit), over TLS when configured. Once `stop` fires, each connection finishes the
/// request it is on and closes; `connections` tracks them so the caller can wait (bounded).
async fn accept_loop(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    router: Router,
    stop: CancellationToken,
    connections: TaskTracker,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
            break;
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.cancelled() => break,
        };
        let (stream, _peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accepting a connection failed");
                continue;
            }
        };
        let service = TowerToHyperService::new(router.clone());
        let tls = tls.clone();
        let stop = stop.clone();
        connections.spawn(async move {
            match tls {
                None => serve_connection(TokioIo::new(stream), service, &stop).await,
                Some(acceptor) => {
                    let Ok(Ok(stream)) =
                        tokio::time::timeout(TLS_TIMEOUT, acceptor.accept(stream)).await
                    else {
                        return;
                    };
                    serve_connection(TokioIo::new(stream), service, &stop).await;
                }
            }
            drop(permit);
        });
    }
}

/// Serve one connection until it ends, or until `stop`: then let it finish its request and close.
async fn serve_connection<I>(io: I, service: TowerToHyperService<Router>, stop: &CancellationToken)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    // With upgrades, so /cdp can become a WebSocket; the upgraded socket then lives in the
    // lease's own task, which the server's task tracker waits for.
    let connection = builder.serve_connection(io, service).with_upgrades();
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        () = stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}
