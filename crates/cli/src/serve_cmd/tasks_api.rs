//! `POST /v1/tasks`: the task as plain JSON for clients without MCP, shaped like
//! `airlock task --json` (screenshots inline as base64, since there is no directory to write to),
//! and `GET /v1/schema`: both shapes, and a task's flight record, as JSON Schema.

use std::sync::Arc;

use airlock_worker::{CancellationToken, RunError, TaskResult, TaskRunner};
use axum::body::{Body, Bytes};
use http::{HeaderMap, Response, StatusCode};
use schemars::JsonSchema;
use serde_json::{Value, json};
use tokio_util::task::TaskTracker;

use super::guard::{busy, json_response, refuse};
use super::task_body::{self, TaskBody};
use crate::capacity::{Gate, Refusal};
use crate::scope_request::Caller;
use crate::task_request::Ready;

/// A kept screenshot as `POST /v1/tasks` returns it (inline, where `airlock task` writes a file).
#[derive(JsonSchema)]
#[allow(dead_code)] // only its schema is used
struct InlineScreenshot {
    /// `image/png`.
    media_type: String,
    /// Its size.
    bytes: u64,
    /// The image, in base64.
    data: String,
}

/// `GET /v1/schema`.
pub(crate) fn schema() -> Response<Body> {
    // The worker's own result type, with screenshots as this API returns them.
    let mut response = serde_json::to_value(schemars::schema_for!(TaskResult)).unwrap_or_default();
    response["properties"]["screenshots"]["items"] =
        serde_json::to_value(schemars::schema_for!(InlineScreenshot)).unwrap_or_default();
    let body = json!({
        "request": schemars::schema_for!(TaskBody),
        "response": response,
        "record": schemars::schema_for!(airlock_worker::FlightRecord),
        "error": {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]},
    });
    json_response(StatusCode::OK, &body)
}

/// `POST /v1/tasks`: check the body, wait for a slot, run, answer. The task is cancelled if the
/// caller goes away (this future is dropped).
pub(crate) async fn run(
    headers: &HeaderMap,
    body: Bytes,
    runner: TaskRunner,
    caller: Caller<'_>,
    gate: Arc<Gate>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
) -> Response<Body> {
    let input = match task_body::read(headers, &body) {
        Ok(input) => input,
        Err((status, why)) => return refuse(status, &why),
    };
    if input.task.trim().is_empty() {
        return refuse(StatusCode::BAD_REQUEST, &RunError::EmptyTask.to_string());
    }
    let Ready {
        request,
        lease,
        give_state,
    } = match input.into_ready(caller) {
        Ok(ready) => ready,
        Err(why) => return refuse(StatusCode::BAD_REQUEST, &why),
    };
    let cancel = shutdown.child_token();
    let _cancel_if_dropped = cancel.clone().drop_guard();
    let slot = match gate.admit(&cancel).await {
        Ok(slot) => slot,
        // A cancelled wait is the client's own doing: nothing to retry.
        Err(Refusal::Cancelled) => {
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                &Refusal::Cancelled.to_string(),
            );
        }
        Err(refusal) => return busy(&refusal.to_string()),
    };
    // On the tracker, so cleanup finishes (and shutdown waits) even if the caller goes away.
    let task = tracker.spawn(async move {
        let mut result = runner.run(request, cancel).await;
        if let Ok(result) = &mut result {
            gate.finished(result);
            crate::task_request::finish(lease, give_state, result);
        }
        drop(slot);
        result
    });
    match task.await {
        Ok(Ok(result)) => json_response(StatusCode::OK, &answer(&result)),
        Ok(Err(error)) => refuse(StatusCode::BAD_REQUEST, &error.to_string()),
        Err(error) => {
            tracing::error!(%error, "a task stopped unexpectedly");
            refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the task stopped unexpectedly; the server's log has the details",
            )
        }
    }
}

/// The result as `airlock task --json` prints it, with the screenshots inline.
fn answer(result: &TaskResult) -> Value {
    let mut value = serde_json::to_value(result).unwrap_or_else(|_| json!({}));
    value["screenshots"] = result
        .screenshots
        .iter()
        .map(|image| json!({"media_type": image.media_type, "bytes": image.data.len(), "data": image.base64()}))
        .collect();
    value
}
