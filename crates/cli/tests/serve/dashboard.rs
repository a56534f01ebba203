//! The dashboard in a real browser: the host's headless Chromium, driven by Playwright from npm,
//! plays a person who signs in, finds a task asking for help, presses a button on the lab page
//! through the live page, hands back, watches the worker navigate, and cancels the task at its
//! second call for help; the session is an `HttpOnly`, `SameSite=Strict` cookie that a page of
//! another origin cannot use, and another token's person sees nothing of the task. The run keeps
//! screenshots of the dashboard, the live view and the record for a person to look at.

use std::collections::HashMap;
use std::path::PathBuf;
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

/// Where the screenshots are kept: `AIRLOCK_TEST_ARTIFACTS` (`cargo xtask integration` sets it
/// to `target/test-artifacts`), else the temp dir.
fn shots() -> PathBuf {
    let dir = std::env::var_os("AIRLOCK_TEST_ARTIFACTS")
        .map_or_else(
            || std::env::temp_dir().join("airlock-test-artifacts"),
            PathBuf::from,
        )
        .join("dashboard");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_person_signs_in_watches_helps_and_cancels_from_the_dashboard() {
    if !docker_ready() {
        return;
    }
    let (forbidden, _) = forbidden_site();
    let port = help_and_next_site(forbidden);
    let home = format!("http://127.0.0.1:{port}/");
    let script = json!({"turns": [
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["open", home]}}]},
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

    let shots = shots();
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
    assert!(steps[2].as_str().unwrap().contains("/next"), "{seen}");
    assert_eq!(seen["second_reason"], "Confirm the purchase");
    assert_eq!(seen["final_state"], "done: cancelled", "{seen}");
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
