//! The guarded CDP endpoint end to end: `airlock cdp` and `airlock serve`'s /cdp, real sealed
//! browsers, and the clients people use: Playwright (Node `playwright-core` and Python
//! `playwright`), Puppeteer (`puppeteer-core`), browser-use, and the `ws` package for what those
//! never send. The lab site is on loopback and reached only through an explicit `--allow`; a
//! second site that is not allowed must hear nothing. Needs Docker, the image, a non-root user and
//! the clients; `cargo xtask integration` runs it with all of them required.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../support/mod.rs"]
mod support;

mod dialogs;
mod lease_live;
mod limits;
mod memory;
mod routes;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::process::{Command, Output, Stdio};

use airlock_testkit::dns::dns;
use airlock_testkit::docker::{containers_of, docker_ready, wait_until_removed};
use airlock_testkit::site::{Seen, site};
use serde_json::Value;
use support::{Served, metric, request, signal};

const TOKEN: &str = "cdp-test-token-0123456789abcdef";

/// The lab (allowed) and a forbidden site (never allowed: it must hear nothing).
struct Sites {
    lab: u16,
    lab_seen: Seen,
    forbidden: u16,
    forbidden_seen: Seen,
}

fn sites() -> Sites {
    let page = |title: &str, text: &str| {
        (
            "200 OK",
            String::new(),
            format!("<html><head><title>{title}</title></head><body><h1>{text}</h1></body></html>"),
        )
    };
    let (lab, lab_seen) = site(|_| HashMap::from([("/", page("Lab", "Hello from the lab"))]));
    let (forbidden, forbidden_seen) =
        site(|_| HashMap::from([("/secret", page("Secret", "internal secret"))]));
    Sites {
        lab,
        lab_seen,
        forbidden,
        forbidden_seen,
    }
}

impl Sites {
    fn lab_url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.lab)
    }

    fn assert_forbidden_heard_nothing(&self) {
        assert!(
            self.forbidden_seen.lock().unwrap().is_empty(),
            "the forbidden site was reached: {:?}",
            self.forbidden_seen.lock().unwrap()
        );
    }
}

/// `airlock cdp` (or `airlock serve`, with a scripted model that is never asked, when `serve` is
/// set) allowing only the lab. The directory holds the script; keep it while the server runs.
fn start(sites: &Sites, serve: bool, extra: &[&str]) -> (Served, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, r#"{"turns": []}"#).unwrap();
    let mut args: Vec<String> = if serve {
        vec![
            "serve".into(),
            "--model".into(),
            format!("script:{}", script.display()),
            "--pool-size".into(),
            "0".into(),
        ]
    } else {
        vec!["cdp".into()]
    };
    args.extend([
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--allow".into(),
        format!("127.0.0.1:{}", sites.lab),
    ]);
    args.extend(extra.iter().map(|&a| a.to_owned()));
    (Served::start(&args, TOKEN), dir)
}

/// Where the Node clients are: `AIRLOCK_TEST_NODE_MODULES` (set by `cargo xtask integration`).
fn node_modules() -> String {
    let modules = std::env::var("AIRLOCK_TEST_NODE_MODULES")
        .unwrap_or_else(|_| "/opt/airlock-ci/node/node_modules".into());
    for package in ["playwright-core", "puppeteer-core", "ws"] {
        assert!(
            std::path::Path::new(&modules).join(package).exists(),
            "{modules} lacks {package}: run `cargo xtask integration` (it installs the CDP clients from npm)"
        );
    }
    modules
}

fn script(name: &str) -> String {
    format!("{}/tests/support/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn node(name: &str) -> Command {
    let mut command = Command::new("node");
    command.arg(script(name)).env("NODE_PATH", node_modules());
    command
}

/// The one JSON object a client printed.
/// `cdp_raw.js` in a mode that connects, prints "open" and waits for a line before it acts.
struct RawClient {
    child: std::process::Child,
    stdout: BufReader<std::process::ChildStdout>,
}

impl RawClient {
    /// Connected to `url` in `mode`, waiting.
    fn open(url: &str, mode: &str) -> Self {
        let mut child = node("cdp_raw.js")
            .args([url, mode])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "open", "{mode}: the client did not get going");
        Self { child, stdout }
    }

    /// Let it act; what it printed at the end.
    fn go(mut self) -> Value {
        writeln!(self.child.stdin.take().unwrap()).unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.stdout, &mut rest).unwrap();
        assert!(self.child.wait().unwrap().success());
        serde_json::from_str(rest.lines().last().unwrap()).unwrap()
    }
}

fn printed(output: &Output) -> Value {
    let text = String::from_utf8_lossy(&output.stdout);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|_| {
        panic!(
            "the client printed {text}; stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn refused_by_guard(value: &Value, method: &str) {
    let error = value["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("airlock refuses {method}")),
        "expected the guard's refusal of {method}: {value}"
    );
}

fn refused_by_proxy(value: &Value, class: &str) {
    assert_eq!(value["ok"]["status"], 403, "{value}");
    let why = value["ok"]["refused"].as_str().unwrap_or_default();
    assert!(why.contains(class), "expected a {class} refusal: {value}");
}

#[test]
fn playwright_drives_the_sealed_browser_and_the_seal_holds() {
    if !docker_ready() {
        return;
    }
    let sites = sites();
    let (served, _dir) = start(&sites, false, &["--cdp-pool-size", "0"]);
    // Discovery through /json/version, the token in the query (as a URL a user pastes).
    let endpoint = served.url(&format!("/cdp?token={TOKEN}"));
    let output = node("cdp_playwright.js")
        .args([&endpoint, &sites.lab_url(), &sites.forbidden.to_string()])
        .output()
        .unwrap();
    let out = printed(&output);
    assert_eq!(out["text"], "Hello from the lab", "{out}");
    assert_eq!(out["screenshot_png"], true);
    // The guard: the browser's own pages, its own proxy, certificate checks, the protocol for
    // pages, and paths on the container's disk.
    refused_by_guard(&out["file"], "Page.navigate");
    refused_by_guard(&out["chrome"], "Page.navigate");
    refused_by_guard(&out["view_source"], "Page.navigate");
    refused_by_guard(&out["own_proxy"], "Target.createBrowserContext");
    refused_by_guard(&out["certificates"], "Security.setIgnoreCertificateErrors");
    refused_by_guard(&out["expose"], "Target.exposeDevToolsProtocol");
    refused_by_guard(&out["upload_path"], "DOM.setFileInputFiles");
    assert_eq!(
        out["still_works"], 42,
        "a refusal ended the connection: {out}"
    );
    // The seal: what the guard lets through still leaves only by the proxy.
    refused_by_proxy(&out["loopback"], "loopback");
    refused_by_proxy(&out["private"], "private");
    refused_by_proxy(&out["metadata"], "metadata");
    refused_by_proxy(&out["devtools_port"], "loopback");
    refused_by_proxy(&out["new_context_loopback"], "loopback");
    assert_eq!(out["new_context_lab"]["ok"]["status"], 200, "{out}");
    assert_eq!(out["script_file"]["url"], sites.lab_url(), "{out}");
    sites.assert_forbidden_heard_nothing();
    assert!(
        !sites.lab_seen.lock().unwrap().is_empty(),
        "the lab was never reached"
    );

    served.wait_for_log("a CDP lease ended");
    assert!(containers_of(served.child.id()).is_empty());
    let metrics = served.metrics(TOKEN);
    assert!(
        metric(
            &metrics,
            "airlock_cdp_guard_verdicts_total{verdict=\"refuse\"}"
        ) >= 7,
        "{metrics}"
    );
    assert!(
        metric(
            &metrics,
            "airlock_cdp_guard_verdicts_total{verdict=\"forward\"}"
        ) > 10,
        "{metrics}"
    );
    assert_eq!(
        metric(
            &metrics,
            "airlock_cdp_leases_ended_total{reason=\"client_closed\"}"
        ),
        1,
        "{metrics}"
    );
    assert!(
        metric(
            &metrics,
            "airlock_egress_refusals_total{class=\"loopback\"}"
        ) >= 2,
        "{metrics}"
    );
    assert_eq!(metric(&metrics, "airlock_cdp_leases "), 0, "{metrics}");
    let log = served.log.lock().unwrap().clone();
    assert!(
        log.contains("refuse Page.navigate") && log.contains("rewrite Browser.setDownloadBehavior"),
        "the lease's record was not logged: {log}"
    );
    assert!(!log.contains(TOKEN), "a token reached the log");
}

#[test]
fn the_escape_traps_fail_through_cdp_too() {
    if !docker_ready() {
        return;
    }
    // The end-to-end scenario's traps, on a page a CDP client opens: the guard lets all of this
    // through (it is ordinary page content), so only the seal stops it.
    let sites = sites();
    let forbidden = sites.forbidden;
    let (port, _) = site(|port| {
        let traps = format!(
            "<h1>Traps</h1><p id=\"ok\">allowed content</p>\
             <iframe src=\"http://127.0.0.1:{forbidden}/secret\"></iframe>\
             <img src=\"http://2130706433/pixel.png\"><img src=\"/redirect\">\
             <img src=\"http://private.lab:{port}/x.png\">\
             <script>window.trapsDone = Promise.allSettled([\
               fetch('http://10.0.0.3/secret').then(() => 'fetched', () => 'fetch failed'),\
               new Promise((done) => {{ const s = new WebSocket('ws://10.0.0.4/socket');\
                 s.onerror = s.onclose = () => done('socket failed'); }}),\
             ]).then((all) => all.map((r) => r.value));</script>"
        );
        HashMap::from([
            (
                "/",
                (
                    "200 OK",
                    String::new(),
                    format!("<!doctype html><html><body>{traps}</body></html>"),
                ),
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
    });
    let resolver = dns(HashMap::from([(
        "private.lab",
        vec![Ipv4Addr::new(10, 0, 0, 1)],
    )]));
    let (served, _dir) = start(
        &sites,
        false,
        &[
            "--cdp-pool-size",
            "0",
            "--allow",
            &format!("127.0.0.1:{port}"),
            "--nameserver",
            &format!("127.0.0.1:{resolver}"),
        ],
    );
    let output = node("cdp_open.js")
        .args([
            &served.url(&format!("/cdp?token={TOKEN}")),
            &format!("http://127.0.0.1:{port}/"),
        ])
        .output()
        .unwrap();
    let out = printed(&output);
    assert_eq!(out["ok"], "allowed content", "{out}");
    assert_eq!(
        out["traps"],
        serde_json::json!(["fetch failed", "socket failed"]),
        "{out}"
    );
    served.wait_for_log("a CDP lease ended");
    let log = served.log.lock().unwrap().clone();
    let refused: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("the egress proxy refused a request"))
        .collect();
    // One line a refusal, with its class and reason beside the target (the same line a task's
    // refusals get).
    assert!(
        refused.iter().any(
            |line| line.contains("target=http://169.254.169.254/latest/meta-data/")
                && line.contains("class=never-opened")
                && line.contains("reason=")
        ),
        "{refused:#?}"
    );
    for target in [
        format!("target=http://127.0.0.1:{forbidden}/secret"),
        "target=http://169.254.169.254/latest/meta-data/".to_owned(),
        "target=http://10.0.0.3/secret".to_owned(),
        "target=10.0.0.4:80".to_owned(),
        "target=http://127.0.0.1/pixel.png".to_owned(),
        format!("target=http://private.lab:{port}/x.png"),
    ] {
        assert!(
            refused.iter().any(|line| line.contains(&target)),
            "{target} was not refused: {refused:#?}"
        );
    }
    sites.assert_forbidden_heard_nothing();
}

#[test]
fn puppeteer_on_serve_closes_the_browser_and_its_container_goes() {
    if !docker_ready() {
        return;
    }
    let sites = sites();
    let (served, _dir) = start(&sites, true, &[]);
    let endpoint = format!("ws://127.0.0.1:{}/cdp?token={TOKEN}", served.port);
    let output = node("cdp_puppeteer.js")
        .args([&endpoint, &sites.lab_url(), &sites.forbidden.to_string()])
        .output()
        .unwrap();
    let out = printed(&output);
    assert_eq!(out["text"], "Hello from the lab", "{out}");
    assert!(
        out["version"].as_str().unwrap().starts_with("Chrome/"),
        "{out}"
    );
    assert_eq!(out["screenshot_png"], true);
    refused_by_guard(&out["file"], "Page.navigate");
    refused_by_proxy(&out["loopback"], "loopback");
    refused_by_proxy(&out["private"], "private");
    refused_by_proxy(&out["metadata"], "metadata");
    // The page's fetch gets the proxy's refusal (an opaque answer in no-cors mode); what
    // matters is below: the forbidden site heard nothing.
    assert!(out["script_fetch"].is_string(), "{out}");
    assert!(
        out["close"].get("error").is_none(),
        "browser.close() failed: {out}"
    );
    sites.assert_forbidden_heard_nothing();
    // Browser.close was answered, then the lease ended and its container was removed.
    served.wait_for_log("a CDP lease ended");
    assert!(
        served.log.lock().unwrap().contains("\"browser_close\""),
        "{}",
        served.log.lock().unwrap()
    );
    assert!(containers_of(served.child.id()).is_empty());
}

#[test]
fn python_playwright_and_browser_use_drive_sealed_browsers() {
    if !docker_ready() {
        return;
    }
    let python = std::env::var("AIRLOCK_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_clients = Command::new(&python)
        .args(["-c", "import playwright.async_api, browser_use"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_clients,
        "{python} lacks playwright or browser-use: run `cargo xtask integration` (it installs them from PyPI)"
    );
    let sites = sites();
    let (served, _dir) = start(&sites, false, &["--cdp-pool-size", "0"]);
    // browser-use makes a downloads folder in the temp directory and never removes it: give the
    // clients a temp directory of their own, removed with the test.
    let client_tmp = tempfile::tempdir().unwrap();
    // The token in a header this time, for both the discovery request and the WebSocket.
    let output = Command::new(&python)
        .arg(script("cdp_python.py"))
        .args([&served.url("/cdp"), TOKEN, &sites.lab_url()])
        .env("TMPDIR", client_tmp.path())
        .output()
        .unwrap();
    let out = printed(&output);
    assert_eq!(out["playwright_text"], "Hello from the lab", "{out}");
    assert!(
        out["playwright_file"]
            .as_str()
            .unwrap()
            .contains("airlock refuses Page.navigate"),
        "{out}"
    );
    assert_eq!(out["browser_use_url"], sites.lab_url(), "{out}");
    assert_eq!(out["browser_use_text"], "Hello from the lab", "{out}");
    sites.assert_forbidden_heard_nothing();
}

#[test]
fn two_clients_get_two_browsers_and_closing_one_leaves_the_other() {
    if !docker_ready() {
        return;
    }
    let sites = sites();
    let (served, _dir) = start(&sites, false, &["--cdp-pool-size", "0"]);
    let pid = served.child.id();
    let mut client = node("cdp_two.js")
        .args([
            &served.url(&format!("/cdp?token={TOKEN}")),
            &sites.lab_url(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = client.stdin.take().unwrap();
    let mut lines = BufReader::new(client.stdout.take().unwrap()).lines();
    let mut next = || -> Value { serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap() };

    let both = next();
    assert_eq!(both["both"], true, "{both}");
    assert_eq!(
        both["second_sees_storage"],
        Value::Null,
        "storage is shared: {both}"
    );
    assert_eq!(both["second_sees_cookies"], 0, "cookies are shared: {both}");
    let containers = containers_of(pid);
    assert_eq!(containers.len(), 2, "{containers:?}");
    for container in &containers {
        // No DevTools port in the container: its only listener is the relay, 127.0.0.1:3128.
        assert_eq!(
            airlock_testkit::docker::listening(container),
            ["0100007F:0C38"],
            "{container}"
        );
    }
    writeln!(stdin).unwrap();
    assert_eq!(next()["closed_first"], true);
    // The lease's end is logged once its container is removed.
    served.wait_for_log("a CDP lease ended");
    let left = containers_of(pid);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(containers.contains(&left[0]));
    writeln!(stdin).unwrap();
    let last = next();
    assert_eq!(last["second_text"], "Hello from the lab", "{last}");
    assert_eq!(last["second_storage"], Value::Null, "{last}");
    assert!(client.wait().unwrap().success());
}

#[test]
fn the_guard_answers_raw_messages_and_the_limits_end_leases() {
    if !docker_ready() {
        return;
    }
    let sites = sites();
    // `airlock cdp` keeps one CDP browser warm by default: the first client gets it.
    let (served, _dir) = start(&sites, false, &["--cdp-idle-timeout", "5"]);
    served.wait_for_log("a warm browser is ready");
    let url = format!("ws://127.0.0.1:{}/cdp?token={TOKEN}", served.port);
    let out = printed(&node("cdp_raw.js").args([&url, "guard"]).output().unwrap());
    assert_eq!(out["not_json"]["error"]["code"], -32600, "{out}");
    assert_eq!(out["no_id"]["error"]["code"], -32600, "{out}");
    assert_eq!(out["bad_params"]["id"], 3, "{out}");
    assert_eq!(out["bad_params"]["error"]["code"], -32600, "{out}");
    assert!(
        out["version"]["result"]["product"]
            .as_str()
            .unwrap()
            .starts_with("Chrome/")
    );
    assert_eq!(out["unflattened"]["error"]["code"], -32000, "{out}");
    assert_eq!(out["download"]["result"], serde_json::json!({}), "{out}");
    assert!(
        out["new_tab_file"]["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("airlock refuses Target.createTarget: `file:`"),
        "{out}"
    );
    assert_eq!(out["close"]["result"], serde_json::json!({}), "{out}");
    assert_eq!(out["closed"]["code"], 1000, "{out}");
    assert_eq!(
        out["replies_after_close"], 0,
        "a command after Browser.close was sent on"
    );
    served.wait_for_log("a CDP lease ended");
    assert!(
        served.log.lock().unwrap().contains("warm=true"),
        "the first client did not get the warm browser"
    );

    // A client that says nothing is closed at the idle limit, with the reason.
    let out = printed(&node("cdp_raw.js").args([&url, "silent"]).output().unwrap());
    assert_eq!(out["closed"]["code"], 1008, "{out}");
    assert!(
        out["closed"]["reason"]
            .as_str()
            .unwrap()
            .contains("--cdp-idle-timeout"),
        "{out}"
    );
    served.wait_for_log("a CDP lease ended");
    let metrics = served.metrics(TOKEN);
    assert_eq!(
        metric(&metrics, "airlock_cdp_leases_ended_total{reason=\"idle\"}"),
        1,
        "{metrics}"
    );
    assert_eq!(
        metric(
            &metrics,
            "airlock_cdp_leases_ended_total{reason=\"browser_close\"}"
        ),
        1,
        "{metrics}"
    );
    assert!(
        metric(
            &metrics,
            "airlock_cdp_guard_verdicts_total{verdict=\"invalid\"}"
        ) >= 3,
        "{metrics}"
    );
    // The warm browsers (the one leased, and the one made next) asked for nothing on their own.
    assert!(
        metrics
            .lines()
            .any(|line| line == "airlock_browser_unasked_requests 0"),
        "{metrics}"
    );
    // Only the warm browser the pool made next is left.
    assert!(containers_of(served.child.id()).len() <= 1);
}

#[test]
fn no_browser_starts_for_a_caller_without_the_token_or_from_a_web_page() {
    if !docker_ready() {
        return;
    }
    let sites = sites();
    let (served, _dir) = start(&sites, false, &["--cdp-pool-size", "0"]);
    let upgrade = [
        "connection: upgrade",
        "upgrade: websocket",
        "sec-websocket-version: 13",
        "sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==",
    ];
    let with = |extra: &[&str]| -> Vec<String> {
        upgrade.iter().chain(extra).map(|&h| h.to_owned()).collect()
    };
    let bearer = format!("authorization: Bearer {TOKEN}");
    let own_origin = format!("origin: http://127.0.0.1:{}", served.port);
    for (headers, path, status, why) in [
        (with(&[]), "/cdp", 401, "no token"),
        (
            with(&["authorization: Bearer wrong-token-0123456789"]),
            "/cdp",
            401,
            "wrong token",
        ),
        (
            with(&["origin: https://evil.example"]),
            "/cdp?token=cdp-test-token-0123456789abcdef",
            403,
            "a web page's origin",
        ),
        (
            // The server's own Origin too: no page it serves needs the CDP endpoint.
            with(&[&bearer, &own_origin]),
            "/cdp",
            403,
            "the server's own origin",
        ),
        (
            with(&[&bearer, "host: rebound.example"]),
            "/cdp",
            403,
            "a rebound Host",
        ),
        (vec![bearer.clone()], "/cdp", 426, "not a WebSocket"),
        (vec![], "/json/version", 401, "discovery without a token"),
    ] {
        let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
        let (got, body) = request(served.port, "GET", path, &headers, "");
        assert_eq!(got, status, "{why}: {body}");
    }
    let (status, body) = request(
        served.port,
        "GET",
        &format!("/json/version/?token={TOKEN}"),
        &[],
        "",
    );
    assert_eq!(status, 200, "{body}");
    let version: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        version["webSocketDebuggerUrl"],
        format!("ws://127.0.0.1:{}/cdp?token={TOKEN}", served.port)
    );
    assert!(
        containers_of(served.child.id()).is_empty(),
        "a refused caller got a browser"
    );
}

#[test]
fn draining_ends_open_leases_and_leaves_nothing() {
    if !docker_ready() {
        return;
    }
    let sites = sites();
    let (mut served, _dir) = start(
        &sites,
        false,
        &["--cdp-pool-size", "0", "--drain-timeout", "1"],
    );
    let url = format!("ws://127.0.0.1:{}/cdp?token={TOKEN}", served.port);
    let client = node("cdp_raw.js")
        .args([&url, "silent"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    served.wait_for_log("a CDP client leased a sealed browser");
    let pid = served.child.id();
    assert_eq!(containers_of(pid).len(), 1);
    signal(pid, "-TERM");
    let out = printed(&client.wait_with_output().unwrap());
    assert_eq!(out["closed"]["code"], 1001, "{out}");
    assert!(served.child.wait().unwrap().success());
    assert!(containers_of(pid).is_empty());
}

#[test]
fn bad_lease_limits_are_refused_with_the_fix() {
    // Checked before Docker is asked, so this runs anywhere.
    for (args, expected) in [
        (
            vec!["--cdp-timeout", "5"],
            "--cdp-timeout 5 is out of range",
        ),
        (
            vec!["--cdp-timeout", "60", "--cdp-idle-timeout", "90"],
            "--cdp-idle-timeout 90 is out of range",
        ),
        (vec!["--cdp-pool-size", "9"], "--cdp-pool-size 9 is over 8"),
        (
            vec!["--cdp-dialogs", "yes"],
            "`yes` is not a dialog setting: use accept, dismiss or client",
        ),
        (
            vec!["--listen", "0.0.0.0:0", "--allowed-host", "a.example"],
            "AIRLOCK_TOKENS",
        ),
    ] {
        let output = Command::new(assert_cmd::cargo::cargo_bin("airlock"))
            .arg("cdp")
            .args(&args)
            .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
            .env("AIRLOCK_TOKENS", "")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn a_cdp_lease_reaches_only_its_tokens_scope() {
    if !docker_ready() {
        return;
    }
    // The CDN is opened by --allow, so only the scope keeps the page's requests off it.
    let (cdn, cdn_seen) =
        site(|_| HashMap::from([("/x.png", ("200 OK", String::new(), String::new()))]));
    let (shop, _) = site(|_| {
        let body = format!(
            "<p id=\"ok\">shop</p><img src=\"http://cdn.lab:{cdn}/x.png\"><script>window.trapsDone = \
             fetch('http://cdn.lab:{cdn}/x.png', {{mode: 'no-cors'}}).then(() => 'answered', () => 'failed');</script>"
        );
        HashMap::from([("/", ("200 OK", String::new(), body))])
    });
    let names = HashMap::from([
        ("shop.lab", vec![Ipv4Addr::LOCALHOST]),
        ("cdn.lab", vec![Ipv4Addr::LOCALHOST]),
    ]);
    let args: Vec<String> = [
        "cdp",
        "--listen",
        "127.0.0.1:0",
        "--cdp-pool-size",
        "0",
        "--allowed-domain",
        "shop.lab",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain([
        "--allow".into(),
        format!("127.0.0.1:{shop}"),
        "--allow".into(),
        format!("127.0.0.1:{cdn}"),
        "--nameserver".into(),
        format!("127.0.0.1:{}", dns(names)),
    ])
    .collect();
    let served = Served::start(&args, TOKEN);
    let output = node("cdp_open.js")
        .arg(served.url(&format!("/cdp?token={TOKEN}")))
        .arg(format!("http://shop.lab:{shop}/"))
        .output()
        .unwrap();
    let opened = printed(&output);
    assert_eq!(opened["ok"], "shop", "{opened}");
    assert!(
        cdn_seen.lock().unwrap().is_empty(),
        "the out-of-scope CDN was reached over CDP: {:?}",
        cdn_seen.lock().unwrap()
    );
}
