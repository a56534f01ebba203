//! The dashboard's pages, rendered on the server (maud): sign-in, the dashboard, a task's and a
//! CDP lease's live page. Each is one response with its style inline and, on a live page, one
//! script, all allowed by their hashes alone; the page may connect only to this server and submit forms only
//! to it, may not be framed, and is never cached.

use std::sync::LazyLock;

use axum::body::Body;
use base64::Engine;
use http::{HeaderValue, Response, StatusCode};
use maud::{DOCTYPE, Markup, PreEscaped, html};
use sha2::{Digest, Sha256};

use super::leases::LeaseSeen;
use crate::task_book::{Snapshot, TaskState};

const STYLE: &str = include_str!("ui/ui.css");
const LIVE_SCRIPT: &str = include_str!("ui/live.js");
const LEASE_SCRIPT: &str = include_str!("ui/lease.js");

/// The pages' Content-Security-Policy: the inline style and script by hash; frames as `blob:`
/// images; fetches, events and the live view's WebSocket to this server alone.
static POLICY: LazyLock<String> = LazyLock::new(|| {
    let hash = |text: &str| {
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text.as_bytes()))
    };
    format!(
        "default-src 'none'; style-src 'sha256-{}'; script-src 'sha256-{}' 'sha256-{}'; img-src blob:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        hash(STYLE),
        hash(LIVE_SCRIPT),
        hash(LEASE_SCRIPT)
    )
});

/// What the dashboard shows besides the caller's tasks: the server's capacity and warm pools.
#[derive(Debug, Default)]
pub(super) struct ServerView {
    pub(super) capacity: usize,
    pub(super) running: usize,
    pub(super) queued: i64,
    pub(super) cdp_leases: i64,
    pub(super) draining: bool,
    pub(super) warm_tasks: usize,
    pub(super) warm_target: usize,
    pub(super) warm_cdp: usize,
    pub(super) pool_error: Option<String>,
    /// Signed in with a cookie (so there is a session to end).
    pub(super) signed_in: bool,
}

/// An HTML answer with the pages' headers.
pub(super) fn page(status: StatusCode, markup: Markup) -> Response<Body> {
    let mut response = Response::new(Body::from(markup.into_string()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    if let Ok(policy) = HeaderValue::from_str(&POLICY) {
        headers.insert(http::header::CONTENT_SECURITY_POLICY, policy);
    }
    for (name, value) in [
        (http::header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (http::header::X_FRAME_OPTIONS, "DENY"),
        // Not `no-referrer`: under it a browser sends `Origin: null` with the pages' own POSTs,
        // and the Origin check is what keeps other pages out.
        (http::header::REFERRER_POLICY, "same-origin"),
        (http::header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// How often the dashboard reloads itself, in seconds: a person watching it sees tasks start,
/// ask for help and end without a script of its own (the live page has its own stream).
const DASHBOARD_REFRESH_SECONDS: u32 = 5;

/// What a page carries besides its body.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Extras {
    None,
    /// The live view's script.
    LiveScript,
    /// A lease's live view's script.
    LeaseScript,
    /// A reload every [`DASHBOARD_REFRESH_SECONDS`].
    Refresh,
}

fn layout(title: &str, body: &Markup, extras: Extras) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if extras == Extras::Refresh {
                    meta http-equiv="refresh" content=(DASHBOARD_REFRESH_SECONDS);
                }
                title { (title) " · Airlock" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                (body)
                @if extras == Extras::LiveScript { script { (PreEscaped(LIVE_SCRIPT)) } }
                @if extras == Extras::LeaseScript { script { (PreEscaped(LEASE_SCRIPT)) } }
            }
        }
    }
}

fn header(signed_in: bool) -> Markup {
    html! {
        header {
            h1 { a href="/ui" { "Airlock" } }
            @if signed_in {
                form method="post" action="/ui/sign-out" { button type="submit" { "Sign out" } }
            }
        }
    }
}

/// The sign-in form; `problem` says why the last try failed.
pub(super) fn sign_in(problem: Option<&str>) -> Markup {
    let body = html! {
        form.sign-in method="post" action="/ui/sign-in" {
            h1 { "Airlock" }
            p { "Sign in with one of this server's tokens. It is sent once, in this form's body; your browser then holds only a session that ends in 8 hours or when you sign out." }
            label for="token" { "Token" }
            input #token type="password" name="token" autocomplete="current-password" required;
            @if let Some(problem) = problem { p.error #problem { (problem) } }
            button.primary type="submit" { "Sign in" }
        }
    };
    layout("Sign in", &body, Extras::None)
}

/// The dashboard: help requests first, then the server, then the caller's tasks and leases.
pub(super) fn dashboard(
    server: &ServerView,
    tasks: &[(String, Snapshot)],
    leases: &[LeaseSeen],
    now_ms: u64,
) -> Markup {
    let waiting: Vec<&(String, Snapshot)> = tasks
        .iter()
        .filter(|(_, task)| task.state == TaskState::WaitingForHuman)
        .collect();
    let body = html! {
        (header(server.signed_in))
        @if !waiting.is_empty() {
            h2 { "Asking for help" }
            @for (id, task) in &waiting {
                div.help.help-request {
                    p { strong { (task.title) } }
                    p { "The worker asks: " (task.help.as_ref().map_or("", |help| help.reason.as_str())) }
                    a href=(format!("/ui/tasks/{id}")) { "Open the live view to help" }
                }
            }
        }
        h2 { "This server" }
        div.facts #server {
            div.fact { b #running { (server.running) " / " (server.capacity) } "browsers in use (tasks and CDP leases)" }
            div.fact { b #queued { (server.queued) } "tasks queued" }
            div.fact { b #leases { (server.cdp_leases) } "CDP leases open" }
            div.fact { b #warm { (server.warm_tasks) " / " (server.warm_target) } "warm task browsers" }
            div.fact { b #warm-cdp { (server.warm_cdp) } "warm CDP browsers" }
        }
        @if server.draining { p.error { "This server is draining: it takes no new tasks." } }
        @if let Some(error) = &server.pool_error { p.error { "The warm pool cannot fill: " (error) } }
        h2 { "Your tasks" }
        p.muted { "This page updates every " (DASHBOARD_REFRESH_SECONDS) " seconds." }
        @if tasks.is_empty() {
            p.muted { "No tasks yet. Tasks this token starts (over /v1/tasks or MCP) appear here, with the last ones kept after they end." }
        } @else {
            table #tasks {
                thead { tr { th { "Task" } th { "State" } th { "Steps" } th { "Started" } th { "" } } }
                tbody {
                    @for (id, task) in tasks {
                        tr.task data-task=(id) data-state=(state_word(task.state)) {
                            td { a href=(format!("/ui/tasks/{id}")) { (task.title) } }
                            td { span.state.(format!("state-{}", state_word(task.state))) { (state_text(task)) } }
                            td { (task.steps.len()) }
                            td { (ago(now_ms, task.created_unix_ms)) }
                            td {
                                @if task.record.is_some() {
                                    a href=(format!("/v1/tasks/{id}/record.html")) { "record" }
                                } @else if task.state != TaskState::Done {
                                    a href=(format!("/ui/tasks/{id}")) { "watch" }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if !leases.is_empty() {
            h2 { "Your CDP leases" }
            table #leases-open {
                thead { tr { th { "Lease" } th { "Browser" } th { "Started" } th { "" } } }
                tbody {
                    @for lease in leases {
                        tr.lease data-lease=(lease.id) {
                            td { code { (lease.id) } }
                            td { @if lease.warm { "warm" } @else { "started for it" } }
                            td { (ago(now_ms, lease.started_unix_ms)) }
                            td { a href=(lease.links.page) { "watch" } }
                        }
                    }
                }
            }
        }
    };
    layout("Dashboard", &body, Extras::Refresh)
}

/// An open CDP lease's live page: its frames while its client drives.
pub(super) fn lease_live(id: &str, signed_in: bool) -> Markup {
    let body = html! {
        (header(signed_in))
        main #lease data-lease=(id) {
            h2 { "CDP lease " code { (id) } }
            p.muted { "Its CDP client drives this page; you watch. Watching changes nothing the client does." }
            p #said role="status" {}
            div #screen {
                p #placeholder { "Waiting for the browser's first frame…" }
                img #view alt="The lease's page" hidden;
            }
        }
    };
    layout("Lease", &body, Extras::LeaseScript)
}

/// A lease this session cannot see, told like one that does not exist.
pub(super) fn no_such_lease(signed_in: bool) -> Markup {
    let body = html! {
        (header(signed_in))
        p.error { "No such open lease for this token: a lease is seen only with the token that opened it, and only while it is open." }
    };
    layout("No such lease", &body, Extras::None)
}

/// A task's live page: its frames, its state and steps as they come, and while it asks for help,
/// the reason and the buttons to hand back or cancel.
pub(super) fn live(id: &str, task: &Snapshot, signed_in: bool) -> Markup {
    let body = html! {
        (header(signed_in))
        main #live data-task=(id) data-state=(state_word(task.state)) {
            h2 { (task.title) }
            p { "State: " span.state #state { (state_text(task)) } }
            div.help #help hidden[task.state != TaskState::WaitingForHuman] {
                p { "The worker asks for help: " strong #reason { (task.help.as_ref().map_or("", |help| help.reason.as_str())) } }
                p { "Click and type on the page below. Only clicks, keys and scrolls reach it, and only what the task may reach. When you are done, hand back." }
                button.primary #hand-back type="button" { "Hand back to the worker" }
                " "
                button #cancel type="button" { "Cancel the task" }
            }
            p #said role="status" {}
            div #screen {
                p #placeholder { "Waiting for the browser's first frame…" }
                img #view tabindex="0" alt="The task's page" hidden;
            }
            p #record hidden[task.state != TaskState::Done] {
                a href=(format!("/v1/tasks/{id}/record.html")) { "The task's record" }
            }
            h2 { "Steps" }
            ol #steps {
                @for step in &task.steps { li { (step.step) "/" (step.max_steps) " " (step.summary) } }
            }
        }
    };
    layout("Live view", &body, Extras::LiveScript)
}

/// A task this session cannot see, told like one that does not exist.
pub(super) fn no_such_task(signed_in: bool) -> Markup {
    let body = html! {
        (header(signed_in))
        p.error { "No such task for this token: a task is seen only with the token that started it, and only the last ones are kept." }
    };
    layout("No such task", &body, Extras::None)
}

fn state_word(state: TaskState) -> &'static str {
    match state {
        TaskState::Queued => "queued",
        TaskState::Running => "running",
        TaskState::WaitingForHuman => "waiting_for_human",
        TaskState::Done => "done",
    }
}

/// How a task ended, in the API's word (`completed`, `timed_out`, …).
fn ended_word(ended: airlock_worker::Ended) -> Option<String> {
    serde_json::to_value(ended)
        .ok()?
        .as_str()
        .map(str::to_owned)
}

fn state_text(task: &Snapshot) -> String {
    match task.state {
        TaskState::WaitingForHuman => "waiting for a person".to_owned(),
        TaskState::Done => {
            let ended = task
                .answer
                .as_ref()
                .and_then(|answer| ended_word(answer.result.ended));
            match (ended, &task.error) {
                (Some(ended), _) => format!("done: {ended}"),
                (None, Some(_)) => "done: never ran".to_owned(),
                (None, None) => "done".to_owned(),
            }
        }
        other => state_word(other).to_owned(),
    }
}

fn ago(now_ms: u64, then_ms: u64) -> String {
    let seconds = now_ms.saturating_sub(then_ms) / 1000;
    match seconds {
        0..60 => format!("{seconds} s ago"),
        60..3600 => format!("{} min ago", seconds / 60),
        _ => format!("{} h ago", seconds / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_allows_exactly_the_inline_style_and_script() {
        let response = page(StatusCode::OK, live("task_1", &snapshot(), true));
        let policy = response.headers()[http::header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(policy.starts_with("default-src 'none'"), "{policy}");
        assert!(policy.contains("connect-src 'self'"), "{policy}");
        assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
        assert!(!policy.contains("unsafe"), "{policy}");
        assert_eq!(response.headers()[http::header::CACHE_CONTROL], "no-store");
        assert_eq!(
            response.headers()[http::header::REFERRER_POLICY],
            "same-origin"
        );
    }

    #[test]
    fn a_tasks_words_are_escaped() {
        let mut task = snapshot();
        task.title = "<script>alert(1)</script>".to_owned();
        let html = dashboard(
            &ServerView::default(),
            &[("task_1".to_owned(), task)],
            &[],
            0,
        )
        .into_string();
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(html.contains("&lt;script&gt;"));
    }

    #[test]
    fn ages_read_in_the_largest_unit() {
        assert_eq!(ago(61_000, 0), "1 min ago");
        assert_eq!(ago(5_000, 0), "5 s ago");
        assert_eq!(ago(0, 5_000), "0 s ago", "a clock step back");
        assert_eq!(ago(7_300_000, 0), "2 h ago");
    }

    fn snapshot() -> Snapshot {
        Snapshot {
            title: "Find the price".to_owned(),
            state: TaskState::Running,
            created_unix_ms: 0,
            steps: Vec::new(),
            help: None,
            answer: None,
            error: None,
            record: None,
        }
    }
}
