//! The service's HTTP behaviour, in process: no Docker, no Chromium. The browser port is a gate
//! the test opens (see `support`), the worker the scripted model; everything between them (the
//! guard, admission, the task book, the `/v1` answers) is the real service. The same paths end
//! to end, with real browsers, are in `crates/cli/tests/serve`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use airlock_testkit::http::within;
use serde_json::json;
use support::{JSON, OTHER_TOKEN, Setup, TOKEN, bearer, request, serve};

/// `POST /v1/tasks` as `bearer`, waiting for the answer.
async fn run_task(served: &support::Served, bearer: &str) -> support::Answer {
    let body = r#"{"task": "Say done"}"#;
    request(served, "POST", "/v1/tasks", &[bearer, JSON], body).await
}

/// `POST /v1/tasks` with `"wait": false` as `bearer`: the task's id.
async fn start_task(served: &support::Served, bearer: &str) -> String {
    let body = json!({"task": "Say done", "wait": false}).to_string();
    let started = request(served, "POST", "/v1/tasks", &[bearer, JSON], &body).await;
    assert_eq!(started.status, 202, "{started:?}");
    started.json()["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_request_without_a_token_is_401_naming_the_bearer_token() {
    let served = serve(Setup::default()).await;
    let answer = request(&served, "POST", "/v1/tasks", &[JSON], r#"{"task": "x"}"#).await;
    assert_eq!(answer.status, 401, "{answer:?}");
    assert!(
        answer.error().contains("bearer token is required"),
        "{answer:?}"
    );
    assert!(answer.header("www-authenticate").is_some(), "{answer:?}");
}

#[tokio::test]
async fn a_wrong_token_is_401_too() {
    let served = serve(Setup::default()).await;
    let wrong = bearer("token-nobody-was-ever-given-00");
    let answer = request(&served, "POST", "/v1/tasks", &[&wrong, JSON], "{}").await;
    assert_eq!(answer.status, 401, "{answer:?}");
}

#[tokio::test]
async fn a_foreign_host_is_403_before_the_token_is_looked_at() {
    let served = serve(Setup::default()).await;
    // With no token at all, the Host is still what is refused: a rebinding page learns nothing.
    let answer = request(&served, "GET", "/v1/leases", &["host: rebound.example"], "").await;
    assert_eq!(answer.status, 403, "{answer:?}");
    assert!(answer.error().contains("Host header"), "{answer:?}");
}

#[tokio::test]
async fn an_origin_the_operator_did_not_allow_is_403() {
    let served = serve(Setup {
        origins: vec!["https://app.example".into()],
        ..Setup::default()
    })
    .await;
    let token = bearer(TOKEN);
    let evil = request(
        &served,
        "GET",
        "/v1/leases",
        &[&token, "origin: https://evil.example"],
        "",
    )
    .await;
    assert_eq!(evil.status, 403, "{evil:?}");
    assert!(evil.error().contains("origin is not allowed"), "{evil:?}");
    let allowed = request(
        &served,
        "GET",
        "/v1/leases",
        &[&token, "origin: https://app.example"],
        "",
    )
    .await;
    assert_eq!(allowed.status, 200, "{allowed:?}");
}

#[tokio::test]
async fn the_probes_need_no_token_and_answer_any_host_but_metrics_needs_both() {
    let served = serve(Setup::default()).await;
    let foreign = "host: 10.1.2.3:8700";
    assert_eq!(
        request(&served, "GET", "/healthz", &[foreign], "")
            .await
            .status,
        200
    );
    let ready = request(&served, "GET", "/readyz", &[], "").await;
    assert_eq!(ready.status, 200, "{ready:?}");
    assert!(!ready.body.contains("detail"), "{ready:?}");
    assert_eq!(
        request(&served, "GET", "/metrics", &[], "").await.status,
        401
    );
    let token = bearer(TOKEN);
    let metrics = request(&served, "GET", "/metrics", &[&token], "").await;
    assert_eq!(metrics.status, 200);
    assert!(
        metrics.body.contains("airlock_tasks_running"),
        "{metrics:?}"
    );
    let elsewhere = request(&served, "GET", "/metrics", &[foreign, &token], "").await;
    assert_eq!(elsewhere.status, 403);
}

#[tokio::test]
async fn a_body_that_is_not_a_task_is_400_naming_what_is_wrong() {
    let served = serve(Setup::default()).await;
    let token = bearer(TOKEN);
    for (body, says) in [
        ("{\"task\": ", "not a task"),
        (
            r#"{"task": "x", "priority": 1}"#,
            "unknown field `priority`",
        ),
        (r#"{"task": "  "}"#, "the task is empty"),
    ] {
        let answer = request(&served, "POST", "/v1/tasks", &[&token, JSON], body).await;
        assert_eq!(answer.status, 400, "{body}: {answer:?}");
        assert!(answer.error().contains(says), "{body}: {answer:?}");
    }
}

#[tokio::test]
async fn a_task_leaves_by_the_route_it_picks_and_an_unknown_one_is_400_with_the_list() {
    let served = serve(Setup::default()).await;
    let token = bearer(TOKEN);
    for body in [
        json!({"task": "Say done", "route": "corp"}),
        json!({"task": "Say done"}),
    ] {
        let answer = request(
            &served,
            "POST",
            "/v1/tasks",
            &[&token, JSON],
            &body.to_string(),
        )
        .await;
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    let unknown = json!({"task": "Say done", "route": "moon"}).to_string();
    let answer = request(&served, "POST", "/v1/tasks", &[&token, JSON], &unknown).await;
    assert_eq!(answer.status, 400, "{answer:?}");
    assert_eq!(
        answer.error(),
        "route: there is no route `moon`: the routes are `direct`, `corp`"
    );
    assert_eq!(
        *served.browsers.routes.lock().unwrap(),
        [Some("corp".to_owned()), None],
        "the refused task asked for no browser"
    );
    // A CDP lease's route is refused the same way, before it is upgraded.
    let lease = request(&served, "GET", "/cdp?route=moon", &[&token], "").await;
    assert_eq!(lease.status, 400, "{lease:?}");
    assert!(
        lease.error().contains("there is no route `moon`"),
        "{lease:?}"
    );
}

#[tokio::test]
async fn a_body_that_is_not_json_is_415() {
    let served = serve(Setup::default()).await;
    let token = bearer(TOKEN);
    let plain = "content-type: text/plain";
    let answer = request(
        &served,
        "POST",
        "/v1/tasks",
        &[&token, plain],
        r#"{"task": "x"}"#,
    )
    .await;
    assert_eq!(answer.status, 415, "{answer:?}");
    assert!(
        answer.error().contains("Content-Type: application/json"),
        "{answer:?}"
    );
}

#[tokio::test]
async fn a_task_runs_and_answers_with_the_workers_report() {
    let served = serve(Setup::default()).await;
    let token = bearer(TOKEN);
    let answer = run_task(&served, &token).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let result = answer.json();
    assert_eq!(result["report"], "Done.", "{result}");
    assert_eq!(result["ended"], "completed", "{result}");
    assert!(answer.header("airlock-replica").is_some(), "{answer:?}");
}

#[tokio::test]
async fn another_tokens_task_is_404_as_if_it_did_not_exist() {
    let served = serve(Setup::default()).await;
    let mine = bearer(TOKEN);
    let id = start_task(&served, &mine).await;
    let path = format!("/v1/tasks/{id}");
    let theirs = bearer(OTHER_TOKEN);
    let seen_by_other = request(&served, "GET", &path, &[&theirs], "").await;
    assert_eq!(seen_by_other.status, 404, "{seen_by_other:?}");
    let cancelled_by_other = request(&served, "DELETE", &path, &[&theirs], "").await;
    assert_eq!(cancelled_by_other.status, 404, "{cancelled_by_other:?}");
    let seen_by_owner = request(&served, "GET", &path, &[&mine], "").await;
    assert_eq!(seen_by_owner.status, 200, "{seen_by_owner:?}");
    assert_eq!(seen_by_owner.json()["id"], id.as_str());
}

#[tokio::test]
async fn a_full_server_turns_a_task_away_with_503_and_retry_after() {
    // One slot, no queue, and the one browser held at its start: the server is full.
    let served = serve(Setup {
        open_starts: 0,
        capacity: 1,
        queue: 0,
        ..Setup::default()
    })
    .await;
    let token = bearer(TOKEN);
    let body = json!({"task": "Hold the slot", "wait": false}).to_string();
    let first = request(&served, "POST", "/v1/tasks", &[&token, JSON], &body).await;
    assert_eq!(first.status, 202, "{first:?}");
    let id = first.json()["id"].as_str().unwrap().to_owned();
    // Its browser is asked for only once it holds the slot.
    within(served.browsers.asked.notified()).await;
    let second = request(&served, "POST", "/v1/tasks", &[&token, JSON], &body).await;
    assert_eq!(second.status, 503, "{second:?}");
    assert_eq!(
        second.header("retry-after").as_deref(),
        Some("5"),
        "{second:?}"
    );
    assert!(second.error().contains("at capacity"), "{second:?}");
    // Let the held browser start: the first task ends (its events stream with it), the slot
    // is free, and the next task runs.
    served.browsers.starts.add_permits(2);
    let events = format!("/v1/tasks/{id}/events");
    let stream = request(&served, "GET", &events, &[&token], "").await;
    assert!(stream.body.contains("event: done"), "{stream:?}");
    let waited = json!({"task": "Say done"}).to_string();
    let third = request(&served, "POST", "/v1/tasks", &[&token, JSON], &waited).await;
    assert_eq!(third.status, 200, "{third:?}");
}

#[tokio::test]
async fn handing_back_a_task_that_is_not_waiting_for_a_person_is_409() {
    let served = serve(Setup::default()).await;
    let token = bearer(TOKEN);
    let id = start_task(&served, &token).await;
    let path = format!("/v1/tasks/{id}/hand-back");
    let answer = request(&served, "POST", &path, &[&token], "").await;
    assert_eq!(answer.status, 409, "{answer:?}");
    assert!(
        answer.error().contains("not waiting for a person"),
        "{answer:?}"
    );
    let theirs = bearer(OTHER_TOKEN);
    let not_theirs = request(&served, "POST", &path, &[&theirs], "").await;
    assert_eq!(not_theirs.status, 404, "{not_theirs:?}");
}

#[tokio::test]
async fn a_tasks_events_come_in_order_and_end_with_done() {
    let served = serve(Setup {
        open_starts: 0,
        ..Setup::default()
    })
    .await;
    let token = bearer(TOKEN);
    let id = start_task(&served, &token).await;
    within(served.browsers.asked.notified()).await;
    served.browsers.starts.add_permits(1);
    let events = format!("/v1/tasks/{id}/events");
    let stream = request(&served, "GET", &events, &[&token], "").await;
    assert_eq!(
        stream.header("content-type").as_deref(),
        Some("text/event-stream")
    );
    let names: Vec<&str> = stream
        .body
        .lines()
        .filter_map(|line| line.strip_prefix("event: "))
        .collect();
    assert_eq!(names.last(), Some(&"done"), "{stream:?}");
    assert_eq!(names.iter().filter(|name| **name == "done").count(), 1);
    let done_at = stream.body.find("event: done").unwrap();
    assert!(stream.body[done_at..].contains("completed"), "{stream:?}");
}

/// An MCP `initialize` over streamable HTTP.
async fn mcp_initialize(served: &support::Served, token: &str) -> support::Answer {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "in-process", "version": "1"}}
    })
    .to_string();
    let accept = "accept: application/json, text/event-stream";
    request(
        served,
        "POST",
        "/mcp",
        &[&bearer(token), JSON, accept],
        &body,
    )
    .await
}

#[tokio::test]
async fn mcp_sessions_open_up_to_the_cap_and_the_next_is_503() {
    // The server allows two sessions (see `support::serve`).
    let served = serve(Setup::default()).await;
    for _ in 0..2 {
        let opened = mcp_initialize(&served, TOKEN).await;
        assert_eq!(opened.status, 200, "{opened:?}");
        assert!(opened.header("mcp-session-id").is_some(), "{opened:?}");
        assert!(opened.body.contains("\"serverInfo\""), "{opened:?}");
    }
    let third = mcp_initialize(&served, TOKEN).await;
    assert_eq!(third.status, 503, "{third:?}");
    assert!(third.error().contains("--max-sessions"), "{third:?}");
    assert_eq!(third.header("retry-after").as_deref(), Some("5"));
}

#[tokio::test]
async fn mcp_without_a_token_is_401_before_any_session_opens() {
    let served = serve(Setup::default()).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}).to_string();
    let answer = request(&served, "POST", "/mcp", &[JSON], &body).await;
    assert_eq!(answer.status, 401, "{answer:?}");
    // No session was taken: both of the cap's places are still free.
    for _ in 0..2 {
        assert_eq!(mcp_initialize(&served, TOKEN).await.status, 200);
    }
}

/// `instance` against the schema `name` of the server's OpenAPI document, and every field it
/// has is one the schema names (so a field added to the answer but not the document fails).
fn conforms(document: &serde_json::Value, name: &str, instance: &serde_json::Value) {
    let mut schema = document.clone();
    schema["$ref"] = json!(format!("#/components/schemas/{name}"));
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|error| format!("{error} at {}", error.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{name}: {errors:#?}");
    let properties = &document["components"]["schemas"][name]["properties"];
    for field in instance.as_object().unwrap().keys() {
        assert!(
            properties.get(field).is_some(),
            "{name} lacks `{field}`: {properties}"
        );
    }
}

#[tokio::test]
async fn a_tasks_answer_and_status_are_what_the_openapi_document_says() {
    let served = serve(Setup::default()).await;
    let token = bearer(TOKEN);
    let document = request(&served, "GET", "/v1/openapi.json", &[&token], "")
        .await
        .json();
    let answer = run_task(&served, &token).await;
    let answer = answer.json();
    conforms(&document, "TaskAnswer", &answer);
    let id = answer["id"].as_str().unwrap();
    assert_eq!(answer["links"]["self"], format!("/v1/tasks/{id}"));
    let status = request(&served, "GET", &format!("/v1/tasks/{id}"), &[&token], "")
        .await
        .json();
    conforms(&document, "TaskStatus", &status);
    assert_eq!(
        status["result"], answer,
        "the status's result is the answer itself"
    );
    assert_eq!(status["ended"], "completed");
}

#[tokio::test]
async fn a_task_with_an_output_schema_answers_with_its_data_and_a_bad_schema_is_400() {
    let answer = json!({"name": "give_answer", "input": {"data": {"hours": [9, 17]}, "report": "Open 9 to 17."}});
    let turns = vec![airlock_worker::ScriptedTurn {
        tool_calls: vec![serde_json::from_value(answer).unwrap()],
        ..airlock_worker::ScriptedTurn::default()
    }];
    let served = serve(Setup {
        turns,
        ..Setup::default()
    })
    .await;
    let token = bearer(TOKEN);
    let schema = json!({
        "type": "object",
        "properties": {"hours": {"type": "array", "items": {"type": "integer"}}},
        "required": ["hours"]
    });
    for (bad, says) in [
        (
            json!({"type": "integr"}),
            "output_schema is not a JSON Schema Airlock can use",
        ),
        (
            json!({"$ref": "http://169.254.169.254/"}),
            "output_schema is not a JSON Schema",
        ),
        (
            json!("object"),
            "output_schema must be a JSON Schema object",
        ),
    ] {
        let body = json!({"task": "Say done", "output_schema": bad}).to_string();
        let refused = request(&served, "POST", "/v1/tasks", &[&token, JSON], &body).await;
        assert_eq!(refused.status, 400, "{refused:?}");
        assert!(refused.error().starts_with(says), "{refused:?}");
    }
    assert!(
        served.browsers.routes.lock().unwrap().is_empty(),
        "a refused schema started no browser"
    );
    let body = json!({"task": "Find the hours", "output_schema": schema}).to_string();
    let answered = request(&served, "POST", "/v1/tasks", &[&token, JSON], &body).await;
    assert_eq!(answered.status, 200, "{answered:?}");
    let result = answered.json();
    assert_eq!(result["data"], json!({"hours": [9, 17]}), "{result}");
    assert_eq!(result["report"], "Open 9 to 17.");
    let document = request(&served, "GET", "/v1/openapi.json", &[&token], "")
        .await
        .json();
    conforms(&document, "TaskAnswer", &result);
    let body_schema = &document["components"]["schemas"]["TaskBody"]["properties"];
    assert!(body_schema.get("output_schema").is_some(), "{body_schema}");
}

#[tokio::test]
async fn a_tasks_browser_settings_reach_its_driver_and_bad_ones_are_400() {
    let served = serve(Setup {
        turns: vec![airlock_worker::ScriptedTurn {
            text: "Done.".into(),
            ..airlock_worker::ScriptedTurn::default()
        }],
        ..Setup::default()
    })
    .await;
    let token = bearer(TOKEN);
    for (bad, says) in [
        (
            json!({"viewport": {"width": 4000, "height": 600}}),
            "browser.viewport 4000x600 is out of range",
        ),
        (
            json!({"device": "Nokia 3310"}),
            "browser.device `Nokia 3310`",
        ),
        (json!({"time_zone": "Mars/Olympus"}), "browser.time_zone"),
        (json!({"locale": "not a tag"}), "browser.locale"),
        (json!({"zoom": 2}), "unknown field `zoom`"),
    ] {
        let body = json!({"task": "Say done", "browser": bad}).to_string();
        let refused = request(&served, "POST", "/v1/tasks", &[&token, JSON], &body).await;
        assert_eq!(refused.status, 400, "{refused:?}");
        assert!(refused.error().contains(says), "{refused:?}");
    }
    assert!(
        served.browsers.settings.lock().unwrap().is_empty(),
        "a refused setting started no browser"
    );
    let asked = json!({"device": "iphone 15", "locale": "de-CH", "time_zone": "Europe/Zurich", "color_scheme": "dark"});
    let body = json!({"task": "Say done", "browser": asked}).to_string();
    let answered = request(&served, "POST", "/v1/tasks", &[&token, JSON], &body).await;
    assert_eq!(answered.status, 200, "{answered:?}");
    let given = served.browsers.settings.lock().unwrap().clone();
    assert_eq!(given.len(), 1);
    // Checked on the way: the device as agent-browser spells it.
    assert_eq!(given[0].device.as_deref(), Some("iPhone 15"));
    assert_eq!(given[0].time_zone.as_deref(), Some("Europe/Zurich"));
    let document = request(&served, "GET", "/v1/openapi.json", &[&token], "")
        .await
        .json();
    let body_schema = &document["components"]["schemas"]["TaskBody"]["properties"];
    assert!(body_schema.get("browser").is_some(), "{body_schema}");
}
