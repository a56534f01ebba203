//! The `airlock-relay` binary against a stand-in proxy that receives with the library: it hands
//! off real connections, marks itself ready, exits when the proxy goes, and names bad flags.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixListener;
use std::process::{Command, Stdio};

use airlock_relay::{Received, receive_stream};

fn relay() -> Command {
    Command::new(env!("CARGO_BIN_EXE_airlock-relay"))
}

#[test]
fn the_relay_hands_off_connections_and_exits_when_the_proxy_goes() {
    let dir = tempfile::tempdir().unwrap();
    let handoff = dir.path().join("handoff.sock");
    let ready = dir.path().join("ready");
    let proxy = UnixListener::bind(&handoff).unwrap();
    let mut child = relay()
        .args(["--listen", "127.0.0.1:0", "--handoff"])
        .arg(&handoff)
        .arg("--ready-file")
        .arg(&ready)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (channel, _) = proxy.accept().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let address = line
        .trim()
        .strip_prefix("airlock-relay: listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    assert!(ready.exists(), "ready line printed before the ready file");

    for round in 0..3_u8 {
        let mut browser = TcpStream::connect(&address).unwrap();
        let Received::Stream(mut handed) = receive_stream(&channel).unwrap() else {
            panic!("expected a handed-off stream");
        };
        assert_eq!(handed.peer_addr().unwrap(), browser.local_addr().unwrap());
        browser.write_all(&[round]).unwrap();
        let mut byte = [0_u8; 1];
        handed.read_exact(&mut byte).unwrap();
        assert_eq!(byte[0], round);
        handed.write_all(b"ok").unwrap();
        drop(handed);
        // The relay kept no copy: closing the proxy's ends the browser's connection.
        let mut answer = Vec::new();
        browser.read_to_end(&mut answer).unwrap();
        assert_eq!(answer, b"ok");
    }

    // The proxy goes away: the relay ends at once, without waiting for another connection.
    drop(channel);
    drop(proxy);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the egress proxy closed the hand-off channel"),
        "{stderr}"
    );
    assert!(TcpStream::connect(&address).is_err(), "still listening");
}

#[test]
fn bad_arguments_name_the_flag_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing-here.sock");
    let cases: [(&[&str], &str); 6] = [
        (&["--handoff", "/x"], "--listen is required"),
        (
            &["--listen", "127.0.0.1:3128"],
            "--handoff or --copy-to is required",
        ),
        (
            &[
                "--listen",
                "127.0.0.1:3128",
                "--handoff",
                "/x",
                "--copy-to",
                "/y",
            ],
            "give one of --handoff and --copy-to, not both",
        ),
        (
            &["--listen", "localhost:3128", "--handoff", "/x"],
            "--listen must be an IP address and port such as 127.0.0.1:3128",
        ),
        (&["--listen"], "--listen needs a value"),
        (&["--bogus"], "unknown argument \"--bogus\""),
    ];
    for (args, expected) in cases {
        let output = relay().args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(
            stderr.contains("usage: airlock-relay"),
            "{args:?}: {stderr}"
        );
    }
    let output = relay()
        .args(["--listen", "127.0.0.1:0", "--handoff"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot reach the egress proxy's hand-off socket")
            && stderr.contains("nothing-here.sock"),
        "{stderr}"
    );
}

#[test]
fn the_copying_relay_carries_each_connection_to_the_proxy_socket_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("proxy.sock");
    let proxy = UnixListener::bind(&socket).unwrap();
    let ready = dir.path().join("ready");
    let mut child = relay()
        .args(["--listen", "127.0.0.1:0", "--copy-to"])
        .arg(&socket)
        .arg("--ready-file")
        .arg(&ready)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The relay reaches the proxy once before it says it is ready.
    let (probe, _) = proxy.accept().unwrap();
    drop(probe);
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let address = line
        .trim()
        .strip_prefix("airlock-relay: listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    assert!(ready.exists());

    for round in 0..3_u8 {
        let mut browser = TcpStream::connect(&address).unwrap();
        let (mut upstream, _) = proxy.accept().unwrap();
        browser.write_all(&[round, round]).unwrap();
        browser.shutdown(std::net::Shutdown::Write).unwrap();
        // The browser's end of input reaches the proxy as the end of its input.
        let mut seen = Vec::new();
        upstream.read_to_end(&mut seen).unwrap();
        assert_eq!(seen, [round, round]);
        upstream.write_all(b"ok").unwrap();
        drop(upstream);
        let mut answer = Vec::new();
        browser.read_to_end(&mut answer).unwrap();
        assert_eq!(answer, b"ok");
    }

    // The proxy goes away: the next connection finds nothing to copy to, and the relay ends.
    drop(proxy);
    std::fs::remove_file(&socket).unwrap();
    let _browser = TcpStream::connect(&address).unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the egress proxy's socket does not answer"),
        "{stderr}"
    );
}
