//! Real Chromium (Debian's, headless) browsing through the proxy: a page on this machine, opened
//! by one exact allow entry, whose iframe, images, redirect, fetch and WebSocket aim at addresses
//! that must be refused. The page loads; every forbidden request is refused and reported; the
//! forbidden server never sees a connection.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_policy::{EgressPolicy, Profile};
use airlock_proxy::{EgressProxy, Outcome, ProxyConfig, ProxyEvent, TcpConnector};
use airlock_testkit::site::site;
use support::ScriptedResolver;
use tokio::net::TcpListener;

const CHROMIUM: &str = "/usr/bin/chromium";

/// The test site: `/` holds the traps, `/ok.txt` is allowed content, `/redirect` points at metadata.
fn trap_site(forbidden_port: u16) -> u16 {
    site(move |_| {
        HashMap::from([
            ("/", ("200 OK", String::new(), page(forbidden_port))),
            ("/ok.txt", ("200 OK", String::new(), "ok loaded".to_owned())),
            (
                "/redirect",
                (
                    "302 Found",
                    "location: http://169.254.169.254/latest/meta-data/\r\n".to_owned(),
                    String::new(),
                ),
            ),
        ])
    })
    .0
}

/// The page with the traps; its iframe aims at a server on this machine that must never be reached.
fn page(forbidden_port: u16) -> String {
    format!(
        r#"<!doctype html><html><head><title>airlock</title></head><body>
<h1>Airlock test page</h1>
<p id="allowed">pending</p><p id="private">pending</p>
<iframe src="http://127.0.0.1:{forbidden_port}/frame"></iframe>
<img src="http://2130706433/pixel.png"><img src="/redirect">
<script>
fetch('/ok.txt').then(r => r.text()).then(t => document.getElementById('allowed').textContent = t);
fetch('http://10.0.0.1/secret').then(() => document.getElementById('private').textContent = 'private reached',
  () => document.getElementById('private').textContent = 'private refused');
try {{ new WebSocket('ws://10.0.0.2/socket'); }} catch (e) {{}}
</script></body></html>"#
    )
}

/// Chromium speaks TCP to its proxy. As `airlock-relay` does in the container, accept each of
/// its connections and hand the socket itself to the proxy.
fn relay(handoff: &Path) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let channel = std::os::unix::net::UnixStream::connect(handoff).unwrap();
    std::thread::spawn(move || airlock_relay::relay(&listener, &channel));
    port
}

fn refused_targets(events: &[ProxyEvent]) -> Vec<String> {
    events
        .iter()
        .filter(|e| matches!(e.outcome, Outcome::Refused { .. }))
        .map(|e| e.target.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_loads_the_allowed_page_and_every_forbidden_request_is_refused() {
    if std::env::var_os("AIRLOCK_SKIP_BROWSER_TESTS").is_some() {
        eprintln!("skipped: AIRLOCK_SKIP_BROWSER_TESTS is set");
        return;
    }
    assert!(
        Path::new(CHROMIUM).exists(),
        "this test drives Debian's Chromium: apt-get install chromium (or set AIRLOCK_SKIP_BROWSER_TESTS=1)"
    );

    // A server that must never be reached, though it listens on this machine.
    let forbidden = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let forbidden_port = forbidden.local_addr().unwrap().port();
    let forbidden_hits = Arc::new(AtomicUsize::new(0));
    let hits = Arc::clone(&forbidden_hits);
    tokio::spawn(async move {
        while forbidden.accept().await.is_ok() {
            hits.fetch_add(1, Ordering::SeqCst);
        }
    });

    let site = trap_site(forbidden_port);
    let policy = EgressPolicy::new(
        Profile::Public,
        None,
        [format!("127.0.0.1:{site}").parse().unwrap()],
    )
    .unwrap();
    let events: Arc<Mutex<Vec<ProxyEvent>>> = Arc::default();
    let sink = Arc::clone(&events);
    // Real TCP to the real site; the page names no host, so the resolver is never asked.
    let config = ProxyConfig::new(policy)
        .with_resolver(Arc::new(ScriptedResolver::default()))
        .with_connector(Arc::new(TcpConnector))
        .with_events(Arc::new(move |event| sink.lock().unwrap().push(event)));
    let proxy = EgressProxy::start(config).unwrap();
    let front = relay(proxy.handoff_path().unwrap());

    let profile = tempfile::tempdir().unwrap();
    let output = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::process::Command::new(CHROMIUM)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-quic",
                &format!("--user-data-dir={}", profile.path().display()),
                &format!("--proxy-server=http://127.0.0.1:{front}"),
                "--proxy-bypass-list=<-loopback>",
                "--virtual-time-budget=5000",
                "--dump-dom",
                &format!("http://127.0.0.1:{site}/"),
            ])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("chromium finished within 90 s")
    .unwrap();
    let dom = String::from_utf8_lossy(&output.stdout);
    assert!(
        dom.contains("Airlock test page"),
        "page did not load: {dom}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        dom.contains("ok loaded"),
        "allowed fetch did not load: {dom}"
    );
    assert!(
        dom.contains("private refused"),
        "private fetch was not refused: {dom}"
    );

    let refused = refused_targets(&events.lock().unwrap());
    for expected in [
        format!("http://127.0.0.1:{forbidden_port}/frame"),
        "http://127.0.0.1/pixel.png".to_owned(),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://10.0.0.1/secret".to_owned(),
        "10.0.0.2:80".to_owned(),
    ] {
        assert!(
            refused.contains(&expected),
            "{expected} was not refused; refused: {refused:#?}"
        );
    }
    eprintln!("refused: {refused:#?}");
    assert_eq!(
        forbidden_hits.load(Ordering::SeqCst),
        0,
        "the forbidden server was reached"
    );
    // Every connection Chromium made was served as a handed-off socket.
    let stats = proxy.stats();
    assert!(stats.handed_off > 0, "{stats:?}");
    assert_eq!(stats.handed_off, stats.connections, "{stats:?}");
    proxy.stop().await;
}
