//! The dashboard's routes: `/ui` (the sign-in form, or the dashboard once signed in),
//! `POST /ui/sign-in` and `/ui/sign-out`, `/ui/tasks/{id}` (a task's live page) and
//! `/ui/leases/{id}` (a CDP lease's). A signed-in browser calls the task API (`/v1/tasks/{id}…`:
//! status, events, live view, hand-back, cancel) and the leases' (`/v1/leases…`) with its
//! session cookie instead of a bearer token; anything it sends that changes something,
//! and every WebSocket it opens, must come from this server's own pages (`Origin`).

use std::sync::Arc;
use std::time::Instant;

use axum::Form;
use axum::body::Body;
use axum::extract::rejection::FormRejection;
use axum::extract::{Path, Request, State};
use http::{HeaderMap, HeaderValue, Response, StatusCode, Uri};
use serde::Deserialize;

use super::App;
use super::callers::refuse;
use super::origin::from_own_page;
use super::ui_pages::{self, ServerView, page};
use crate::scope_request::Ceiling;

/// Marks a request whose caller is a signed-in browser (its session cookie).
#[derive(Debug, Clone, Copy)]
pub(super) struct SignedIn;

/// Whether `path` is reached without a token or session (the form and its answer).
pub(super) fn open_path(path: &str) -> bool {
    path == "/ui" || path == "/ui/sign-in"
}

/// The ceiling of the request's session, when it has one and its path takes it: `Err` with the
/// refusal when a session comes with another page's `Origin`, or tries to change something or
/// open a WebSocket without this server's own.
pub(super) fn session_ceiling(
    app: &App,
    request: &Request,
) -> Result<Option<Arc<Ceiling>>, Box<Response<Body>>> {
    let path = request.uri().path();
    if !(path.starts_with("/ui")
        || path.starts_with("/v1/tasks/")
        || path.starts_with("/v1/leases"))
    {
        return Ok(None);
    }
    let headers = request.headers();
    let Some(ceiling) = app.sign_ins.find(headers, Instant::now()) else {
        return Ok(None);
    };
    let safe = matches!(*request.method(), http::Method::GET | http::Method::HEAD);
    let upgrade = headers.contains_key(http::header::UPGRADE);
    // A page elsewhere (even an origin the operator allows for token callers) never rides on a
    // person's session: with one, any `Origin` must be ours, and a change must name it.
    let named = headers.contains_key(http::header::ORIGIN);
    let ours = from_own_page(request.uri(), headers, app.tls);
    if !ours && (named || !safe || upgrade) {
        return Err(Box::new(refuse(
            StatusCode::FORBIDDEN,
            "a signed-in browser is served only from this server's own pages, and changes something or opens a live view only from them: use the dashboard at /ui",
        )));
    }
    Ok(Some(ceiling))
}

/// Where a browser without a session is sent.
pub(super) fn to_sign_in() -> Response<Body> {
    see_other("/ui", None)
}

/// `303` to `location`, setting `cookie` if given.
pub(super) fn see_other(location: &str, cookie: Option<&str>) -> Response<Body> {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SEE_OTHER;
    let headers = response.headers_mut();
    if let Ok(location) = HeaderValue::from_str(location) {
        headers.insert(http::header::LOCATION, location);
    }
    if let Some(cookie) = cookie.and_then(|cookie| HeaderValue::from_str(cookie).ok()) {
        headers.insert(http::header::SET_COOKIE, cookie);
    }
    response
}

/// `GET /ui`: the dashboard for a signed-in caller, else the sign-in form.
pub(super) async fn home(
    State(app): State<App>,
    ceiling: Option<axum::Extension<Arc<Ceiling>>>,
    signed_in: Option<axum::Extension<SignedIn>>,
) -> Response<Body> {
    let Some(ceiling) = ceiling else {
        return page(StatusCode::OK, ui_pages::sign_in(None));
    };
    let tasks = app.book.list(&ceiling.context_owner);
    let leases = app.leases.of(&ceiling.context_owner);
    let pools = app.browsers.pools();
    let server = ServerView {
        capacity: app.admission.capacity(),
        running: app.admission.running(),
        queued: app.admission.metrics.queued.get(),
        cdp_leases: app.admission.metrics.cdp_leases.get(),
        draining: app.admission.draining.is_cancelled(),
        warm_tasks: pools.warm_tasks,
        warm_target: pools.target,
        warm_cdp: pools.warm_cdp,
        pool_error: pools.error,
        signed_in: signed_in.is_some(),
    };
    page(
        StatusCode::OK,
        ui_pages::dashboard(&server, &tasks, &leases, crate::task_book::now_unix_ms()),
    )
}

#[derive(Deserialize)]
pub(super) struct SignInForm {
    token: String,
}

/// `POST /ui/sign-in`: a token from the form (only from this server's own page) opens a session.
pub(super) async fn sign_in(
    State(app): State<App>,
    client: Option<axum::Extension<super::connections::ClientAddr>>,
    uri: Uri,
    headers: HeaderMap,
    form: Result<Form<SignInForm>, FormRejection>,
) -> Response<Body> {
    // A request served without a connection's address (none is, today) counts as one client.
    let client = client.map_or(std::net::IpAddr::from([0, 0, 0, 0]), |found| found.0.0);
    let now = Instant::now();
    if let Err(wait) = app.sign_ins.failures.check(client, now) {
        tracing::warn!(%client, "dashboard sign-ins are held back: too many failed");
        let mut response = page(
            StatusCode::TOO_MANY_REQUESTS,
            ui_pages::sign_in(Some(&format!(
                "Too many failed sign-ins: try again in {} seconds.",
                wait.as_secs()
            ))),
        );
        response.headers_mut().insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from(wait.as_secs()),
        );
        return response;
    }
    if !from_own_page(&uri, &headers, app.tls) {
        return page(
            StatusCode::FORBIDDEN,
            ui_pages::sign_in(Some(
                "Sign in from this server's own page (the form at /ui): this request came from elsewhere.",
            )),
        );
    }
    let Ok(Form(form)) = form else {
        return page(
            StatusCode::BAD_REQUEST,
            ui_pages::sign_in(Some(
                "The form arrived without its token field: sign in with the form at /ui.",
            )),
        );
    };
    let Some(ceiling) = app.callers.ceiling_of(form.token.trim()) else {
        tracing::info!("a dashboard sign-in was refused: not one of the server's tokens");
        app.sign_ins.failures.failed(client, now);
        return page(
            StatusCode::UNAUTHORIZED,
            ui_pages::sign_in(Some(
                "That is not one of this server's tokens: paste the whole token.",
            )),
        );
    };
    let Some(cookie) = app.sign_ins.open(ceiling, Instant::now()) else {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "the system's random source failed, so no session could be made: try again, and check the host's entropy source",
        );
    };
    see_other("/ui", Some(&cookie))
}

/// `POST /ui/sign-out`: the session ends and the browser forgets it.
pub(super) async fn sign_out(State(app): State<App>, headers: HeaderMap) -> Response<Body> {
    see_other("/ui", Some(&app.sign_ins.close(&headers)))
}

/// `GET /ui/tasks/{id}`: the task's live page, for its own token.
pub(super) async fn task_page(
    State(app): State<App>,
    ceiling: axum::Extension<Arc<Ceiling>>,
    signed_in: Option<axum::Extension<SignedIn>>,
    Path(id): Path<String>,
) -> Response<Body> {
    let signed_in = signed_in.is_some();
    match app.book.get(&ceiling.context_owner, &id) {
        Some(task) => page(StatusCode::OK, ui_pages::live(&id, &task, signed_in)),
        None => page(StatusCode::NOT_FOUND, ui_pages::no_such_task(signed_in)),
    }
}

/// `GET /ui/leases/{id}`: an open CDP lease's live page, for its own token.
pub(super) async fn lease_page(
    State(app): State<App>,
    ceiling: axum::Extension<Arc<Ceiling>>,
    signed_in: Option<axum::Extension<SignedIn>>,
    Path(id): Path<String>,
) -> Response<Body> {
    let signed_in = signed_in.is_some();
    if app.leases.has(&ceiling.context_owner, &id) {
        page(StatusCode::OK, ui_pages::lease_live(&id, signed_in))
    } else {
        page(StatusCode::NOT_FOUND, ui_pages::no_such_lease(signed_in))
    }
}
