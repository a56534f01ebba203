//! A task's scope, set on a running proxy: out-of-scope names are refused before any lookup and
//! before any connection, through CONNECT and plain forwarding alike; in-scope names still face
//! the address rule.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use airlock_policy::{EgressPolicy, Profile, Scope};
use airlock_proxy::{Outcome, ProxyLimits};
use support::{Harness, http_upstream, status_of};

#[tokio::test]
async fn a_scope_set_on_a_running_proxy_refuses_other_names_before_any_lookup() {
    let (upstream, _) = http_upstream().await;
    let harness = Harness::start(
        EgressPolicy::new(Profile::Public, None, []).unwrap(),
        ProxyLimits::default(),
    );
    harness.connector.route("93.184.216.34:80", upstream);
    harness.connector.route("93.184.216.35:80", upstream);
    harness.resolver.answer("shop.test", &[&["93.184.216.34"]]);
    harness.resolver.answer("cdn.test", &[&["93.184.216.35"]]);
    let get = |host: &str| {
        format!("GET http://{host}/ HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
    };

    // Before a task takes the proxy, the whole public web is open.
    assert_eq!(status_of(&harness.exchange(&get("cdn.test")).await), 200);
    assert_eq!(harness.resolver.lookups_of("cdn.test"), 1);

    harness
        .proxy
        .set_scope(Scope::parse(["shop.test"], [] as [&str; 0]).unwrap());
    assert!(!harness.proxy.policy().scope().is_unlimited());
    let response = harness.exchange(&get("shop.test")).await;
    assert_eq!(status_of(&response), 200, "{response}");

    for request in [
        get("cdn.test"),
        get("CDN.test."),
        get("shop.test.cdn.test"),
        "CONNECT cdn.test:443 HTTP/1.1\r\nHost: cdn.test:443\r\nConnection: close\r\n\r\n"
            .to_owned(),
        "CONNECT 93.184.216.34:80 HTTP/1.1\r\nHost: 93.184.216.34:80\r\nConnection: close\r\n\r\n"
            .to_owned(),
    ] {
        let response = harness.exchange(&request).await;
        assert_eq!(status_of(&response), 403, "{request}: {response}");
        assert!(
            response.contains("out of this task's scope"),
            "{request}: {response}"
        );
    }
    // Refused on the name alone: no lookup, and nothing but the two allowed requests dialled.
    assert_eq!(harness.resolver.lookups_of("cdn.test"), 1);
    assert_eq!(harness.resolver.lookups_of("shop.test.cdn.test"), 0);
    assert_eq!(harness.connector.attempted().len(), 2);
    let refusals = harness.refusals();
    assert_eq!(refusals.len(), 5);
    assert!(
        refusals.iter().all(|event| matches!(
            event.outcome,
            Outcome::Refused {
                class: "out-of-scope",
                ..
            }
        )),
        "{refusals:#?}"
    );
}

#[tokio::test]
async fn an_in_scope_name_still_faces_the_address_rule() {
    let harness = Harness::start(EgressPolicy::default(), ProxyLimits::default());
    harness.resolver.answer("shop.test", &[&["10.0.0.7"]]);
    harness
        .proxy
        .set_scope(Scope::parse(["shop.test"], [] as [&str; 0]).unwrap());
    let response = harness
        .exchange("GET http://shop.test/ HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n")
        .await;
    assert_eq!(status_of(&response), 403, "{response}");
    assert!(
        response.contains("non-public address (private)"),
        "{response}"
    );
    assert!(harness.connector.attempted().is_empty());
}

/// Open a CONNECT tunnel to `host:443` and read its `200` head; the stream, ready to carry bytes.
async fn tunnel_to(harness: &Harness, host: &str) -> tokio::net::UnixStream {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = harness.client().await;
    stream
        .write_all(format!("CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        assert_eq!(
            stream.read(&mut byte).await.unwrap(),
            1,
            "no tunnel to {host}"
        );
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    stream
}

/// A tunnel outlives the request that judged it. When the scope narrows (a secret was typed),
/// an open tunnel to a site it no longer admits closes, so a connection a page opened before
/// cannot carry what it learns after; a tunnel to a site still admitted carries on.
#[tokio::test]
async fn narrowing_the_scope_closes_open_tunnels_it_no_longer_admits() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let echo = support::echo_upstream().await;
    let harness = Harness::start(
        EgressPolicy::new(Profile::Public, None, []).unwrap(),
        ProxyLimits::default(),
    );
    harness.connector.route("93.184.216.34:443", echo);
    harness.connector.route("93.184.216.35:443", echo);
    harness.resolver.answer("shop.test", &[&["93.184.216.34"]]);
    harness
        .resolver
        .answer("tracker.test", &[&["93.184.216.35"]]);
    let scope = Scope::parse(["shop.test", "tracker.test"], [] as [&str; 0]).unwrap();
    harness.proxy.set_scope(scope.clone());
    let mut shop = tunnel_to(&harness, "shop.test").await;
    let mut tracker = tunnel_to(&harness, "tracker.test").await;

    let handle = harness.proxy.scope_handle();
    handle.set_scope(scope.after_secret(["shop.test".parse().unwrap()]));

    // The tracker's tunnel is closed by the proxy: the next read ends.
    let mut rest = Vec::new();
    support::within(tracker.read_to_end(&mut rest))
        .await
        .unwrap();
    // The shop's still echoes.
    shop.write_all(b"still here").await.unwrap();
    let mut echoed = [0u8; 10];
    support::within(shop.read_exact(&mut echoed)).await.unwrap();
    assert_eq!(&echoed, b"still here");
    // New requests meet the narrowed scope, and the refusal names the rule.
    let refused = harness
        .exchange("CONNECT tracker.test:443 HTTP/1.1\r\nHost: tracker.test:443\r\nConnection: close\r\n\r\n")
        .await;
    assert_eq!(status_of(&refused), 403, "{refused}");
    assert!(
        refused.contains("a secret was typed in this task"),
        "{refused}"
    );
}
