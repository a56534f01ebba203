//! A CONNECT tunnel's bytes move by `splice(2)` between the sockets: what a client sent with its
//! CONNECT head arrives first, a half-close reaches the other side while answers still come
//! back, the byte cap holds (`tunnel_pipes.rs`: an idle tunnel holds no pipe), and each tunnel
//! reports what it carried when it closes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use airlock_policy::{EgressPolicy, Profile};
use airlock_proxy::{Outcome, ProxyLimits};
use support::{Harness, echo_upstream, read_head, within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

const CONNECT: &[u8] = b"CONNECT 93.184.216.34:443 HTTP/1.1\r\nHost: x\r\n\r\n";

fn policy() -> EgressPolicy {
    EgressPolicy::new(Profile::Public, None, std::iter::empty()).unwrap()
}

async fn tunnel(limits: ProxyLimits) -> (Harness, UnixStream) {
    let harness = Harness::start(policy(), limits);
    harness
        .connector
        .route("93.184.216.34:443", echo_upstream().await);
    let mut client = harness.client().await;
    client.write_all(CONNECT).await.unwrap();
    assert!(read_head(&mut client).await.starts_with("HTTP/1.1 200"));
    (harness, client)
}

#[tokio::test]
async fn bytes_sent_with_the_connect_head_arrive_first() {
    let harness = Harness::start(policy(), ProxyLimits::default());
    harness
        .connector
        .route("93.184.216.34:443", echo_upstream().await);
    let mut client = harness.client().await;
    // A client that does not wait for the 200: the parser has read these bytes already.
    let mut sent = CONNECT.to_vec();
    sent.extend_from_slice(b"early bytes");
    client.write_all(&sent).await.unwrap();
    assert!(read_head(&mut client).await.starts_with("HTTP/1.1 200"));
    client.write_all(b", then more").await.unwrap();
    let mut echoed = [0_u8; 22];
    within(client.read_exact(&mut echoed)).await.unwrap();
    assert_eq!(&echoed, b"early bytes, then more");
}

#[tokio::test]
async fn a_half_close_reaches_upstream_and_the_answer_still_comes_back() {
    let (harness, mut client) = tunnel(ProxyLimits::default()).await;
    let payload: Vec<u8> = (0..300_000_u32).map(|i| (i % 253) as u8).collect();
    client.write_all(&payload).await.unwrap();
    // The echo server ends its copy (and closes) only once it sees our end of stream.
    client.shutdown().await.unwrap();
    let mut echoed = Vec::new();
    within(client.read_to_end(&mut echoed)).await.unwrap();
    assert_eq!(echoed.len(), payload.len());
    assert!(echoed == payload);
    let stats = harness.proxy.stats();
    assert_eq!(stats.bytes_up, payload.len() as u64);
    assert_eq!(stats.bytes_down, payload.len() as u64);
}

#[tokio::test]
async fn a_tunnel_is_cut_at_the_byte_cap() {
    let cap = 64 * 1024;
    let (harness, mut client) = tunnel(ProxyLimits {
        max_bytes_per_connection: cap,
        ..ProxyLimits::default()
    })
    .await;
    support::cut_at_the_cap(&harness, &mut client, cap).await;
}

#[tokio::test]
async fn each_tunnel_reports_its_bytes_when_it_closes_and_a_stop_waits_for_open_ones() {
    let (harness, mut finished) = tunnel(ProxyLimits::default()).await;
    let payload = vec![3_u8; 100_000];
    finished.write_all(&payload).await.unwrap();
    finished.shutdown().await.unwrap();
    let mut echoed = Vec::new();
    within(finished.read_to_end(&mut echoed)).await.unwrap();
    // A second tunnel, still open when the proxy stops.
    let mut open = harness.client().await;
    open.write_all(CONNECT).await.unwrap();
    assert!(read_head(&mut open).await.starts_with("HTTP/1.1 200"));
    open.write_all(b"hello").await.unwrap();
    let mut hello = [0_u8; 5];
    within(open.read_exact(&mut hello)).await.unwrap();

    let events = std::sync::Arc::clone(&harness.events);
    harness.proxy.stop().await;
    let mut closed: Vec<(String, u64, u64)> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|event| match event.outcome {
            Outcome::Closed { up, down, .. } => Some((event.target.clone(), up, down)),
            _ => None,
        })
        .collect();
    closed.sort();
    assert_eq!(
        closed,
        [
            ("93.184.216.34:443".to_owned(), 5, 5),
            ("93.184.216.34:443".to_owned(), 100_000, 100_000)
        ],
        "one closing report per tunnel, every one in before stop returned"
    );
}
