//! A stand-in network for proxy tests: a scripted resolver, a connector that maps "public"
//! addresses onto real servers on loopback, and those servers.
//!
//! The fakes stand in only for what cannot be had here (public DNS and public hosts); the proxy,
//! its Unix socket, the upstream TCP connections and the bytes are all real.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};

use airlock_policy::EgressPolicy;
use airlock_proxy::{
    BoxFuture, Connector, EgressProxy, ProxyConfig, ProxyEvent, ProxyLimits, ResolveError, Resolver,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};

pub(crate) use airlock_testkit::http::{read_head, within};

/// Answers per name, one list per lookup in order (the last repeats), and a count of lookups.
#[derive(Default)]
pub(crate) struct ScriptedResolver {
    answers: Mutex<HashMap<String, Vec<Vec<IpAddr>>>>,
    pub lookups: Mutex<Vec<String>>,
}

impl ScriptedResolver {
    pub(crate) fn answer(&self, name: &str, sequence: &[&[&str]]) {
        let sequence = sequence
            .iter()
            .map(|answer| answer.iter().map(|ip| ip.parse().unwrap()).collect())
            .collect();
        self.answers
            .lock()
            .unwrap()
            .insert(name.to_owned(), sequence);
    }

    pub(crate) fn lookups_of(&self, name: &str) -> usize {
        self.lookups
            .lock()
            .unwrap()
            .iter()
            .filter(|n| *n == name)
            .count()
    }
}

impl Resolver for ScriptedResolver {
    fn resolve<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Vec<IpAddr>, ResolveError>> {
        Box::pin(async move {
            self.lookups.lock().unwrap().push(name.to_owned());
            let mut answers = self.answers.lock().unwrap();
            let Some(sequence) = answers.get_mut(name) else {
                return Err(ResolveError::NotFound {
                    name: name.to_owned(),
                });
            };
            let answer = if sequence.len() > 1 {
                sequence.remove(0)
            } else {
                sequence[0].clone()
            };
            Ok(answer)
        })
    }
}

/// Connects "public" addresses to real loopback servers; records every address it was asked for.
#[derive(Default)]
pub(crate) struct MappedConnector {
    routes: Mutex<HashMap<SocketAddr, SocketAddr>>,
    blackholes: Mutex<Vec<SocketAddr>>,
    pub attempts: Mutex<Vec<SocketAddr>>,
}

impl MappedConnector {
    pub(crate) fn route(&self, public: &str, local: SocketAddr) {
        self.routes
            .lock()
            .unwrap()
            .insert(public.parse().unwrap(), local);
    }

    /// Connecting to this address never completes, as with a host that drops SYNs.
    pub(crate) fn blackhole(&self, public: &str) {
        self.blackholes
            .lock()
            .unwrap()
            .push(public.parse().unwrap());
    }

    pub(crate) fn attempted(&self) -> Vec<SocketAddr> {
        self.attempts.lock().unwrap().clone()
    }
}

impl Connector for MappedConnector {
    fn connect(&self, address: SocketAddr) -> BoxFuture<'_, io::Result<TcpStream>> {
        Box::pin(async move {
            self.attempts.lock().unwrap().push(address);
            if self.blackholes.lock().unwrap().contains(&address) {
                std::future::pending::<()>().await;
            }
            let local = self.routes.lock().unwrap().get(&address).copied();
            match local {
                Some(local) => TcpStream::connect(local).await,
                None => Err(io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    "nothing listens there",
                )),
            }
        })
    }
}

/// The public profile with these exact allow entries.
pub(crate) fn policy(allow: &[&str]) -> EgressPolicy {
    EgressPolicy::new(
        airlock_policy::Profile::Public,
        None,
        allow.iter().map(|e| e.parse().unwrap()),
    )
    .unwrap()
}

/// A proxy on the stand-in network, with its events collected.
pub(crate) struct Harness {
    pub proxy: EgressProxy,
    pub resolver: Arc<ScriptedResolver>,
    pub connector: Arc<MappedConnector>,
    pub events: Arc<Mutex<Vec<ProxyEvent>>>,
}

impl Harness {
    pub(crate) fn start(policy: EgressPolicy, limits: ProxyLimits) -> Self {
        Self::start_with(policy, limits, Arc::default(), Arc::default())
    }

    pub(crate) fn start_with(
        policy: EgressPolicy,
        limits: ProxyLimits,
        resolver: Arc<ScriptedResolver>,
        connector: Arc<MappedConnector>,
    ) -> Self {
        Self::start_routed(
            policy,
            limits,
            airlock_policy::Routes::default(),
            (resolver, connector),
        )
    }

    /// A proxy whose allowed destinations leave by `routes`.
    pub(crate) fn start_routed(
        policy: EgressPolicy,
        limits: ProxyLimits,
        routes: airlock_policy::Routes,
        network: (Arc<ScriptedResolver>, Arc<MappedConnector>),
    ) -> Self {
        Self::start_routed_trusting(policy, limits, routes, network, Vec::new())
    }

    /// As [`Self::start_routed`], trusting `parent_cas` (DER) for TLS to `https://` parents.
    pub(crate) fn start_routed_trusting(
        policy: EgressPolicy,
        limits: ProxyLimits,
        routes: airlock_policy::Routes,
        (resolver, connector): (Arc<ScriptedResolver>, Arc<MappedConnector>),
        parent_cas: Vec<Vec<u8>>,
    ) -> Self {
        let events: Arc<Mutex<Vec<ProxyEvent>>> = Arc::default();
        let sink = Arc::clone(&events);
        let config = ProxyConfig::new(policy)
            .with_routes(routes)
            .with_limits(limits)
            .with_resolver(resolver.clone())
            .with_connector(connector.clone())
            .with_parent_cas(parent_cas)
            .with_events(Arc::new(move |event| sink.lock().unwrap().push(event)));
        let proxy = EgressProxy::start(config).unwrap();
        Self {
            proxy,
            resolver,
            connector,
            events,
        }
    }

    pub(crate) fn refusals(&self) -> Vec<ProxyEvent> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.is_refusal())
            .cloned()
            .collect()
    }

    pub(crate) async fn client(&self) -> UnixStream {
        UnixStream::connect(self.proxy.socket_path()).await.unwrap()
    }

    /// Send raw bytes on a fresh connection and read until the proxy closes it.
    pub(crate) async fn exchange(&self, request: &str) -> String {
        exchange_at(self.proxy.socket_path(), request).await
    }
}

pub(crate) async fn exchange_at(socket: &Path, request: &str) -> String {
    let mut stream = UnixStream::connect(socket).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    within(stream.read_to_end(&mut response)).await.unwrap();
    String::from_utf8_lossy(&response).into_owned()
}

/// What the HTTP upstream saw, one request head per connection.
pub(crate) type SeenHeads = Arc<Mutex<Vec<String>>>;

/// An HTTP/1.1 server on loopback: `/big` answers 1 MiB, anything else a short greeting.
/// It answers `101` and then echoes when asked to upgrade.
pub(crate) async fn http_upstream() -> (SocketAddr, SeenHeads) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let seen: SeenHeads = Arc::default();
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let record = Arc::clone(&record);
            tokio::spawn(async move {
                let head = read_head(&mut stream).await;
                record.lock().unwrap().push(head.clone());
                if head.to_ascii_lowercase().contains("upgrade: websocket") {
                    let _ = stream
                        .write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
                        .await;
                    let (mut read, mut write) = stream.split();
                    let _ = tokio::io::copy(&mut read, &mut write).await;
                    return;
                }
                let body = if head.starts_with("GET /big ") {
                    vec![b'x'; 1024 * 1024]
                } else {
                    b"hello from upstream".to_vec()
                };
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\nkeep-alive: timeout=5\r\nx-upstream: yes\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.write_all(&body).await;
            });
        }
    });
    (address, seen)
}

/// A TCP server on loopback that echoes every byte.
pub(crate) async fn echo_upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let (mut read, mut write) = stream.split();
                let _ = tokio::io::copy(&mut read, &mut write).await;
            });
        }
    });
    address
}

/// The status code of a raw HTTP response (0 if it has none).
pub(crate) fn status_of(response: &str) -> u16 {
    response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Push 512 KiB through an open tunnel to an echo server on `client`: the proxy must cut it at
/// `cap` bytes in both directions together, so less comes back than went.
pub(crate) async fn cut_at_the_cap(harness: &Harness, client: &mut UnixStream, cap: u64) {
    let payload = vec![7_u8; 512 * 1024];
    let (mut read, mut write) = client.split();
    let ((), echoed) = tokio::join!(
        async {
            // The proxy stops reading at the cap and closes: the rest may not be accepted.
            let _ = write.write_all(&payload).await;
        },
        async {
            let mut echoed = Vec::new();
            let _ = within(read.read_to_end(&mut echoed)).await;
            echoed
        }
    );
    let stats = harness.proxy.stats();
    assert!(
        stats.bytes_up + stats.bytes_down <= cap,
        "{} up and {} down through a {cap}-byte cap",
        stats.bytes_up,
        stats.bytes_down
    );
    assert!(echoed.len() < payload.len(), "{}", echoed.len());
}
