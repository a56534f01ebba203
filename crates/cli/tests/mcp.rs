//! `airlock mcp` as an MCP client uses it: a child process on stdio, with a scripted worker and a
//! real container. Needs Docker, the image and a non-root user (see the driver's docker tests);
//! `cargo xtask integration` runs it with those required.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use airlock_testkit::docker::{containers_of, docker_ready, wait_until_removed};
use airlock_testkit::site::simple_site;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
}

impl Client {
    fn start(script: &Value, site_port: u16, dir: &std::path::Path) -> Self {
        let path = dir.join("script.json");
        std::fs::write(&path, script.to_string()).unwrap();
        let model = format!("script:{}", path.display());
        let allow = format!("127.0.0.1:{site_port}");
        Self::spawn(&["mcp", "--model", &model, "--allow", &allow])
    }

    /// `airlock mcp` with these arguments; without a warm pool unless they ask for one, so a
    /// test's container counts are its tasks' alone.
    fn spawn(args: &[&str]) -> Self {
        Self::spawn_with(args, None)
    }

    /// As [`Client::spawn`], sending the server's log lines (at `RUST_LOG=filter`) to `log`.
    fn spawn_with(args: &[&str], log: Option<(&str, mpsc::Sender<String>)>) -> Self {
        let mut command = Command::new(assert_cmd::cargo::cargo_bin("airlock"));
        command.args(args);
        if !args.contains(&"--pool-size") {
            command.args(["--pool-size", "0"]);
        }
        command
            .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        match &log {
            Some((filter, _)) => command.env("RUST_LOG", filter).stderr(Stdio::piped()),
            None => command.stderr(Stdio::inherit()),
        };
        let mut child = command.spawn().unwrap();
        if let Some((_, sender)) = log {
            let stderr = child.stderr.take().unwrap();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    eprintln!("{line}");
                    let _ = sender.send(line);
                }
            });
        }
        let stdout: ChildStdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(serde_json::from_str(&line).unwrap()).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        Self {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    fn next(&self) -> Value {
        self.lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the server answered within 60 s")
    }

    /// Read until the response with this id, returning it and the notifications before it.
    fn response(&self, id: u64) -> (Value, Vec<Value>) {
        let mut notes = Vec::new();
        loop {
            let message = self.next();
            if message["id"] == id {
                return (message, notes);
            }
            notes.push(message);
        }
    }

    fn initialize(&mut self) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}));
        let (init, _) = self.response(1);
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        init
    }

    /// Close stdin and wait for the server to exit.
    fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        self.child.wait().unwrap()
    }
}

/// `browser_task` with an `output_schema` and browser settings on stdio: the answer is the
/// structured content's `data`; a bad schema or setting is refused naming the field, before any
/// browser starts.
#[test]
fn browser_task_answers_with_data_matching_its_output_schema() {
    if !docker_ready() {
        return;
    }
    let port = simple_site("Prices", "A pot of tea costs 4 euros.");
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["open", format!("http://127.0.0.1:{port}/")]}}]},
        {"expect": {"shown_contains": ["✓ Prices"]},
         "tool_calls": [{"name": "give_answer", "input": {"data": {"item": "tea", "euros": 4}, "report": "Tea is 4 euros."}}]}
    ]});
    let mut client = Client::start(&script, port, dir.path());
    client.initialize();
    let schema = json!({"type": "object", "required": ["item", "euros"],
        "properties": {"item": {"type": "string"}, "euros": {"type": "number"}}});
    client.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "browser_task", "arguments": {"task": "What does tea cost?", "output_schema": {"type": "integr"}}}}));
    let (refused, _) = client.response(2);
    assert!(
        refused
            .to_string()
            .contains("output_schema is not a JSON Schema"),
        "{refused}"
    );
    // So is a browser setting out of range.
    client.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "browser_task", "arguments": {"task": "What does tea cost?", "browser": {"viewport": {"width": 9000, "height": 600}}}}}));
    let (refused, _) = client.response(4);
    assert!(
        refused
            .to_string()
            .contains("browser.viewport 9000x600 is out of range"),
        "{refused}"
    );
    // A task with settings runs with them applied (read back from pages in browser_settings.rs).
    client.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "browser_task", "arguments": {"task": "What does tea cost?", "output_schema": schema,
            "browser": {"viewport": {"width": 800, "height": 600}, "color_scheme": "dark"}}}}));
    let (call, _) = client.response(3);
    let structured = &call["result"]["structuredContent"];
    assert_eq!(
        structured["data"],
        json!({"item": "tea", "euros": 4}),
        "{call}"
    );
    assert_eq!(call["result"]["content"][0]["text"], "Tea is 4 euros.");
    assert_eq!(call["result"]["isError"], false);
    let pid = client.child.id();
    assert!(client.finish().success());
    assert_eq!(containers_of(pid).len(), 0);
}

#[test]
fn initialize_list_and_call_browser_task_with_progress_and_an_image() {
    if !docker_ready() {
        return;
    }
    let port = simple_site("MCP page", "Hello from the lab");
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["open", format!("http://127.0.0.1:{port}/")]}}]},
        {"expect": {"shown_contains": ["MCP page"]}, "tool_calls": [{"name": "agent_browser", "input": {"args": ["screenshot"], "keep": true}}]},
        {"text": "The page greets the lab."}
    ]});
    let mut client = Client::start(&script, port, dir.path());
    let init = client.initialize();
    assert_eq!(init["result"]["serverInfo"]["name"], "airlock");
    assert!(init["result"]["capabilities"]["tools"].is_object());

    client.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let (list, _) = client.response(2);
    let tool = &list["result"]["tools"][0];
    assert_eq!(tool["name"], "browser_task");
    assert_eq!(tool["inputSchema"]["required"], json!(["task"]));
    assert!(tool["inputSchema"]["properties"]["url"].is_object());

    client.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "browser_task", "arguments": {"task": "Read the page"}, "_meta": {"progressToken": "t1"}}}));
    let (call, notes) = client.response(3);
    let content = call["result"]["content"].as_array().unwrap();
    assert_eq!(content[0]["text"], "The page greets the lab.");
    let image = content
        .iter()
        .find(|c| c["type"] == "image")
        .expect("an image came back");
    assert_eq!(image["mimeType"], "image/png");
    assert!(
        image["data"].as_str().unwrap().starts_with("iVBORw0KGgo"),
        "not a PNG"
    );
    let progress: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 2, "{notes:?}");
    assert_eq!(progress[0]["params"]["progressToken"], "t1");
    assert_eq!(progress[1]["params"]["progress"], 2.0);
    // The same result for programs: how it ended and what the worker was shown.
    let structured = &call["result"]["structuredContent"];
    assert_eq!(structured["ended"], "completed", "{call}");
    assert_eq!(structured["steps_used"], 2);
    assert_eq!(structured["screenshots"], 1);
    assert_eq!(structured["context"]["images_shown"], 1);
    assert!(structured["context"]["chars_shown"].as_u64().unwrap() > 0);
    assert_eq!(structured["total_tokens"], 0, "a script reports no usage");

    let pid = client.child.id();
    assert!(client.finish().success());
    assert_eq!(containers_of(pid).len(), 0);
}

#[test]
fn a_cancelled_call_and_a_closed_stdin_leave_no_container() {
    if !docker_ready() {
        return;
    }
    let port = simple_site("MCP page", "Hello from the lab");
    let dir = tempfile::tempdir().unwrap();
    let wait =
        json!({"tool_calls": [{"name": "agent_browser", "input": {"args": ["wait", "60000"]}}]});
    let script = json!({"turns": [wait, wait]});
    let mut client = Client::start(&script, port, dir.path());
    client.initialize();
    let pid = client.child.id();
    client.send(
        &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "browser_task", "arguments": {"task": "wait"}, "_meta": {"progressToken": 9}}}),
    );
    // The first progress notification means the container is up and the command is running.
    let started = client.next();
    assert_eq!(started["method"], "notifications/progress", "{started}");
    let running = containers_of(pid);
    assert_eq!(running.len(), 1);
    let cancelled_at = std::time::SystemTime::now();
    client.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "test"}}));
    // Cancelling alone removes the container: stdin is still open and the server still runs.
    assert!(
        wait_until_removed(
            &running[0],
            cancelled_at,
            std::time::Duration::from_secs(30)
        ),
        "cancelling the call did not remove its container"
    );
    assert!(
        client.child.try_wait().unwrap().is_none(),
        "the server exited"
    );
    assert_eq!(containers_of(pid).len(), 0);

    // A second task, left running when stdin closes: the server removes it before exiting.
    client.send(
        &json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {
        "name": "browser_task", "arguments": {"task": "wait again"}, "_meta": {"progressToken": 10}}}),
    );
    // (A late answer to the cancelled call, if the server sends one, may come first.)
    while client.next()["params"]["progressToken"] != 10 {}
    assert_eq!(containers_of(pid).len(), 1);
    assert!(client.finish().success());
    assert_eq!(
        containers_of(pid).len(),
        0,
        "closing stdin left the running task's container behind"
    );
}

#[test]
fn direct_mode_gives_the_client_its_own_sealed_browser() {
    if !docker_ready() {
        return;
    }
    let port = simple_site("MCP page", "Hello from the lab");
    let mut client = Client::spawn(&[
        "mcp",
        "--direct",
        "--allow",
        &format!("127.0.0.1:{port}"),
        "--direct-max-steps",
        "3",
    ]);
    client.initialize();
    client.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let (list, _) = client.response(2);
    assert_eq!(list["result"]["tools"][0]["name"], "agent_browser");
    assert_eq!(
        list["result"]["tools"][0]["inputSchema"]["required"],
        json!(["args"])
    );
    // Long outputs come as previews the calling agent pages with this tool.
    assert_eq!(list["result"]["tools"][1]["name"], "read_output");
    assert_eq!(
        list["result"]["tools"][1]["inputSchema"]["required"],
        json!(["id"])
    );
    let pid = client.child.id();
    let mut id = 10;
    let mut call = |client: &mut Client, args: Value| {
        id += 1;
        client.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "agent_browser", "arguments": {"args": args}}}));
        client.response(id).0
    };
    let opened = call(
        &mut client,
        json!(["open", format!("http://127.0.0.1:{port}/")]),
    );
    assert_eq!(opened["result"]["isError"], false, "{opened}");
    assert!(
        opened["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("MCP page"),
        "{opened}"
    );
    let refused = call(&mut client, json!(["open", "file:///etc/passwd"]));
    assert_eq!(refused["result"]["isError"], true);
    assert!(
        refused["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("scheme `file:` is refused")
    );
    assert_eq!(containers_of(pid).len(), 1, "one browser for the session");
    client.send(&json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "read_output", "arguments": {"id": "out-4"}}}));
    let unknown = client.response(99).0;
    assert_eq!(unknown["result"]["isError"], true, "{unknown}");
    assert!(
        unknown["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("there is no output `out-4`"),
        "{unknown}"
    );
    let over = call(&mut client, json!(["snapshot"]));
    assert!(
        over["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains(
                "Step limit reached: this session has used all 3 commands (direct_max_steps)"
            ),
        "{over}"
    );
    assert!(client.finish().success());
    assert_eq!(
        containers_of(pid).len(),
        0,
        "the session's browser outlived the server"
    );
}

/// A direct session is held to its own limits, not a task's: with a task time limit of 5 s and
/// a step limit of 2, it runs 45 commands and lasts until it has been idle for its idle time;
/// then its browser is removed while the server runs, and the next call says why.
#[test]
fn a_direct_session_lasts_until_left_idle_not_to_the_task_limits() {
    if !docker_ready() {
        return;
    }
    let port = simple_site("MCP page", "Hello from the lab");
    let mut client = Client::spawn(&[
        "mcp",
        "--direct",
        "--allow",
        &format!("127.0.0.1:{port}"),
        "--timeout",
        "5",
        "--max-steps",
        "2",
        "--direct-idle-timeout",
        "10",
    ]);
    client.initialize();
    let pid = client.child.id();
    let started_at = std::time::SystemTime::now();
    client.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "agent_browser", "arguments": {"args": ["open", format!("http://127.0.0.1:{port}/")]}}}));
    let (opened, _) = client.response(3);
    assert_eq!(opened["result"]["isError"], false, "{opened}");
    for id in 4..49 {
        client.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "agent_browser", "arguments": {"args": ["get", "title"]}}}));
        let (titled, _) = client.response(id);
        assert_eq!(titled["result"]["isError"], false, "call {id}: {titled}");
    }
    let browser = containers_of(pid);
    assert_eq!(browser.len(), 1);
    // No more calls: being idle removes the browser, and the server keeps running.
    assert!(
        wait_until_removed(&browser[0], started_at, std::time::Duration::from_secs(90)),
        "the browser outlived its idle time"
    );
    assert!(
        client.child.try_wait().unwrap().is_none(),
        "the server exited"
    );
    client.send(&json!({"jsonrpc": "2.0", "id": 50, "method": "tools/call", "params": {"name": "agent_browser", "arguments": {"args": ["snapshot"]}}}));
    let (late, _) = client.response(50);
    assert_eq!(late["result"]["isError"], true, "{late}");
    assert!(
        late["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("idle for 10 s (direct_idle_timeout)"),
        "{late}"
    );
    assert!(client.finish().success());
    assert_eq!(containers_of(pid).len(), 0);
}

// The warm pool: browsers started before the task asks, each used by one task.

/// `airlock mcp --pool-size SIZE` with a scripted worker (and `--allow 127.0.0.1:PORT`), its
/// pool's log lines sent to the returned receiver.
fn pooled(
    dir: &std::path::Path,
    script: &Value,
    allow: Option<u16>,
    size: &str,
) -> (Client, mpsc::Receiver<String>) {
    let path = dir.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let model = format!("script:{}", path.display());
    let allow = allow.map(|port| format!("127.0.0.1:{port}"));
    let mut args = vec!["mcp", "--model", &model, "--pool-size", size];
    if let Some(allow) = &allow {
        args.extend(["--allow", allow.as_str()]);
    }
    let (sender, log) = mpsc::channel();
    let client = Client::spawn_with(&args, Some(("airlock_driver_docker::pool=info", sender)));
    (client, log)
}

/// A page that shows, in its title, what an earlier visit left (localStorage and a cookie), then
/// leaves both behind.
fn storage_site() -> u16 {
    let page = "<html><head><title>unset</title></head><body><script>\
        document.title = (localStorage.getItem('left') || 'none') + '|' + (document.cookie || 'nocookie');\
        localStorage.setItem('left', 'stored'); document.cookie = 'left=cookie; max-age=3600';\
        </script></body></html>";
    airlock_testkit::site::site(move |_| {
        std::collections::HashMap::from([("/", ("200 OK", String::new(), page.to_owned()))])
    })
    .0
}

/// A log line without its terminal colour codes (`ESC [ … m`).
fn without_colours(line: &str) -> String {
    let mut plain = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

/// Wait for the server's log to say a warm browser is ready; its container's name.
fn next_warm(log: &mpsc::Receiver<String>) -> String {
    loop {
        let line = log
            .recv_timeout(Duration::from_secs(90))
            .expect("a warm browser became ready within 90 s");
        let line = without_colours(&line);
        if line.contains("a warm browser is ready") {
            let name = line
                .split("container=")
                .nth(1)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap();
            return name.to_owned();
        }
    }
}

fn call_task(client: &mut Client, id: u64) -> Value {
    client.send(
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "browser_task", "arguments": {"task": "Read the page"}}}),
    );
    client.response(id).0
}

#[test]
fn two_tasks_from_the_pool_start_warm_and_share_nothing() {
    if !docker_ready() {
        return;
    }
    let port = storage_site();
    let dir = tempfile::tempdir().unwrap();
    let open = json!({"name": "agent_browser", "input": {"args": ["open", format!("http://127.0.0.1:{port}/")]}});
    let title = json!({"name": "agent_browser", "input": {"args": ["get", "title"]}});
    let script = json!({"turns": [
        // Task 1: a first visit finds nothing; a second, in the same task, finds what it left.
        {"tool_calls": [open, title]},
        {"expect": {"shown_contains": ["none|nocookie"]}, "tool_calls": [open, title]},
        {"expect": {"shown_contains": ["stored|left=cookie"]}, "text": "task 1 done"},
        // Task 2, on another warm browser: nothing from task 1.
        {"tool_calls": [open, title]},
        {"expect": {"shown_contains": ["none|nocookie"], "shown_not_contains": ["stored"]}, "text": "task 2 done"},
    ]});
    let (mut client, log) = pooled(dir.path(), &script, Some(port), "1");
    client.initialize();
    let pid = client.child.id();
    let mut used = Vec::new();
    for (id, report) in [(2, "task 1 done"), (3, "task 2 done")] {
        let warm = next_warm(&log);
        let egress = airlock_testkit::docker::egress_dir_of(&warm);
        let before = std::time::SystemTime::now();
        let answer = call_task(&mut client, id);
        let result = &answer["result"];
        assert_eq!(result["content"][0]["text"], report, "{answer}");
        assert_eq!(
            result["structuredContent"]["timings"]["browser_warm"], true,
            "{answer}"
        );
        assert!(
            wait_until_removed(&warm, before, Duration::from_secs(30)),
            "the warm browser {warm} outlived its task"
        );
        used.push((warm, egress));
    }
    assert_ne!(used[0].0, used[1].0, "two tasks shared a container");
    assert_ne!(used[0].1, used[1].1, "two tasks shared a proxy");
    // The pool refilled after the second task; closing stdin removes that browser too.
    next_warm(&log);
    assert!(client.finish().success());
    assert_eq!(
        containers_of(pid).len(),
        0,
        "a warm browser outlived the server"
    );
}

#[test]
fn a_dead_warm_browser_is_replaced_without_the_task_noticing() {
    if !docker_ready() {
        return;
    }
    let port = simple_site("MCP page", "Hello from the lab");
    let dir = tempfile::tempdir().unwrap();
    let open = json!({"name": "agent_browser", "input": {"args": ["open", format!("http://127.0.0.1:{port}/")]}});
    let script = json!({"turns": [
        {"tool_calls": [open]},
        {"expect": {"shown_contains": ["MCP page"]}, "text": "seen after a killed container"},
        {"tool_calls": [open]},
        {"expect": {"shown_contains": ["MCP page"]}, "text": "seen after a killed browser"},
    ]});
    let (mut client, log) = pooled(dir.path(), &script, Some(port), "1");
    client.initialize();
    // The whole container killed while it waits.
    let warm = next_warm(&log);
    let killed = Command::new("docker")
        .args(["kill", &warm])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(killed.success());
    let answer = call_task(&mut client, 2);
    assert_eq!(
        answer["result"]["content"][0]["text"], "seen after a killed container",
        "{answer}"
    );
    assert_eq!(answer["result"]["isError"], false);
    // The dead one was not used: the pool held no other, so the task started cold.
    assert_eq!(
        answer["result"]["structuredContent"]["timings"]["browser_warm"], false,
        "{answer}"
    );
    // Chromium alone killed inside a waiting container (the container still runs).
    let warm = next_warm(&log);
    // SIGKILL is delivered after pkill returns, and a renderer may still be exiting: kill again
    // until none is left (bounded), so the task below meets a container with no Chromium at all.
    let kill_until_gone = "for _ in $(seq 100); do \
        pkill -9 -x chromium || exit 0; sleep 0.05; done; exit 1";
    let gone = Command::new("docker")
        .args(["exec", &warm, "sh", "-c", kill_until_gone])
        .status()
        .unwrap();
    assert!(gone.success(), "Chromium still runs in {warm}");
    let answer = call_task(&mut client, 3);
    assert_eq!(
        answer["result"]["content"][0]["text"], "seen after a killed browser",
        "{answer}"
    );
    assert_eq!(answer["result"]["isError"], false);
    // Its Chromium was found dead on take: the task is not told it came warm.
    assert_eq!(
        answer["result"]["structuredContent"]["timings"]["browser_warm"], false,
        "{answer}"
    );
    let pid = client.child.id();
    assert!(client.finish().success());
    assert_eq!(containers_of(pid).len(), 0);
}

#[test]
fn a_killed_servers_warm_browsers_are_removed_by_cleanup() {
    if !docker_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mut client, log) = pooled(dir.path(), &json!({"turns": []}), None, "2");
    client.initialize();
    let first = next_warm(&log);
    let second = next_warm(&log);
    let pid = client.child.id();
    assert_eq!(containers_of(pid).len(), 2);
    client.child.kill().unwrap();
    client.child.wait().unwrap();
    let cleaned = Command::new(assert_cmd::cargo::cargo_bin("airlock"))
        .arg("cleanup")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&cleaned.stdout);
    assert!(cleaned.status.success(), "{said}");
    assert!(said.contains(&first) && said.contains(&second), "{said}");
    assert_eq!(
        containers_of(pid).len(),
        0,
        "a SIGKILLed server's warm browsers stayed"
    );
}
