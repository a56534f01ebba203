//! `airlock proxy` as a user runs it: the real binary on a real socket, stopped by SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};

/// Start `airlock proxy` with the arguments `configure` adds; return it and the first line it
/// logs, which says where it listens once it does.
fn start_proxy(configure: impl FnOnce(&mut Command) -> &mut Command) -> (Child, String) {
    let mut command = proxy_command();
    command.arg("proxy");
    let mut child = configure(&mut command)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    // Keep the pipe open: the proxy logs again when it stops, and a closed pipe would fail that.
    child.stderr = Some(stderr.into_inner());
    (child, first)
}

/// Stop it with SIGTERM, as a service manager would; it must exit cleanly.
fn terminate(mut child: Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(child.wait().unwrap().success());
}

#[test]
fn logs_each_decision_and_removes_its_socket_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("egress.sock");
    let (mut child, first) = start_proxy(|proxy| proxy.arg("--json").arg("--socket").arg(&socket));
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

    terminate(child);
    assert!(!socket.exists(), "the socket was left behind");
}

#[test]
fn an_existing_socket_path_is_an_error_naming_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let taken = dir.path().join("taken");
    std::fs::write(&taken, "").unwrap();
    let output = proxy_command()
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

#[test]
fn handed_off_connections_are_served_and_both_sockets_removed_on_sigterm() {
    // A site on this machine, opened by one exact allow entry.
    let site = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let site_port = site.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in site.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut head = Vec::new();
            let mut byte = [0_u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
            );
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("egress.sock");
    let handoff = dir.path().join("handoff.sock");
    let (mut child, first) = start_proxy(|proxy| {
        proxy
            .args(["--allow", &format!("127.0.0.1:{site_port}"), "--socket"])
            .arg(&socket)
            .arg("--handoff-socket")
            .arg(&handoff)
    });
    assert!(first.contains("hand-offs on"), "{first}");

    // What airlock-relay does: accept the browser's connection, pass the socket itself.
    let channel = UnixStream::connect(&handoff).unwrap();
    let relay = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut browser = std::net::TcpStream::connect(relay.local_addr().unwrap()).unwrap();
    let (accepted, _) = relay.accept().unwrap();
    airlock_relay::send_stream(&channel, &accepted).unwrap();
    drop(accepted);
    write!(
        browser,
        "GET http://127.0.0.1:{site_port}/ HTTP/1.1\r\nHost: 127.0.0.1:{site_port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    browser.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with("hello"), "{response}");

    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains(" allow FORWARD "), "{line}");
    // Then the connection's close, with what it carried: the site's 62-byte answer came down.
    let mut closed = String::new();
    stdout.read_line(&mut closed).unwrap();
    assert!(closed.contains(" closed FORWARD "), "{closed}");
    assert!(closed.trim_end().ends_with("bytes up, 62 down"), "{closed}");

    terminate(child);
    assert!(
        !socket.exists() && !handoff.exists(),
        "a socket was left behind"
    );
}

#[test]
fn an_existing_hand_off_path_names_its_own_flag() {
    let dir = tempfile::tempdir().unwrap();
    let taken = dir.path().join("taken");
    std::fs::write(&taken, "").unwrap();
    let socket = dir.path().join("free.sock");
    let output = proxy_command()
        .args(["proxy", "--socket"])
        .arg(&socket)
        .arg("--handoff-socket")
        .arg(&taken)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("already exists") && stderr.contains("--handoff-socket"),
        "{stderr}"
    );
    assert!(!socket.exists(), "a failed start left its socket");
}

/// `airlock`, run as it is (as root, `cargo test` in CI, without the drop to an unprivileged
/// user, which would not reach this test's private directories; `cargo xtask integration`
/// proves the drop).
fn proxy_command() -> Command {
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("airlock"));
    command.env("AIRLOCK_PRIVSEP_CHILD", "1");
    command
}

#[test]
fn a_parents_route_carries_what_the_stand_alone_proxy_allows_and_its_log_says_so() {
    use airlock_testkit::parents::{PASSWORD, USER, squid};
    let site = airlock_testkit::site::simple_site("Lab", "Through the parent.");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let squid = runtime.block_on(squid(""));
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("corp");
    std::fs::write(&credentials, format!("{USER}:{PASSWORD}\n")).unwrap();
    let socket = dir.path().join("egress.sock");
    let (mut child, first) = start_proxy(|proxy| {
        proxy
            .args(["--json", "--allow", &format!("127.0.0.1:{site}")])
            .args(["--parent", &format!("corp=http://{}", squid.address)])
            .arg("--parent-credentials")
            .arg(format!("corp=file:{}", credentials.display()))
            .args(["--route", "corp", "--socket"])
            .arg(&socket)
    });
    assert!(first.contains("listening on"), "{first}");
    let mut stream = UnixStream::connect(&socket).unwrap();
    write!(
        stream,
        "GET http://127.0.0.1:{site}/ HTTP/1.1\r\nHost: 127.0.0.1:{site}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.contains("Through the parent."), "{response}");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let decision: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(decision["verdict"], "allow", "{line}");
    assert_eq!(decision["route"], "corp", "{line}");
    runtime.block_on(squid.logged(&format!("CONNECT 127.0.0.1:{site}")));
    terminate(child);
}

#[test]
fn an_https_parent_is_reached_with_the_ca_given_and_a_bad_ca_file_is_named() {
    use airlock_testkit::parents::{PASSWORD, USER, squid_tls};
    let site = airlock_testkit::site::simple_site("Lab", "Through the parent's TLS.");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let squid = runtime.block_on(squid_tls(""));
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("corp");
    std::fs::write(&credentials, format!("{USER}:{PASSWORD}\n")).unwrap();
    let socket = dir.path().join("egress.sock");
    let parent = |proxy: &mut Command| {
        proxy
            .args(["--allow", &format!("127.0.0.1:{site}")])
            .args(["--parent", &format!("corp=https://{}", squid.address)])
            .arg("--parent-credentials")
            .arg(format!("corp=file:{}", credentials.display()))
            .args(["--route", "corp", "--socket"])
            .arg(&socket);
    };
    let key = dir.path().join("key.pem");
    std::fs::write(
        &key,
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let mut refused = proxy_command();
    refused.arg("proxy").arg("--ca-cert").arg(&key);
    parent(&mut refused);
    let output = refused.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--ca-cert") && stderr.contains("key.pem"),
        "{stderr}"
    );

    let (child, first) = start_proxy(|proxy| {
        parent(proxy);
        proxy.arg("--ca-cert").arg(squid.tls_ca())
    });
    assert!(first.contains("listening on"), "{first}");
    let mut stream = UnixStream::connect(&socket).unwrap();
    write!(
        stream,
        "GET http://127.0.0.1:{site}/ HTTP/1.1\r\nHost: 127.0.0.1:{site}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.contains("Through the parent's TLS."), "{response}");
    runtime.block_on(squid.logged(&format!("CONNECT 127.0.0.1:{site}")));
    terminate(child);
}
