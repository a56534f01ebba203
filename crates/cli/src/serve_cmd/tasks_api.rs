//! `POST /v1/tasks`: the task as plain JSON for clients without MCP, shaped like
//! `airlock task --json` (screenshots inline as base64, since there is no directory to write to),
//! and `GET /v1/schema`: both shapes as JSON Schema.

use std::sync::Arc;

use airlock_worker::{CancellationToken, RunError, Secret, TaskRequest, TaskResult, TaskRunner};
use axum::body::{Body, Bytes};
use http::{HeaderMap, Response, StatusCode};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::task::TaskTracker;

use super::guard::{busy, json_response, refuse};
use crate::capacity::{Gate, Refusal};
use crate::scope_request::{Caller, task_scope, task_secrets};

/// The most a task body may be: a task and a URL, with room to spare.
pub(crate) const MAX_TASK_BODY_BYTES: usize = 64 * 1024;

/// The body of `POST /v1/tasks`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskBody {
    /// What to do in the browser, in plain words.
    task: String,
    /// Where to start (http or https).
    #[serde(default)]
    url: Option<String>,
    /// Confine the task to these sites: names (`shop.example`: that name only) or `*.` before a
    /// name (`*.shop.example`: every name under it, not the bare name). Omitted: what the
    /// operator allows. Asking beyond that is refused (400), never narrowed.
    #[serde(default)]
    allowed_domains: Vec<String>,
    /// Refuse these sites even where allowed (same patterns). The operator's blocked list
    /// always applies too.
    #[serde(default)]
    blocked_domains: Vec<String>,
    /// Secrets the worker may type (by placeholder) on their sites without seeing them: the name
    /// of one the operator configured, or `{name, value, domains}` given here. Values are never
    /// logged, echoed or returned.
    #[serde(default)]
    #[schemars(length(max = 32))]
    secrets: Vec<SecretAsk>,
}

/// One entry of `secrets`.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum SecretAsk {
    /// A secret the operator configured, by name.
    Named(String),
    /// A secret given with the request.
    Inline {
        /// What the worker writes: `{{secret:NAME}}`.
        name: String,
        /// The value (4–4096 bytes, no control characters).
        value: String,
        /// The sites it may be typed on (names or `*.` wildcards, inside the task's scope).
        domains: Vec<String>,
    },
}

// A value must never reach a log through Debug.
impl std::fmt::Debug for SecretAsk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Named(name) => write!(f, "Named({name:?})"),
            Self::Inline { name, domains, .. } => {
                write!(f, "Inline {{ name: {name:?}, domains: {domains:?}, .. }}")
            }
        }
    }
}

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
    let json_type = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !json_type {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body must be JSON: send `Content-Type: application/json` and {\"task\": \"…\", \"url\": \"…\"}",
        );
    }
    let input: TaskBody = match serde_json::from_slice(&body) {
        Ok(input) => input,
        Err(error) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                &format!(
                    "the body is not a task ({error}): send {{\"task\": \"what to do\", \"url\": \"https://…\"}}; the schema is at /v1/schema"
                ),
            );
        }
    };
    if input.task.trim().is_empty() {
        return refuse(StatusCode::BAD_REQUEST, &RunError::EmptyTask.to_string());
    }
    let scope = match task_scope(
        &input.allowed_domains,
        &input.blocked_domains,
        caller.ceiling,
    ) {
        Ok(scope) => scope,
        Err(refusal) => return refuse(StatusCode::BAD_REQUEST, &refusal),
    };
    let mut names = Vec::new();
    let mut inline = Vec::new();
    for ask in input.secrets {
        match ask {
            SecretAsk::Named(name) => names.push(name),
            SecretAsk::Inline {
                name,
                value,
                domains,
            } => match Secret::new(&name, value, &domains) {
                Ok(secret) => inline.push(secret),
                Err(error) => return refuse(StatusCode::BAD_REQUEST, &error.to_string()),
            },
        }
    }
    let secrets = match task_secrets(&names, inline, caller.ceiling, caller.configured, &scope) {
        Ok(secrets) => secrets,
        Err(refusal) => return refuse(StatusCode::BAD_REQUEST, &refusal),
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
    let request = TaskRequest {
        task: input.task,
        url: input.url,
        scope,
        secrets,
        state: None,
        return_state: false,
    };
    // On the tracker, so cleanup finishes (and shutdown waits) even if the caller goes away.
    let task = tracker.spawn(async move {
        let result = runner.run(request, cancel).await;
        if let Ok(result) = &result {
            gate.finished(result);
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
