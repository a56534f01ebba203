//! Tasks followed over `/v1`: `"wait": false` answers `202` at once; the task is followed with
//! `GET /v1/tasks/{id}` and its Server-Sent Events (read by curl as they come), cancelled with
//! `DELETE` (its container goes), and its record fetched when done. Another token sees none of
//! it, exactly as if the task did not exist.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

use airlock_testkit::site::site;

use super::*;

const OTHER_TOKEN: &str = "second-token-abcdef0123456";

/// A shop page linking to a second page.
fn shop() -> u16 {
    let (port, _) = site(|_| {
        HashMap::from([
            (
                "/",
                (
                    "200 OK",
                    String::new(),
                    "<!doctype html><title>Shop</title><a id=next href=/hours>Hours</a>".to_owned(),
                ),
            ),
            (
                "/hours",
                (
                    "200 OK",
                    String::new(),
                    "<!doctype html><title>Hours</title><p>Open 9 to 5.</p>".to_owned(),
                ),
            ),
        ])
    });
    port
}

fn call(args: &Value) -> Value {
    json!({"name": "agent_browser", "input": {"args": args}})
}

/// `curl -N` on a task's events: the events as they arrive.
pub(super) struct Events {
    child: Child,
    lines: BufReader<std::process::ChildStdout>,
}

impl Events {
    pub(super) fn open(served: &Served, token: &str, id: &str) -> Self {
        let mut child = Command::new("curl")
            .args(["-sSN", "--max-time", "300", "-H"])
            .arg(format!("authorization: Bearer {token}"))
            .arg(served.url(&format!("/v1/tasks/{id}/events")))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap());
        Self { child, lines }
    }

    /// The next event's name and data; `None` once the stream has ended.
    pub(super) fn next(&mut self) -> Option<(String, Value)> {
        let mut name = String::new();
        let mut data = String::new();
        loop {
            let mut line = String::new();
            if self.lines.read_line(&mut line).unwrap() == 0 {
                return None;
            }
            let line = line.trim_end();
            if let Some(value) = line.strip_prefix("event:") {
                value.trim().clone_into(&mut name);
            } else if let Some(value) = line.strip_prefix("data:") {
                data.push_str(value.trim());
            } else if line.is_empty() && !name.is_empty() {
                return Some((name, serde_json::from_str(&data).unwrap()));
            }
        }
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `instance` is a `name` as the server's own OpenAPI document describes it.
pub(super) fn conforms(document: &Value, name: &str, instance: &Value) {
    let mut schema = document.clone();
    schema["$ref"] = json!(format!("#/components/schemas/{name}"));
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|error| format!("{error} at {}", error.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{name}: {errors:#?}");
}

/// The server's OpenAPI document, after the maintained validator (openapi-spec-validator, from
/// PyPI) passed it.
pub(super) fn openapi(served: &Served) -> Value {
    let (status, text) = get(served, TOKEN, "/v1/openapi.json");
    assert_eq!(status, 200, "{text}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openapi.json");
    std::fs::write(&path, &text).unwrap();
    let python = std::env::var("AIRLOCK_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let checked = Command::new(&python)
        .args(["-m", "openapi_spec_validator"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "{python} -m openapi_spec_validator: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    serde_json::from_str(&text).unwrap()
}

/// A `browser_task` answer on `serve` links its task's record, which its token can read and no
/// other token can.
pub(super) fn its_record_is_linked_for_its_token_alone(served: &Served, result: &Value) {
    let record = result["structured"]["links"]["record"].as_str().unwrap();
    assert!(
        result["texts"][1].as_str().unwrap().contains(record),
        "{result}"
    );
    let (status, body) = request(served.port, "GET", record, &[&bearer()], "");
    assert_eq!(status, 200, "{body}");
    let record_json: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(record_json["steps"][1]["thumbnail"]["cause"], "screenshot");
    let other = "authorization: Bearer second-token-abcdef0123456";
    assert_eq!(request(served.port, "GET", record, &[other], "").0, 404);
}

/// A server allowing the lab site on `port`, running `script`, and a task it queued at once
/// (`"wait": false`) for `TOKEN`: the server, its directory, the `202`'s body and the task's id.
pub(super) fn queued(
    script: &Value,
    port: u16,
    task: &Value,
) -> (Served, tempfile::TempDir, Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let allow = format!("127.0.0.1:{port}");
    let served = serve(script, dir.path(), &["--allow", &allow]);
    let (status, accepted) = curl_task(&served, TOKEN, task);
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["id"].as_str().unwrap().to_owned();
    (served, dir, accepted, id)
}

/// Read a task's events until step `step` has begun.
pub(super) fn until_step(events: &mut Events, step: u64) {
    while let Some((name, data)) = events.next() {
        if name == "step" && data["step"] == step {
            return;
        }
    }
    panic!("the events ended before step {step}");
}

/// The headers `path` is answered with (lower case), by curl.
fn headers_of(served: &Served, path: &str) -> String {
    let answer = Command::new("curl")
        .args(["-sS", "-D", "-", "-o", "/dev/null", "-H"])
        .arg(format!("authorization: Bearer {TOKEN}"))
        .arg(served.url(path))
        .output()
        .unwrap();
    String::from_utf8_lossy(&answer.stdout).to_ascii_lowercase()
}

pub(super) fn get(served: &Served, token: &str, path: &str) -> (u16, String) {
    let auth = format!("authorization: Bearer {token}");
    request(served.port, "GET", path, &[&auth], "")
}

#[test]
fn a_task_answered_at_once_is_followed_to_its_record_and_no_other_token_sees_it() {
    if !docker_ready() {
        return;
    }
    let port = shop();
    let home = format!("http://127.0.0.1:{port}/");
    // The worker opens `home` itself before the first turn: the record's step 1, no event.
    let script = json!({"turns": [
        {"tool_calls": [call(&json!(["click", "#next"]))]},
        {"tool_calls": [call(&json!(["cookies"])), call(&json!(["get", "text", "body"]))]},
        {"text": "Open 9 to 5."}
    ]});
    let task = json!({"task": "Find the hours", "url": home, "wait": false});
    let (served, _dir, accepted, id) = queued(&script, port, &task);
    assert_eq!(
        accepted["links"]["events"],
        format!("/v1/tasks/{id}/events")
    );
    let document = openapi(&served);
    conforms(&document, "TaskAccepted", &accepted);

    // Followed as it runs: the state, every step in order, then how it ended.
    let mut events = Events::open(&served, TOKEN, &id);
    let mut seen = Vec::new();
    while let Some(event) = events.next() {
        seen.push(event);
    }
    let names: Vec<&str> = seen.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names.last(), Some(&"done"), "{seen:?}");
    let steps: Vec<u64> = seen
        .iter()
        .filter(|(name, _)| name == "step")
        .map(|(_, data)| data["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [1, 2, 3], "{seen:?}");
    assert_eq!(seen.last().unwrap().1["ended"], "completed", "{seen:?}");

    let (status, body) = get(&served, TOKEN, &format!("/v1/tasks/{id}"));
    assert_eq!(status, 200, "{body}");
    let task: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(task["state"], "done");
    assert_eq!(task["result"]["report"], "Open 9 to 5.");
    assert_eq!(task["steps"][0]["summary"], "agent_browser click #next");
    conforms(&document, "TaskStatus", &task);
    conforms(&document, "TaskAnswer", &task["result"]);
    for (name, data) in &seen {
        let schema = match name.as_str() {
            "state" => "StateEvent",
            "step" => "StepSeen",
            _ => "DoneEvent",
        };
        conforms(&document, schema, data);
    }

    let (status, record) = get(&served, TOKEN, &format!("/v1/tasks/{id}/record"));
    assert_eq!(status, 200, "{record}");
    let record: Value = serde_json::from_str(&record).unwrap();
    assert_eq!(record["steps"][1]["page"]["title"], "Hours");
    assert_eq!(record["steps"][2]["verdict"]["kind"], "refused");
    conforms(&document, "FlightRecord", &record);
    let (status, page) = get(&served, TOKEN, &format!("/v1/tasks/{id}/record.html"));
    assert_eq!(status, 200);
    let headers = headers_of(&served, &format!("/v1/tasks/{id}/record.html"));
    assert!(
        headers.contains("content-security-policy: sandbox allow-scripts;")
            && headers.contains("content-type: text/html")
            && headers.contains("x-content-type-options: nosniff"),
        "{headers}"
    );
    assert!(page.contains("Open 9 to 5."), "{page}");

    // Another token: every path answers as for a task that does not exist.
    let (_, missing) = get(
        &served,
        OTHER_TOKEN,
        "/v1/tasks/task_00000000000000000000000000000000",
    );
    for path in ["", "/events", "/record", "/record.html"] {
        let (status, body) = get(&served, OTHER_TOKEN, &format!("/v1/tasks/{id}{path}"));
        assert_eq!((status, &body), (404, &missing), "{path}");
    }
    let other = format!("authorization: Bearer {OTHER_TOKEN}");
    let (status, body) = request(
        served.port,
        "DELETE",
        &format!("/v1/tasks/{id}"),
        &[&other],
        "",
    );
    assert_eq!((status, &body), (404, &missing));
    assert_eq!(
        get(&served, TOKEN, &format!("/v1/tasks/{id}")).0,
        200,
        "still there for its owner"
    );
}

/// The shop's port, a script whose second step waits two minutes, and a task on the shop that
/// answers at once (`"wait": false`).
fn long_wait() -> (u16, Value, Value) {
    let port = shop();
    let home = format!("http://127.0.0.1:{port}/");
    let script = json!({"turns": [
        {"tool_calls": [call(&json!(["open", home])), call(&json!(["wait", "120000"]))]},
        {"text": "never reached"}
    ]});
    let task = json!({"task": "Wait", "url": home, "wait": false});
    (port, script, task)
}

#[test]
fn deleting_a_running_task_cancels_it_and_removes_its_container() {
    if !docker_ready() {
        return;
    }
    let (port, script, task) = long_wait();
    let (served, _dir, _, id) = queued(&script, port, &task);
    let mut events = Events::open(&served, TOKEN, &id);
    // Step 2 (the long wait) has begun.
    until_step(&mut events, 2);
    let container = containers_of(served.child.id()).remove(0);
    let asked = std::time::SystemTime::now();
    let auth = bearer();
    let (status, body) = request(
        served.port,
        "DELETE",
        &format!("/v1/tasks/{id}"),
        &[&auth],
        "",
    );
    assert_eq!(status, 202, "{body}");
    let (name, done) = events.next().unwrap();
    assert_eq!(
        (name.as_str(), &done["ended"]),
        ("done", &json!("cancelled")),
        "{done}"
    );
    assert!(wait_until_removed(
        &container,
        asked,
        Duration::from_secs(30)
    ));
    let (status, body) = request(
        served.port,
        "DELETE",
        &format!("/v1/tasks/{id}"),
        &[&auth],
        "",
    );
    assert_eq!(status, 200, "an ended task stays as it ended: {body}");
}

#[test]
fn a_task_that_will_not_wait_is_turned_away_at_once_when_there_is_no_room() {
    if !docker_ready() {
        return;
    }
    let (port, script, task) = long_wait();
    let dir = tempfile::tempdir().unwrap();
    let allow = format!("127.0.0.1:{port}");
    let extra = [
        "--allow",
        &allow,
        "--max-concurrent-tasks",
        "1",
        "--queue-timeout",
        "0",
    ];
    let served = serve(&script, dir.path(), &extra);
    let (status, accepted) = curl_task(&served, TOKEN, &task);
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["id"].as_str().unwrap();
    let mut events = Events::open(&served, TOKEN, id);
    until_step(&mut events, 1);
    // The one slot is taken and there is no queue: the words a waiting caller would get, now.
    let (status, refused) = curl_task(&served, TOKEN, &task);
    assert_eq!(status, 503, "{refused}");
    assert!(refused.to_string().contains("capacity"), "{refused}");
    let metrics = served.metrics(TOKEN);
    assert_eq!(
        metric(&metrics, "airlock_tasks_refused_total{reason=\"full\"}"),
        1,
        "{metrics}"
    );
}
