//! A CDP lease's live view: while a raw CDP client drives its sealed browser, the token's viewer
//! (Node's `ws`) and a person at the dashboard (the host's Chromium, Playwright) see its page
//! change as the client navigates, the client never sees a message of the watch, nothing a
//! viewer sends reaches the page, and another token sees no lease at all.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Stdio};

use base64::Engine;
use serde_json::json;

use super::*;
use support::mean_colour;

const OTHER_TOKEN: &str = "second-token-abcdef0123456";

/// Two pages of one colour each: `/` blue, `/red` red; and `/moving/`, whose colour never rests.
fn coloured_lab() -> u16 {
    let page = |colour: &str| {
        (
            "200 OK",
            String::new(),
            format!(
                "<!doctype html><title>{colour}</title><style>html,body{{margin:0;height:100%;background:{colour}}}</style>"
            ),
        )
    };
    let moving = (
        "200 OK",
        String::new(),
        "<!doctype html><title>moving</title><style>@keyframes shift{from{background:#000}to{background:#fff}}html,body{margin:0;height:100%;animation:shift .3s infinite alternate}</style>".to_owned(),
    );
    let (port, _) = site(move |_| {
        HashMap::from([
            ("/", page("blue")),
            ("/red", page("red")),
            ("/moving/", moving.clone()),
        ])
    });
    port
}

/// A child's stdout, a line at a time.
struct Lines(BufReader<ChildStdout>);

impl Lines {
    fn of(child: &mut Child) -> Self {
        Self(BufReader::new(child.stdout.take().unwrap()))
    }

    fn next(&mut self) -> String {
        let mut line = String::new();
        self.0.read_line(&mut line).unwrap();
        line.trim().to_owned()
    }

    /// Frames until one whose colour passes `wanted` (it must come before the viewer closes).
    fn frame_until(&mut self, wanted: impl Fn((u64, u64, u64)) -> bool) -> (u64, u64, u64) {
        let mut seen = Vec::new();
        loop {
            let line = self.next();
            assert!(
                !line.is_empty() && !line.starts_with("closed") && !line.starts_with("text"),
                "the viewer got {line:?} before the frame it waited for, after frames of these colours: {seen:?}"
            );
            let jpeg = base64::engine::general_purpose::STANDARD
                .decode(&line)
                .unwrap();
            let colour = mean_colour(&jpeg);
            if wanted(colour) {
                return colour;
            }
            seen.push(colour);
        }
    }
}

/// `cdp_watched.js` on `port`'s /cdp, at `page` and ready: the client, what it says, its lease.
fn watched_client(port: u16, page: &str) -> (Child, Lines, String) {
    let mut client = node("cdp_watched.js")
        .arg(format!("ws://127.0.0.1:{port}/cdp?token={TOKEN}"))
        .arg(page)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = Lines::of(&mut client);
    let ready: Value = serde_json::from_str(&said.next()).unwrap();
    let lease = ready["lease"].as_str().unwrap().to_owned();
    assert!(lease.starts_with("lease_"), "{ready}");
    (client, said, lease)
}

fn viewer(port: u16, token: &str, lease: &str) -> Child {
    node("live_viewer.js")
        .arg(format!("ws://127.0.0.1:{port}/v1/leases/{lease}/live"))
        .arg(token)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

fn get(port: u16, token: &str, path: &str) -> (u16, Value) {
    let (status, body) = request(
        port,
        "GET",
        path,
        &[&format!("authorization: Bearer {token}")],
        "",
    );
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// `airlock serve` for two tokens, allowing the lab, with `extra` arguments; the directory holds
/// its (never asked) model script.
fn serving(lab: u16, extra: &[&str]) -> (Served, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, r#"{"turns": []}"#).unwrap();
    let args: Vec<String> = [
        "serve",
        "--model",
        &format!("script:{}", script.display()),
        "--pool-size",
        "0",
        "--cdp-pool-size",
        "0",
        "--listen",
        "127.0.0.1:0",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain(["--allow".into(), format!("127.0.0.1:{lab}")])
    .chain(extra.iter().map(|&arg| arg.to_owned()))
    .collect();
    (Served::start(&args, &format!("{TOKEN},{OTHER_TOKEN}")), dir)
}

/// Another token lists no lease, and can neither watch this one nor open its page.
fn other_token_sees_nothing(port: u16, lease: &str) {
    let (_, theirs) = get(port, OTHER_TOKEN, "/v1/leases");
    assert_eq!(theirs["leases"], json!([]), "{theirs}");
    let mut other = viewer(port, OTHER_TOKEN, lease);
    assert_eq!(Lines::of(&mut other).next(), "refused 404");
    let _ = other.wait();
    let (status, _) = request(
        port,
        "GET",
        &format!("/ui/leases/{lease}"),
        &[&format!("authorization: Bearer {OTHER_TOKEN}")],
        "",
    );
    assert_eq!(status, 404);
}

/// A person at the dashboard finds the lease and watches it, in a real browser: the page is red.
fn person_sees_red(port: u16, lease: &str) {
    let shots = support::artifacts("lease");
    let output = node("lease_person.js")
        .args([&format!("http://127.0.0.1:{port}"), TOKEN, lease])
        .arg(&shots)
        .output()
        .unwrap();
    let person = printed(&output);
    assert!(
        person["listed"]
            .as_str()
            .unwrap_or_default()
            .contains(lease),
        "{person}"
    );
    assert!(person["frames"].as_u64().unwrap() >= 1, "{person}");
    let colour = &person["colour"];
    assert!(
        colour[0].as_u64().unwrap() > 200 && colour[2].as_u64().unwrap() < 60,
        "the dashboard's live page did not show the red page: {person}"
    );
    assert_eq!(person["problems"], json!([]), "{person}");
}

#[test]
fn a_leases_page_is_watched_by_its_token_alone_and_its_client_never_sees_the_watch() {
    if !docker_ready() {
        return;
    }
    let lab = coloured_lab();
    let (served, _dir) = serving(lab, &[]);
    let port = served.port;

    let (mut client, mut said, lease) = watched_client(port, &format!("http://127.0.0.1:{lab}/"));

    // The token lists its lease; another token lists nothing and cannot watch it.
    let (status, listed) = get(port, TOKEN, "/v1/leases");
    assert_eq!(status, 200);
    assert_eq!(listed["leases"][0]["id"], lease.as_str(), "{listed}");
    assert_eq!(
        listed["leases"][0]["links"]["live"],
        format!("/v1/leases/{lease}/live")
    );
    other_token_sees_nothing(port, &lease);

    // The viewer sees the client's blue page, then the red one it moves to.
    let mut watching = viewer(port, TOKEN, &lease);
    let mut frames = Lines::of(&mut watching);
    assert_eq!(frames.next(), "open");
    frames.frame_until(|(red, _, blue)| blue > 200 && red < 60);
    // Nothing a viewer sends reaches a lease's page.
    let mut typing = watching.stdin.take().unwrap();
    writeln!(
        typing,
        r#"{{"type":"input_mouse","eventType":"mousePressed","x":5,"y":5,"button":"left","clickCount":1}}"#
    )
    .unwrap();
    writeln!(client.stdin.as_mut().unwrap()).unwrap();
    assert_eq!(said.next(), r#"{"moved":true}"#);
    let mut refused = false;
    loop {
        let line = frames.next();
        if line.starts_with("text ") {
            assert!(line.contains("takes no input"), "{line}");
            refused = true;
            continue;
        }
        let jpeg = base64::engine::general_purpose::STANDARD
            .decode(&line)
            .unwrap_or_else(|_| panic!("not a frame: {line:?}"));
        let (red, _, blue) = mean_colour(&jpeg);
        if red > 200 && blue < 60 && refused {
            break;
        }
    }

    // A person at the dashboard finds the lease and watches it too, in a real browser.
    person_sees_red(port, &lease);

    // The client saw nothing of either watch, and its page is still its own.
    writeln!(client.stdin.as_mut().unwrap()).unwrap();
    let end: Value = serde_json::from_str(&said.next()).unwrap();
    assert!(client.wait().unwrap().success());
    assert_eq!(end["title"], "red", "{end}");
    assert_eq!(
        end["foreign"],
        json!([]),
        "the client received the watch's messages"
    );

    // The lease ended with its client: the view closes and the lease is gone from the list.
    let rest = loop {
        let line = frames.next();
        if line.is_empty() || line.starts_with("closed") {
            break line;
        }
    };
    assert!(rest.starts_with("closed"), "{rest:?}");
    drop(typing);
    let _ = watching.wait();
    let (_, listed) = get(port, TOKEN, "/v1/leases");
    assert_eq!(listed["leases"], json!([]), "{listed}");
}

#[test]
fn a_watched_lease_whose_client_is_silent_still_ends_at_its_idle_limit() {
    if !docker_ready() {
        return;
    }
    let lab = coloured_lab();
    // The idle limit leaves a busy machine room to show the viewer its frames first (15 s was
    // not enough once: a CI run on a machine compiling beside it closed the lease before the
    // third frame); what is proved is that they never count as the client's traffic, so the
    // lease still ends.
    let (served, _dir) = serving(lab, &["--cdp-idle-timeout", "30", "--cdp-timeout", "120"]);
    let port = served.port;
    let (mut client, mut said, lease) =
        watched_client(port, &format!("http://127.0.0.1:{lab}/moving/"));
    // The page never rests, so the browser sends the view frame after frame; none of them is the
    // client's traffic, and the client sends nothing.
    let mut watching = viewer(port, TOKEN, &lease);
    let mut frames = Lines::of(&mut watching);
    assert_eq!(frames.next(), "open");
    let mut seen = std::collections::HashSet::new();
    while seen.len() < 3 {
        let line = frames.next();
        assert!(!line.is_empty() && !line.starts_with("closed"), "{line:?}");
        seen.insert(line);
    }
    let closed: Value = serde_json::from_str(&said.next()).unwrap();
    assert_eq!(closed["closed"], 1008, "{closed}");
    assert!(
        closed["reason"]
            .as_str()
            .unwrap()
            .contains("--cdp-idle-timeout"),
        "the lease did not end at its idle limit: {closed}"
    );
    drop(client.stdin.take());
    let _ = client.wait();
    let _ = watching.wait();
}
