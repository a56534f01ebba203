//! Running `airlock task` with a scripted worker, and reading its result.

use std::path::Path;
use std::process::{Command, Output};

use airlock_testkit::site::Page;
use serde_json::{Value, json};

pub(crate) fn page(body: &str) -> Page {
    (
        "200 OK",
        String::new(),
        format!("<!doctype html><html><head><title>Lab</title></head><body>{body}</body></html>"),
    )
}

/// `airlock task … --json` with a script; returns the parsed result and the process output.
pub(crate) fn task(dir: &Path, script: &Value, args: &[&str]) -> (Value, Output) {
    let path = dir.join(format!("script-{}.json", std::process::id()));
    std::fs::write(&path, script.to_string()).unwrap();
    let output = Command::new(assert_cmd::cargo::cargo_bin("airlock"))
        .args([
            "task",
            "Do the lab task",
            "--json",
            "--model",
            &format!("script:{}", path.display()),
        ])
        .args(args)
        .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
        .output()
        .unwrap();
    let result = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON result ({e}): {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (result, output)
}

pub(crate) fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

pub(crate) fn call(args: &Value) -> Value {
    json!({"name": "agent_browser", "input": {"args": args}})
}

/// One field (`target` or `reason`) of every refusal in a task result.
pub(crate) fn refusals(result: &Value, field: &str) -> Vec<String> {
    result["egress_refusals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[field].as_str().unwrap().to_owned())
        .collect()
}

pub(crate) fn no_task_containers_left() {
    let out = Command::new("docker")
        .args(["ps", "-aq", "--filter", "label=airlock.task"])
        .output()
        .unwrap();
    assert!(out.stdout.is_empty(), "task containers were left behind");
}
