//! `airlock task` end to end with a scripted worker and a real container: the JSON result, the
//! saved screenshots, and Ctrl-C removing the container. Needs Docker, the image and a non-root
//! user; `cargo xtask integration` runs it with those required.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::{containers_of, docker_ready};

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

fn site() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let body = "<html><head><title>Task page</title></head><body><p>Opening hours: 9 to 5.</p></body></html>";
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    port
}

fn task_command(dir: &std::path::Path, script: &Value, port: u16) -> Command {
    let path = dir.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("airlock"));
    command
        .args([
            "task",
            "Find the opening hours",
            "--url",
            &format!("http://127.0.0.1:{port}/"),
        ])
        .args([
            "--model",
            &format!("script:{}", path.display()),
            "--allow",
            &format!("127.0.0.1:{port}"),
        ])
        .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml");
    command
}

#[test]
fn the_json_result_and_private_screenshot_files() {
    if !docker_ready() {
        return;
    }
    let port = site();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shots");
    let script = json!({"turns": [
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["open", format!("http://127.0.0.1:{port}/")]}}]},
        {"tool_calls": [
            {"name": "agent_browser", "input": {"args": ["screenshot"], "keep": true}},
            {"name": "agent_browser", "input": {"args": ["open", "http://169.254.169.254/latest/meta-data/"]}}
        ]},
        {"text": "Open 9 to 5, per http://127.0.0.1/."}
    ]});
    let output = task_command(dir.path(), &script, port)
        .args(["--json", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["ended"], "completed");
    assert_eq!(result["report"], "Open 9 to 5, per http://127.0.0.1/.");
    assert_eq!(result["steps_used"], 3);
    assert!(result["timings"]["total_ms"].is_u64());
    let refused = result["egress_refusals"].as_array().unwrap();
    assert!(
        refused
            .iter()
            .any(|r| r["target"].as_str().unwrap().contains("169.254.169.254")),
        "{refused:?}"
    );
    let shot = &result["screenshots"][0];
    assert_eq!(shot["media_type"], "image/png");
    let path = std::path::PathBuf::from(shot["path"].as_str().unwrap());
    assert!(std::fs::read(&path).unwrap().starts_with(b"\x89PNG"));
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("step 1/40: agent_browser open"), "{stderr}");

    // A second run never overwrites the first one's file.
    let again = task_command(dir.path(), &script, port)
        .args(["--json", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let second: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_ne!(second["screenshots"][0]["path"], shot["path"]);
}

#[test]
fn ctrl_c_cancels_the_task_and_removes_its_container() {
    if !docker_ready() {
        return;
    }
    let port = site();
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "agent_browser", "input": {"args": ["wait", "60000"]}}]}
    ]});
    let mut child = task_command(dir.path(), &script, port)
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("step 1/") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "airlock ended before its first step"
        );
    }
    assert_eq!(containers_of(pid), 1);
    assert!(
        Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "a cancelled task exits 1");
    assert_eq!(containers_of(pid), 0, "Ctrl-C left the container behind");
}
