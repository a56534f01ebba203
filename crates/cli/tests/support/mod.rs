//! Shared by the `airlock` binary's tests: starting a task and waiting for its first step. The
//! Docker gate, the lab site and the DNS responder are in `airlock-testkit`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::Command;

/// Start `airlock task` with a script, and return once its first step has begun.
pub fn spawn_task_at_first_step(
    script_path: &std::path::Path,
    extra: &[&str],
) -> std::process::Child {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("airlock"))
        .args([
            "task",
            "wait",
            "--model",
            &format!("script:{}", script_path.display()),
        ])
        .args(extra)
        .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("step 1/") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "airlock ended before its first step"
        );
    }
    // Keep draining stderr so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in stderr.lines() {});
    child
}
