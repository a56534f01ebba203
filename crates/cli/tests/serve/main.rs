//! `airlock serve` end to end: a real server process, real sealed browsers, the official Python
//! MCP SDK's streamable HTTP client, curl, and raw sockets for what a well-behaved client never
//! sends. Needs Docker, the image and a non-root user; `cargo xtask integration` runs it with
//! those required (and the Python SDK installed).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../support/mod.rs"]
mod support;

mod answers;
mod capacity;
mod dashboard;
mod direct;
mod downloads;
mod followed;
mod help;
mod limits;
mod live;
mod scope;
mod secrets;
mod state;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use airlock_testkit::docker::{
    containers_of, docker_ready, wait_for_containers_of, wait_until_removed,
};
use airlock_testkit::site::simple_site;
use serde_json::{Value, json};
use support::{Served, exchange, metric, raw, request, signal};

const TOKEN: &str = "test-token-0123456789abcdef";

/// `airlock serve` with a scripted model, no warm browser unless the test asks (container counts
/// are then the tasks' alone), and the test tokens.
fn serve(script: &Value, dir: &std::path::Path, extra: &[&str]) -> Served {
    let path = dir.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let mut args: Vec<String> = vec![
        "serve".into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--model".into(),
        format!("script:{}", path.display()),
    ];
    args.extend(extra.iter().map(|&a| a.to_owned()));
    if !extra.contains(&"--pool-size") {
        args.extend(["--pool-size".into(), "0".into()]);
    }
    Served::start(&args, &format!("{TOKEN},second-token-abcdef0123456"))
}

/// Once the task a client's call started has its container, drops the client's connection:
/// whether the task's container was removed within `within`.
fn dropping_the_client_ends_its_task(pid: u32, client: TcpStream, within: Duration) -> bool {
    assert!(wait_for_containers_of(pid, 1, Duration::from_secs(60)));
    let container = containers_of(pid).remove(0);
    let dropped_at = std::time::SystemTime::now();
    drop(client);
    wait_until_removed(&container, dropped_at, within)
}

/// `POST /v1/tasks` with curl as `token`: the status and the body as text.
fn curl_task_text(served: &Served, token: &str, body: &Value) -> (u16, String) {
    let output = Command::new("curl")
        .args(["-sS", "-w", "\n%{http_code}", "-H"])
        .arg(format!("authorization: Bearer {token}"))
        .args(["-H", "content-type: application/json", "--data"])
        .arg(body.to_string())
        .arg(served.url("/v1/tasks"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, status) = text.trim().rsplit_once('\n').unwrap();
    (status.parse().unwrap(), body.to_owned())
}

/// [`curl_task_text`], the body read as JSON.
fn curl_task(served: &Served, token: &str, body: &Value) -> (u16, Value) {
    let (status, text) = curl_task_text(served, token, body);
    let body = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{text}"));
    (status, body)
}

fn bearer() -> String {
    format!("authorization: Bearer {TOKEN}")
}

/// Python with the official MCP SDK: `AIRLOCK_TEST_PYTHON` (set by `cargo xtask integration`),
/// else `python3` if it has the SDK.
fn python() -> String {
    let python = std::env::var("AIRLOCK_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_sdk = Command::new(&python)
        .args(["-c", "import mcp.client.streamable_http"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_sdk,
        "{python} lacks the MCP Python SDK: run `cargo xtask integration` (it prepares one), or `pip install mcp`"
    );
    python
}

fn sdk_call(served: &Served, headers: &Value, task: &str) -> Value {
    sdk(served, headers, &[task])
}

/// The Python client with these arguments after the URL and headers.
fn sdk(served: &Served, headers: &Value, args: &[&str]) -> Value {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/support/mcp_http_client.py"
    );
    let output = Command::new(python())
        .arg(script)
        .arg(served.url("/mcp"))
        .arg(headers.to_string())
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    // The SDK ends its session with a DELETE and warns unless it gets the answer it expects.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("Session termination failed"),
        "the SDK could not end its session: {stderr}"
    );
    serde_json::from_str(text.trim()).unwrap_or_else(|_| {
        panic!(
            "the client printed {text}; stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

#[test]
fn unsafe_starts_are_refused_with_the_fix() {
    // Checked before Docker is asked, so this runs anywhere.
    for (args, env_tokens, expected) in [
        (
            vec!["--listen", "0.0.0.0:0", "--allowed-host", "a.example"],
            "",
            "AIRLOCK_TOKENS",
        ),
        (vec!["--listen", "0.0.0.0:0"], TOKEN, "--allowed-host"),
        (vec![], "short", "shorter than 16"),
        (
            vec![
                "--tls-cert",
                "/nonexistent/cert.pem",
                "--tls-key",
                "/nonexistent/key.pem",
            ],
            "",
            "--tls-cert /nonexistent/cert.pem",
        ),
        (vec!["--allowed-origin", "app.example"], "", "scheme://host"),
        (
            vec!["--direct", "--stateless"],
            "",
            "--direct and --stateless cannot go together",
        ),
    ] {
        let output = Command::new(assert_cmd::cargo::cargo_bin("airlock"))
            .arg("serve")
            .args(&args)
            .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
            .env("AIRLOCK_TOKENS", env_tokens)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains(TOKEN), "a token was printed: {stderr}");
    }
}

#[test]
fn the_python_mcp_sdk_runs_browser_task_with_the_token_and_is_refused_without_it() {
    if !docker_ready() {
        return;
    }
    let port = simple_site("Served page", "Hello over HTTP");
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["open", format!("http://127.0.0.1:{port}/")]}}]},
        {"expect": {"shown_contains": ["Served page"]}, "tool_calls": [{"name": "agent_browser", "input": {"args": ["screenshot"], "keep": true}}]},
        {"usage": {"input_tokens": 10, "output_tokens": 5}, "text": "The page says hello."}
    ]});
    let served = serve(
        &script,
        dir.path(),
        &["--allow", &format!("127.0.0.1:{port}")],
    );
    let good = json!({"Authorization": format!("Bearer {TOKEN}")});
    let result = sdk_call(&served, &good, "Read the page");
    assert_eq!(result["tools"], json!(["browser_task"]), "{result}");
    assert_eq!(result["texts"][0], "The page says hello.", "{result}");
    assert_eq!(result["images"], json!(["image/png"]));
    assert_eq!(result["is_error"], false);
    assert_eq!(result["structured"]["ended"], "completed");
    assert_eq!(result["structured"]["total_tokens"], 15);
    assert_eq!(result["progress"].as_array().unwrap().len(), 2, "{result}");
    followed::its_record_is_linked_for_its_token_alone(&served, &result);

    for (headers, why) in [
        (json!({}), "no token"),
        (
            json!({"Authorization": "Bearer wrong-token-0123456789"}),
            "wrong token",
        ),
        (
            json!({"Authorization": format!("Bearer {TOKEN}"), "Host": "rebound.example"}),
            "wrong Host",
        ),
        (
            json!({"Authorization": format!("Bearer {TOKEN}"), "Origin": "https://evil.example"}),
            "foreign Origin",
        ),
    ] {
        let refused = sdk_call(&served, &headers, "Read the page");
        assert!(refused["failed"].is_string(), "{why}: {refused}");
        let status = if why.contains("token") { 401 } else { 403 };
        assert_eq!(refused["statuses"], json!([status]), "{why}: {refused}");
    }
    let metrics = request(served.port, "GET", "/metrics", &[&bearer()], "").1;
    assert_eq!(
        metric(
            &metrics,
            "airlock_tasks_finished_total{outcome=\"completed\"}"
        ),
        1,
        "{metrics}"
    );
    assert_eq!(
        metric(&metrics, "airlock_task_tokens_total{kind=\"input\"}"),
        10,
        "{metrics}"
    );
    assert!(
        metric(
            &metrics,
            "airlock_egress_bytes_total{direction=\"down\",route=\"direct\"}"
        ) > 0,
        "{metrics}"
    );
    assert!(!metrics.contains(TOKEN));
    assert!(
        !served.log.lock().unwrap().contains(TOKEN),
        "a token reached the log"
    );
}

#[test]
fn curl_runs_a_task_through_the_json_api() {
    if !docker_ready() {
        return;
    }
    let port = simple_site("Curl page", "Hello, curl");
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["open", format!("http://127.0.0.1:{port}/")]}}]},
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["open", "http://169.254.169.254/latest/meta-data/"]}}]},
        {"text": "Curl page seen."}
    ]});
    let served = serve(
        &script,
        dir.path(),
        &["--allow", &format!("127.0.0.1:{port}")],
    );
    let output = Command::new("curl")
        .args([
            "-sS",
            "--fail-with-body",
            "-H",
            &bearer(),
            "-H",
            "content-type: application/json",
        ])
        .args([
            "--data",
            &json!({"task": "Read the page", "url": format!("http://127.0.0.1:{port}/")})
                .to_string(),
        ])
        .arg(served.url("/v1/tasks"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["report"], "Curl page seen.");
    assert_eq!(result["ended"], "completed");
    assert_eq!(result["steps_used"], 2);
    assert_eq!(
        result["egress_refusals"][0]["class"], "never-opened",
        "{result}"
    );

    assert_eq!(containers_of(served.child.id()).len(), 0);
}

// One server takes every bad request in turn: a test per request would start a server each.
#[allow(clippy::too_many_lines)]
#[test]
fn bad_requests_get_clear_answers_and_only_the_probes_go_without_a_token() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&json!({"turns": []}), dir.path(), &[]);
    let (status, schema) = request(served.port, "GET", "/v1/schema", &[&bearer()], "");
    assert_eq!(status, 200);
    let schema: Value = serde_json::from_str(&schema).unwrap();
    assert_eq!(schema["request"]["required"], json!(["task"]));
    assert!(schema["response"]["properties"]["usage"].is_object());
    assert!(schema["record"]["properties"]["steps"].is_object());

    let json = "content-type: application/json";
    let cases: Vec<(Vec<String>, String, u16, &str)> = vec![
        (
            vec![bearer(), json.into()],
            "{\"task\": ".into(),
            400,
            "not a task",
        ),
        (
            vec![bearer(), json.into()],
            r#"{"task": "x", "priority": 1}"#.into(),
            400,
            "unknown field `priority`",
        ),
        (
            vec![bearer(), json.into()],
            r#"{"task": "  "}"#.into(),
            400,
            "the task is empty",
        ),
        (
            vec![bearer(), "content-type: text/plain".into()],
            r#"{"task": "x"}"#.into(),
            415,
            "Content-Type: application/json",
        ),
        (
            vec![json.into()],
            r#"{"task": "x"}"#.into(),
            401,
            "bearer token is required",
        ),
        (
            vec![bearer(), json.into(), "host: rebound.example".into()],
            r#"{"task": "x"}"#.into(),
            403,
            "Host header",
        ),
        (
            vec![bearer(), json.into(), "origin: https://evil.example".into()],
            r#"{"task": "x"}"#.into(),
            403,
            "origin is not allowed",
        ),
    ];
    for (headers, body, expected, says) in cases {
        let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
        let (status, answer) = request(served.port, "POST", "/v1/tasks", &headers, &body);
        assert_eq!(status, expected, "{headers:?}: {answer}");
        let error: Value =
            serde_json::from_str(&answer).unwrap_or_else(|_| panic!("not JSON: {answer}"));
        assert!(
            error["error"].as_str().unwrap().contains(says),
            "{headers:?}: {answer}"
        );
    }
    // A 10 MiB body is refused by its declared length, before any of it is read. (Only the head
    // is sent: a server that closes with bytes unread resets the connection, racing the answer.)
    let (status, answer) = raw(
        served.port,
        format!(
            "POST /v1/tasks HTTP/1.1\r\nhost: 127.0.0.1:{}\r\n{}\r\n{json}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            served.port,
            bearer(),
            10 * 1024 * 1024
        )
        .as_bytes(),
    );
    assert_eq!(status, 413, "{answer}");
    assert!(answer.contains("over 29077160 bytes"), "{answer}");
    // The probes need no token; everything else does.
    assert_eq!(request(served.port, "GET", "/healthz", &[], "").0, 200);
    let (status, ready) = request(served.port, "GET", "/readyz", &[], "");
    assert_eq!(status, 200, "{ready}");
    // Anyone reads the fixed words; only a caller with a token reads the details.
    assert!(
        !ready.contains("detail") && !ready.contains("pool_error"),
        "{ready}"
    );
    let (status, detailed) = request(served.port, "GET", "/readyz", &[&bearer()], "");
    assert_eq!(status, 200, "{detailed}");
    assert!(detailed.contains("\"detail\":null"), "{detailed}");
    assert_eq!(request(served.port, "GET", "/metrics", &[], "").0, 401);
    // Engines probe by address: the probes answer any Host; nothing else does.
    let foreign = "host: 10.1.2.3:8700";
    assert_eq!(
        request(served.port, "GET", "/healthz", &[foreign], "").0,
        200
    );
    assert_eq!(
        request(served.port, "GET", "/readyz", &[foreign], "").0,
        200
    );
    assert_eq!(
        request(served.port, "GET", "/metrics", &[foreign, &bearer()], "").0,
        403
    );
    assert_eq!(containers_of(served.child.id()).len(), 0);
}

#[test]
fn a_token_in_the_query_opens_only_the_cdp_paths() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&json!({"turns": []}), dir.path(), &[]);
    let port = served.port;
    // URLs end up in logs, so a token there is taken only where CDP clients need it.
    for (method, path) in [
        ("GET", "/metrics"),
        ("POST", "/v1/tasks"),
        ("POST", "/mcp"),
        ("GET", "/"),
        ("GET", "/v1/schema"),
    ] {
        let (status, body) = request(
            port,
            method,
            &format!("{path}?token={TOKEN}"),
            &["content-type: application/json"],
            "{}",
        );
        assert_eq!(status, 401, "{method} {path}: {body}");
    }
    let (status, body) = request(
        port,
        "GET",
        &format!("/json/version?token={TOKEN}"),
        &[],
        "",
    );
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_scraper_reaches_metrics_alone_on_their_own_listener() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let served = serve(
        &json!({"turns": []}),
        dir.path(),
        &["--metrics-listen", "127.0.0.1:0"],
    );
    served.wait_for_log("metrics on http://");
    let log = served.log.lock().unwrap().clone();
    let at = log
        .split("metrics on http://")
        .nth(1)
        .and_then(|rest| rest.split("/metrics").next())
        .unwrap();
    let metrics_port: u16 = at.rsplit_once(':').unwrap().1.parse().unwrap();
    // A scraper by pod address: no token, a Host naming the pod.
    let pod = "host: 10.2.3.4:9700";
    let (status, text) = request(metrics_port, "GET", "/metrics", &[pod], "");
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("airlock_tasks_running"), "{text}");
    // Nothing else is served there, and the main listener keeps its checks.
    let (status, _) = request(metrics_port, "POST", "/v1/tasks", &[pod], "{}");
    assert_eq!(status, 404);
    let (status, _) = request(metrics_port, "GET", "/healthz", &[pod], "");
    assert_eq!(status, 404);
    assert_eq!(request(served.port, "GET", "/metrics", &[], "").0, 401);
}

/// `count` clients, each posting one task at once; their answers, to join.
fn tasks_at_once(port: u16, count: usize) -> Vec<std::thread::JoinHandle<(u16, String)>> {
    (0..count)
        .map(|_| {
            std::thread::spawn(move || {
                request(
                    port,
                    "POST",
                    "/v1/tasks",
                    &[&bearer(), "content-type: application/json"],
                    r#"{"task": "wait"}"#,
                )
            })
        })
        .collect()
}

/// A script every task can share: each takes one slow step, then ends at the step limit.
fn slow_steps(turns: usize) -> Value {
    let turn = json!({"text": "done", "tool_calls": [{"name": "agent_browser", "input": {"args": ["wait", "3000"]}}]});
    json!({"turns": vec![turn; turns]})
}

#[test]
fn sigterm_drains_running_tasks_and_exits_0_with_nothing_left() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut served = serve(
        &slow_steps(20),
        dir.path(),
        &[
            "--max-concurrent-tasks",
            "2",
            "--max-steps",
            "1",
            "--drain-timeout",
            "60",
        ],
    );
    let port = served.port;
    let clients = tasks_at_once(port, 2);
    // Both tasks hold a slot before the signal.
    let pid = served.child.id();
    assert!(wait_for_containers_of(pid, 2, Duration::from_secs(60)));
    signal(pid, "-TERM");
    served.wait_for_log("airlock serve: draining");
    // While draining: not ready, and new tasks are refused.
    let (ready, ready_body) = request(port, "GET", "/readyz", &[], "");
    let (refused, why) = request(
        port,
        "POST",
        "/v1/tasks",
        &[&bearer(), "content-type: application/json"],
        r#"{"task": "x"}"#,
    );
    for client in clients {
        let (status, body) = client.join().unwrap();
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap()["ended"],
            "step_limit"
        );
    }
    assert_eq!(ready, 503);
    assert!(
        ready_body.contains("\"reason\":\"draining\""),
        "{ready_body}"
    );
    assert_eq!(refused, 503, "{why}");
    assert!(why.contains("shutting down"), "{why}");
    let status = served.child.wait().unwrap();
    assert!(
        status.success(),
        "{status:?}: {}",
        served.log.lock().unwrap()
    );
    assert_eq!(containers_of(pid).len(), 0);
}

#[test]
fn a_client_that_disconnects_mid_task_cancels_it() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let long = json!({"turns": [{"tool_calls": [{"name": "agent_browser", "input": {"args": ["wait", "60000"]}}]}]});
    let served = serve(&long, dir.path(), &[]);
    let pid = served.child.id();
    let mut stream = TcpStream::connect(("127.0.0.1", served.port)).unwrap();
    let body = r#"{"task": "wait"}"#;
    write!(
        stream,
        "POST /v1/tasks HTTP/1.1\r\nhost: 127.0.0.1:{}\r\n{}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        served.port,
        bearer(),
        body.len()
    )
    .unwrap();
    assert!(
        dropping_the_client_ends_its_task(pid, stream, Duration::from_secs(10)),
        "the task outlived its client"
    );
    let metrics = request(served.port, "GET", "/metrics", &[&bearer()], "").1;
    assert_eq!(
        metric(
            &metrics,
            "airlock_tasks_finished_total{outcome=\"cancelled\"}"
        ),
        1,
        "{metrics}"
    );
}

/// The names of the task containers process `pid` started since `since` (by Docker's event log).
fn started_since(pid: u32, since: std::time::SystemTime) -> Vec<String> {
    let seconds =
        |at: std::time::SystemTime| at.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let since = seconds(since).saturating_sub(1);
    let until = seconds(std::time::SystemTime::now()) + 1;
    let output = Command::new("docker")
        // An `--until` a second ahead: "now" is cut to the second, and would leave out this one.
        .args([
            "events",
            "--since",
            &since.to_string(),
            "--until",
            &until.to_string(),
        ])
        .args(["--filter", "event=start", "--filter", "label=airlock.task"])
        .args([
            "--format",
            "{{.Actor.Attributes.name}}\t{{index .Actor.Attributes \"airlock.owner\"}}",
        ])
        .output()
        .unwrap();
    let marker = format!("pid={pid};");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .filter(|(_, owner)| owner.contains(&marker))
        .map(|(name, _)| name.to_owned())
        .collect()
}

#[test]
fn a_cancelled_mcp_call_stops_its_task_and_removes_its_container() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let long = json!({"turns": [{"tool_calls": [{"name": "agent_browser", "input": {"args": ["wait", "60000"]}}]}]});
    let served = serve(&long, dir.path(), &[]);
    let since = std::time::SystemTime::now();
    let good = json!({"Authorization": format!("Bearer {TOKEN}")});
    let cancelled = sdk(&served, &good, &["wait a minute", "cancel"]);
    assert!(cancelled["cancelled_after"].is_array(), "{cancelled}");
    let started = started_since(served.child.id(), since);
    assert_eq!(started.len(), 1, "{started:?}");
    assert!(
        wait_until_removed(&started[0], since, Duration::from_secs(15)),
        "the cancelled task's container stayed"
    );
    let metrics = request(served.port, "GET", "/metrics", &[&bearer()], "").1;
    assert_eq!(
        metric(
            &metrics,
            "airlock_tasks_finished_total{outcome=\"cancelled\"}"
        ),
        1,
        "{metrics}"
    );
}

#[test]
fn tls_serves_https_with_the_given_certificate() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) =
        airlock_testkit::certs::self_signed(dir.path(), "/CN=127.0.0.1", Some("IP:127.0.0.1"));
    let served = serve(
        &json!({"turns": []}),
        dir.path(),
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    let https = |path: &str, token: bool| {
        let mut command = Command::new("curl");
        command
            .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
            .arg(&cert);
        if token {
            command.args(["-H", &bearer()]);
        }
        let output = command
            .arg(format!("https://127.0.0.1:{}{path}", served.port))
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).to_string()
    };
    assert_eq!(https("/healthz", false), "200");
    assert_eq!(https("/metrics", true), "200");
    assert_eq!(https("/metrics", false), "401");
    // Over TLS every answer tells the browser to come back over TLS alone.
    let head = Command::new("curl")
        .args(["-sS", "-D", "-", "-o", "/dev/null", "--cacert"])
        .arg(&cert)
        .arg(format!("https://127.0.0.1:{}/ui", served.port))
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&head.stdout).to_ascii_lowercase();
    assert!(
        head.contains("strict-transport-security: max-age=31536000"),
        "{head}"
    );
    // Plain HTTP to the TLS port gets no answer.
    let (status, _) = request(served.port, "GET", "/healthz", &[], "");
    assert_eq!(status, 0, "plain HTTP was answered on the TLS port");
}
