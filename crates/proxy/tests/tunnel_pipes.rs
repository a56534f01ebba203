//! A tunnel with nothing in flight holds no pipe (its own process: it counts the process's pipes,
//! which another test's tunnel would change), and idles out.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use airlock_policy::{EgressPolicy, Profile};
use airlock_proxy::ProxyLimits;
use support::{Harness, echo_upstream, read_head, within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The pipes this process holds now (the proxy runs in it).
fn pipes() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().starts_with("pipe:"))
        .count()
}

#[tokio::test]
async fn an_idle_tunnel_holds_no_pipe_and_is_closed_at_its_time_out() {
    let before = pipes();
    let harness = Harness::start(
        EgressPolicy::new(Profile::Public, None, std::iter::empty()).unwrap(),
        ProxyLimits {
            idle_timeout: Duration::from_millis(500),
            ..ProxyLimits::default()
        },
    );
    harness
        .connector
        .route("93.184.216.34:443", echo_upstream().await);
    let mut client = harness.client().await;
    client
        .write_all(b"CONNECT 93.184.216.34:443 HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(read_head(&mut client).await.starts_with("HTTP/1.1 200"));
    client.write_all(&vec![1_u8; 200_000]).await.unwrap();
    let mut echoed = vec![0_u8; 200_000];
    within(client.read_exact(&mut echoed)).await.unwrap();
    // Both directions have moved everything and found nothing more, so their pipes are closed:
    // on this single-threaded runtime the proxy's task ran to its next wait before the last
    // bytes were read here.
    assert_eq!(pipes(), before);
    let mut rest = Vec::new();
    within(client.read_to_end(&mut rest)).await.unwrap();
    assert!(rest.is_empty());
}
