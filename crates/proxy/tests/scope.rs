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
