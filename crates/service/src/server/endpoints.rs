//! The endpoints each server offers, and the handlers that are not a module of their own: the
//! checks before every handler, the probes, the metrics, the task API's entry and MCP.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::routing::{get, post};
use http::{Response, StatusCode};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::sync::Mutex;

use super::callers::{busy, json_response, refuse, unauthorized};
use super::readiness::NotReady;
use super::{App, cdp, hand_back, leases, live, openapi, task_body, task_by_id, tasks_api, ui};
use crate::TaskSettings;
use crate::mcp::{Direct, Mode, Server};
use crate::scope_request::{Caller, Ceiling};

/// A client must send a request's body within this.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// The sign-in form's body: a token and its field name.
const SIGN_IN_BODY_BYTES: usize = 4 * 1024;

pub(super) fn router(app: App, settings: Arc<TaskSettings>) -> Router {
    let mcp = mcp_service(&app, settings);
    let mcp = Router::new()
        .fallback_service(mcp)
        .layer(middleware::from_fn(session_ended))
        .layer(middleware::from_fn(crate::answer_gone::tie_to_answer));
    let routes = common_routes()
        .route("/v1/schema", get(|| async { tasks_api::schema() }))
        .route(
            "/v1/openapi.json",
            get(|| async { json_response(StatusCode::OK, &openapi::document()) }),
        )
        .route("/v1/tasks", post(tasks))
        .merge(task_endpoints())
        .route("/v1/leases", get(leases::list))
        .route("/v1/leases/{id}/live", get(leases::watch))
        .route("/ui/leases/{id}", get(ui::lease_page))
        .route("/ui", get(ui::home))
        .route(
            "/ui/sign-in",
            post(ui::sign_in).layer(axum::extract::DefaultBodyLimit::max(SIGN_IN_BODY_BYTES)),
        )
        .route("/ui/sign-out", post(ui::sign_out))
        .nest("/mcp", mcp)
        .fallback(|| async {
            refuse(
                StatusCode::NOT_FOUND,
                "no such path: the endpoints are /mcp, /v1/tasks (and /v1/tasks/{id}), /v1/leases, /v1/schema, /v1/openapi.json, /ui (the dashboard), /cdp, /json/version, /healthz, /readyz and /metrics",
            )
        });
    guarded(routes, app)
}

/// One task's routes, for its owner: its status and cancel, its events, live view, hand-back
/// and record, and its live page (`airlock task --live` serves these alone).
pub(super) fn task_endpoints() -> Router<App> {
    Router::new()
        .route(
            "/v1/tasks/{id}",
            get(task_by_id::get).delete(task_by_id::cancel),
        )
        .route("/v1/tasks/{id}/events", get(task_by_id::events))
        .route("/v1/tasks/{id}/live", get(live::watch))
        .route("/v1/tasks/{id}/hand-back", post(hand_back::hand_back))
        .route("/v1/tasks/{id}/record", get(task_by_id::record_json))
        .route("/v1/tasks/{id}/record.html", get(task_by_id::record_page))
        .route("/ui/tasks/{id}", get(ui::task_page))
}

/// A session ended by DELETE is answered `200`, as the MCP SDKs expect (rmcp answers `202`,
/// which the official Python SDK reports as "Session termination failed: 202").
async fn session_ended(request: Request, next: Next) -> Response<Body> {
    let delete = request.method() == http::Method::DELETE;
    let mut response = next.run(request).await;
    if delete && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::OK;
    }
    response
}

/// `airlock cdp`: the CDP endpoint, its discovery, and the probes.
pub(super) fn cdp_router(app: App) -> Router {
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

/// `--metrics-listen`: `/metrics` alone, for a scraper that reaches pods by address. No Host or
/// token check: the metrics carry no secret (labels are fixed words), and who may reach this
/// listener is the network's rule (the Kubernetes manifest admits only the monitoring namespace).
pub(super) fn metrics_router(app: App) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .fallback(|| async {
            refuse(
                StatusCode::NOT_FOUND,
                "this listener serves /metrics alone (--metrics-listen)",
            )
        })
        .with_state(app)
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
        // Every answer, refusals included, names the replica that gave it.
        .layer(middleware::map_response(name_the_replica))
        .layer(middleware::map_response_with_state(app.tls, never_kept))
        // Every body (a task's, an MCP message's) must arrive within the time limit: a client
        // that trickles one holds a connection no longer than that.
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            BODY_TIMEOUT,
        ))
        .with_state(app)
}

/// `Airlock-Replica` on an answer: which replica holds the tasks and leases whose ids begin
/// with it (a balancer keeps the pair and routes by the id).
async fn name_the_replica(mut response: Response<Body>) -> Response<Body> {
    response.headers_mut().insert(
        crate::replica::HEADER,
        http::HeaderValue::from_static(crate::replica::tag_hex()),
    );
    response
}

/// Answers carry a task's content (its answer, record, steps, pages): neither a browser nor a
/// proxy between may keep one (`no-store`, unless the answer set its own). Over TLS, browsers
/// are told to come back over TLS alone, so a dashboard session is never sent in the clear.
async fn never_kept(State(tls): State<bool>, mut response: Response<Body>) -> Response<Body> {
    let headers = response.headers_mut();
    headers
        .entry(http::header::CACHE_CONTROL)
        .or_insert(http::HeaderValue::from_static("no-store"));
    if tls {
        headers.insert(
            http::header::STRICT_TRANSPORT_SECURITY,
            http::HeaderValue::from_static("max-age=31536000"),
        );
    }
    response
}

/// Host, Origin and token checks, and the MCP session cap, before any handler.
async fn checks(State(app): State<App>, mut request: Request, next: Next) -> Response<Body> {
    let headers = request.headers();
    let path = request.uri().path();
    // The probes answer whatever the Host: engines call them by a pod's or container's address,
    // and they tell nothing but whether this server is up and has room.
    let probe = path == "/healthz" || path == "/readyz";
    if !probe && let Some(refused) = app.callers.check_site(request.uri(), headers, app.tls) {
        return refused;
    }
    // CDP clients cannot always add a header: their endpoints also take `?token=`.
    // `/` is the CDP endpoint of `airlock cdp` only; on `airlock serve` it is nothing, and a
    // token in its query must not be told apart from a wrong one.
    let from_query = (cdp::is_cdp_path(path) || (path == "/" && app.root_is_cdp))
        .then(|| cdp::with_query_token(headers, request.uri().query()))
        .flatten();
    let token_headers = from_query.as_ref().unwrap_or(headers);
    let mut signed_in = false;
    let ceiling = if probe {
        None
    } else if let Some(ceiling) = app.callers.authorize(token_headers) {
        Some(ceiling)
    } else {
        // A browser signed in to the dashboard sends its session instead.
        match ui::session_ceiling(&app, &request) {
            Err(refused) => return *refused,
            Ok(Some(ceiling)) => {
                signed_in = true;
                Some(ceiling)
            }
            Ok(None) if ui::open_path(path) => None,
            Ok(None) if path.starts_with("/ui/") => return ui::to_sign_in(),
            Ok(None) => return unauthorized(),
        }
    };
    let headers = request.headers();
    let path = request.uri().path();
    let new_session = path.starts_with("/mcp")
        && request.method() == http::Method::POST
        && !headers.contains_key("mcp-session-id");
    let _opening = if new_session && !app.stateless {
        match app.opening.admit(&app.sessions, app.max_sessions).await {
            Some(opening) => Some(opening),
            None => {
                return busy(
                    "this server has as many MCP sessions open as it allows (--max-sessions); end one, or try again shortly",
                );
            }
        }
    } else {
        None
    };
    // Handlers hold the caller's tasks to the ceiling of the token it called with.
    if let Some(ceiling) = ceiling {
        request.extensions_mut().insert(ceiling);
    }
    if signed_in {
        request.extensions_mut().insert(ui::SignedIn);
    }
    next.run(request).await
}

async fn readyz(State(app): State<App>, headers: http::HeaderMap) -> Response<Body> {
    let not_ready = if app.admission.draining.is_cancelled() {
        Some(NotReady::Draining)
    } else if !app.admission.has_room() {
        Some(NotReady::Full)
    } else {
        let browsers = Arc::clone(&app.browsers);
        app.readiness
            .browser_can_start(|| async move {
                browsers.check().await.map_err(|error| error.to_string())
            })
            .await
            .err()
            .map(NotReady::BrowserUnavailable)
    };
    let mut body = serde_json::json!({
        "ready": not_ready.is_none(),
        "reason": not_ready.as_ref().map(NotReady::word),
        "running": app.admission.running(),
    });
    // The details (Docker's own text, why the warm pool cannot fill) only for a caller with a
    // token; the probe itself needs none.
    if app.callers.check_token(&headers).is_none() {
        body["detail"] = serde_json::json!(not_ready.as_ref().map(NotReady::detail));
        body["pool_error"] = serde_json::json!(app.browsers.pools().error);
    }
    let status = if not_ready.is_none() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json_response(status, &body)
}

async fn metrics(State(app): State<App>) -> Response<Body> {
    app.admission.metrics.set_pools(&app.browsers.pools());
    let mut response = Response::new(Body::from(app.admission.metrics.encode()));
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
    // The checks put it there for every request that reaches a handler; a route that skipped
    // them runs nothing rather than run unconfined.
    let Some(ceiling) = parts.extensions.get::<Arc<Ceiling>>().cloned() else {
        return refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            "this request reached the task handler without the token checks: report it as a bug",
        );
    };
    let too_large = || {
        refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!(
                "the body is over {} bytes: a task is a short text, a URL, its settings, at most a 1 MiB session state and 20 MiB of files",
                task_body::MAX_TASK_BODY_BYTES
            ),
        )
    };
    // A declared length over the limit is refused before any of the body is read.
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > task_body::MAX_TASK_BODY_BYTES as u64) {
        return too_large();
    }
    let body = match tokio::time::timeout(
        BODY_TIMEOUT,
        axum::body::to_bytes(body, task_body::MAX_TASK_BODY_BYTES),
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
    let service = tasks_api::Service {
        runner,
        admission: app.admission,
        tracker: app.tracker,
        shutdown: app.shutdown,
        book: app.book,
    };
    let caller = Caller {
        ceiling: &ceiling,
        configured: &app.secrets,
        max_download_bytes: app.max_download_bytes,
        routes: &app.routes,
        max_viewport: app.max_viewport,
    };
    tasks_api::run(&parts.headers, body, service, caller).await
}

/// The MCP endpoint: one [`Server`] per MCP session, sharing the runner, the admission and the
/// tracker. A session's tasks (and its --direct browser) end with the session.
fn mcp_service(
    app: &App,
    settings: Arc<TaskSettings>,
) -> StreamableHttpService<Server, LocalSessionManager> {
    let shutdown = app.shutdown.child_token();
    let sessions = Arc::clone(&app.sessions);
    let app = app.clone();
    let factory = move || {
        let session = app.shutdown.child_token();
        let mode = match &app.runner {
            Some(runner) => Mode::Task(runner.clone()),
            None => Mode::Direct(Arc::new(Direct {
                browsers: Arc::clone(&app.browsers),
                session: Mutex::new(None),
                tracker: app.tracker.clone(),
                admission: Some(Arc::clone(&app.admission)),
                slot: std::sync::Mutex::new(None),
            })),
        };
        Ok(Server {
            mode,
            settings: Arc::clone(&settings),
            tracker: app.tracker.clone(),
            shutdown: session.clone(),
            admission: Some(Arc::clone(&app.admission)),
            book: Some(Arc::clone(&app.book)),
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
