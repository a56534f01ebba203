//! `airlock proxy` as a user runs it: the real binary on a real socket, stopped by SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};

#[test]
fn logs_each_decision_and_removes_its_socket_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("egress.sock");
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("airlock"))
        .args(["proxy", "--json", "--socket"])
        .arg(&socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    assert!(first.contains("listening on"), "{first}");

    let mut stream = UnixStream::connect(&socket).unwrap();
    stream
        .write_all(b"GET http://10.9.9.9/x?token=secret HTTP/1.1\r\nHost: 10.9.9.9\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 403"), "{response}");

    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let decision: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(decision["verdict"], "refuse");
    assert_eq!(decision["via"], "FORWARD");
    assert_eq!(
        decision["target"], "http://10.9.9.9/x",
        "the query is not logged"
    );
    assert_eq!(decision["class"], "private");

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(child.wait().unwrap().success());
    assert!(!socket.exists(), "the socket was left behind");
}

#[test]
fn an_existing_socket_path_is_an_error_naming_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let taken = dir.path().join("taken");
    std::fs::write(&taken, "").unwrap();
    let output = Command::new(assert_cmd::cargo::cargo_bin("airlock"))
        .args(["proxy", "--socket"])
        .arg(&taken)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("already exists") && stderr.contains("--socket"),
        "{stderr}"
    );
    assert!(taken.exists(), "an existing file must not be removed");
}
