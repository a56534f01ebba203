//! Following a task of one's own: `GET /v1/tasks/{id}` (its state and steps so far, its answer
//! once done), `GET /v1/tasks/{id}/events` (the same as Server-Sent Events, ending when it is
//! done), `DELETE /v1/tasks/{id}` (cancel it), and its record once done (`/record` as JSON,
//! `/record.html` as a page). A task of another token answers exactly as a task that does not
//! exist.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use airlock_worker::{Ended, HelpCall};
use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::IntoResponse;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::{self, Stream, StreamExt};
use http::{HeaderValue, Response, StatusCode};
use schemars::JsonSchema;
use serde::Serialize;

use super::App;
use super::callers::{json_response, refuse};
use crate::scope_request::Ceiling;
use crate::task_book::{Snapshot, StepSeen, TaskAnswer, TaskBook, TaskLinks, TaskState};

/// Comments sent while nothing happens, so proxies keep the stream open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub(super) fn not_found() -> Response<Body> {
    refuse(
        StatusCode::NOT_FOUND,
        "no such task for this token: a task is seen only with the token that started it, and only the last ones are kept",
    )
}

/// A task as `GET /v1/tasks/{id}` (and `DELETE`) answer it.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct TaskStatus {
    /// The task's id.
    id: String,
    /// How it stands.
    state: TaskState,
    /// When it was asked for, in milliseconds since the Unix epoch.
    created_unix_ms: u64,
    /// Its steps so far.
    steps: Vec<StepSeen>,
    /// While it waits for a person: why, and how long it waits. Help through the `live` link
    /// (input events), then `POST` the `hand_back` link; `DELETE` the task to end it instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    help: Option<HelpCall>,
    /// Where to follow it.
    links: TaskLinks,
    /// How it ended, once done.
    #[serde(skip_serializing_if = "Option::is_none")]
    ended: Option<Ended>,
    /// Its result, once done (the same body `"wait": true` answers with).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<TaskAnswer>,
    /// Why it never ran, once done without running (admission turned it away, or the runner did).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

impl TaskStatus {
    pub(super) fn of(id: &str, snapshot: &Snapshot) -> Self {
        Self {
            id: id.to_owned(),
            state: snapshot.state,
            created_unix_ms: snapshot.created_unix_ms,
            steps: snapshot.steps.clone(),
            help: snapshot.help.clone(),
            links: TaskLinks::of(id),
            ended: snapshot.answer.as_ref().map(|answer| answer.result.ended),
            result: snapshot.answer.as_ref().map(|answer| (**answer).clone()),
            error: snapshot.error.clone(),
        }
    }
}

/// The `state` event: the task queued, began to run, or began or stopped waiting for a person.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct StateEvent {
    /// How it stands now.
    state: TaskState,
    /// While it waits for a person: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    help: Option<HelpCall>,
}

/// The `done` event, the stream's last.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct DoneEvent {
    /// Always `done`.
    state: TaskState,
    /// Where its result and record are.
    links: TaskLinks,
    /// How it ended (absent when it never ran).
    #[serde(skip_serializing_if = "Option::is_none")]
    ended: Option<Ended>,
    /// Tool calls made.
    #[serde(skip_serializing_if = "Option::is_none")]
    steps_used: Option<usize>,
    /// Why it never ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// `GET /v1/tasks/{id}`.
pub(super) async fn get(
    State(app): State<App>,
    ceiling: axum::Extension<Arc<Ceiling>>,
    Path(id): Path<String>,
) -> Response<Body> {
    match app.book.get(&ceiling.context_owner, &id) {
        Some(snapshot) => json_response(StatusCode::OK, &TaskStatus::of(&id, &snapshot)),
        None => not_found(),
    }
}

/// `DELETE /v1/tasks/{id}`: cancel it; `202` while it stops, `200` once it has ended.
pub(super) async fn cancel(
    State(app): State<App>,
    ceiling: axum::Extension<Arc<Ceiling>>,
    Path(id): Path<String>,
) -> Response<Body> {
    let owner = &ceiling.context_owner;
    if !app.book.cancel(owner, &id) {
        return not_found();
    }
    match app.book.get(owner, &id) {
        Some(snapshot) if snapshot.state == TaskState::Done => {
            json_response(StatusCode::OK, &TaskStatus::of(&id, &snapshot))
        }
        Some(snapshot) => json_response(StatusCode::ACCEPTED, &TaskStatus::of(&id, &snapshot)),
        None => not_found(),
    }
}

/// `GET /v1/tasks/{id}/record`.
pub(super) async fn record_json(
    State(app): State<App>,
    ceiling: axum::Extension<Arc<Ceiling>>,
    Path(id): Path<String>,
) -> Response<Body> {
    record(&app.book, &ceiling.context_owner, &id, false)
}

/// `GET /v1/tasks/{id}/record.html`.
pub(super) async fn record_page(
    State(app): State<App>,
    ceiling: axum::Extension<Arc<Ceiling>>,
    Path(id): Path<String>,
) -> Response<Body> {
    record(&app.book, &ceiling.context_owner, &id, true)
}

fn record(book: &TaskBook, owner: &str, id: &str, page: bool) -> Response<Body> {
    let Some(snapshot) = book.get(owner, id) else {
        return not_found();
    };
    let Some(record) = snapshot.record else {
        return refuse(
            StatusCode::CONFLICT,
            "this task has no record yet: it is recorded when it ends (follow it at its events link)",
        );
    };
    let (body, media_type) = if page {
        (record.html.clone(), "text/html; charset=utf-8")
    } else {
        (record.json.clone(), "application/json")
    };
    let mut response = Response::new(Body::from(body));
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(media_type),
    );
    headers.insert(
        http::header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // The page runs in an opaque origin: it can reach nothing of this server's, whatever it holds.
    if let Ok(policy) = HeaderValue::from_str(&crate::record_page::served_policy()) {
        headers.insert(http::header::CONTENT_SECURITY_POLICY, policy);
    }
    response
}

/// `GET /v1/tasks/{id}/events`: `state` when it changes, each `step`, and `done` with how it
/// ended, then the stream ends.
pub(super) async fn events(
    State(app): State<App>,
    ceiling: axum::Extension<Arc<Ceiling>>,
    Path(id): Path<String>,
) -> Response<Body> {
    let owner = ceiling.context_owner.clone();
    let Some(changes) = app.book.follow(&owner, &id) else {
        return not_found();
    };
    let follower = Follower {
        book: Arc::clone(&app.book),
        owner,
        id,
        changes,
        steps_sent: 0,
        state_sent: None,
        over: false,
    };
    Sse::new(follower.stream())
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

struct Follower {
    book: Arc<TaskBook>,
    owner: String,
    id: String,
    changes: tokio::sync::watch::Receiver<u64>,
    steps_sent: usize,
    /// The state last sent, with the step of its call for help if it had one.
    state_sent: Option<(TaskState, Option<usize>)>,
    over: bool,
}

impl Follower {
    fn stream(self) -> impl Stream<Item = Result<Event, Infallible>> {
        stream::unfold(self, |mut follower| async move {
            if follower.over {
                return None;
            }
            loop {
                // Gone (evicted, or the server stops): the stream ends.
                let snapshot = follower.book.get(&follower.owner, &follower.id)?;
                let events = follower.news(&snapshot);
                if !events.is_empty() {
                    return Some((stream::iter(events.into_iter().map(Ok)), follower));
                }
                follower.changes.changed().await.ok()?;
            }
        })
        .flatten()
    }

    /// What happened since the last look.
    fn news(&mut self, snapshot: &Snapshot) -> Vec<Event> {
        let mut events = Vec::new();
        // A call for help is told apart by its step: a task that is handed back and asks again
        // before the follower wakes never showed it `running`, yet has a new call.
        let now = (snapshot.state, snapshot.help.as_ref().map(|help| help.step));
        if self.state_sent != Some(now) && snapshot.state != TaskState::Done {
            self.state_sent = Some(now);
            let state = StateEvent {
                state: snapshot.state,
                help: snapshot.help.clone(),
            };
            events.push(json_event("state", &state));
        }
        for step in snapshot.steps.iter().skip(self.steps_sent) {
            events.push(json_event("step", step));
        }
        self.steps_sent = snapshot.steps.len();
        if snapshot.state == TaskState::Done {
            let done = DoneEvent {
                state: snapshot.state,
                links: TaskLinks::of(&self.id),
                ended: snapshot.answer.as_ref().map(|a| a.result.ended),
                steps_used: snapshot.answer.as_ref().map(|a| a.result.steps_used),
                error: snapshot.error.clone(),
            };
            events.push(json_event("done", &done));
            self.over = true;
        }
        events
    }
}

fn json_event(name: &str, data: &impl Serialize) -> Event {
    Event::default()
        .event(name)
        .data(serde_json::to_string(data).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(step: usize) -> HelpCall {
        HelpCall {
            reason: format!("call at step {step}"),
            step,
            timeout_secs: 600,
        }
    }

    #[test]
    fn a_new_call_for_help_is_told_even_when_the_running_between_was_missed() {
        let book = crate::task_book::TaskBook::new(4, 1 << 20);
        let id = book.open("o", "a task", airlock_worker::CancellationToken::new());
        book.help(&id, Some(call(2)));
        let mut follower = Follower {
            book: Arc::clone(&book),
            owner: "o".to_owned(),
            changes: book.follow("o", &id).unwrap(),
            id: id.clone(),
            steps_sent: 0,
            state_sent: None,
            over: false,
        };
        let snapshot = |book: &TaskBook| book.get("o", &id).unwrap();
        assert_eq!(follower.news(&snapshot(&book)).len(), 1, "waiting");
        // Handed back and asked again before the follower looked.
        book.help(&id, None);
        book.help(&id, Some(call(4)));
        assert_eq!(follower.news(&snapshot(&book)).len(), 1, "the second call");
        assert!(follower.news(&snapshot(&book)).is_empty(), "nothing new");
    }
}
