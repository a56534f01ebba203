//! `POST /v1/tasks`: the task as plain JSON for clients without MCP, shaped like
//! `airlock task --json` (screenshots inline as base64, since there is no directory to write to),
//! and `GET /v1/schema`: both shapes, and a task's flight record, as JSON Schema.

use std::sync::Arc;

use airlock_worker::{CancellationToken, RunError, TaskResult, TaskRunner};
use axum::body::{Body, Bytes};
use http::{HeaderMap, Response, StatusCode};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;
use tokio_util::task::TaskTracker;

use super::callers::{busy, json_response, refuse};
use super::task_body::{self, TaskBody};
use crate::capacity::{Admission, Refusal};
use crate::kept_run::{self, Kept};
use crate::request_refusal::RequestRefusal;
use crate::scope_request::Caller;
use crate::task_book::{TaskAnswer, TaskBook, TaskLinks, TaskState};
use crate::task_request::Ready;

/// `GET /v1/schema`.
pub(super) fn schema() -> Response<Body> {
    let body = json!({
        "request": schemars::schema_for!(TaskBody),
        "response": schemars::schema_for!(TaskResult),
        "record": schemars::schema_for!(airlock_worker::FlightRecord),
        "error": {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]},
    });
    json_response(StatusCode::OK, &body)
}

/// Where a task's run reports and answers.
pub(super) struct Service {
    pub runner: TaskRunner,
    pub admission: Arc<Admission>,
    pub tracker: TaskTracker,
    pub shutdown: CancellationToken,
    pub book: Arc<TaskBook>,
}

/// `POST /v1/tasks`: check the body, then either wait for a slot, run and answer (`wait`, the
/// default: the task is cancelled if the caller goes away), or answer `202` at once with the
/// task's id and links while it queues and runs on its own.
pub(super) async fn run(
    headers: &HeaderMap,
    body: Bytes,
    service: Service,
    caller: Caller<'_>,
) -> Response<Body> {
    let input = match task_body::read(headers, &body) {
        Ok(input) => input,
        Err((status, why)) => return refuse(status, &why),
    };
    if input.task.trim().is_empty() {
        return refused(&RunError::EmptyTask.into());
    }
    let wait = input.wait;
    let title = input.task.clone();
    let ready = match input.into_ready(caller) {
        Ok(ready) => ready,
        Err(refusal) => return refused(&refusal),
    };
    // The same words a waiting caller would get, at once.
    if !wait && let Some(refusal) = service.admission.turn_away() {
        return busy(&refusal.to_string());
    }
    let cancel = service.shutdown.child_token();
    let owner = caller.ceiling.context_owner.clone();
    let id = service.book.open(&owner, &title, cancel.clone());
    let job = Job {
        id: id.clone(),
        ready,
        cancel: cancel.clone(),
        service,
    };
    // On the tracker, so the task finishes (its container removed, the book told) and shutdown
    // waits for it even if the caller goes away.
    let tracker = job.service.tracker.clone();
    let handle = tracker.spawn(job.queue_and_run());
    if !wait {
        return json_response(
            StatusCode::ACCEPTED,
            &TaskAccepted {
                links: TaskLinks::of(&id),
                id,
                state: TaskState::Queued,
            },
        );
    }
    let _cancel_if_dropped = cancel.drop_guard();
    match handle.await {
        Ok(Finished::Answered(answer)) => json_response(StatusCode::OK, &answer),
        Ok(Finished::Refused(refusal)) => match refusal {
            // A cancelled wait is the client's own doing: nothing to retry.
            Refusal::Cancelled => refuse(StatusCode::SERVICE_UNAVAILABLE, &refusal.to_string()),
            refusal => busy(&refusal.to_string()),
        },
        Ok(Finished::NotRun(refusal)) => refused(&refusal),
        Err(_) => refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the task stopped unexpectedly; the server's log has the details",
        ),
    }
}

/// The answer to a request that is not run: its status, and `Retry-After` when trying again soon
/// can succeed.
fn refused(refusal: &RequestRefusal) -> Response<Body> {
    if refusal.is_busy() {
        busy(&refusal.to_string())
    } else {
        refuse(refusal.status(), &refusal.to_string())
    }
}

/// A task on its way through admission and the runner.
struct Job {
    id: String,
    ready: Ready,
    cancel: CancellationToken,
    service: Service,
}

/// How a job ended.
enum Finished {
    /// It ran: the answer.
    Answered(Box<TaskAnswer>),
    /// Admission turned it away.
    Refused(Refusal),
    /// The runner would not run it.
    NotRun(RequestRefusal),
}

impl Job {
    async fn queue_and_run(self) -> Finished {
        let Self {
            id,
            ready,
            cancel,
            service,
        } = self;
        let book = service.book;
        let slot = match service.admission.admit(&cancel).await {
            Ok(slot) => slot,
            Err(refusal) => {
                book.done(&id, Err(refusal.to_string()), None);
                return Finished::Refused(refusal);
            }
        };
        let Ready {
            request,
            lease,
            give_state,
        } = ready;
        let admission = Arc::clone(&service.admission);
        let links = TaskLinks::of(&id);
        let kept = Kept {
            book,
            id: id.clone(),
        };
        let ran = kept_run::run(
            &service.runner,
            request,
            cancel,
            None,
            Some(kept),
            |result| {
                admission.finished(result);
                crate::task_request::finish(lease, give_state, result);
            },
        )
        .await;
        drop(slot);
        match ran {
            // A kept run always has its answer; built here too, it cannot be missing.
            Ok((result, answer)) => {
                Finished::Answered(Box::new(answer.unwrap_or(TaskAnswer { id, links, result })))
            }
            Err(error) => Finished::NotRun(error.into()),
        }
    }
}

/// `POST /v1/tasks` with `"wait": false`: the task queued.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct TaskAccepted {
    /// The task's id.
    id: String,
    /// `queued`.
    state: TaskState,
    /// Where to follow it.
    links: TaskLinks,
}
