//! Routes through a parent proxy, against real ones on loopback (squid, microsocks): the lab site
//! is reached only through the parent, which is asked for the vetted address; what the policy
//! refuses never reaches the parent; a parent resolves names only on a route that allows it; a
//! wrong password ends with the route's refusal; credentials show nowhere. The proxy's own
//! connector knows no address here, so a direct dial could only fail, and is counted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use airlock_policy::{Credentials, Resolution, Route, Routes};
use airlock_proxy::{Outcome, ProxyLimits};
use airlock_testkit::parents::{PASSWORD, USER, microsocks, squid};
use support::{Harness, MappedConnector, ScriptedResolver, http_upstream, policy, status_of};

fn through(url: &str, sites: &[&str], resolution: Resolution, password: &str) -> Route {
    let sites: Vec<String> = sites.iter().map(|s| (*s).to_owned()).collect();
    Route::parse("corp", url, &sites, resolution)
        .unwrap()
        .with_credentials(Credentials {
            user: USER.into(),
            password: password.into(),
        })
}

/// A proxy whose only route out is `route` (the default), with `lab.test` answering loopback.
fn routed(route: Route, allow: &str, default: &str) -> Harness {
    let resolver = Arc::new(ScriptedResolver::default());
    resolver.answer("lab.test", &[&["127.0.0.1"]]);
    resolver.answer("private.test", &[&["10.0.0.5"]]);
    let routes = Routes::new(vec![route], default).unwrap();
    Harness::start_routed(
        policy(&[allow]),
        ProxyLimits::default(),
        routes,
        (resolver, Arc::new(MappedConnector::default())),
    )
}

fn get(host: &str) -> String {
    format!("GET http://{host}/ HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
}

#[tokio::test]
async fn a_pinned_route_asks_squid_for_the_vetted_address_and_never_dials_itself() {
    let (lab, _) = http_upstream().await;
    let squid = squid("").await;
    let url = format!("http://{}", squid.address);
    let route = through(&url, &[], Resolution::Pinned, PASSWORD);
    let harness = routed(route, &lab.to_string(), "corp");
    let host = format!("lab.test:{}", lab.port());
    let answer = harness.exchange(&get(&host)).await;
    assert_eq!(status_of(&answer), 200, "{answer}");
    assert!(answer.contains("hello from upstream"), "{answer}");
    // squid was asked for the address Airlock vetted, never the name.
    let log = squid
        .logged(&format!("CONNECT 127.0.0.1:{}", lab.port()))
        .await;
    assert!(!log.contains("lab.test"), "{log}");
    assert!(harness.connector.attempted().is_empty(), "dialled directly");
    // A CONNECT tunnel goes the same way.
    let tunnel = harness
        .exchange(&format!(
            "CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n\r\nGET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        ))
        .await;
    assert_eq!(status_of(&tunnel), 200, "{tunnel}");
    assert!(tunnel.contains("hello from upstream"), "{tunnel}");
    assert!(harness.connector.attempted().is_empty(), "dialled directly");
}

#[tokio::test]
async fn what_the_policy_refuses_never_reaches_the_parent() {
    let (lab, _) = http_upstream().await;
    let squid = squid("").await;
    let route = through(
        &format!("http://{}", squid.address),
        &[],
        Resolution::Pinned,
        PASSWORD,
    );
    let harness = routed(route, &lab.to_string(), "corp");
    for host in [
        "private.test",
        "169.254.169.254",
        "127.0.0.1:9",
        "localhost",
    ] {
        let answer = harness.exchange(&get(host)).await;
        assert_eq!(status_of(&answer), 403, "{host}: {answer}");
    }
    // Then one allowed request: once squid logged it, it logged everything it heard before.
    let allowed = harness
        .exchange(&get(&format!("lab.test:{}", lab.port())))
        .await;
    assert_eq!(status_of(&allowed), 200, "{allowed}");
    let log = squid.logged("CONNECT 127.0.0.1").await;
    assert_eq!(
        log.lines().count(),
        1,
        "the parent heard a refused request: {log}"
    );
}

#[tokio::test]
async fn a_wrong_password_ends_with_the_routes_refusal_and_no_credential_shows() {
    let (lab, _) = http_upstream().await;
    let squid = squid("").await;
    let wrong = "not-the-password-91c2";
    let route = through(
        &format!("http://{}", squid.address),
        &[],
        Resolution::Pinned,
        wrong,
    );
    let harness = routed(route, &lab.to_string(), "corp");
    let answer = harness
        .exchange(&get(&format!("lab.test:{}", lab.port())))
        .await;
    assert_eq!(status_of(&answer), 502, "{answer}");
    assert!(answer.contains("route `corp`"), "{answer}");
    assert!(answer.contains("407"), "{answer}");
    let events = format!("{:?}", harness.events.lock().unwrap());
    for shown in [&answer, &events] {
        for secret in [wrong, PASSWORD, USER] {
            assert!(!shown.contains(secret), "`{secret}` shown: {shown}");
        }
    }
    assert!(events.contains("parent-credentials"), "{events}");
}

#[tokio::test]
async fn a_parent_resolves_names_only_on_a_route_that_allows_it() {
    let (lab, _) = http_upstream().await;
    // Only squid knows `intranet.corp.test`; Airlock's resolver has no answer for it.
    let squid = squid("127.0.0.1 intranet.corp.test\n").await;
    let url = format!("http://{}", squid.address);
    let host = format!("intranet.corp.test:{}", lab.port());
    let allow = format!("intranet.corp.test:{}", lab.port());

    let pinned = routed(
        through(&url, &[], Resolution::Pinned, PASSWORD),
        &allow,
        "corp",
    );
    let answer = pinned.exchange(&get(&host)).await;
    assert_eq!(
        status_of(&answer),
        502,
        "a pinned route resolves itself: {answer}"
    );
    assert!(answer.contains("intranet.corp.test"), "{answer}");

    let resolving = routed(
        through(&url, &[], Resolution::ParentResolves, PASSWORD),
        &allow,
        "corp",
    );
    let answer = resolving.exchange(&get(&host)).await;
    assert_eq!(status_of(&answer), 200, "{answer}");
    let log = squid.logged(&format!("CONNECT {host}")).await;
    assert_eq!(
        log.lines().count(),
        1,
        "the pinned route asked the parent: {log}"
    );
    assert_eq!(resolving.resolver.lookups_of("intranet.corp.test"), 0);
}

#[tokio::test]
async fn socks5_carries_the_vetted_address_and_refuses_a_wrong_password() {
    let (lab, _) = http_upstream().await;
    let socks = microsocks().await;
    let url = format!("socks5://{}", socks.address);
    let harness = routed(
        through(&url, &[], Resolution::Pinned, PASSWORD),
        &lab.to_string(),
        "corp",
    );
    let host = format!("lab.test:{}", lab.port());
    let answer = harness.exchange(&get(&host)).await;
    assert_eq!(status_of(&answer), 200, "{answer}");
    assert!(harness.connector.attempted().is_empty(), "dialled directly");

    let wrong = routed(
        through(&url, &[], Resolution::Pinned, "not-the-password-91c2"),
        &lab.to_string(),
        "corp",
    );
    let answer = wrong.exchange(&get(&host)).await;
    assert_eq!(status_of(&answer), 502, "{answer}");
    assert!(answer.contains("refused the credentials"), "{answer}");
    assert!(!answer.contains("not-the-password-91c2") && !answer.contains(PASSWORD));
}

#[tokio::test]
async fn sites_send_their_names_through_the_parent_and_the_rest_direct() {
    let (lab, _) = http_upstream().await;
    let squid = squid("127.0.0.1 intranet.corp.test\n").await;
    let route = through(
        &format!("http://{}", squid.address),
        &["*.corp.test"],
        Resolution::ParentResolves,
        PASSWORD,
    );
    let resolver = Arc::new(ScriptedResolver::default());
    resolver.answer("lab.test", &[&["127.0.0.1"]]);
    let connector = Arc::new(MappedConnector::default());
    connector.route(&lab.to_string(), lab);
    let harness = Harness::start_routed(
        policy(&[
            &lab.to_string(),
            &format!("intranet.corp.test:{}", lab.port()),
        ]),
        ProxyLimits::default(),
        Routes::new(vec![route], "direct").unwrap(),
        (resolver, connector),
    );
    let corp = harness
        .exchange(&get(&format!("intranet.corp.test:{}", lab.port())))
        .await;
    assert_eq!(status_of(&corp), 200, "{corp}");
    squid.logged("intranet.corp.test").await;
    assert!(harness.connector.attempted().is_empty());
    let direct = harness
        .exchange(&get(&format!("lab.test:{}", lab.port())))
        .await;
    assert_eq!(status_of(&direct), 200, "{direct}");
    assert_eq!(
        harness.connector.attempted(),
        vec![lab],
        "the rest went direct"
    );
    // A third request through the parent: logged after the direct one would have been.
    let again = harness
        .exchange(&get(&format!("intranet.corp.test:{}", lab.port())))
        .await;
    assert_eq!(status_of(&again), 200, "{again}");
    let log = squid.lines(2).await;
    assert!(!log.contains("lab.test"), "{log}");
    // Each connection says which route it left by, when it opened and when it closed (every
    // closing is reported once the proxy has stopped).
    let events = std::sync::Arc::clone(&harness.events);
    harness.proxy.stop().await;
    let routes: Vec<(String, &str, String)> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|event| match &event.outcome {
            Outcome::Allowed { route, .. } => Some((event.target.clone(), "opened", route.clone())),
            Outcome::Closed { route, .. } => Some((event.target.clone(), "closed", route.clone())),
            _ => None,
        })
        .collect();
    for (target, _, route) in &routes {
        let expected = if target.contains("corp.test") {
            "corp"
        } else {
            "direct"
        };
        assert_eq!(route, expected, "{routes:?}");
    }
    assert_eq!(
        routes
            .iter()
            .filter(|(_, what, _)| *what == "closed")
            .count(),
        3,
        "{routes:?}"
    );
}

#[tokio::test]
async fn a_tasks_route_takes_every_unnamed_site_and_closes_tunnels_on_the_old_one() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let echo = support::echo_upstream().await;
    let (lab, _) = http_upstream().await;
    let squid = squid("").await;
    let route = through(
        &format!("http://{}", squid.address),
        &[],
        Resolution::Pinned,
        PASSWORD,
    );
    let resolver = Arc::new(ScriptedResolver::default());
    resolver.answer("lab.test", &[&["127.0.0.1"]]);
    resolver.answer("echo.test", &[&["127.0.0.1"]]);
    let connector = Arc::new(MappedConnector::default());
    connector.route(&echo.to_string(), echo);
    let harness = Harness::start_routed(
        policy(&[&lab.to_string(), &echo.to_string()]),
        ProxyLimits::default(),
        Routes::new(vec![route], "direct").unwrap(),
        (resolver, connector),
    );
    assert_eq!(harness.proxy.default_route(), "direct");
    // A tunnel opened directly before the task picks its route (as a warm browser's could be).
    let mut tunnel = harness.client().await;
    let host = format!("echo.test:{}", echo.port());
    tunnel
        .write_all(format!("CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = [0_u8; 19];
    tunnel.read_exact(&mut head).await.unwrap();
    assert!(head.starts_with(b"HTTP/1.1 200"), "{head:?}");
    tunnel.write_all(b"ping").await.unwrap();
    let mut echoed = [0_u8; 4];
    tunnel.read_exact(&mut echoed).await.unwrap();

    let unknown = harness.proxy.choose_route("home").unwrap_err().to_string();
    assert!(unknown.contains("`direct`, `corp`"), "{unknown}");
    harness.proxy.choose_route("corp").unwrap();
    assert_eq!(harness.proxy.default_route(), "corp");
    // The direct tunnel closes: it would carry the task's bytes by a route it did not pick.
    // (Closed or reset: either way nothing more passes.)
    let mut rest = Vec::new();
    let ended = support::within(tunnel.read_to_end(&mut rest)).await;
    assert!(ended.is_err() || rest.is_empty(), "{rest:?}");
    let answer = harness
        .exchange(&get(&format!("lab.test:{}", lab.port())))
        .await;
    assert_eq!(status_of(&answer), 200, "{answer}");
    squid
        .logged(&format!("CONNECT 127.0.0.1:{}", lab.port()))
        .await;
    assert_eq!(
        harness.connector.attempted(),
        vec![echo],
        "only the tunnel before the choice went direct"
    );
}
