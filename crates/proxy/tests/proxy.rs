//! The egress proxy on a stand-in network: every refusal class, rebinding, real bytes through
//! CONNECT and forwarding, WebSocket upgrades, and each limit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use airlock_policy::EgressPolicy;
use airlock_proxy::{Outcome, ProxyLimits, REFUSED_HEADER, Via};
use support::{
    Harness, MappedConnector, ScriptedResolver, echo_upstream, http_upstream, policy, read_head,
    status_of, within,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn header_of<'a>(response: &'a str, name: &str) -> Option<&'a str> {
    response.split("\r\n\r\n").next()?.lines().find_map(|line| {
        line.split_once(':')
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
    })
}

/// A request for each refusal class, and the class the proxy must report.
const REFUSAL_CASES: &[(&str, &str)] = &[
    (
        "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n",
        "loopback",
    ),
    (
        "CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n",
        "loopback",
    ),
    (
        "GET http://10.0.0.5/ HTTP/1.1\r\nHost: 10.0.0.5\r\n\r\n",
        "private",
    ),
    (
        "GET http://172.16.0.1/ HTTP/1.1\r\nHost: 172.16.0.1\r\n\r\n",
        "private",
    ),
    (
        "GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\nHost: x\r\n\r\n",
        "never-opened",
    ),
    (
        "GET http://169.254.10.10/ HTTP/1.1\r\nHost: x\r\n\r\n",
        "link-local",
    ),
    (
        "GET http://100.64.0.1/ HTTP/1.1\r\nHost: x\r\n\r\n",
        "carrier-grade NAT",
    ),
    (
        "CONNECT [fd00:ec2::254]:443 HTTP/1.1\r\nHost: x\r\n\r\n",
        "never-opened",
    ),
    (
        "CONNECT [fe80::1]:443 HTTP/1.1\r\nHost: x\r\n\r\n",
        "link-local",
    ),
    (
        "CONNECT [fc00::1]:443 HTTP/1.1\r\nHost: x\r\n\r\n",
        "unique-local",
    ),
    (
        "CONNECT [::ffff:10.0.0.1]:443 HTTP/1.1\r\nHost: x\r\n\r\n",
        "IPv4-mapped",
    ),
    (
        "CONNECT [::5db8:d822]:443 HTTP/1.1\r\nHost: x\r\n\r\n",
        "IPv4-compatible",
    ),
    (
        "CONNECT [64:ff9b::7f00:1]:443 HTTP/1.1\r\nHost: x\r\n\r\n",
        "loopback",
    ),
    (
        "GET http://2130706433/ HTTP/1.1\r\nHost: x\r\n\r\n",
        "host-spelling",
    ),
    (
        "GET http://0x7f.1/ HTTP/1.1\r\nHost: x\r\n\r\n",
        "host-spelling",
    ),
    (
        "CONNECT 0177.0.0.1:443 HTTP/1.1\r\nHost: x\r\n\r\n",
        "host-spelling",
    ),
    (
        "CONNECT localhost:443 HTTP/1.1\r\nHost: x\r\n\r\n",
        "host-spelling",
    ),
    (
        "CONNECT 93.184.216.34:22 HTTP/1.1\r\nHost: x\r\n\r\n",
        "port",
    ),
    (
        "GET http://example.com:8080/ HTTP/1.1\r\nHost: x\r\n\r\n",
        "port",
    ),
    (
        "GET http://user:pw@example.com/ HTTP/1.1\r\nHost: x\r\n\r\n",
        "userinfo",
    ),
    (
        "GET http://private.test/ HTTP/1.1\r\nHost: x\r\n\r\n",
        "private",
    ),
    (
        "CONNECT metadata.test:443 HTTP/1.1\r\nHost: x\r\n\r\n",
        "never-opened",
    ),
    (
        "CONNECT mapped.test:443 HTTP/1.1\r\nHost: x\r\n\r\n",
        "IPv4-mapped",
    ),
    (
        "CONNECT mixed.test:443 HTTP/1.1\r\nHost: x\r\n\r\n",
        "private",
    ),
    (
        "GET http://0.0.0.0/ HTTP/1.1\r\nHost: x\r\n\r\n",
        "never-opened",
    ),
];

#[tokio::test]
async fn every_refusal_class_is_refused_before_any_connection() {
    let harness = Harness::start(policy(&[]), ProxyLimits::default());
    harness.resolver.answer("private.test", &[&["10.0.0.1"]]);
    harness
        .resolver
        .answer("metadata.test", &[&["169.254.169.254"]]);
    harness
        .resolver
        .answer("mapped.test", &[&["::ffff:127.0.0.1"]]);
    harness
        .resolver
        .answer("mixed.test", &[&["93.184.216.34", "192.168.1.1"]]);
    for &(request, class) in REFUSAL_CASES {
        let response = harness
            .exchange(&request.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n"))
            .await;
        assert_eq!(status_of(&response), 403, "{request}: {response}");
        let reason = header_of(&response, REFUSED_HEADER)
            .unwrap_or_else(|| panic!("no reason header: {response}"));
        assert!(!reason.is_empty());
        let last = harness.refusals().pop().unwrap();
        assert!(
            matches!(&last.outcome, Outcome::Refused { class: c, .. } if *c == class),
            "{request}: {last:?}"
        );
    }
    assert!(
        harness.connector.attempted().is_empty(),
        "connected to {:?}",
        harness.connector.attempted()
    );
    let stats = harness.proxy.stats();
    assert_eq!(
        stats.refusals.values().sum::<u64>(),
        REFUSAL_CASES.len() as u64
    );
    assert_eq!(stats.refusals["loopback"], 3);
    assert_eq!(stats.refusals["IPv4-mapped"], 2);
}

#[tokio::test]
async fn refusal_answer_names_the_reason() {
    let harness = Harness::start(policy(&[]), ProxyLimits::default());
    let response = harness
        .exchange("GET http://10.0.0.5/ HTTP/1.1\r\nHost: 10.0.0.5\r\nConnection: close\r\n\r\n")
        .await;
    assert_eq!(status_of(&response), 403);
    assert_eq!(
        header_of(&response, REFUSED_HEADER),
        Some("private address 10.0.0.5 (10.0.0.0/8)")
    );
    assert!(
        response.ends_with("Airlock: private address 10.0.0.5 (10.0.0.0/8)\n"),
        "{response}"
    );
    let event = harness.refusals().pop().unwrap();
    assert_eq!(event.via, Via::Forward);
    assert_eq!(event.target, "http://10.0.0.5/");
}

#[tokio::test]
async fn a_rebinding_name_is_connected_only_where_it_was_vetted() {
    let (upstream, _) = http_upstream().await;
    let harness = Harness::start(policy(&[]), ProxyLimits::default());
    harness.connector.route("93.184.216.34:80", upstream);
    // First lookup public, every later one private: a proxy that looked up twice (once to vet,
    // once to connect) would connect to 10.0.0.1.
    harness
        .resolver
        .answer("rebind.test", &[&["93.184.216.34"], &["10.0.0.1"]]);

    let first = harness
        .exchange(
            "GET http://rebind.test/ HTTP/1.1\r\nHost: rebind.test\r\nConnection: close\r\n\r\n",
        )
        .await;
    assert_eq!(status_of(&first), 200, "{first}");
    assert!(first.ends_with("hello from upstream"));
    assert_eq!(harness.resolver.lookups_of("rebind.test"), 1);

    let second = harness
        .exchange(
            "GET http://rebind.test/ HTTP/1.1\r\nHost: rebind.test\r\nConnection: close\r\n\r\n",
        )
        .await;
    assert_eq!(status_of(&second), 403, "{second}");
    assert_eq!(harness.resolver.lookups_of("rebind.test"), 2);
    assert_eq!(
        harness.connector.attempted(),
        vec!["93.184.216.34:80".parse().unwrap()]
    );
}

#[tokio::test]
async fn the_next_vetted_address_is_tried_when_one_fails() {
    let (upstream, _) = http_upstream().await;
    let harness = Harness::start(policy(&[]), ProxyLimits::default());
    harness.connector.route("1.1.1.1:80", upstream);
    harness
        .resolver
        .answer("multi.test", &[&["8.8.8.8", "1.1.1.1"]]);
    let response = harness
        .exchange(
            "GET http://multi.test/ HTTP/1.1\r\nHost: multi.test\r\nConnection: close\r\n\r\n",
        )
        .await;
    assert_eq!(status_of(&response), 200, "{response}");
    assert_eq!(
        harness.connector.attempted(),
        vec!["8.8.8.8:80".parse().unwrap(), "1.1.1.1:80".parse().unwrap()]
    );
}

#[tokio::test]
async fn plain_http_is_forwarded_in_origin_form_without_hop_by_hop_headers() {
    let (upstream, seen) = http_upstream().await;
    let harness = Harness::start(policy(&[]), ProxyLimits::default());
    harness.connector.route("93.184.216.34:80", upstream);
    harness.resolver.answer("site.test", &[&["93.184.216.34"]]);
    let response = harness
        .exchange(
            "GET http://site.test/page?q=1 HTTP/1.1\r\nHost: evil.test\r\nProxy-Authorization: Basic eA==\r\n\
             Proxy-Connection: keep-alive\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nTE: trailers\r\nX-Kept: yes\r\n\r\n",
        )
        .await;
    assert_eq!(status_of(&response), 200, "{response}");
    assert!(response.ends_with("hello from upstream"));
    assert_eq!(header_of(&response, "x-upstream"), Some("yes"));
    assert_eq!(header_of(&response, "keep-alive"), None);

    let head = seen.lock().unwrap()[0].to_ascii_lowercase();
    assert!(head.starts_with("get /page?q=1 http/1.1\r\n"), "{head}");
    assert!(head.contains("host: site.test\r\n"), "{head}");
    assert!(head.contains("x-kept: yes\r\n"), "{head}");
    for gone in ["proxy-authorization", "proxy-connection", "x-hop", "te:"] {
        assert!(!head.contains(gone), "{gone} reached upstream: {head}");
    }
    let stats = harness.proxy.stats();
    assert_eq!(stats.forwarded, 1);
    assert!(stats.bytes_down >= "hello from upstream".len() as u64);
    assert!(stats.bytes_up > 0);
}

#[tokio::test]
async fn connect_tunnels_carry_real_bytes_both_ways() {
    let echo = echo_upstream().await;
    let harness = Harness::start(policy(&[]), ProxyLimits::default());
    harness.connector.route("[2606:4700::1111]:443", echo);
    let mut client = harness.client().await;
    client
        .write_all(b"CONNECT [2606:4700::1111]:443 HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let head = read_head(&mut client).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let payload: Vec<u8> = (0..200_000_u32).map(|i| (i % 251) as u8).collect();
    let (mut read, mut write) = client.split();
    let ((), echoed) = tokio::join!(async { write.write_all(&payload).await.unwrap() }, async {
        let mut echoed = vec![0_u8; payload.len()];
        within(read.read_exact(&mut echoed)).await.unwrap();
        echoed
    });
    assert_eq!(echoed, payload);
    let stats = harness.proxy.stats();
    assert_eq!(stats.tunnels, 1);
    assert_eq!(stats.bytes_up, payload.len() as u64);
    assert_eq!(stats.bytes_down, payload.len() as u64);
}

#[tokio::test]
async fn websocket_upgrade_goes_through_connect() {
    let (upstream, seen) = http_upstream().await;
    let harness = Harness::start(policy(&[]), ProxyLimits::default());
    harness.connector.route("93.184.216.34:443", upstream);
    harness.resolver.answer("ws.test", &[&["93.184.216.34"]]);
    let mut client = harness.client().await;
    client
        .write_all(b"CONNECT ws.test:443 HTTP/1.1\r\nHost: ws.test:443\r\n\r\n")
        .await
        .unwrap();
    assert!(read_head(&mut client).await.starts_with("HTTP/1.1 200"));
    client
        .write_all(b"GET /chat HTTP/1.1\r\nHost: ws.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        .await
        .unwrap();
    let switched = read_head(&mut client).await;
    assert!(switched.starts_with("HTTP/1.1 101"), "{switched}");
    client.write_all(b"\x81\x05hello").await.unwrap();
    let mut frame = [0_u8; 7];
    within(client.read_exact(&mut frame)).await.unwrap();
    assert_eq!(&frame, b"\x81\x05hello");
    assert!(seen.lock().unwrap()[0].starts_with("GET /chat HTTP/1.1"));
}

#[tokio::test]
async fn requests_that_are_not_proxy_requests_get_a_clear_4xx() {
    let (upstream, _) = http_upstream().await;
    let harness = Harness::start(policy(&[]), ProxyLimits::default());
    harness.connector.route("93.184.216.34:80", upstream);
    harness.resolver.answer("site.test", &[&["93.184.216.34"]]);
    let origin_form = harness
        .exchange("GET / HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n")
        .await;
    assert_eq!(status_of(&origin_form), 400, "{origin_form}");
    assert!(origin_form.contains("absolute-form"));
    let https = harness
        .exchange("GET https://site.test/ HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n")
        .await;
    assert_eq!(status_of(&https), 400, "{https}");
    for (host, status) in [("10.0.0.1", 403), ("site.test", 400)] {
        let mut client = harness.client().await;
        let request = format!(
            "GET http://{host}/ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
        );
        client.write_all(request.as_bytes()).await.unwrap();
        let head = read_head(&mut client).await;
        assert_eq!(status_of(&head), status, "{host}: {head}");
    }
    assert!(harness.connector.attempted().is_empty());
}

#[tokio::test]
async fn unknown_names_get_502_and_silent_hosts_504() {
    let limits = ProxyLimits {
        connect_timeout: Duration::from_millis(200),
        ..ProxyLimits::default()
    };
    let harness = Harness::start(policy(&[]), limits);
    harness.connector.blackhole("93.184.216.34:443");
    harness
        .resolver
        .answer("silent.test", &[&["93.184.216.34"]]);
    let unknown = harness
        .exchange("CONNECT nowhere.test:443 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await;
    assert_eq!(status_of(&unknown), 502, "{unknown}");
    let silent = harness
        .exchange("CONNECT silent.test:443 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await;
    assert_eq!(status_of(&silent), 504, "{silent}");
    // A port on loopback that nothing listens on: the connection is refused for real.
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    harness.connector.route("93.184.216.35:443", closed_port);
    harness
        .resolver
        .answer("closed.test", &[&["93.184.216.35"]]);
    let closed = harness
        .exchange("CONNECT closed.test:443 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await;
    assert_eq!(status_of(&closed), 502, "{closed}");
    let failures: Vec<(u16, &str, String)> = harness
        .events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match &e.outcome {
            Outcome::Failed {
                status,
                class,
                reason,
            } => Some((*status, *class, reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(failures.len(), 3, "{failures:?}");
    assert_eq!(failures[0].0, 502);
    assert_eq!(failures[0].1, "no-dns-answer");
    assert_eq!(failures[0].2, "`nowhere.test` does not resolve");
    assert_eq!((failures[1].0, failures[1].1), (504, "connect-timeout"));
    assert!(failures[1].2.contains("timed out"), "{failures:?}");
    assert_eq!((failures[2].0, failures[2].1), (502, "connect-refused"));
    assert!(failures[2].2.contains("93.184.216.35:443"), "{failures:?}");
}

#[tokio::test]
async fn a_client_that_sends_half_a_head_is_closed_at_the_time_out() {
    let limits = ProxyLimits {
        header_read_timeout: Duration::from_millis(300),
        ..ProxyLimits::default()
    };
    let harness = Harness::start(policy(&[]), limits);
    let mut client = harness.client().await;
    client
        .write_all(b"GET http://example.com/ HTTP/1.1\r\nHost: exa")
        .await
        .unwrap();
    let mut rest = Vec::new();
    // The proxy closes the connection; a proxy without the time-out would leave this pending.
    within(client.read_to_end(&mut rest)).await.unwrap();
    assert!(!String::from_utf8_lossy(&rest).starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn an_oversized_head_gets_431() {
    let harness = Harness::start(policy(&[]), ProxyLimits::default());
    let big = "a".repeat(10 * 1024);
    let response = harness
        .exchange(&format!(
            "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nX-Big: {big}\r\n\r\n"
        ))
        .await;
    assert_eq!(status_of(&response), 431, "{response}");
}

#[tokio::test]
async fn an_idle_tunnel_is_closed() {
    let echo = echo_upstream().await;
    let limits = ProxyLimits {
        idle_timeout: Duration::from_millis(300),
        ..ProxyLimits::default()
    };
    let harness = Harness::start(policy(&[]), limits);
    harness.connector.route("93.184.216.34:443", echo);
    let mut client = harness.client().await;
    client
        .write_all(b"CONNECT 93.184.216.34:443 HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(read_head(&mut client).await.starts_with("HTTP/1.1 200"));
    client.write_all(b"ping").await.unwrap();
    let mut pong = [0_u8; 4];
    within(client.read_exact(&mut pong)).await.unwrap();
    let mut rest = Vec::new();
    within(client.read_to_end(&mut rest)).await.unwrap();
    assert!(rest.is_empty());
}

#[tokio::test]
async fn a_body_over_the_byte_cap_is_cut() {
    let (upstream, _) = http_upstream().await;
    let limits = ProxyLimits {
        max_bytes_per_connection: 64 * 1024,
        ..ProxyLimits::default()
    };
    let harness = Harness::start(policy(&[]), limits);
    harness.connector.route("93.184.216.34:80", upstream);
    harness.resolver.answer("big.test", &[&["93.184.216.34"]]);
    let response = harness
        .exchange("GET http://big.test/big HTTP/1.1\r\nHost: big.test\r\nConnection: close\r\n\r\n")
        .await;
    assert_eq!(status_of(&response), 200);
    let body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
    assert!(
        body.len() < 64 * 1024,
        "got {} body bytes through a 64 KiB cap",
        body.len()
    );
    assert!(harness.proxy.stats().bytes_down <= 64 * 1024);
}

#[tokio::test]
async fn connections_past_the_limit_get_503() {
    let limits = ProxyLimits {
        max_connections: 2,
        ..ProxyLimits::default()
    };
    let harness = Harness::start(policy(&[]), limits);
    let _first = harness.client().await;
    let _second = harness.client().await;
    let third = harness
        .exchange("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n")
        .await;
    assert_eq!(status_of(&third), 503, "{third}");
    assert_eq!(harness.proxy.stats().busy_rejections, 1);
}

#[tokio::test]
async fn exact_allow_entries_open_a_lab_server_on_loopback() {
    let (upstream, _) = http_upstream().await;
    let allowed = format!("127.0.0.1:{}", upstream.port());
    // The real TCP connector: the proxy itself reaches the loopback server it was told to open.
    let config_policy = policy(&[&allowed]);
    let harness = Harness::start_with(
        config_policy,
        ProxyLimits::default(),
        Arc::new(ScriptedResolver::default()),
        Arc::new(MappedConnector::default()),
    );
    harness.connector.route(&allowed, upstream);
    let response = harness
        .exchange(&format!(
            "GET http://{allowed}/ HTTP/1.1\r\nHost: {allowed}\r\nConnection: close\r\n\r\n"
        ))
        .await;
    assert_eq!(status_of(&response), 200, "{response}");
    let other_port = harness
        .exchange(&format!(
            "GET http://127.0.0.1:{}/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            upstream.port() + 1
        ))
        .await;
    assert_eq!(status_of(&other_port), 403);
}

#[tokio::test]
async fn the_socket_lives_in_a_private_directory_that_is_removed_on_stop() {
    let harness = Harness::start(policy(&[]), ProxyLimits::default());
    let socket = harness.proxy.socket_path().to_owned();
    let dir = harness.proxy.private_dir().unwrap().to_owned();
    let mode_of =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode_of(&dir), 0o700);
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&dir).unwrap());
    assert_eq!(owner, nix_uid());
    // The container's own uid reaches the sockets through the mounted folder, which only the
    // private directory's owner can reach on the host.
    let mounted = harness.proxy.socket_dir();
    assert_eq!(mounted.parent(), Some(dir.as_path()));
    assert_eq!(mode_of(mounted), 0o711);
    for path in [&socket, harness.proxy.handoff_path().unwrap()] {
        assert_eq!(path.parent(), Some(mounted), "{}", path.display());
        assert_eq!(mode_of(path), 0o666, "{}", path.display());
    }
    let mut idle = harness.client().await;
    harness.proxy.stop().await;
    assert!(
        !socket.exists() && !dir.exists(),
        "left behind: {}",
        dir.display()
    );
    // Open connections end with the proxy: EOF if it had accepted this one, a reset if it was
    // still queued. Either way the read returns; `within` fails the test if it hangs.
    let mut rest = Vec::new();
    let _ended = within(idle.read_to_end(&mut rest)).await;
    assert!(rest.is_empty());
}

#[tokio::test]
async fn dropping_the_proxy_also_removes_its_directory() {
    let harness = Harness::start(policy(&[]), ProxyLimits::default());
    let dir = harness.proxy.private_dir().unwrap().to_owned();
    drop(harness);
    assert!(!dir.exists());
}

fn nix_uid() -> u32 {
    std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap())
}

#[tokio::test]
async fn an_exact_entry_admits_no_other_spelling_of_its_address() {
    let harness = Harness::start(policy(&["127.0.0.1:8080"]), ProxyLimits::default());
    harness
        .resolver
        .answer("mapped-lab.test", &[&["::ffff:127.0.0.1"]]);
    harness
        .resolver
        .answer("nat64-lab.test", &[&["64:ff9b::7f00:1"]]);
    for target in [
        "[::ffff:127.0.0.1]:8080",
        "[::7f00:1]:8080",
        "[64:ff9b::127.0.0.1]:8080",
        "mapped-lab.test:8080",
        "nat64-lab.test:8080",
    ] {
        let response = harness
            .exchange(&format!(
                "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n"
            ))
            .await;
        assert_eq!(status_of(&response), 403, "{target}: {response}");
    }
    assert!(
        harness.connector.attempted().is_empty(),
        "dialled {:?}",
        harness.connector.attempted()
    );
}

#[tokio::test]
async fn the_proxy_dials_exactly_the_address_it_vetted() {
    let (upstream, _) = http_upstream().await;
    let harness = Harness::start(policy(&[]), ProxyLimits::default());
    // A NAT64 answer carrying a public address is allowed, and dialled as answered, not as the
    // IPv4 address it carries.
    harness
        .resolver
        .answer("nat64.test", &[&["64:ff9b::5db8:d822"]]);
    harness.connector.route("[64:ff9b::5db8:d822]:80", upstream);
    let response = harness
        .exchange(
            "GET http://nat64.test/ HTTP/1.1\r\nHost: nat64.test\r\nConnection: close\r\n\r\n",
        )
        .await;
    assert_eq!(status_of(&response), 200, "{response}");
    assert_eq!(
        harness.connector.attempted(),
        vec!["[64:ff9b::5db8:d822]:80".parse().unwrap()]
    );
}

#[tokio::test]
async fn a_temp_dir_deeper_than_a_socket_path_holds_still_serves() {
    // A TMPDIR of 100 characters and more, as CI runners and test harnesses have: the socket's
    // full path is past the 108 bytes a socket address holds.
    let base = tempfile::tempdir().unwrap();
    let deep = base.path().join("t".repeat(100));
    std::fs::create_dir(&deep).unwrap();
    let mut config = airlock_proxy::ProxyConfig::new(EgressPolicy::default())
        .with_resolver(Arc::new(ScriptedResolver::default()));
    config.socket_parent = Some(deep.clone());
    let proxy = airlock_proxy::EgressProxy::start(config).unwrap();
    let socket = proxy.socket_path().to_owned();
    assert!(socket.as_os_str().len() > 108, "{}", socket.display());
    assert!(socket.starts_with(&deep));
    assert!(proxy.handoff_path().unwrap().exists());
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o666);
    // Connected the way a container does, by a short path to the same directory.
    let dir = std::fs::File::open(proxy.socket_dir()).unwrap();
    let short = format!(
        "/proc/self/fd/{}/proxy.sock",
        std::os::fd::AsRawFd::as_raw_fd(&dir)
    );
    let answer = support::exchange_at(
        std::path::Path::new(&short),
        "GET http://10.0.0.5/ HTTP/1.1\r\nHost: 10.0.0.5\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    let dir_path = proxy.private_dir().unwrap().to_owned();
    proxy.stop().await;
    assert!(!dir_path.exists(), "the directory is removed on stop");
}

#[tokio::test]
async fn a_page_is_told_a_refused_names_class_never_the_address_it_resolved_to() {
    // The page (and so the worker or a CDP client) must not learn the host's internal DNS.
    let harness = Harness::start(policy(&[]), ProxyLimits::default());
    harness.resolver.answer("db.corp.test", &[&["10.0.3.7"]]);
    for request in [
        "GET http://db.corp.test/ HTTP/1.1\r\nHost: db.corp.test\r\nConnection: close\r\n\r\n",
        "CONNECT db.corp.test:443 HTTP/1.1\r\nHost: db.corp.test:443\r\nConnection: close\r\n\r\n",
    ] {
        let response = harness.exchange(request).await;
        assert_eq!(status_of(&response), 403, "{response}");
        assert_eq!(
            header_of(&response, REFUSED_HEADER),
            Some("`db.corp.test` resolves to a non-public address (private)")
        );
        assert!(!response.contains("10.0.3.7"), "{response}");
    }
    // The host side keeps the whole reason, and hands the page's text on for the worker.
    for event in harness.refusals() {
        let Outcome::Refused {
            reason,
            page_reason,
            class,
        } = &event.outcome
        else {
            panic!("{event:?}")
        };
        assert!(reason.contains("private address 10.0.3.7"), "{reason}");
        assert!(!page_reason.contains("10.0.3.7"), "{page_reason}");
        assert_eq!(*class, "private");
    }
    assert_eq!(harness.refusals().len(), 2);
}
