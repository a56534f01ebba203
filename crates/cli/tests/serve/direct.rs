//! `--direct` sessions and capacity: a browser's slot goes with the browser, and a stop removes
//! every open session's browser before the server exits.

use super::*;

/// A Python SDK client that opens a `--direct` session, opens the page in it, prints its first
/// answer and keeps the session open until told (a line on stdin) or killed.
struct Held {
    child: std::process::Child,
}

impl Held {
    fn open(served: &Served, url: &str) -> (Self, Value) {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/support/mcp_http_client.py"
        );
        let headers = json!({"Authorization": format!("Bearer {TOKEN}")});
        let mut child = Command::new(python())
            .arg(script)
            .arg(served.url("/mcp"))
            .arg(headers.to_string())
            .args(["", "hold", &json!(["open", url]).to_string()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let answer = serde_json::from_str(&line).unwrap_or_else(|_| panic!("{line}"));
        (Self { child }, answer)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn direct_mode_gives_each_mcp_session_its_own_browser_removed_when_the_session_ends() {
    if !docker_ready() {
        return;
    }
    let port = simple_site("Direct page", "Hello, driver");
    let dir = tempfile::tempdir().unwrap();
    let served = serve(
        &json!({"turns": []}),
        dir.path(),
        &["--direct", "--allow", &format!("127.0.0.1:{port}")],
    );
    let good = json!({"Authorization": format!("Bearer {TOKEN}")});
    let open = json!(["open", format!("http://127.0.0.1:{port}/")]).to_string();
    let mut names = Vec::new();
    for _ in 0..2 {
        let since = std::time::SystemTime::now();
        let session = sdk(
            &served,
            &good,
            &["", "direct", &open, r#"["get", "title"]"#],
        );
        assert_eq!(
            session["tools"],
            json!(["agent_browser", "read_output"]),
            "{session}"
        );
        assert_eq!(
            session["outputs"][1]["texts"][0], "Direct page",
            "{session}"
        );
        // The event log's resolution is a second: leave out the earlier session's browser.
        let started: Vec<String> = started_since(served.child.id(), since)
            .into_iter()
            .filter(|name| !names.contains(name))
            .collect();
        assert_eq!(started.len(), 1, "one browser per session: {started:?}");
        assert!(
            wait_until_removed(&started[0], since, Duration::from_secs(15)),
            "the session ended but its browser stayed"
        );
        names.push(started[0].clone());
    }
    assert_ne!(names[0], names[1], "two sessions shared a browser");
}

#[test]
fn a_direct_browser_ended_while_its_session_is_open_gives_its_slot_back() {
    if !docker_ready() {
        return;
    }
    let port = simple_site("Direct page", "Hello, driver");
    let dir = tempfile::tempdir().unwrap();
    let served = serve(
        &json!({"turns": []}),
        dir.path(),
        &[
            "--direct",
            "--allow",
            &format!("127.0.0.1:{port}"),
            "--max-concurrent-tasks",
            "1",
            "--queue-timeout",
            "0",
            "--direct-idle-timeout",
            "10",
        ],
    );
    let url = format!("http://127.0.0.1:{port}/");
    let since = std::time::SystemTime::now();
    let (_first, answer) = Held::open(&served, &url);
    assert_eq!(answer["outputs"][0]["is_error"], false, "{answer}");
    let started = started_since(served.child.id(), since);
    assert_eq!(started.len(), 1, "{started:?}");
    // The first session stays open but idle; its browser ends at its idle time.
    assert!(
        wait_until_removed(&started[0], since, Duration::from_secs(90)),
        "being idle did not end the first browser"
    );
    // With capacity 1 and no queue, a second session gets a browser only if the first one's
    // slot went with its browser.
    let (_second, answer) = Held::open(&served, &url);
    assert_eq!(answer["outputs"][0]["is_error"], false, "{answer}");
    let metrics = served.metrics(TOKEN);
    assert_eq!(metric(&metrics, "airlock_direct_sessions"), 1, "{metrics}");
}

#[test]
fn sigterm_removes_every_open_direct_sessions_browser_before_the_server_exits() {
    if !docker_ready() {
        return;
    }
    let port = simple_site("Direct page", "Hello, driver");
    let dir = tempfile::tempdir().unwrap();
    let mut served = serve(
        &json!({"turns": []}),
        dir.path(),
        &["--direct", "--allow", &format!("127.0.0.1:{port}")],
    );
    let url = format!("http://127.0.0.1:{port}/");
    let (_first, first) = Held::open(&served, &url);
    let (_second, second) = Held::open(&served, &url);
    assert_eq!(first["outputs"][0]["is_error"], false, "{first}");
    assert_eq!(second["outputs"][0]["is_error"], false, "{second}");
    let pid = served.child.id();
    assert_eq!(containers_of(pid).len(), 2);
    signal(pid, "-TERM");
    let status = served.child.wait().unwrap();
    assert!(status.success(), "{status}");
    // Gone before the server exited, not eventually.
    assert_eq!(containers_of(pid), Vec::<String>::new());
}
