//! `airlock task --live`: the task's live page (the dashboard's) on a loopback port of its own,
//! for a person at this machine. The link printed at start carries a one-time key: the first
//! visit trades it for a session cookie, as the dashboard's sign-in does, and is sent on to the
//! page, so the key leaves the address bar at once and a second use of the link is refused.
//! Without that session nothing here answers; with it, only the task's own routes do (its page,
//! status, events, live view, hand-back, cancel, record), behind the same Host, Origin and
//! input checks as `serve`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::routing::get;
use http::{Response, StatusCode};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;

use super::callers::{Callers, refuse};
use super::sign_ins::{SignIns, random_hex};
use super::{App, cdp, ui};
use crate::scope_request::Ceiling;
use crate::task_book::TaskBook;
use crate::{Browsers, TaskSettings};

/// Why the task's page could not be served.
#[derive(Debug, thiserror::Error)]
pub enum LocalWatchError {
    /// No loopback port could be had.
    #[error("--live: cannot listen on a loopback port: {0}; free one, or run without --live")]
    Listen(std::io::Error),
    /// No key could be drawn.
    #[error(
        "--live: the system's random source failed, so no private link could be made; run without --live"
    )]
    Random,
    /// The page's own checks could not be built.
    #[error("--live: {0}")]
    Callers(#[from] super::callers::CallersError),
}

/// The task's page, served while the task runs; dropping it stops the server.
pub struct LocalWatch {
    /// The link to open (once): `http://127.0.0.1:PORT/?key=…`.
    pub link: String,
    _stop: DropGuard,
}

/// The link's key, good for one visit.
struct OneTimeKey {
    key: String,
    used: AtomicBool,
}

/// What the local server knows besides the `App`: the key, and the task's page.
#[derive(Clone)]
struct Local {
    key: Arc<OneTimeKey>,
    page: Arc<str>,
    ceiling: Arc<Ceiling>,
}

/// Serve the task `id` of `book` on a loopback port of its own.
///
/// # Errors
/// When no loopback port or no random key can be had.
pub async fn start(
    book: Arc<TaskBook>,
    id: &str,
    browsers: Arc<dyn Browsers>,
    settings: &TaskSettings,
) -> Result<LocalWatch, LocalWatchError> {
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(LocalWatchError::Listen)?;
    let local: SocketAddr = listener.local_addr().map_err(LocalWatchError::Listen)?;
    let key = random_hex::<16>().ok_or(LocalWatchError::Random)?;
    let shutdown = CancellationToken::new();
    let app = App {
        stateless: true,
        tls: false,
        cdp: cdp::LeaseLimits {
            lease: Duration::ZERO,
            idle: Duration::ZERO,
            dialogs: airlock_policy::DialogSetting::Client,
        },
        // Loopback, no tokens: the Host and Origin checks; who may see the task is the
        // session's rule below.
        callers: Arc::new(Callers::new(local, Vec::new(), &[], &[])?),
        admission: crate::capacity::Admission::new(1, 0, Duration::ZERO),
        runner: None,
        browsers,
        tracker: TaskTracker::new(),
        shutdown: shutdown.clone(),
        sessions: Arc::new(LocalSessionManager::default()),
        max_sessions: 0,
        opening: Arc::default(),
        root_is_cdp: false,
        readiness: Arc::default(),
        secrets: settings.secrets.clone(),
        max_download_bytes: settings.max_download_bytes,
        routes: settings.routes.clone(),
        max_viewport: settings.max_viewport,
        book,
        leases: Arc::default(),
        sign_ins: Arc::new(SignIns::new(false)),
    };
    let state = Local {
        key: Arc::new(OneTimeKey {
            key: key.clone(),
            used: AtomicBool::new(false),
        }),
        page: format!("/ui/tasks/{id}").into(),
        ceiling: Arc::new(Ceiling::server(settings.scope.clone())),
    };
    let router = super::endpoints::task_endpoints()
        .route_layer(middleware::from_fn_with_state(app.clone(), with_session))
        .route("/", get(enter).layer(axum::Extension(state.clone())))
        .route("/ui", get(to_page).layer(axum::Extension(state)))
        .layer(middleware::from_fn_with_state(app.clone(), site))
        .with_state(app);
    let serving = shutdown.clone();
    tokio::spawn(async move {
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(async move { serving.cancelled().await })
            .await;
        if let Err(error) = served {
            tracing::warn!(%error, "the task's live page stopped");
        }
    });
    Ok(LocalWatch {
        link: format!("http://{local}/?key={key}"),
        _stop: shutdown.drop_guard(),
    })
}

/// The Host and Origin checks, for every path.
async fn site(State(app): State<App>, request: Request, next: Next) -> Response<Body> {
    if let Some(refused) = app
        .callers
        .check_site(request.uri(), request.headers(), false)
    {
        return refused;
    }
    next.run(request).await
}

/// The task's routes want the session the link gave.
async fn with_session(State(app): State<App>, mut request: Request, next: Next) -> Response<Body> {
    match ui::session_ceiling(&app, &request) {
        Err(refused) => *refused,
        Ok(Some(ceiling)) => {
            request.extensions_mut().insert(ceiling);
            next.run(request).await
        }
        Ok(None) => refuse(
            StatusCode::UNAUTHORIZED,
            "this page is for the person who started the task: open the link `airlock task --live` printed (its key works once, in one browser)",
        ),
    }
}

/// `GET /?key=…`: the first visit with the key opens a session and goes on to the task's page.
async fn enter(
    State(app): State<App>,
    axum::Extension(local): axum::Extension<Local>,
    request: Request,
) -> Response<Body> {
    if app
        .sign_ins
        .find(request.headers(), Instant::now())
        .is_some()
    {
        return ui::see_other(&local.page, None);
    }
    // The key is hex: nothing in it is ever percent-encoded.
    let given = (request.uri().query().unwrap_or_default().split('&'))
        .find_map(|pair| pair.strip_prefix("key="))
        .unwrap_or_default();
    let matches = bool::from(local.key.key.as_bytes().ct_eq(given.as_bytes()));
    if !matches || local.key.used.swap(true, Ordering::SeqCst) {
        return refuse(
            StatusCode::FORBIDDEN,
            "this link's key is wrong or was used already: it works once, in the browser that opened it first (start the task again with --live for a new one)",
        );
    }
    match app
        .sign_ins
        .open(Arc::clone(&local.ceiling), Instant::now())
    {
        Some(cookie) => ui::see_other(&local.page, Some(&cookie)),
        None => refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "the system's random source failed, so no session could be made",
        ),
    }
}

/// `GET /ui`: the task's page (the page's header links here).
async fn to_page(axum::Extension(local): axum::Extension<Local>) -> Response<Body> {
    ui::see_other(&local.page, None)
}
