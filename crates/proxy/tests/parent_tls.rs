//! A route through a parent reached over TLS (`https://` to the proxy itself), against Debian's
//! squid on its `https_port`: the parent is spoken to only once its certificate checks out (so
//! the credentials never go to an impostor), it is asked for the vetted address as over plain
//! TCP, and a tunnel inside the TLS session keeps the byte cap. The proxy's own connector knows
//! no address here, so a direct dial could only fail, and is counted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use airlock_policy::{Credentials, Resolution, Route, Routes};
use airlock_proxy::ProxyLimits;
use airlock_testkit::parents::{PASSWORD, ParentProxy, USER, squid_tls};
use support::{Harness, MappedConnector, ScriptedResolver, echo_upstream, http_upstream, policy};
use support::{read_head, status_of, within};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::pem::PemObject;

/// A proxy whose only route out is squid over TLS, trusting `cas`, with `lab.test` and
/// `echo.test` answering loopback.
fn through_tls(
    squid: &ParentProxy,
    allow: &[&str],
    cas: Vec<Vec<u8>>,
    limits: ProxyLimits,
) -> Harness {
    let route = Route::parse(
        "corp",
        &format!("https://{}", squid.address),
        &[],
        Resolution::Pinned,
    )
    .unwrap()
    .with_credentials(Credentials {
        user: USER.into(),
        password: PASSWORD.into(),
    });
    let resolver = Arc::new(ScriptedResolver::default());
    resolver.answer("lab.test", &[&["127.0.0.1"]]);
    resolver.answer("echo.test", &[&["127.0.0.1"]]);
    Harness::start_routed_trusting(
        policy(allow),
        limits,
        Routes::new(vec![route], "corp").unwrap(),
        (resolver, Arc::new(MappedConnector::default())),
        cas,
    )
}

/// The CA that signed the parent's certificate, as the operator's `--ca-cert` would give it.
fn trusted(squid: &ParentProxy) -> Vec<Vec<u8>> {
    vec![
        CertificateDer::from_pem_file(squid.tls_ca())
            .unwrap()
            .to_vec(),
    ]
}

fn get(host: &str) -> String {
    format!("GET http://{host}/ HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
}

#[tokio::test]
async fn a_parent_over_tls_is_asked_for_the_vetted_address_once_its_certificate_checks_out() {
    let (lab, _) = http_upstream().await;
    let echo = echo_upstream().await;
    let squid = squid_tls("").await;
    let harness = through_tls(
        &squid,
        &[&lab.to_string(), &echo.to_string()],
        trusted(&squid),
        ProxyLimits::default(),
    );
    let answer = harness
        .exchange(&get(&format!("lab.test:{}", lab.port())))
        .await;
    assert_eq!(status_of(&answer), 200, "{answer}");
    assert!(answer.contains("hello from upstream"), "{answer}");
    let log = squid
        .logged(&format!("CONNECT 127.0.0.1:{}", lab.port()))
        .await;
    assert!(!log.contains("lab.test"), "{log}");

    // A CONNECT tunnel inside the TLS session: copied, not spliced, both ways.
    let mut tunnel = harness.client().await;
    let host = format!("echo.test:{}", echo.port());
    tunnel
        .write_all(format!("CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let head = read_head(&mut tunnel).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // Read back while writing (TLS has no half-close a parent honours: the client's end of
    // stream ends the session, so it comes last).
    let payload: Vec<u8> = (0..200_000_u32).map(|i| (i % 251) as u8).collect();
    let mut echoed = vec![0_u8; payload.len()];
    let (mut read, mut write) = tunnel.split();
    let (written, read_back) = tokio::join!(
        write.write_all(&payload),
        within(read.read_exact(&mut echoed))
    );
    written.unwrap();
    read_back.unwrap();
    assert!(echoed == payload, "the bytes came back changed");
    assert!(harness.connector.attempted().is_empty(), "dialled directly");
}

#[tokio::test]
async fn a_parent_whose_certificate_is_not_trusted_never_hears_the_request_or_the_credentials() {
    let (lab, _) = http_upstream().await;
    let squid = squid_tls("").await;
    // Only the public roots: squid's certificate chains to none of them.
    let harness = through_tls(
        &squid,
        &[&lab.to_string()],
        Vec::new(),
        ProxyLimits::default(),
    );
    let answer = harness
        .exchange(&get(&format!("lab.test:{}", lab.port())))
        .await;
    assert_eq!(status_of(&answer), 502, "{answer}");
    assert!(answer.contains("route `corp`"), "{answer}");
    assert!(
        answer.contains("TLS with its parent proxy failed"),
        "{answer}"
    );
    assert!(answer.contains("--ca-cert"), "{answer}");
    let events = format!("{:?}", harness.events.lock().unwrap());
    assert!(events.contains("parent-tls"), "{events}");
    for shown in [&answer, &events] {
        for secret in [PASSWORD, USER] {
            assert!(!shown.contains(secret), "`{secret}` shown: {shown}");
        }
    }
    // The handshake failed before the CONNECT (and its Proxy-Authorization) was written: squid
    // logged no request.
    assert!(
        !squid.access_log().contains("CONNECT"),
        "{}",
        squid.access_log()
    );
}

#[tokio::test]
async fn a_tunnel_inside_the_tls_session_is_cut_at_the_byte_cap() {
    let echo = echo_upstream().await;
    let squid = squid_tls("").await;
    let cap = 64 * 1024;
    let harness = through_tls(
        &squid,
        &[&echo.to_string()],
        trusted(&squid),
        ProxyLimits {
            max_bytes_per_connection: cap,
            ..ProxyLimits::default()
        },
    );
    let mut client = harness.client().await;
    let host = format!("echo.test:{}", echo.port());
    client
        .write_all(format!("CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let head = read_head(&mut client).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    support::cut_at_the_cap(&harness, &mut client, cap).await;
}
