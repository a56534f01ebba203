//! The dashboard in a real browser: the host's headless Chromium, driven by Playwright from npm,
//! plays a person who signs in, finds a task asking for help, presses a button on the lab page
//! through the live page, hands back, watches the worker navigate, and cancels the task at its
//! second call for help; the session is an `HttpOnly`, `SameSite=Strict` cookie that a page of
//! another origin cannot use, and another token's person sees nothing of the task. The run keeps
//! screenshots of the dashboard, the live view and the record for a person to look at.

use std::collections::HashMap;
use std::process::Command;

use airlock_testkit::site::site;

use super::followed::{Events, get, queued};
use super::help::{forbidden_site, help_page, until_state};
use super::*;

const OTHER_TOKEN: &str = "second-token-abcdef0123456";

/// The help page at `/`, and at `/next` a purple page the worker goes on to (its corner blinks,
/// so frames keep coming).
fn help_and_next_site(forbidden: u16) -> u16 {
    let next = "<!doctype html><title>Next</title><style>html,body{margin:0;height:100%;background:#a000c0}\
         @keyframes blink{from{opacity:0}to{opacity:1}}\
         #blink{position:fixed;right:0;bottom:0;width:8px;height:8px;background:#fff;animation:blink .3s infinite alternate}</style>\
         <p>The next page</p><div id=blink></div>"
        .to_owned();
    let help = help_page(forbidden);
    let (port, _) = site(move |_| {
        HashMap::from([
            ("/", ("200 OK", String::new(), help.clone())),
            ("/next", ("200 OK", String::new(), next.clone())),
        ])
    });
    port
}

#[test]
fn a_person_signs_in_watches_helps_and_cancels_from_the_dashboard() {
    if !docker_ready() {
        return;
    }
    let (forbidden, _) = forbidden_site();
    let port = help_and_next_site(forbidden);
    let home = format!("http://127.0.0.1:{port}/");
    // The worker opens `home` itself before the first turn (the record's first step).
    let script = json!({"turns": [
        {"tool_calls": [{"name": "ask_human", "input": {"reason": "Press the button"}}]},
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["open", format!("{home}next")]}}]},
        {"tool_calls": [{"name": "ask_human", "input": {"reason": "Confirm the purchase"}}]},
        {"text": "Never reached: the person cancels."}
    ]});
    let task = json!({"task": "Get the button pressed", "url": home, "wait": false});
    let (served, _dir, accepted, id) = queued(&script, port, &task);
    assert_eq!(accepted["links"]["page"], format!("/ui/tasks/{id}"));
    let mut events = Events::open(&served, TOKEN, &id);
    until_state(&mut events, "waiting_for_human");
    let container = containers_of(served.child.id()).remove(0);
    // The browser outlives the task's limit by its time for a person: 300 + 600 + 60 s grace.
    let env = airlock_testkit::docker::inspect(&container)["Config"]["Env"].to_string();
    assert!(env.contains("BROWSER_LIFETIME_SECONDS=960"), "{env}");

    let shots = support::artifacts("dashboard");
    // The person cancels the task; its container goes after that.
    let person_came = std::time::SystemTime::now();
    let person = Command::new("node")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/support/dashboard_person.js"
        ))
        .arg(served.url(""))
        .args([TOKEN, OTHER_TOKEN, &id, &home])
        .arg(&shots)
        .env("NODE_PATH", super::live::node_modules())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&person.stdout);
    assert!(
        person.status.success(),
        "{said}\n{}",
        String::from_utf8_lossy(&person.stderr)
    );
    let seen: Value = serde_json::from_str(said.trim()).unwrap();

    the_person_saw_it_all(&seen, &shots);

    // The events end with the cancel; the record keeps the press the worker's look saw.
    let mut ended = None;
    while let Some((name, data)) = events.next() {
        if name == "done" {
            ended = Some(data["ended"].clone());
        }
    }
    assert_eq!(ended, Some(json!("cancelled")));
    let (status, body) = get(&served, TOKEN, &format!("/v1/tasks/{id}/record"));
    assert_eq!(status, 200, "{body}");
    let record: Value = serde_json::from_str(&body).unwrap();
    let first = &record["steps"][1];
    assert_eq!(first["help"]["outcome"], "handed_back", "{first}");
    assert_eq!(first["help"]["actions"]["clicks"], 1, "{first}");
    let output = first["output"].as_str().unwrap();
    assert!(output.contains("Pressed by a person"), "{output}");
    // The second call, cancelled by the person, is kept too.
    let second = &record["steps"][3];
    assert_eq!(second["tool"], "ask_human", "{record}");
    assert_eq!(second["help"]["outcome"], "cancelled", "{second}");
    assert!(wait_until_removed(
        &container,
        person_came,
        Duration::from_secs(60)
    ));
}

/// What the person's browser saw: the refusal of a wrong token, the session's cookie, the help
/// request on the dashboard and the live page, the other origin's failures, the end, the
/// record, the sign-out and the other token's empty view; and the screenshots.
fn the_person_saw_it_all(seen: &Value, shots: &std::path::Path) {
    assert!(
        seen["wrong_token"]
            .as_str()
            .unwrap()
            .contains("not one of this server's tokens"),
        "{seen}"
    );
    let cookie = &seen["cookie"][0];
    assert_eq!(seen["cookie"].as_array().unwrap().len(), 1, "{seen}");
    assert_eq!(cookie["name"], "airlock_ui");
    assert_eq!(cookie["httpOnly"], true);
    assert_eq!(cookie["sameSite"], "Strict");
    assert_eq!(cookie["length"], 64, "256 random bits");
    assert_eq!(seen["script_cookie"], "", "no script reads the session");
    // A move while the next frame loaded (the image without a size) was sent and kept the view.
    assert_eq!(seen["move_without_a_size"], "sent", "{seen}");
    assert_eq!(seen["token_in_a_url"], false);
    assert!(
        seen["dashboard_help"]
            .as_str()
            .unwrap()
            .contains("Press the button"),
        "{seen}"
    );
    assert!(
        seen["dashboard_server"]
            .as_str()
            .unwrap()
            .contains("browsers in use"),
        "{seen}"
    );
    // Same site, another origin: the cookie goes along, the Origin check stops it.
    assert_eq!(seen["elsewhere"]["hand_back"], "failed", "{seen}");
    assert_eq!(seen["elsewhere"]["live"], "failed", "{seen}");
    assert_eq!(seen["live_reason"], "Press the button");
    // The worker's navigation after the hand-back reached the view (its frames turned purple),
    // and the page lists each step once, as served and as followed.
    assert!(seen["navigated"].is_array(), "{seen}");
    let steps = seen["steps_listed"].as_array().unwrap();
    for (index, step) in steps.iter().enumerate() {
        let step = step.as_str().unwrap();
        assert!(step.starts_with(&format!("{}/", index + 1)), "{seen}");
    }
    assert!(steps[1].as_str().unwrap().contains("/next"), "{seen}");
    assert_eq!(seen["second_reason"], "Confirm the purchase");
    assert_eq!(seen["final_state"], "done: cancelled", "{seen}");
    assert_eq!(
        seen["board_followed"], true,
        "the open dashboard followed the task: {seen}"
    );
    assert!(
        seen["dashboard_done"]
            .as_str()
            .unwrap()
            .contains("done: cancelled"),
        "{seen}"
    );
    assert!(
        seen["record_title"]
            .as_str()
            .unwrap()
            .starts_with("Airlock record"),
        "{seen}"
    );
    assert_eq!(seen["after_sign_out"], "password", "signed out: the form");
    assert_eq!(seen["stranger_tasks"], 0);
    assert_eq!(seen["stranger_live"], 404);
    for shot in [
        "dashboard-waiting",
        "live-helping",
        "live-second-call",
        "dashboard-done",
        "record",
    ] {
        assert!(shots.join(format!("{shot}.png")).is_file(), "{shot}");
    }
}

/// Sign in with `token` from the server's own page: the whole answer, head and body.
fn signing_in(served: &Served, token: &str, origin: Option<&str>) -> String {
    let body = format!("token={token}");
    let origin = origin.map_or_else(String::new, |origin| format!("origin: {origin}\r\n"));
    let request = format!(
        "POST /ui/sign-in HTTP/1.1\r\nhost: 127.0.0.1:{}\r\nconnection: close\r\n{origin}content-type: application/x-www-form-urlencoded\r\ncontent-length: {}\r\n\r\n{body}",
        served.port,
        body.len()
    );
    support::exchange(served.port, request.as_bytes())
}

#[test]
fn a_session_counts_only_on_the_dashboard_and_the_task_routes_and_changes_only_from_its_pages() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // An origin the operator allows, for token callers.
    let allowed = "http://127.0.0.1:1";
    let served = serve(
        &json!({"turns": []}),
        dir.path(),
        &["--allowed-origin", allowed],
    );
    let own = format!("http://127.0.0.1:{}", served.port);
    // The form is answered only from this server's own page, and only with a token of its own.
    for (origin, status) in [(None, "403"), (Some(allowed), "403"), (Some("null"), "403")] {
        let answer = signing_in(&served, TOKEN, origin);
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{origin:?}: {answer}"
        );
        assert!(
            !answer.to_ascii_lowercase().contains("set-cookie"),
            "{answer}"
        );
    }
    let wrong = signing_in(&served, "not-a-token-of-this-server", Some(&own));
    assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
    let answer = signing_in(&served, TOKEN, Some(&own));
    assert!(answer.starts_with("HTTP/1.1 303"), "{answer}");
    let cookie = support::cookie_set_by(&answer);
    let with_cookie = format!("cookie: {cookie}");
    let from_own = format!("origin: {own}");
    let status = |method: &str, path: &str, headers: &[&str]| {
        let mut all = vec![with_cookie.as_str()];
        all.extend_from_slice(headers);
        request(served.port, method, path, &all, "").0
    };
    assert_eq!(status("GET", "/ui", &[]), 200);
    let missing = "/v1/tasks/task_00000000000000000000000000000000";
    // The task routes take it (a missing task is missing, not unauthorized) ...
    assert_eq!(status("GET", missing, &[]), 404);
    assert_eq!(status("DELETE", missing, &[&from_own]), 404);
    // ... but a change without this server's Origin is refused before any handler.
    assert_eq!(status("DELETE", missing, &[]), 403);
    let hand_back = format!("{missing}/hand-back");
    assert_eq!(status("POST", &hand_back, &[]), 403);
    // An origin allowed for token callers reads nothing through a person's session.
    let from_allowed = format!("origin: {allowed}");
    assert_eq!(status("GET", missing, &[&from_allowed]), 403);
    let bearer = format!("authorization: Bearer {TOKEN}");
    let by_token = request(served.port, "GET", missing, &[&bearer, &from_allowed], "");
    assert_eq!(by_token.0, 404, "{}", by_token.1);
    // Nothing else takes a session: MCP, tasks, CDP and the metrics want the token.
    assert_eq!(status("POST", "/mcp", &[&from_own]), 401);
    assert_eq!(status("POST", "/v1/tasks", &[&from_own]), 401);
    assert_eq!(status("GET", "/metrics", &[]), 401);
    assert_eq!(status("GET", "/json/version", &[]), 401);
    // A made-up session is no session: the dashboard's pages send the browser to sign in.
    let forged =
        "cookie: airlock_ui=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    assert_eq!(
        request(served.port, "GET", "/ui/tasks/x", &[forged], "").0,
        303
    );
    assert_eq!(request(served.port, "GET", missing, &[forged], "").0, 401);
    // Signing out ends it at once.
    assert_eq!(status("POST", "/ui/sign-out", &[&from_own]), 303);
    assert_eq!(status("GET", missing, &[]), 401);
}

/// Sign-in is throttled: after ten wrong tokens from one client, every sign-in from it (the
/// right token's too) is answered 429 with `Retry-After`, and the form says when to try again.
/// Before, 200 wrong tokens in a row were all answered 401 and the right one then signed in.
#[test]
fn failed_sign_ins_hold_back_the_next_ones() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&json!({"turns": []}), dir.path(), &[]);
    let own = format!("http://127.0.0.1:{}", served.port);
    let mut statuses = Vec::new();
    for attempt in 0..30 {
        let answer = signing_in(&served, &format!("guess-{attempt:026}"), Some(&own));
        statuses.push(answer[9..12].to_owned());
    }
    assert!(statuses[..10].iter().all(|s| s == "401"), "{statuses:?}");
    assert!(statuses[10..].iter().all(|s| s == "429"), "{statuses:?}");
    let right = signing_in(&served, TOKEN, Some(&own));
    assert!(right.starts_with("HTTP/1.1 429"), "{right}");
    let lower = right.to_ascii_lowercase();
    let retry: u64 = lower
        .lines()
        .find_map(|line| line.strip_prefix("retry-after: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{right}");
    assert!(!lower.contains("set-cookie"), "{right}");
    assert!(right.contains("Too many failed sign-ins"), "{right}");
}

/// Nothing the server answers may be kept by a browser or a proxy between: the task answers,
/// the record (JSON and page) and the API's refusals carry `Cache-Control: no-store`.
#[test]
fn task_answers_and_records_are_never_stored() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let served = serve(
        &json!({"turns": [{"text": "Nothing to do."}]}),
        dir.path(),
        &[],
    );
    let bearer = format!("authorization: Bearer {TOKEN}");
    let answer = support::exchange(
        served.port,
        format!(
            "POST /v1/tasks HTTP/1.1\r\nhost: 127.0.0.1:{}\r\nconnection: close\r\n{bearer}\r\ncontent-type: application/json\r\ncontent-length: 16\r\n\r\n{{\"task\": \"look\"}}",
            served.port
        )
        .as_bytes(),
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let body: Value =
        serde_json::from_str(&answer[answer.find("\r\n\r\n").unwrap() + 4..]).unwrap();
    let id = body["id"].as_str().unwrap().to_owned();
    let mut answers = vec![answer];
    for path in [
        format!("/v1/tasks/{id}"),
        format!("/v1/tasks/{id}/record"),
        format!("/v1/tasks/{id}/record.html"),
        "/v1/tasks/task_00000000000000000000000000000000".to_owned(),
    ] {
        answers.push(support::exchange(
            served.port,
            format!(
                "GET {path} HTTP/1.1\r\nhost: 127.0.0.1:{}\r\nconnection: close\r\n{bearer}\r\n\r\n",
                served.port
            )
            .as_bytes(),
        ));
    }
    for answer in &answers {
        let head = answer[..answer.find("\r\n\r\n").unwrap()].to_ascii_lowercase();
        assert!(head.contains("\r\ncache-control: no-store"), "{head}");
        // Plain HTTP: no Strict-Transport-Security (it is sent over TLS only).
        assert!(!head.contains("strict-transport-security"), "{head}");
    }
}

/// A token too short to stand a guessing attack, even throttled, stops the server at start,
/// naming which one and the rule, never the token.
#[test]
fn a_short_token_is_refused_at_start() {
    let output = std::process::Command::new(assert_cmd::cargo::cargo_bin("airlock"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--model",
            "script:/nonexistent",
        ])
        .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
        .env("AIRLOCK_TOKENS", "a-long-enough-token-0123456789,hunter2")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("token 2 is shorter than 16 characters"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
}
