//! A task's live view over `/v1/tasks/{id}/live`: a real viewer (Node's `ws`) receives the task's
//! page as JPEG frames, and they change when the task navigates (a red page, then a blue one).
//! Another token gets what a missing task gets, and a finished task has no live view.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

use airlock_testkit::site::site;
use base64::Engine;

use super::followed::{Events, queued, until_step};
use super::support::mean_colour;
use super::*;

/// Two pages of one colour each; the red one links to the blue one.
fn coloured_site() -> u16 {
    let page = |colour: &str, link: &str| {
        format!(
            "<!doctype html><title>{colour}</title><style>html,body{{margin:0;height:100%;background:{colour}}}</style>{link}"
        )
    };
    let (port, _) = site(|_| {
        HashMap::from([
            (
                "/",
                (
                    "200 OK",
                    String::new(),
                    page(
                        "#ff0000",
                        "<a id=next href=/blue style=color:#ff0000>next</a>",
                    ),
                ),
            ),
            ("/blue", ("200 OK", String::new(), page("#0000ff", ""))),
        ])
    });
    port
}

/// Where the Node clients are: `AIRLOCK_TEST_NODE_MODULES` (set by `cargo xtask integration`).
pub(super) fn node_modules() -> String {
    let modules = std::env::var("AIRLOCK_TEST_NODE_MODULES")
        .unwrap_or_else(|_| "/opt/airlock-ci/node/node_modules".into());
    assert!(
        std::path::Path::new(&modules).join("ws").exists(),
        "{modules} lacks ws: run `cargo xtask integration` (it installs it from npm)"
    );
    modules
}

fn viewer(served: &Served, token: &str, id: &str) -> std::process::Child {
    viewer_with(served, token, id, Stdio::null())
}

/// The viewer, with `stdin` as what it sends (`Stdio::piped()` for a person who acts).
pub(super) fn viewer_with(
    served: &Served,
    token: &str,
    id: &str,
    stdin: Stdio,
) -> std::process::Child {
    Command::new("node")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/support/live_viewer.js"
        ))
        .arg(format!("ws://127.0.0.1:{}/v1/tasks/{id}/live", served.port))
        .arg(token)
        .env("NODE_PATH", node_modules())
        .stdin(stdin)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_viewer_sees_the_task_s_page_change_as_it_navigates() {
    if !docker_ready() {
        return;
    }
    let port = coloured_site();
    let home = format!("http://127.0.0.1:{port}/");
    let call = |args: Value| json!({"name": "agent_browser", "input": {"args": args}});
    let script = json!({"turns": [
        {"tool_calls": [call(json!(["open", home])), call(json!(["wait", "3000"]))]},
        {"tool_calls": [call(json!(["click", "#next"])), call(json!(["wait", "3000"]))]},
        {"text": "Seen both."}
    ]});
    let task = json!({"task": "Look", "url": home, "wait": false});
    let (served, _dir, _, id) = queued(&script, port, &task);
    let mut events = Events::open(&served, TOKEN, &id);
    until_step(&mut events, 2);
    // Another token is told what a missing task's viewer is told.
    let mut other = viewer(&served, "second-token-abcdef0123456", &id);
    let mut said = String::new();
    BufReader::new(other.stdout.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    assert_eq!(said.trim(), "refused 404");
    let _ = other.wait();

    let mut watching = viewer(&served, TOKEN, &id);
    let lines: Vec<String> = BufReader::new(watching.stdout.take().unwrap())
        .lines()
        .map(Result::unwrap)
        .collect();
    let _ = watching.wait();
    assert_eq!(lines.first().map(String::as_str), Some("open"), "{lines:?}");
    assert!(
        lines.last().unwrap().starts_with("closed"),
        "{:?}",
        lines.last()
    );
    let colours: Vec<(u64, u64, u64)> = lines[1..lines.len() - 1]
        .iter()
        .map(|line| {
            mean_colour(
                &base64::engine::general_purpose::STANDARD
                    .decode(line)
                    .unwrap(),
            )
        })
        .collect();
    let red = colours
        .iter()
        .position(|(r, g, b)| *r > 200 && *g < 60 && *b < 60);
    let blue = colours
        .iter()
        .rposition(|(r, g, b)| *b > 200 && *r < 60 && *g < 60);
    assert!(
        matches!((red, blue), (Some(red), Some(blue)) if red < blue),
        "frames' colours, in order: {colours:?}"
    );
    // The task ended as it would have unwatched, and its live view with it.
    let mut done = None;
    while let Some((name, data)) = events.next() {
        if name == "done" {
            done = Some(data);
        }
    }
    assert_eq!(done.unwrap()["ended"], "completed");
    let mut late = viewer(&served, TOKEN, &id);
    let mut said = String::new();
    BufReader::new(late.stdout.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    assert_eq!(said.trim(), "refused 409");
    let _ = late.wait();
}
