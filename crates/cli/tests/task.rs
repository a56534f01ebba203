//! `airlock task` end to end with a scripted worker and a real container: the JSON result, the
//! saved screenshots, and Ctrl-C removing the container. Needs Docker, the image and a non-root
//! user; `cargo xtask integration` runs it with those required.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use airlock_testkit::docker::{containers_of, docker_ready};
use airlock_testkit::site::simple_site;
use support::spawn_task_at_first_step;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use serde_json::{Value, json};

fn task_command(dir: &std::path::Path, script: &Value, port: u16) -> Command {
    let path = dir.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("airlock"));
    command
        .args([
            "task",
            "Find the opening hours",
            "--url",
            &format!("http://127.0.0.1:{port}/"),
        ])
        .args([
            "--model",
            &format!("script:{}", path.display()),
            "--allow",
            &format!("127.0.0.1:{port}"),
        ])
        .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml");
    command
}

#[test]
fn the_json_result_and_private_screenshot_files() {
    if !docker_ready() {
        return;
    }
    let port = simple_site("Task page", "Opening hours: 9 to 5.");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shots");
    let script = json!({"turns": [
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["open", format!("http://127.0.0.1:{port}/")]}}]},
        {"tool_calls": [
            {"name": "agent_browser", "input": {"args": ["screenshot"], "keep": true}},
            {"name": "agent_browser", "input": {"args": ["open", "http://169.254.169.254/latest/meta-data/"]}}
        ]},
        {"text": "Open 9 to 5, per http://127.0.0.1/."}
    ]});
    let output = task_command(dir.path(), &script, port)
        .args(["--json", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["ended"], "completed");
    assert_eq!(result["report"], "Open 9 to 5, per http://127.0.0.1/.");
    assert_eq!(result["steps_used"], 3);
    assert!(result["timings"]["total_ms"].is_u64());
    let refused = result["egress_refusals"].as_array().unwrap();
    assert!(
        refused
            .iter()
            .any(|r| r["target"].as_str().unwrap().contains("169.254.169.254")),
        "{refused:?}"
    );
    let shot = &result["screenshots"][0];
    assert_eq!(shot["media_type"], "image/png");
    let path = std::path::PathBuf::from(shot["path"].as_str().unwrap());
    assert!(std::fs::read(&path).unwrap().starts_with(b"\x89PNG"));
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("step 1/40: agent_browser open"), "{stderr}");

    // A second run never overwrites the first one's file.
    let again = task_command(dir.path(), &script, port)
        .args(["--json", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let second: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_ne!(second["screenshots"][0]["path"], shot["path"]);
}

#[test]
fn ctrl_c_cancels_the_task_and_removes_its_container() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wait.json");
    let script = json!({"turns": [{"tool_calls": [{"name": "agent_browser", "input": {"args": ["wait", "60000"]}}]}]});
    std::fs::write(&path, script.to_string()).unwrap();
    let mut child = spawn_task_at_first_step(&path, &[]);
    let pid = child.id();
    assert_eq!(containers_of(pid).len(), 1);
    assert!(
        Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "a cancelled task exits 1");
    assert_eq!(
        containers_of(pid).len(),
        0,
        "Ctrl-C left the container behind"
    );
}

/// `--command-timeout` reaches the browser: a `wait` longer than it is stopped, the worker is told
/// after how long, and the task goes on to its report.
#[test]
fn a_command_longer_than_the_command_timeout_is_stopped_and_the_task_goes_on() {
    if !docker_ready() {
        return;
    }
    let port = simple_site("Slow page", "Nothing quick here.");
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["wait", "20000"]}}]},
        {"expect": {"shown_contains": ["The command was stopped after 5 seconds."]},
         "text": "The wait was cut short."}
    ]});
    let output = task_command(dir.path(), &script, port)
        .args(["--json", "--command-timeout", "5"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["ended"], "completed", "{result}");
    assert_eq!(result["report"], "The wait was cut short.");
}

/// `--output-schema`: the worker's answer from a real page comes out on stdout as JSON alone
/// (the report on stderr), and a task whose answers never match exits 1 with no data.
#[test]
fn an_output_schema_puts_the_answer_on_stdout_and_no_match_exits_1() {
    if !docker_ready() {
        return;
    }
    let port = simple_site("Hours", "Opening hours: 9 to 5.");
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("schema.json");
    std::fs::write(
        &schema,
        r#"{"type": "object", "properties": {"opens": {"type": "integer"}}, "required": ["opens"]}"#,
    )
    .unwrap();
    let give = |opens: Value| json!({"name": "give_answer", "input": {"data": {"opens": opens}, "report": "Read on the page."}});
    let script = json!({"turns": [
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["open", format!("http://127.0.0.1:{port}/")]}}]},
        {"expect": {"shown_contains": ["✓ Hours"]}, "tool_calls": [give(json!(9))]}
    ]});
    let output = task_command(dir.path(), &script, port)
        .arg("--output-schema")
        .arg(&schema)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let data: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(data, json!({"opens": 9}));
    assert!(stderr.contains("Read on the page."), "{stderr}");

    let never = json!({"turns": [
        {"tool_calls": [give(json!("nine"))]},
        {"tool_calls": [give(json!("9 am"))]},
        {"tool_calls": [give(json!(null))]}
    ]});
    let output = task_command(dir.path(), &never, port)
        .args(["--json", "--output-schema"])
        .arg(&schema)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["ended"], "no_valid_answer", "{result}");
    assert!(result.get("data").is_none(), "{result}");

    // A schema that is not one is bad input, named.
    std::fs::write(&schema, r#"{"type": "integr"}"#).unwrap();
    let output = task_command(dir.path(), &script, port)
        .arg("--output-schema")
        .arg(&schema)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--output-schema"), "{stderr}");
}

#[test]
fn a_long_page_is_paged_not_cut_and_the_token_budget_ends_the_task_with_the_workers_last_words() {
    if !docker_ready() {
        return;
    }
    // 40,000 characters of filler with the fact in the middle: past any preview.
    let filler = "granite lantern meadow ".repeat(870);
    let text: &'static str =
        Box::leak(format!("{filler}The hidden code is ZULU-9876. {filler}").into_boxed_str());
    let port = simple_site("Long page", text);
    let dir = tempfile::tempdir().unwrap();
    let usage =
        |input: u64| json!({"input_tokens": input, "cache_read_tokens": 100, "output_tokens": 50});
    let script = json!({"turns": [
        {"usage": usage(100), "tool_calls": [{"name": "agent_browser", "input": {"args": ["open", format!("http://127.0.0.1:{port}/")]}}]},
        {"usage": usage(100), "tool_calls": [
            {"name": "agent_browser", "input": {"args": ["screenshot"], "keep": true}},
            {"name": "agent_browser", "input": {"args": ["get", "text", "body"]}}
        ]},
        {"usage": usage(100),
         "expect": {"shown_contains": ["out-1: this output has", "read_output"], "shown_not_contains": ["ZULU-9876"]},
         "tool_calls": [{"name": "read_output", "input": {"id": "out-1", "find": "hidden code"}}]},
        // 250 × 3 + 200,150 tokens by now, over the 100,000 budget (more than the estimate
        // said): this call is refused, and no report turn is sent past the budget.
        {"usage": usage(200_000),
         "text": "The hidden code is ZULU-9876.",
         "expect": {"shown_contains": ["occurs 1 time", "ZULU-9876"]},
         "tool_calls": [{"name": "agent_browser", "input": {"args": ["snapshot"]}}]},
        {"text": "never asked for"}
    ]});
    let output = task_command(dir.path(), &script, port)
        .args(["--json", "--max-task-tokens", "100000", "--out"])
        .arg(dir.path().join("shots"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["ended"], "token_budget", "{result}");
    let report = result["report"].as_str().unwrap();
    assert!(
        report.contains("200900 of 100000 tokens")
            && report.ends_with("last words:\nThe hidden code is ZULU-9876."),
        "{report}"
    );
    assert_eq!(result["steps_used"], 4, "the refused call is not a step");
    assert_eq!(
        result["screenshots"].as_array().unwrap().len(),
        1,
        "the kept screenshot comes back"
    );
    assert_eq!(result["usage"]["input_tokens"], 200_300);
    assert_eq!(result["usage"]["cache_read_tokens"], 400);
    assert_eq!(result["usage"]["output_tokens"], 200);
    assert_eq!(result["context"]["outputs_kept"], 1);
    assert_eq!(result["context"]["output_reads"], 1);
    assert_eq!(result["context"]["images_shown"], 1);
    assert!(result["context"]["image_bytes_shown"].as_u64().unwrap() > 0);
    let chars = result["context"]["chars_shown"].as_u64().unwrap();
    assert!(
        chars < 40_000,
        "the page was shown whole: {chars} characters"
    );
}

#[test]
fn browse_without_out_works_from_a_directory_it_cannot_write_and_keeps_files_private() {
    if !docker_ready() {
        return;
    }
    let port = simple_site("Front door", "Seen through the seal");
    let data = tempfile::tempdir().unwrap();
    // `/` is root's and nobody else may write there: the old default (`.`) failed here.
    let output = Command::new(assert_cmd::cargo::cargo_bin("airlock"))
        .current_dir("/")
        .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
        .env("XDG_DATA_HOME", data.path())
        .args([
            "browse",
            &format!("http://127.0.0.1:{port}/"),
            "--allow",
            &format!("127.0.0.1:{port}"),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("Front door"));
    let saved = stderr
        .lines()
        .find_map(|line| line.strip_prefix("saved "))
        .unwrap_or_else(|| panic!("no screenshot saved: {stderr}"));
    let saved = std::path::Path::new(saved);
    let run_dir = saved.parent().unwrap();
    assert!(
        run_dir.starts_with(data.path().join("airlock/runs")),
        "{}",
        saved.display()
    );
    for (path, mode) in [(run_dir, 0o700), (saved, 0o600)] {
        let found = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(found, mode, "{}", path.display());
    }
}

/// A page whose corner blinks, so its live view keeps sending frames.
fn blinking_site() -> u16 {
    let (port, _) = airlock_testkit::site::site(|_| {
        std::collections::HashMap::from([(
            "/",
            (
                "200 OK",
                String::new(),
                "<!doctype html><title>Blink</title><style>@keyframes b{from{opacity:0}to{opacity:1}}\
                 #b{width:20px;height:20px;background:#000;animation:b .3s infinite alternate}</style>\
                 <p>Check me</p><div id=b></div>"
                    .to_owned(),
            ),
        )])
    });
    port
}

/// The next line of `lines` that starts with `start`, with the lines before it.
fn line_starting(lines: &mut impl Iterator<Item = String>, start: &str) -> String {
    let mut before = Vec::new();
    for line in lines.by_ref() {
        if let Some(rest) = line.strip_prefix(start) {
            return rest.to_owned();
        }
        before.push(line);
    }
    panic!("no line starting {start:?}: {before:?}");
}

#[test]
fn live_serves_the_tasks_page_on_a_private_loopback_link_where_a_person_helps() {
    use std::io::{BufRead, BufReader};
    if !docker_ready() {
        return;
    }
    let port = blinking_site();
    let dir = tempfile::tempdir().unwrap();
    // The worker opens the start page itself before the first turn (the record's step 1).
    let script = json!({"turns": [
        {"tool_calls": [{"name": "ask_human", "input": {"reason": "Check the page"}}]},
        {"text": "Checked."}
    ]});
    let record = dir.path().join("record");
    let child = task_command(dir.path(), &script, port)
        .args(["--live", "--json", "--record"])
        .arg(&record)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(Some(child));
    let stderr = child.0.as_mut().unwrap().stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines().map(Result::unwrap);
    let link = line_starting(&mut lines, "watch the task at ");
    let link = link.split_whitespace().next().unwrap().to_owned();
    let (origin, query) = link.split_once("/?").unwrap();
    let live_port: u16 = origin.rsplit(':').next().unwrap().parse().unwrap();
    // The worker's call is printed where the person is.
    let asked = line_starting(&mut lines, "the worker asks for a person: ");
    assert!(asked.starts_with("Check the page"), "{asked}");

    // The link's key opens a session once; nothing answers without it.
    let (page, cookie) = enter_once(live_port, query);
    let id = page.strip_prefix("/ui/tasks/").unwrap().to_owned();
    let with_cookie = format!("cookie: {cookie}");
    let status_path = format!("/v1/tasks/{id}");
    assert_eq!(
        support::request(live_port, "GET", &status_path, &[], "").0,
        401
    );
    let evil_host = "host: evil.example";
    assert_eq!(
        support::request(live_port, "GET", &page, &[evil_host, &with_cookie], "").0,
        403
    );
    let (status, body) = support::request(live_port, "GET", &page, &[&with_cookie], "");
    assert_eq!(status, 200);
    assert!(body.contains("Check the page"), "{body}");
    let (_, body) = support::request(live_port, "GET", &status_path, &[&with_cookie], "");
    assert!(body.contains("\"state\":\"waiting_for_human\""), "{body}");

    // Its frames come as they do on `serve`.
    let viewer = Command::new("node")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/support/live_viewer.js"
        ))
        .arg(format!("ws://127.0.0.1:{live_port}/v1/tasks/{id}/live"))
        .arg(format!("cookie {cookie}"))
        .env("NODE_PATH", node_modules())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut viewer = KillOnDrop(Some(viewer));
    let stdout = viewer.0.as_mut().unwrap().stdout.take().unwrap();
    let mut frames = BufReader::new(stdout).lines();
    assert_eq!(frames.next().unwrap().unwrap(), "open");
    let frame = frames.next().unwrap().unwrap();
    assert!(frame.len() > 100 && !frame.contains(' '), "{frame}");

    // A hand-back must come from the page's own origin.
    let hand_back = format!("/v1/tasks/{id}/hand-back");
    assert_eq!(
        support::request(live_port, "POST", &hand_back, &[&with_cookie], "").0,
        403
    );
    let own = format!("origin: http://127.0.0.1:{live_port}");
    assert_eq!(
        support::request(live_port, "POST", &hand_back, &[&with_cookie, &own], "").0,
        200
    );
    let output = child.0.take().unwrap().wait_with_output().unwrap();
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["ended"], "completed", "{result}");
    let record: Value =
        serde_json::from_slice(&std::fs::read(record.join("record.json")).unwrap()).unwrap();
    assert_eq!(
        record["steps"][1]["help"]["outcome"], "handed_back",
        "{record}"
    );
}

/// Where the Node clients are: `AIRLOCK_TEST_NODE_MODULES` (set by `cargo xtask integration`).
fn node_modules() -> String {
    std::env::var("AIRLOCK_TEST_NODE_MODULES")
        .unwrap_or_else(|_| "/opt/airlock-ci/node/node_modules".into())
}

/// Trade the `--live` link's key (`query`) for a session: a wrong key and a second use are
/// refused. The task's page and the session's cookie.
fn enter_once(live_port: u16, query: &str) -> (String, String) {
    let enter = |key: &str| {
        support::exchange(
            live_port,
            format!(
                "GET /?{key} HTTP/1.1\r\nhost: 127.0.0.1:{live_port}\r\nconnection: close\r\n\r\n"
            )
            .as_bytes(),
        )
    };
    assert!(enter("key=0123").starts_with("HTTP/1.1 403"));
    let entered = enter(query);
    assert!(entered.starts_with("HTTP/1.1 303"), "{entered}");
    assert!(
        enter(query).starts_with("HTTP/1.1 403"),
        "the key works once"
    );
    let page = entered
        .lines()
        .find_map(|line| line.strip_prefix("location: "))
        .unwrap()
        .to_owned();
    let cookie = support::cookie_set_by(&entered);
    (page, cookie)
}

/// A child process killed however the test ends.
struct KillOnDrop(Option<std::process::Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A task whose route goes through squid (asking for a password): the page is reached through
/// squid, which is asked for the vetted address; with a wrong password the task's failures name
/// the route and the 407; no credential shows in anything the task writes.
#[test]
fn a_task_on_a_parents_route_reaches_its_site_through_squid_and_never_shows_its_password() {
    use airlock_testkit::parents::{PASSWORD, USER, squid};
    if !docker_ready() {
        return;
    }
    let port = simple_site("Routed page", "Reached through the company's proxy.");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let squid = runtime.block_on(squid(""));
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["open", format!("http://127.0.0.1:{port}/")]}}]},
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["get", "text", "body"]}}]},
        {"text": "The page says it was reached through the company's proxy."}
    ]});
    let run = |password: &str, record: &str| {
        let credentials = dir.path().join(format!("{record}.credentials"));
        std::fs::write(&credentials, format!("{USER}:{password}\n")).unwrap();
        let output = task_command(dir.path(), &script, port)
            .args(["--parent", &format!("corp=http://{}", squid.address)])
            .args([
                "--parent-credentials",
                &format!("corp=file:{}", credentials.display()),
            ])
            .args(["--route", "corp", "--json", "--record"])
            .arg(dir.path().join(record))
            .env("RUST_LOG", "debug")
            .output()
            .unwrap();
        let record = std::fs::read_to_string(dir.path().join(record).join("record.json")).unwrap();
        let everything = format!(
            "{}{}{record}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        for secret in [USER, PASSWORD, password] {
            assert!(
                !everything.contains(secret),
                "`{secret}` shown: {everything}"
            );
        }
        let result: Value =
            serde_json::from_slice(&output.stdout).unwrap_or_else(|_| panic!("{everything}"));
        (result, record)
    };

    let (result, record) = run(PASSWORD, "through");
    assert_eq!(result["ended"], "completed", "{result}");
    assert!(record.contains("Reached through the company"), "{record}");
    // Every byte went by the route, and the result and the record say so.
    let by_route = &result["egress_bytes_by_route"];
    assert!(by_route["corp"]["down"].as_u64().unwrap() > 0, "{result}");
    assert!(by_route.get("direct").is_none(), "{result}");
    let recorded: Value = serde_json::from_str(&record).unwrap();
    assert_eq!(recorded["egress"]["bytes_by_route"], *by_route, "{record}");
    assert_eq!(
        recorded["egress"]["allowed"][0]["route"], "corp",
        "{record}"
    );
    let log = runtime.block_on(squid.logged(&format!("CONNECT 127.0.0.1:{port}")));
    assert!(!log.contains("TCP_DENIED"), "{log}");

    let (refused, record) = run("not-the-password-91c2", "refused");
    // Not the policy's refusal: the route failed, and says where and why.
    let failures = &refused["egress_failures"][0];
    assert_eq!(failures["class"], "parent-credentials", "{refused}");
    assert!(
        failures["reason"]
            .as_str()
            .unwrap()
            .contains("route `corp`")
            && failures["reason"].as_str().unwrap().contains("407"),
        "{refused}"
    );
    assert!(!record.contains("Reached through the company"), "{record}");
}

/// A task on a route through a TLS-inspecting parent (mitmproxy, with its own CA): with
/// `--ca-cert` the inspected HTTPS page loads, for the browser and for agent-browser's own
/// `read`; without it the certificate is refused and the page never shows.
#[test]
fn an_inspecting_parents_https_page_loads_only_with_its_ca() {
    use airlock_testkit::parents::{INSPECTED_PAGE, mitmproxy};
    if !docker_ready() {
        return;
    }
    // The lab site's port is only what the policy allows: mitmproxy answers for it itself.
    let port = simple_site("Never reached", "mitmproxy answers instead.");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let inspector = runtime.block_on(mitmproxy());
    let dir = tempfile::tempdir().unwrap();
    let url = format!("https://127.0.0.1:{port}/");
    let script = json!({"turns": [
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["open", &url]}}]},
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["get", "text", "body"]}}]},
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["read", format!("{url}read")]}}]},
        {"text": "Done."}
    ]});
    let run = |ca: bool, record: &str| {
        let mut command = task_command(dir.path(), &script, port);
        command
            .args(["--parent", &format!("inspect=http://{}", inspector.address)])
            .args(["--route", "inspect", "--json", "--record"])
            .arg(dir.path().join(record));
        if ca {
            command.arg("--ca-cert").arg(inspector.ca_cert());
        }
        let output = command.output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        std::fs::read_to_string(dir.path().join(record).join("record.json")).unwrap()
    };

    let trusted = run(true, "trusted");
    let record: Value = serde_json::from_str(&trusted).unwrap();
    let output_of = |verb: &str| {
        record["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|step| step["command"][0] == verb)
            .map_or_else(
                || panic!("no `{verb}` step: {record}"),
                |step| step["output"].to_string(),
            )
    };
    assert!(
        output_of("get").contains(INSPECTED_PAGE),
        "the browser: {}; mitmproxy said: {}",
        output_of("get"),
        inspector.output()
    );
    assert!(
        output_of("read").contains(INSPECTED_PAGE),
        "`read`: {}",
        output_of("read")
    );
    let seen = inspector.seen();
    assert!(
        seen.contains(&format!("https://127.0.0.1:{port}/")),
        "{seen}"
    );

    let untrusted = run(false, "untrusted");
    assert!(!untrusted.contains(INSPECTED_PAGE), "{untrusted}");
    assert!(
        untrusted.contains("ERR_CERT_AUTHORITY_INVALID") || untrusted.contains("certificate"),
        "{untrusted}"
    );
}

/// A task on a route through a parent reached over TLS (squid's `https_port`, its certificate
/// signed by a CA of its own): with that CA given as `--ca-cert` the page is reached through the
/// parent; without it the parent's certificate is refused before it hears anything, and the
/// task's failures say so.
#[test]
fn a_task_reaches_its_site_through_a_parent_over_tls_only_when_its_ca_is_given() {
    use airlock_testkit::parents::{PASSWORD, USER, squid_tls};
    if !docker_ready() {
        return;
    }
    let port = simple_site("Routed over TLS", "Reached through the proxy's TLS.");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let squid = runtime.block_on(squid_tls(""));
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("corp.credentials");
    std::fs::write(&credentials, format!("{USER}:{PASSWORD}\n")).unwrap();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["open", format!("http://127.0.0.1:{port}/")]}}]},
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["get", "text", "body"]}}]},
        {"text": "Done."}
    ]});
    let run = |ca: bool, record: &str| {
        let mut command = task_command(dir.path(), &script, port);
        command
            .args(["--parent", &format!("corp=https://{}", squid.address)])
            .arg("--parent-credentials")
            .arg(format!("corp=file:{}", credentials.display()))
            .args(["--route", "corp", "--json", "--record"])
            .arg(dir.path().join(record));
        if ca {
            command.arg("--ca-cert").arg(squid.tls_ca());
        }
        let output = command.output().unwrap();
        let result: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&output.stderr)));
        let record = std::fs::read_to_string(dir.path().join(record).join("record.json")).unwrap();
        (result, record)
    };

    let (refused, record) = run(false, "untrusted");
    assert_eq!(
        refused["egress_failures"][0]["class"], "parent-tls",
        "{refused}"
    );
    assert!(!record.contains("Reached through the proxy"), "{record}");
    assert!(
        !squid.access_log().contains("CONNECT"),
        "an untrusted parent heard a request: {}",
        squid.access_log()
    );

    let (result, record) = run(true, "trusted");
    assert_eq!(result["ended"], "completed", "{result}");
    assert!(
        record.contains("Reached through the proxy's TLS"),
        "{record}"
    );
    assert!(
        result["egress_bytes_by_route"]["corp"]["down"]
            .as_u64()
            .unwrap()
            > 0,
        "{result}"
    );
    runtime.block_on(squid.logged(&format!("CONNECT 127.0.0.1:{port}")));
}
