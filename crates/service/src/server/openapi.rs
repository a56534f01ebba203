//! `GET /v1/openapi.json`: the `/v1` API as one OpenAPI 3.1 document, its schemas generated
//! (schemars, JSON Schema 2020-12 as OpenAPI 3.1 takes it) from the same Rust types the handlers
//! read and answer with.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::leases::LeaseList;
use super::task_body::TaskBody;
use super::task_by_id::{DoneEvent, StateEvent, TaskStatus};
use super::tasks_api::TaskAccepted;
use crate::task_book::{StepSeen, TaskAnswer};

/// An error's body.
#[derive(JsonSchema)]
#[allow(dead_code)] // only its schema is used; `callers::refuse` writes the body
struct ApiError {
    /// What was wrong, and how to put it right.
    error: String,
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn json_content(name: &str) -> Value {
    json!({"application/json": {"schema": reference(name)}})
}

fn answer(description: &str, name: &str) -> Value {
    json!({"description": description, "content": json_content(name)})
}

fn error(description: &str) -> Value {
    answer(description, "ApiError")
}

fn lease_id() -> Value {
    json!({"name": "id", "in": "path", "required": true, "description": "The lease's id, from `GET /v1/leases` or the `Airlock-Lease` header of the CDP upgrade.", "schema": {"type": "string", "pattern": "^lease_[0-9a-f]{32}$"}})
}

fn task_id() -> Value {
    json!({"name": "id", "in": "path", "required": true, "description": "The task's id, from `POST /v1/tasks`.", "schema": {"type": "string", "pattern": "^task_[0-9a-f]{32}$"}})
}

/// The components: every type's schema.
fn components() -> Map<String, Value> {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    let mut generator = settings.into_generator();
    let mut named = Map::new();
    macro_rules! register {
        ($($type:ty => $name:literal),* $(,)?) => {$(
            let schema = generator.subschema_for::<$type>();
            if schema.get("$ref").is_none() {
                named.insert($name.to_owned(), schema.to_value());
            }
        )*};
    }
    register!(
        TaskBody => "TaskBody",
        airlock_worker::TaskResult => "TaskResult",
        TaskAnswer => "TaskAnswer",
        TaskAccepted => "TaskAccepted",
        TaskStatus => "TaskStatus",
        StateEvent => "StateEvent",
        StepSeen => "StepSeen",
        DoneEvent => "DoneEvent",
        airlock_worker::FlightRecord => "FlightRecord",
        LeaseList => "LeaseList",
        ApiError => "ApiError",
    );
    let mut schemas = generator.take_definitions(true);
    schemas.extend(named);
    schemas
}

/// Each operation's answers, by operation.
fn responses() -> Map<String, Value> {
    let errors = |extra: &[(&str, &str)]| {
        let mut map = Map::new();
        map.insert("401".into(), error("No token, or a wrong one."));
        for (status, words) in extra {
            map.insert((*status).into(), error(words));
        }
        Value::Object(map)
    };
    let mut post_answers = errors(&[
        (
            "400",
            "The body is not a task, or asks for more than the token may.",
        ),
        ("413", "The body is too large."),
        ("415", "The body is not JSON."),
        (
            "503",
            "No slot and no queue place (or the wait ran out); try again shortly.",
        ),
    ]);
    post_answers["200"] = answer(
        "The task ran (`wait`, the default): its result.",
        "TaskAnswer",
    );
    post_answers["202"] = answer("`\"wait\": false`: the task is queued.", "TaskAccepted");
    let mut status_answers = errors(&[("404", "No such task for this token.")]);
    status_answers["200"] = answer("The task.", "TaskStatus");
    let mut cancel_answers = status_answers.clone();
    cancel_answers["200"] = answer("The task had ended; it stays as it ended.", "TaskStatus");
    cancel_answers["202"] = answer("The task is being cancelled.", "TaskStatus");
    let mut event_answers = errors(&[("404", "No such task for this token.")]);
    event_answers["200"] = json!({
        "description": "Server-Sent Events: `state` (a `StateEvent`) when the task queues, runs, or waits for a person (with why), `step` (a `StepSeen`) for each step, and `done` (a `DoneEvent`), after which the stream ends.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}}
    });
    let mut live_answers = errors(&[
        ("404", "No such task for this token."),
        ("409", "The task's browser is not running."),
        (
            "503",
            "The live view could not start, or the task's watches are all taken.",
        ),
    ]);
    live_answers["101"] = json!({"description": "The WebSocket is open."});
    let mut hand_back_answers = errors(&[
        ("404", "No such task for this token."),
        ("409", "The task is not waiting for a person."),
    ]);
    hand_back_answers["200"] = answer("The task, running again.", "TaskStatus");
    let mut record_answers = errors(&[
        ("404", "No such task for this token."),
        ("409", "The task has not ended yet."),
    ]);
    record_answers["200"] = answer("The task's flight record.", "FlightRecord");
    let mut page_answers = record_answers.clone();
    page_answers["200"] = json!({
        "description": "The task's flight record as one self-contained page (sent in a sandbox: it reaches nothing).",
        "content": {"text/html": {"schema": {"type": "string"}}}
    });
    let mut leases_answers = errors(&[]);
    leases_answers["200"] = answer("The caller's open CDP leases.", "LeaseList");
    let mut lease_live_answers = errors(&[
        ("404", "No such open lease for this token."),
        (
            "503",
            "The live view could not start, or the lease's watches are all taken.",
        ),
    ]);
    lease_live_answers["101"] = json!({"description": "The WebSocket is open."});
    let mut all = Map::new();
    for (name, answers) in [
        ("leases", leases_answers),
        ("lease_live", lease_live_answers),
        ("post", post_answers),
        ("status", status_answers),
        ("cancel", cancel_answers),
        ("events", event_answers),
        ("live", live_answers),
        ("hand_back", hand_back_answers),
        ("record", record_answers),
        ("page", page_answers),
    ] {
        all.insert(name.to_owned(), answers);
    }
    all
}

/// The document.
pub(super) fn document() -> Value {
    let answers = responses();
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Airlock",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Browser tasks in a sealed browser whose only way out is an egress proxy that refuses anything but public addresses."
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": {
            "/v1/tasks": {"post": {
                "operationId": "createTask",
                "summary": "Run a browser task, or queue it (`\"wait\": false`).",
                "requestBody": {"required": true, "content": json_content("TaskBody")},
                "responses": answers["post"]
            }},
            "/v1/tasks/{id}": {
                "parameters": [task_id()],
                "get": {"operationId": "getTask", "summary": "A task's state, steps so far, and result once done.", "responses": answers["status"]},
                "delete": {"operationId": "cancelTask", "summary": "Cancel a task.", "responses": answers["cancel"]}
            },
            "/v1/tasks/{id}/events": {
                "parameters": [task_id()],
                "get": {"operationId": "followTask", "summary": "A task's progress as Server-Sent Events.", "responses": answers["events"]}
            },
            "/v1/tasks/{id}/live": {
                "parameters": [task_id()],
                "get": {"operationId": "watchTask", "summary": "A WebSocket (upgrade) carrying the task's page as it runs: one binary message per frame, a JPEG, the newest only. While the task waits for a person, each text message the viewer sends is one input event (`{\"type\": \"input_mouse\" | \"input_keyboard\" | \"input_touch\", …}`, agent-browser's fields) passed to the page; at other times an event is answered with a refusal. Any other message closes the socket (1008).", "responses": answers["live"]}
            },
            "/v1/tasks/{id}/hand-back": {
                "parameters": [task_id()],
                "post": {"operationId": "handBackTask", "summary": "Hand the page back to a task that asked for a person's help; it resumes with a fresh look at the page.", "responses": answers["hand_back"]}
            },
            "/v1/tasks/{id}/record": {
                "parameters": [task_id()],
                "get": {"operationId": "getTaskRecord", "summary": "A finished task's flight record.", "responses": answers["record"]}
            },
            "/v1/tasks/{id}/record.html": {
                "parameters": [task_id()],
                "get": {"operationId": "getTaskRecordPage", "summary": "A finished task's flight record as a page.", "responses": answers["page"]}
            },
            "/v1/leases": {"get": {
                "operationId": "listLeases",
                "summary": "The caller's open CDP leases (from `/cdp`), each with its live view's links.",
                "responses": answers["leases"]
            }},
            "/v1/leases/{id}/live": {
                "parameters": [lease_id()],
                "get": {"operationId": "watchLease", "summary": "A WebSocket (upgrade) carrying an open CDP lease's page: one binary message per frame, a JPEG, the newest only. Watching changes nothing the lease's client does, and the page takes no input from here: an input event is answered with a refusal; any other message closes the socket (1008).", "responses": answers["lease_live"]}
            },
            "/v1/schema": {"get": {
                "operationId": "getSchemas",
                "summary": "The task's request, response and record as JSON Schema.",
                "responses": {"200": {"description": "The schemas.", "content": {"application/json": {"schema": {"type": "object"}}}}}
            }},
            "/v1/openapi.json": {"get": {
                "operationId": "getOpenApi",
                "summary": "This document.",
                "responses": {"200": {"description": "This document.", "content": {"application/json": {"schema": {"type": "object"}}}}}
            }}
        },
        "components": {
            "schemas": components(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "A token from --tokens-file or AIRLOCK_TOKENS."}}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reference_names_a_component() {
        let document = document();
        let text = document.to_string();
        let schemas = document["components"]["schemas"].as_object().unwrap();
        for name in text.split("#/components/schemas/").skip(1) {
            let name: String = name.chars().take_while(|c| *c != '"').collect();
            assert!(
                schemas.contains_key(&name),
                "{name} is referred to but missing"
            );
        }
        assert!(
            !text.contains("#/$defs/"),
            "a reference left in schemars' own place"
        );
    }
}
