//! The guarded CDP endpoint: `ws://HOST/cdp` (and the `/json/version` discovery that
//! Playwright's `connectOverCDP("http://…")` and Puppeteer's `browserURL` read).
//!
//! Each WebSocket connection leases its own sealed browser (from the warm CDP pool when one is
//! ready) with its own egress proxy, for at most `--cdp-timeout`, and while messages flow at least
//! every `--cdp-idle-timeout`. A lease takes a slot from the same admission as tasks. Every client
//! message passes the [`CdpGuard`] before Chromium sees it; when the connection ends for any
//! reason the browser's container is removed and its proxy stopped. The token's viewers may
//! watch the lease's page meanwhile (`lease_view.rs`; its id is the upgrade's `Airlock-Lease`
//! header and in `GET /v1/leases`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_policy::{CdpGuard, DialogAnswers, DialogStep, Verdict};
use axum::body::Body;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{Extension, Request, State};
use axum::response::IntoResponse;
use http::{HeaderMap, Response, StatusCode};

use super::App;
use super::callers::{busy, json_response, refuse};
use super::lease_view::{LeaseView, lease_view};
use super::leases::Listed;
use crate::CdpLease;
use crate::capacity::Slot;
use crate::scope_request::Ceiling;

/// The largest message a client may send (a command with a big script or document).
const MAX_CLIENT_MESSAGE_BYTES: usize = 32 * 1024 * 1024;
/// A client that takes longer than this to accept one message is gone.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// How long leases last.
#[derive(Debug, Clone, Copy)]
pub struct LeaseLimits {
    /// The most a lease lasts.
    pub lease: Duration,
    /// A lease with no message either way for this long ends.
    pub idle: Duration,
    /// Who answers a page's JavaScript dialogs: the client, or the server at once.
    pub dialogs: airlock_policy::DialogSetting,
}

/// `GET /json/version` (also under `/cdp/`): where to connect, in Chromium's shape.
pub(super) async fn version(State(app): State<App>, request: Request) -> Response<Body> {
    let headers = request.headers();
    let host = headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    let scheme = if app.tls { "wss" } else { "ws" };
    // A token given in the query is handed back in the URL the client will use next: it has it
    // already, and clients that read this document cannot always add headers.
    let query = request.uri().query();
    let asked: Vec<String> = [
        query_token(query).map(|token| format!("token={token}")),
        query_route(query).map(|route| format!("route={route}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    let url = if asked.is_empty() {
        format!("{scheme}://{host}/cdp")
    } else {
        format!("{scheme}://{host}/cdp?{}", asked.join("&"))
    };
    json_response(
        StatusCode::OK,
        &serde_json::json!({
            "Browser": "Airlock sealed Chromium",
            "Protocol-Version": "1.3",
            "webSocketDebuggerUrl": url,
        }),
    )
}

/// The `token` query parameter, if there is one (its characters are token characters or it is
/// not a token).
pub(super) fn query_token(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
        .filter(|token| {
            token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
        })
}

/// The `route` query parameter, if there is one (a route's name is letters, digits, `-`, `_`).
fn query_route(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("route="))
        .filter(|route| {
            route
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
        })
}

/// `GET /cdp` with a WebSocket upgrade: lease a browser, then serve the connection.
pub(super) async fn connect(
    State(app): State<App>,
    Extension(ceiling): Extension<Arc<Ceiling>>,
    uri: http::Uri,
    headers: http::HeaderMap,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response<Body> {
    // CDP clients (Playwright, Puppeteer, browser-use) send no Origin, and no page Airlock serves
    // needs this endpoint: an Origin, even this server's own, means a web page is asking.
    if headers.contains_key(http::header::ORIGIN) {
        return refuse(
            StatusCode::FORBIDDEN,
            "/cdp takes no Origin header: it is for CDP clients, never for web pages; connect without one",
        );
    }
    // `?route=NAME` picks the operator's route, as `route` does for a task (checked
    // before the upgrade, so a mistaken name is a plain 400 with the list).
    let route =
        match crate::scope_request::task_route(query_route(uri.query()), &ceiling, &app.routes) {
            Ok(route) => route,
            Err(why) => return refuse(StatusCode::BAD_REQUEST, &why),
        };
    let Ok(upgrade) = upgrade else {
        return refuse(
            StatusCode::UPGRADE_REQUIRED,
            "/cdp is a WebSocket endpoint: connect with a CDP client (Playwright connectOverCDP, Puppeteer connect), or read /json/version for its URL",
        );
    };
    let slot = match app.admission.admit(&app.shutdown).await {
        Ok(slot) => slot,
        Err(refusal) => return busy(&refusal.to_string()),
    };
    let limits = app.cdp;
    let started = Instant::now();
    // The browser starts before the upgrade, so a failure is an HTTP answer with its reason.
    // A CDP client drives the browser itself: its token's ceiling is its scope.
    let browser = match app
        .browsers
        .start_cdp(limits.lease, ceiling.scope.clone(), route)
        .await
    {
        Ok(browser) => browser,
        Err(error) => {
            tracing::warn!(%error, "a CDP browser could not start");
            app.admission.metrics.cdp_ended("start_failed");
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("the sealed browser could not start: {error}"),
            );
        }
    };
    let start_ms = started.elapsed().as_millis();
    let id = crate::task_book::new_id("lease");
    tracing::info!(
        lease = %id,
        container = browser.container(),
        warm = browser.warm(),
        start_ms,
        "a CDP client leased a sealed browser"
    );
    let tracker = app.tracker.clone();
    let (view, source) = lease_view();
    // Listed from here: an upgrade that fails drops the closure, and the lease leaves the book.
    let listed = app
        .leases
        .list_lease(&id, &ceiling.context_owner, browser.warm(), source);
    let mut response = upgrade
        .max_message_size(MAX_CLIENT_MESSAGE_BYTES)
        .max_frame_size(MAX_CLIENT_MESSAGE_BYTES)
        .on_failed_upgrade(|error| tracing::warn!(%error, "a CDP client's upgrade failed"))
        .on_upgrade(move |socket| {
            let lease = Lease {
                slot,
                browser,
                view,
                listed,
            };
            // The tracker keeps shutdown waiting for the lease's cleanup.
            tracker.track_future(serve_lease(app, lease, socket))
        })
        .into_response();
    if let Ok(value) = http::HeaderValue::from_str(&id) {
        response.headers_mut().insert(LEASE_HEADER, value);
    }
    response
}

/// The upgrade's header naming the lease (for `GET /v1/leases/{id}/live`).
const LEASE_HEADER: &str = "airlock-lease";

/// What a lease holds while it runs.
struct Lease {
    slot: Slot,
    browser: Box<dyn CdpLease>,
    view: LeaseView,
    /// In the book until the lease ends.
    listed: Listed,
}

/// How a lease ended, for the log and `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    ClientClosed,
    BrowserClosed,
    BrowserExited,
    LeaseTimeout,
    Idle,
    Draining,
    Failed,
    /// The browser took no message within the idle limit (its stdin stopped draining).
    BrowserStuck,
}

impl End {
    /// The WebSocket close code and reason the client is told.
    fn close_frame(self, limits: LeaseLimits) -> (u16, String) {
        match self {
            Self::ClientClosed | Self::BrowserClosed => (close_code::NORMAL, String::new()),
            Self::BrowserExited => (
                close_code::ERROR,
                "airlock: the browser exited; connect again for a new one".to_owned(),
            ),
            Self::Failed => (
                close_code::ERROR,
                "airlock: the browser's stream failed; connect again for a new one".to_owned(),
            ),
            Self::BrowserStuck => (
                close_code::ERROR,
                format!(
                    "airlock: the browser took no message for {} s (--cdp-idle-timeout); connect again for a new one",
                    limits.idle.as_secs()
                ),
            ),
            Self::LeaseTimeout => (
                close_code::POLICY,
                format!(
                    "airlock: the lease's time limit ({} s, --cdp-timeout) passed",
                    limits.lease.as_secs()
                ),
            ),
            Self::Idle => (
                close_code::POLICY,
                format!(
                    "airlock: no message for {} s (--cdp-idle-timeout)",
                    limits.idle.as_secs()
                ),
            ),
            Self::Draining => (
                close_code::AWAY,
                "airlock: the server is shutting down".to_owned(),
            ),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::ClientClosed => "client_closed",
            Self::BrowserClosed => "browser_close",
            Self::BrowserExited => "browser_exited",
            Self::LeaseTimeout => "lease_timeout",
            Self::Idle => "idle",
            Self::Draining => "draining",
            Self::Failed => "failed",
            Self::BrowserStuck => "browser_stuck",
        }
    }
}

/// Pass messages both ways until either side ends or a limit passes; then close the client with
/// the reason and dispose of the browser.
async fn serve_lease(app: App, lease: Lease, mut socket: WebSocket) {
    let Lease {
        slot,
        mut browser,
        mut view,
        listed,
    } = lease;
    let metrics = &app.admission.metrics;
    metrics.cdp_leases.inc();
    let limits = app.cdp;
    let mut guard = CdpGuard::new();
    let mut dialogs = DialogAnswers::new(limits.dialogs);
    let deadline = tokio::time::Instant::now() + limits.lease;
    let mut idle_until = tokio::time::Instant::now() + limits.idle;
    let end = loop {
        tokio::select! {
            from_client = socket.recv() => {
                idle_until = tokio::time::Instant::now() + limits.idle;
                let text = match from_client {
                    Some(Ok(Message::Text(text))) => text.to_string(),
                    Some(Ok(Message::Binary(bytes))) => String::from_utf8_lossy(&bytes).into_owned(),
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                    Some(Ok(Message::Close(_)) | Err(_)) | None => break End::ClientClosed,
                };
                let verdict = guard.check(&text);
                metrics.cdp_verdict(verdict.kind());
                match verdict {
                    Verdict::Forward { message } | Verdict::Rewrite { message, .. } => {
                        // A browser that stops taking messages must not hold the lease past its
                        // limits or the drain: the write is bounded like silence is.
                        let write_until = deadline.min(tokio::time::Instant::now() + limits.idle);
                        tokio::select! {
                            sent = tokio::time::timeout_at(write_until, browser.send(&message)) => match sent {
                                Ok(Ok(())) => {}
                                Ok(Err(_)) => break End::BrowserExited,
                                Err(_) if tokio::time::Instant::now() >= deadline => break End::LeaseTimeout,
                                Err(_) => break End::BrowserStuck,
                            },
                            () = app.shutdown.cancelled() => break End::Draining,
                        }
                    }
                    Verdict::Refuse { reply, .. } | Verdict::Invalid { reply, .. } => {
                        if !send(&mut socket, reply).await {
                            break End::ClientClosed;
                        }
                    }
                    Verdict::Close { reply } => {
                        send(&mut socket, reply).await;
                        break End::BrowserClosed;
                    }
                    Verdict::Ignore => {}
                }
            }
            from_browser = browser.next_message() => {
                match from_browser {
                    Some(Ok(message)) => {
                        log_refusals(browser.as_ref(), metrics);
                        let mut both = Both { socket: &mut socket, guard: &mut guard, browser: browser.as_mut(), dialogs: &mut dialogs };
                        match both.pass(&mut view, message).await {
                            Ok(true) => idle_until = tokio::time::Instant::now() + limits.idle,
                            // The live view's own messages are not the client's traffic: a
                            // watched lease whose client is silent still ends when idle.
                            Ok(false) => {}
                            Err(end) => break end,
                        }
                    }
                    Some(Err(error)) => {
                        tracing::warn!(%error, container = browser.container(), "a CDP browser's stream failed");
                        break End::Failed;
                    }
                    None => break End::BrowserExited,
                }
            }
            command = view.next() => {
                if !to_browser(browser.as_mut(), &[command]).await {
                    break End::BrowserExited;
                }
            }
            () = tokio::time::sleep_until(deadline) => break End::LeaseTimeout,
            () = tokio::time::sleep_until(idle_until) => break End::Idle,
            () = app.shutdown.cancelled() => break End::Draining,
        }
    };
    guard.close();
    let (code, reason) = end.close_frame(limits);
    if end != End::ClientClosed {
        let frame = CloseFrame {
            code,
            reason: reason.into(),
        };
        let _ = tokio::time::timeout(SEND_TIMEOUT, socket.send(Message::Close(Some(frame)))).await;
    }
    log_refusals(browser.as_ref(), metrics);
    let container = browser.container().to_owned();
    browser.dispose().await;
    // Out of the book before its viewers are told it ended.
    drop(listed);
    drop(view);
    drop(slot);
    metrics.cdp_leases.dec();
    metrics.cdp_ended(end.label());
    log_end(&container, end, &guard, dialogs.answered());
}

fn log_end(container: &str, end: End, guard: &CdpGuard, dialogs_answered: u64) {
    let record: Vec<String> = guard
        .record()
        .iter()
        .map(|r| format!("{} {}: {}", r.verdict, r.method, r.reason))
        .collect();
    tracing::info!(
        container,
        end = end.label(),
        guard_record = ?record,
        unrecorded = guard.unrecorded(),
        dialogs_answered,
        "a CDP lease ended; its browser is removed"
    );
}

/// Log and count what the browser's egress proxy refused since the last look (as the browser's
/// messages arrive, and once more at the end).
fn log_refusals(browser: &dyn CdpLease, metrics: &crate::metrics::Metrics) {
    let taken = browser.take_egress_events();
    for event in &taken.events {
        if let airlock_proxy::Outcome::Refused { reason, class, .. } = &event.outcome {
            metrics.cdp_egress_refusal(class, 1);
            airlock_worker::log_refusal(&event.target, class, reason);
        }
    }
    for (class, count) in &taken.more_refused {
        metrics.cdp_egress_refusal(class, *count);
    }
    let more: u64 = taken.more_refused.iter().map(|(_, count)| count).sum();
    if more > 0 {
        tracing::info!(
            container = browser.container(),
            more,
            "the egress proxy refused more of a CDP browser's requests, not logged one by one"
        );
    }
}

/// Send the live view's commands to the browser (each bounded like the client's); false when
/// the browser is gone or stuck.
async fn to_browser(browser: &mut dyn CdpLease, commands: &[String]) -> bool {
    for command in commands {
        match tokio::time::timeout(SEND_TIMEOUT, browser.send(command)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) | Err(_) => return false,
        }
    }
    true
}

/// A lease's two ends, for one message from the browser.
struct Both<'a> {
    socket: &'a mut WebSocket,
    guard: &'a mut CdpGuard,
    browser: &'a mut dyn CdpLease,
    dialogs: &'a mut DialogAnswers,
}

impl Both<'_> {
    /// Pass one browser message on: to the client, or (a dialog the operator's setting answers,
    /// and the reply to that answer) nowhere, or (the live view's own) to the view, which may
    /// answer the browser and hand back messages for the client. `Ok(true)` when the client
    /// got something; `Err` with how the lease ends when either side is gone.
    async fn pass(&mut self, view: &mut LeaseView, message: String) -> Result<bool, End> {
        match self.dialogs.step(&message) {
            DialogStep::Pass => {}
            DialogStep::Keep => return Ok(false),
            DialogStep::Answer(answer) => {
                return if to_browser(self.browser, &[answer]).await {
                    Ok(false)
                } else {
                    Err(End::BrowserExited)
                };
            }
        }
        let Some(taken) = view.take(&message) else {
            self.tell_client(message).await?;
            return Ok(true);
        };
        if !to_browser(self.browser, &taken.to_browser).await {
            return Err(End::BrowserExited);
        }
        let any = !taken.to_client.is_empty();
        for message in taken.to_client {
            self.tell_client(message).await?;
        }
        Ok(any)
    }

    async fn tell_client(&mut self, message: String) -> Result<(), End> {
        self.guard.observe_reply(&message);
        if send(self.socket, message).await {
            Ok(())
        } else {
            Err(End::ClientClosed)
        }
    }
}

/// Send one text message within [`SEND_TIMEOUT`]; false when the client is gone.
async fn send(socket: &mut WebSocket, text: String) -> bool {
    matches!(
        tokio::time::timeout(SEND_TIMEOUT, socket.send(Message::Text(text.into()))).await,
        Ok(Ok(()))
    )
}

/// Whether this request is for the CDP endpoints (which also take the token from the query).
pub(super) fn is_cdp_path(path: &str) -> bool {
    path == "/cdp" || path.starts_with("/cdp/") || path.starts_with("/json/version")
}

/// Headers with the query's token moved into `Authorization`, for the one token check.
pub(super) fn with_query_token(headers: &HeaderMap, query: Option<&str>) -> Option<HeaderMap> {
    let token = query_token(query)?;
    if headers.contains_key(http::header::AUTHORIZATION) {
        return None;
    }
    let mut headers = headers.clone();
    let value = http::HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
    headers.insert(http::header::AUTHORIZATION, value);
    Some(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_token_is_read_only_when_it_is_token_text() {
        assert_eq!(
            query_token(Some("token=abcDEF0123456789")),
            Some("abcDEF0123456789")
        );
        assert_eq!(query_token(Some("x=1&token=abc-_.~")), Some("abc-_.~"));
        assert_eq!(query_token(Some("token=a%20b")), None);
        assert_eq!(query_token(Some("tokens=abc")), None);
        assert_eq!(query_token(None), None);
    }

    #[test]
    fn cdp_paths_are_the_endpoint_and_its_discovery() {
        for path in [
            "/cdp",
            "/cdp/json/version",
            "/cdp/json/version/",
            "/json/version",
            "/json/version/",
        ] {
            assert!(is_cdp_path(path), "{path}");
        }
        for path in ["/cdpx", "/mcp", "/v1/tasks", "/json/list"] {
            assert!(!is_cdp_path(path), "{path}");
        }
    }
}
