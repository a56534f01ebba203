//! `airlock task --record DIR`: a real task's flight record, as JSON that validates against the
//! published schema and as a page that opens offline in a real browser (the host's Chromium,
//! driven by Playwright, with the network off) showing every step, refusal and picture. Needs
//! Docker, the image and a non-root user; `cargo xtask integration` runs it with those required.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use airlock_testkit::docker::docker_ready;
use airlock_testkit::site::site;
use serde_json::{Value, json};

/// The published schema, beside the other documents.
fn published_schema() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/record.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn the_published_schema_is_the_records_own() {
    let own = serde_json::to_value(schemars::schema_for!(airlock_worker::FlightRecord)).unwrap();
    if std::env::var_os("AIRLOCK_WRITE_SCHEMA").is_some() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/record.schema.json");
        std::fs::write(path, serde_json::to_string_pretty(&own).unwrap() + "\n").unwrap();
    }
    assert_eq!(
        published_schema(),
        own,
        "docs/record.schema.json is stale: write it again from schemars::schema_for!(FlightRecord) \
         (AIRLOCK_WRITE_SCHEMA=1 cargo test -p airlock --test record)"
    );
}

fn node_modules() -> String {
    let modules = std::env::var("AIRLOCK_TEST_NODE_MODULES")
        .unwrap_or_else(|_| "/opt/airlock-ci/node/node_modules".into());
    assert!(
        Path::new(&modules).join("playwright-core").exists(),
        "{modules} lacks playwright-core: run `cargo xtask integration` (it installs it from npm)"
    );
    modules
}

/// A page whose title tries to break out of the record's markup, linking to a second page.
fn lab() -> u16 {
    let (port, _seen) = site(|_| {
        HashMap::from([
            (
                "/",
                (
                    "200 OK",
                    String::new(),
                    "<!doctype html><title>&lt;/title>&lt;script>alert(1)&lt;/script>&lt;img src=http://127.0.0.1:9/x></title>\
                     <h1>Shop</h1><a id=next href=/next>Next</a>"
                        .to_owned(),
                ),
            ),
            (
                "/next",
                (
                    "200 OK",
                    String::new(),
                    "<!doctype html><title>Second page</title><p>The opening hours are 9 to 5.</p>"
                        .to_owned(),
                ),
            ),
        ])
    });
    port
}

/// Every allowed destination is recorded with its connections and what they carried: the lab's
/// two pages came down (by plain HTTP, so forwarded, each request on a connection of its own).
fn the_lab_is_the_one_allowed_destination(record: &Value, port: u16) -> String {
    let lab = format!("http://127.0.0.1:{port}");
    let allowed = record["egress"]["allowed"].as_array().unwrap();
    assert_eq!(allowed.len(), 1, "only the lab was reached: {allowed:#?}");
    assert_eq!(allowed[0]["destination"], lab);
    assert!(
        allowed[0]["connections"].as_u64().unwrap() >= 2,
        "{allowed:#?}"
    );
    let (up, down) = (allowed[0]["up"].as_u64(), allowed[0]["down"].as_u64());
    assert!(up.unwrap() > 0 && down.unwrap() > 200, "{allowed:#?}");
    lab
}

#[test]
fn a_real_task_records_every_step_and_its_page_opens_offline() {
    if !docker_ready() {
        return;
    }
    let port = lab();
    let home = format!("http://127.0.0.1:{port}/");
    let dir = tempfile::tempdir().unwrap();
    // The worker opens the start page itself (step 1, turn 0); the model begins with a look.
    let script = json!({"turns": [
        {"tool_calls": [
            {"name": "agent_browser", "input": {"args": ["snapshot", "-i"]}}
        ]},
        {"tool_calls": [
            {"name": "agent_browser", "input": {"args": ["click", "#next"]}},
            {"name": "agent_browser", "input": {"args": ["cookies"]}},
            {"name": "agent_browser", "input": {"args": ["eval", "fetch('http://169.254.169.254/latest/meta-data/').catch(() => 0)"]}},
            {"name": "agent_browser", "input": {"args": ["screenshot"]}}
        ]},
        {"text": "Open 9 to 5."}
    ]});
    let script_path = dir.path().join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let records = dir.path().join("records");
    let output = Command::new(assert_cmd::cargo::cargo_bin("airlock"))
        .args(["task", "Find the opening hours", "--url", &home])
        .arg("--model")
        .arg(format!("script:{}", script_path.display()))
        .args(["--allow", &format!("127.0.0.1:{port}"), "--record"])
        .arg(&records)
        .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("saved the task's record in"), "{stderr}");

    let text = std::fs::read_to_string(records.join("record.json")).unwrap();
    let record: Value = serde_json::from_str(&text).unwrap();
    conforms_to_the_published_schema(&record);

    let steps = record["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 6, "{record:#}");
    let verdict = |index: usize| steps[index]["verdict"]["kind"].as_str().unwrap();
    assert_eq!(verdict(0), "ran");
    assert_eq!(verdict(3), "refused", "{:#}", steps[3]);
    assert_eq!(steps[0]["command"], json!(["open", home]));
    assert_eq!(steps[0]["turn"], 0, "{:#}", steps[0]);
    assert_eq!(steps[1]["turn"], 1, "{:#}", steps[1]);
    assert_eq!(steps[0]["thumbnail"]["cause"], "navigation");
    assert_eq!(steps[1]["page"]["url"], home);
    assert!(steps[1].get("thumbnail").is_none(), "{:#}", steps[1]);
    assert_eq!(steps[2]["page"]["url"], format!("{home}next"));
    assert_eq!(steps[2]["page"]["title"], "Second page");
    assert_eq!(steps[2]["thumbnail"]["cause"], "navigation");
    assert_eq!(steps[5]["thumbnail"]["cause"], "screenshot");
    let refusals = record["egress"]["refusals"].as_array().unwrap();
    let metadata = refusals
        .iter()
        .find(|refusal| {
            refusal["target"]
                .as_str()
                .unwrap()
                .contains("169.254.169.254")
        })
        .unwrap_or_else(|| panic!("{refusals:#?}"));
    // The `eval` of step 5 asked for it; the proxy's report comes with that command's answer,
    // or the next one's when the request went out after the command returned.
    let step = metadata["step"].as_u64().unwrap();
    assert!(step == 5 || step == 6, "{metadata}");
    let lab = the_lab_is_the_one_allowed_destination(&record, port);
    assert_eq!(record["ended"], "completed");
    assert_eq!(record["turns"].as_array().unwrap().len(), 3);

    // The page, opened by a real browser with the network off.
    let seen = open_offline(&records.join("record.html"), &text);
    assert_eq!(seen["asked"], json!([]), "{seen:#}");
    assert_eq!(seen["dialogs"], json!([]), "{seen:#}");
    assert_eq!(seen["logged"], json!([]), "{seen:#}");
    assert_eq!(seen["steps"], 6, "{seen:#}");
    assert_eq!(seen["refused_steps"], 1, "{seen:#}");
    assert_eq!(seen["allowed_rows"], json!([lab]), "{seen:#}");
    assert_eq!(seen["scripts"], 1, "{seen:#}");
    let thumbnails = steps
        .iter()
        .filter(|step| step.get("thumbnail").is_some())
        .count();
    assert!(thumbnails >= 3);
    assert_eq!(seen["images"], thumbnails, "{seen:#}");
    assert_eq!(seen["images_loaded"], thumbnails, "{seen:#}");
    assert_eq!(seen["enlarged"], true, "{seen:#}");
    // The page's hostile title is shown as text: no dialog, no request for its image.
    assert_eq!(
        steps[0]["page"]["title"],
        "</title><script>alert(1)</script><img src=http://127.0.0.1:9/x>"
    );
    assert!(
        seen["timeline"]
            .as_str()
            .unwrap()
            .contains("<script>alert(1)</script>"),
        "{seen:#}"
    );
    assert!(
        seen["egress_refusals"]
            .to_string()
            .contains("169.254.169.254"),
        "{seen:#}"
    );
    assert_eq!(seen["report"], "Open 9 to 5.");
}

/// What the host's Chromium, offline, shows of the record page (a copy of it, its JSON and its
/// screenshots are kept for a person to look at).
fn open_offline(page: &Path, json: &str) -> Value {
    let keep = support::artifacts("record");
    std::fs::copy(page, keep.join("record.html")).unwrap();
    std::fs::write(keep.join("record.json"), json).unwrap();
    let shot = keep.join("record.png");
    let opened = Command::new("node")
        .arg(format!(
            "{}/tests/support/record_offline.js",
            env!("CARGO_MANIFEST_DIR")
        ))
        .arg(page)
        .arg(&shot)
        .env("NODE_PATH", node_modules())
        .output()
        .unwrap();
    assert!(
        opened.status.success(),
        "{}",
        String::from_utf8_lossy(&opened.stderr)
    );
    assert!(shot.exists());
    serde_json::from_slice(&opened.stdout).unwrap()
}

fn conforms_to_the_published_schema(record: &Value) {
    let validator = jsonschema::validator_for(&published_schema()).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(record)
        .map(|error| format!("{error} at {}", error.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}
