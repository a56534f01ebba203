//! Connections handed off on `handoff.sock` (as `airlock-relay` does in the container): served
//! exactly like connections to `proxy.sock`, under the same policy; anything but one connected TCP
//! socket per message closes that channel and nothing else.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream as StdUnixStream;

use airlock_policy::{EgressPolicy, Profile};
use airlock_proxy::{EgressProxy, ProxyConfig, ProxyLimits};
use support::{Harness, http_upstream, read_head, within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn policy() -> EgressPolicy {
    EgressPolicy::new(Profile::Public, None, []).unwrap()
}

/// What a relay does: accept a browser's TCP connection and pass the socket to the proxy. Returns
/// the browser's end.
async fn hand_off(channel: &StdUnixStream) -> TcpStream {
    let relay = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let browser = TcpStream::connect(relay.local_addr().unwrap())
        .await
        .unwrap();
    let (accepted, _) = relay.accept().await.unwrap();
    airlock_relay::send_stream(channel, &accepted).unwrap();
    // The relay keeps no copy: the proxy's is the only one left.
    drop(accepted);
    browser
}

async fn exchange(mut browser: TcpStream, request: &str) -> String {
    browser.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    within(browser.read_to_end(&mut response)).await.unwrap();
    String::from_utf8_lossy(&response).into_owned()
}

#[tokio::test]
async fn handed_off_connections_are_served_under_the_same_policy() {
    let (upstream, seen) = http_upstream().await;
    let harness = Harness::start(policy(), ProxyLimits::default());
    harness.connector.route("93.184.216.34:80", upstream);
    harness.resolver.answer("site.test", &[&["93.184.216.34"]]);
    let channel = StdUnixStream::connect(harness.proxy.handoff_path().unwrap()).unwrap();

    let allowed = exchange(
        hand_off(&channel).await,
        "GET http://site.test/ HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(allowed.starts_with("HTTP/1.1 200"), "{allowed}");
    assert!(allowed.ends_with("hello from upstream"), "{allowed}");
    assert_eq!(seen.lock().unwrap().len(), 1);

    // The browser's loopback is still loopback: refused, and nothing is dialled for it.
    let mut browser = hand_off(&channel).await;
    browser
        .write_all(b"CONNECT 127.0.0.1:8080 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n")
        .await
        .unwrap();
    let refused = read_head(&mut browser).await;
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    assert_eq!(harness.connector.attempted().len(), 1);

    let stats = harness.proxy.stats();
    assert_eq!(stats.handed_off, 2, "{stats:?}");
    assert_eq!(stats.connections, 2, "{stats:?}");
    assert_eq!(stats.refusals.get("loopback"), Some(&1), "{stats:?}");
}

#[tokio::test]
async fn handed_off_connections_count_against_the_connection_limit() {
    let harness = Harness::start(
        policy(),
        ProxyLimits {
            max_connections: 1,
            ..ProxyLimits::default()
        },
    );
    let channel = StdUnixStream::connect(harness.proxy.handoff_path().unwrap()).unwrap();
    let _held = hand_off(&channel).await;
    let mut second = hand_off(&channel).await;
    let mut response = Vec::new();
    within(second.read_to_end(&mut response)).await.unwrap();
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 503"), "{response}");
    assert_eq!(harness.proxy.stats().busy_rejections, 1);
}

#[tokio::test]
async fn a_hand_off_that_is_not_a_tcp_socket_closes_its_channel_and_nothing_else() {
    let (upstream, _seen) = http_upstream().await;
    let harness = Harness::start(policy(), ProxyLimits::default());
    harness.connector.route("93.184.216.34:80", upstream);
    harness.resolver.answer("site.test", &[&["93.184.216.34"]]);

    // A Unix socket is not a browser's connection.
    let bad_channel = StdUnixStream::connect(harness.proxy.handoff_path().unwrap()).unwrap();
    let (not_tcp, _peer) = StdUnixStream::pair().unwrap();
    airlock_relay::send_stream(&bad_channel, &not_tcp).unwrap();
    let mut bad_channel = tokio::net::UnixStream::from_std({
        bad_channel.set_nonblocking(true).unwrap();
        bad_channel
    })
    .unwrap();
    let mut rest = Vec::new();
    within(bad_channel.read_to_end(&mut rest)).await.unwrap();
    assert!(rest.is_empty());
    let stats = harness.proxy.stats();
    assert_eq!(stats.handoff_refusals, 1, "{stats:?}");
    assert_eq!(stats.connections, 0, "{stats:?}");

    // Another channel, and connections on proxy.sock, still work.
    let channel = StdUnixStream::connect(harness.proxy.handoff_path().unwrap()).unwrap();
    let request = "GET http://site.test/ HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n";
    assert!(
        exchange(hand_off(&channel).await, request)
            .await
            .starts_with("HTTP/1.1 200")
    );
    assert!(harness.exchange(request).await.starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn an_explicit_hand_off_socket_is_private_and_removed_on_stop() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("p.sock");
    let handoff = dir.path().join("h.sock");
    std::fs::write(&handoff, b"in the way").unwrap();
    let taken = EgressProxy::start_at(&socket, Some(&handoff), ProxyConfig::new(policy()))
        .unwrap_err()
        .to_string();
    assert!(taken.contains("h.sock"), "{taken}");
    assert!(!socket.exists(), "a failed start left its socket");
    std::fs::remove_file(&handoff).unwrap();

    let proxy = EgressProxy::start_at(&socket, Some(&handoff), ProxyConfig::new(policy())).unwrap();
    for path in [&socket, &handoff] {
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
    }
    proxy.stop().await;
    assert!(!socket.exists() && !handoff.exists());
}

#[tokio::test]
async fn a_private_proxy_has_its_hand_off_socket_beside_proxy_sock() {
    let harness = Harness::start(policy(), ProxyLimits::default());
    let handoff = harness.proxy.handoff_path().unwrap().to_owned();
    assert_eq!(handoff.parent(), Some(harness.proxy.socket_dir()));
    assert_eq!(
        handoff.file_name().unwrap(),
        airlock_proxy::HANDOFF_SOCKET_NAME
    );
    harness.proxy.stop().await;
    assert!(!handoff.exists());
}

#[tokio::test]
async fn hand_off_channels_are_few() {
    let (upstream, _seen) = http_upstream().await;
    let harness = Harness::start(policy(), ProxyLimits::default());
    harness.connector.route("93.184.216.34:80", upstream);
    harness.resolver.answer("site.test", &[&["93.184.216.34"]]);
    let path = harness.proxy.handoff_path().unwrap().to_owned();
    let mut open = Vec::new();
    for _ in 0..4 {
        open.push(StdUnixStream::connect(&path).unwrap());
    }
    // One channel per relay is all a task needs; past a handful, a channel is closed at once.
    let extra = StdUnixStream::connect(&path).unwrap();
    extra.set_nonblocking(true).unwrap();
    let mut extra = tokio::net::UnixStream::from_std(extra).unwrap();
    let mut rest = Vec::new();
    within(extra.read_to_end(&mut rest)).await.unwrap();
    // The first ones still work.
    let request = "GET http://site.test/ HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n";
    assert!(
        exchange(hand_off(&open[0]).await, request)
            .await
            .starts_with("HTTP/1.1 200")
    );
}

#[tokio::test]
async fn the_copying_relay_gets_the_same_answers_as_a_handed_off_connection() {
    // What gVisor's containers use: `airlock-relay --copy-to proxy.sock`, on a thread.
    let (upstream, _) = http_upstream().await;
    let harness = Harness::start(policy(), ProxyLimits::default());
    harness.connector.route("93.184.216.34:80", upstream);
    harness.resolver.answer("site.test", &[&["93.184.216.34"]]);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let relay = listener.local_addr().unwrap();
    let socket = harness.proxy.socket_path().to_owned();
    std::thread::spawn(move || airlock_relay::relay_copying(&listener, &socket));

    let allowed = exchange(
        TcpStream::connect(relay).await.unwrap(),
        "GET http://site.test/ HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(allowed.starts_with("HTTP/1.1 200"), "{allowed}");
    assert!(allowed.ends_with("hello from upstream"), "{allowed}");

    let mut browser = TcpStream::connect(relay).await.unwrap();
    browser
        .write_all(b"CONNECT 127.0.0.1:8080 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n")
        .await
        .unwrap();
    let refused = read_head(&mut browser).await;
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    assert!(
        refused.contains("x-airlock-refused: loopback address 127.0.0.1"),
        "{refused}"
    );
    assert_eq!(harness.connector.attempted().len(), 1);
    let stats = harness.proxy.stats();
    assert_eq!((stats.connections, stats.handed_off), (2, 0), "{stats:?}");
    assert_eq!(stats.refusals.get("loopback"), Some(&1), "{stats:?}");
}

#[tokio::test]
async fn a_handed_off_connection_outlives_its_channel() {
    let (upstream, _seen) = http_upstream().await;
    let harness = Harness::start(policy(), ProxyLimits::default());
    harness.connector.route("93.184.216.34:80", upstream);
    harness.resolver.answer("site.test", &[&["93.184.216.34"]]);
    let channel = StdUnixStream::connect(harness.proxy.handoff_path().unwrap()).unwrap();
    let browser = hand_off(&channel).await;
    // The relay goes (its container is stopping, say) before the browser has asked anything.
    drop(channel);
    let request = "GET http://site.test/ HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n";
    let answer = exchange(browser, request).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(harness.proxy.stats().handed_off, 1);
}
