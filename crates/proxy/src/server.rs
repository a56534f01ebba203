//! Serving one client connection: CONNECT tunnels and absolute-form forwarding, every
//! destination vetted by the egress policy, every connection made only to a vetted address.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use airlock_policy::{Decision, EgressPolicy, Refusal};
use airlock_relay::Received;
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode, Uri, Version};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::Interest;
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::sync::mpsc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::events::{Counters, EventSink, Outcome, ProxyEvent, Via};
use crate::guard::{ByteCounters, Guarded};
use crate::network::{Connector, Resolver, Upstream};
use crate::{Limits, REFUSED_HEADER};

/// Buffer per direction for tunnels: large enough that bulk transfers are not syscall-bound.
const TUNNEL_BUFFER: usize = 64 * 1024;

/// The body of every response the proxy sends.
type ProxyBody = UnsyncBoxBody<Bytes, hyper::Error>;

/// Everything a connection needs, shared by all of them.
pub(crate) struct Shared {
    pub(crate) policy: EgressPolicy,
    pub(crate) limits: Limits,
    pub(crate) resolver: Arc<dyn Resolver>,
    pub(crate) connector: Arc<dyn Connector>,
    pub(crate) events: Option<EventSink>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) shutdown: CancellationToken,
}

/// Holds a connection slot; tunnels keep a clone so the slot lasts as long as the tunnel.
struct Ticket {
    _permit: OwnedSemaphorePermit,
    counters: Arc<Counters>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.counters
            .active_connections
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// How many relays may hold a hand-off channel at once; a task has one.
const MAX_HANDOFF_CHANNELS: usize = 4;

/// Accept clients until `shutdown`, then end every connection still open. Clients come from
/// `listener` and, as sockets passed by a relay, from channels on `handoff`.
pub(crate) async fn accept_loop(
    listener: UnixListener,
    handoff: Option<UnixListener>,
    shared: Arc<Shared>,
) {
    let slots = Arc::new(Semaphore::new(shared.limits.max_connections));
    let channel_slots = Arc::new(Semaphore::new(MAX_HANDOFF_CHANNELS));
    let (handed_tx, mut handed_rx) = mpsc::channel::<TcpStream>(64);
    let mut connections = JoinSet::new();
    loop {
        let client = tokio::select! {
            () = shared.shutdown.cancelled() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => Client::Unix(stream),
                Err(error) => {
                    tracing::warn!(%error, "egress proxy could not accept a connection");
                    // Out of descriptors or similar: yield so the loop does not spin.
                    tokio::task::yield_now().await;
                    continue;
                }
            },
            accepted = accept_on(handoff.as_ref()) => {
                match accepted {
                    Ok((channel, _)) => {
                        if let Ok(permit) = Arc::clone(&channel_slots).try_acquire_owned() {
                            connections.spawn(receive_handoffs(
                                channel,
                                handed_tx.clone(),
                                Arc::clone(&shared.counters),
                                permit,
                            ));
                        } else {
                            tracing::warn!("egress proxy refused a hand-off channel: too many open");
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "egress proxy could not accept a hand-off channel");
                        tokio::task::yield_now().await;
                    }
                }
                continue;
            }
            Some(stream) = handed_rx.recv() => {
                shared.counters.handed_off.fetch_add(1, Ordering::Relaxed);
                Client::Tcp(stream)
            }
        };
        shared.counters.connections.fetch_add(1, Ordering::Relaxed);
        if let Ok(permit) = Arc::clone(&slots).try_acquire_owned() {
            shared
                .counters
                .active_connections
                .fetch_add(1, Ordering::Relaxed);
            let ticket = Arc::new(Ticket {
                _permit: permit,
                counters: Arc::clone(&shared.counters),
            });
            connections.spawn(serve(client, Arc::clone(&shared), ticket));
        } else {
            shared
                .counters
                .busy_rejections
                .fetch_add(1, Ordering::Relaxed);
            connections.spawn(reject_busy(client));
        }
    }
    connections.shutdown().await;
}

/// Accept on the hand-off listener, or wait forever when there is none.
async fn accept_on(
    listener: Option<&UnixListener>,
) -> std::io::Result<(UnixStream, tokio::net::unix::SocketAddr)> {
    match listener {
        Some(listener) => listener.accept().await,
        None => std::future::pending().await,
    }
}

/// Read sockets a relay passes on `channel` and queue each as a client. A message that breaks the
/// protocol closes the channel: the relay is broken or not a relay.
async fn receive_handoffs(
    channel: UnixStream,
    clients: mpsc::Sender<TcpStream>,
    counters: Arc<Counters>,
    _slot: OwnedSemaphorePermit,
) {
    loop {
        if channel.readable().await.is_err() {
            return;
        }
        let received = channel.try_io(Interest::READABLE, || {
            airlock_relay::receive_stream(&channel)
        });
        let stream = match received {
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(error) => {
                tracing::debug!(%error, "egress proxy hand-off channel failed");
                return;
            }
            Ok(Received::Closed) => return,
            Ok(Received::Refused(refusal)) => {
                counters.handoff_refusals.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%refusal, "egress proxy refused a hand-off and closed its channel");
                return;
            }
            Ok(Received::Stream(stream)) => stream,
        };
        let stream = match stream
            .set_nonblocking(true)
            .and_then(|()| TcpStream::from_std(stream))
        {
            Ok(stream) => stream,
            Err(error) => {
                tracing::warn!(%error, "egress proxy could not take a handed-off connection");
                continue;
            }
        };
        // Answers are often small writes; they should not wait on Nagle's algorithm.
        let _ = stream.set_nodelay(true);
        if clients.send(stream).await.is_err() {
            return;
        }
    }
}

/// A browser's connection: made to `proxy.sock`, or handed off by the relay.
enum Client {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl tokio::io::AsyncRead for Client {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Client::Unix(stream) => std::pin::Pin::new(stream).poll_read(cx, buf),
            Client::Tcp(stream) => std::pin::Pin::new(stream).poll_read(cx, buf),
        }
    }
}

impl tokio::io::AsyncWrite for Client {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Client::Unix(stream) => std::pin::Pin::new(stream).poll_write(cx, data),
            Client::Tcp(stream) => std::pin::Pin::new(stream).poll_write(cx, data),
        }
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Client::Unix(stream) => std::pin::Pin::new(stream).poll_write_vectored(cx, bufs),
            Client::Tcp(stream) => std::pin::Pin::new(stream).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Client::Unix(stream) => std::pin::Pin::new(stream).poll_flush(cx),
            Client::Tcp(stream) => std::pin::Pin::new(stream).poll_flush(cx),
        }
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Client::Unix(stream) => std::pin::Pin::new(stream).poll_shutdown(cx),
            Client::Tcp(stream) => std::pin::Pin::new(stream).poll_shutdown(cx),
        }
    }
}

async fn reject_busy(mut stream: Client) {
    use tokio::io::AsyncWriteExt;
    let response = b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-length: 37\r\ncontent-type: text/plain\r\n\r\nAirlock: too many proxy connections\r\n";
    // The client may already be gone; there is nothing to do about a failed write.
    let _ = stream.write_all(response).await;
    linger(stream).await;
}

/// Close a client connection so that it can still read what was written: shut down our side,
/// then discard what it sent until it closes too (bounded in time and bytes). Closing a socket
/// with unread input makes the peer's next read fail with a reset, losing the answer (a `431`
/// for an oversized head, a `503` when busy).
async fn linger(mut stream: Client) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const LINGER: std::time::Duration = std::time::Duration::from_secs(2);
    const MAX_DISCARD: usize = 256 * 1024;
    if stream.shutdown().await.is_err() {
        return;
    }
    let mut discarded = 0;
    let mut scratch = [0_u8; 8192];
    let drain = async {
        while discarded < MAX_DISCARD {
            match stream.read(&mut scratch).await {
                Ok(0) | Err(_) => break,
                Ok(n) => discarded += n,
            }
        }
    };
    // Time running out is the expected end for a client that never closes.
    let _ = tokio::time::timeout(LINGER, drain).await;
}

/// The client's socket, handed to hyper; when hyper lets go of it, it closes by [`linger`].
struct LingeringClose(Option<Client>);

impl Drop for LingeringClose {
    fn drop(&mut self) {
        if let (Some(stream), Ok(runtime)) = (self.0.take(), tokio::runtime::Handle::try_current())
        {
            runtime.spawn(linger(stream));
        }
    }
}

impl tokio::io::AsyncRead for LingeringClose {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.0.as_mut() {
            Some(stream) => std::pin::Pin::new(stream).poll_read(cx, buf),
            None => std::task::Poll::Ready(Ok(())),
        }
    }
}

impl tokio::io::AsyncWrite for LingeringClose {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.0.as_mut() {
            Some(stream) => std::pin::Pin::new(stream).poll_write(cx, data),
            None => std::task::Poll::Ready(Err(std::io::ErrorKind::NotConnected.into())),
        }
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.0.as_mut() {
            Some(stream) => std::pin::Pin::new(stream).poll_flush(cx),
            None => std::task::Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.0.as_mut() {
            Some(stream) => std::pin::Pin::new(stream).poll_shutdown(cx),
            None => std::task::Poll::Ready(Ok(())),
        }
    }
}

async fn serve(stream: Client, shared: Arc<Shared>, ticket: Arc<Ticket>) {
    let limits = shared.limits;
    // The client side gets the idle time-out too; its bytes are not upstream traffic.
    let client_counters = ByteCounters {
        read: Arc::new(AtomicU64::new(0)),
        written: Arc::new(AtomicU64::new(0)),
    };
    let client = Guarded::new(
        LingeringClose(Some(stream)),
        limits.idle_timeout,
        u64::MAX,
        client_counters,
    );
    let service = {
        let shared = Arc::clone(&shared);
        service_fn(move |request| {
            let shared = Arc::clone(&shared);
            let ticket = Arc::clone(&ticket);
            async move { Ok::<_, Infallible>(shared.handle(request, ticket).await) }
        })
    };
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes)
        .serve_connection(TokioIo::new(client), service)
        .with_upgrades();
    tokio::select! {
        result = connection => {
            if let Err(error) = result {
                tracing::debug!(%error, "egress proxy client connection ended with an error");
            }
        }
        () = shared.shutdown.cancelled() => {}
    }
}

/// What went wrong before a destination was reached, as the response to send.
struct Stop {
    status: StatusCode,
    reason: String,
    refusal_class: Option<&'static str>,
}

impl Stop {
    fn refused(refusal: &Refusal) -> Self {
        Self {
            status: StatusCode::FORBIDDEN,
            reason: refusal.to_string(),
            refusal_class: Some(refusal.class()),
        }
    }

    fn failed(status: StatusCode, reason: impl Into<String>) -> Self {
        Self {
            status,
            reason: reason.into(),
            refusal_class: None,
        }
    }
}

impl Shared {
    async fn handle(&self, request: Request<Incoming>, ticket: Arc<Ticket>) -> Response<ProxyBody> {
        if request.method() == Method::CONNECT {
            self.tunnel(request, ticket).await
        } else {
            self.forward(request).await
        }
    }

    async fn tunnel(&self, request: Request<Incoming>, ticket: Arc<Ticket>) -> Response<ProxyBody> {
        let Some(authority) = request.uri().authority().map(ToString::to_string) else {
            let stop = Stop::failed(StatusCode::BAD_REQUEST, "CONNECT needs host:port");
            return self.stop(Via::Connect, &request.uri().to_string(), &stop);
        };
        let decision = self.policy.decide_authority(&authority);
        let (upstream, address) = match self.open(decision).await {
            Ok(opened) => opened,
            Err(stop) => return self.stop(Via::Connect, &authority, &stop),
        };
        self.emit(Via::Connect, &authority, Outcome::Allowed { address });
        self.counters.tunnels.fetch_add(1, Ordering::Relaxed);

        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            let _ticket = ticket;
            let upgraded = match hyper::upgrade::on(request).await {
                Ok(upgraded) => upgraded,
                Err(error) => {
                    tracing::debug!(%error, "CONNECT client left before the tunnel opened");
                    return;
                }
            };
            // The client's socket inside `upgraded` is already guarded (idle time-out).
            let mut client = TokioIo::new(upgraded);
            let mut upstream = upstream;
            tokio::select! {
                result = tokio::io::copy_bidirectional_with_sizes(&mut client, &mut upstream, TUNNEL_BUFFER, TUNNEL_BUFFER) => {
                    if let Err(error) = result {
                        tracing::debug!(%error, %address, "tunnel ended with an error");
                    }
                }
                () = shutdown.cancelled() => {}
            }
        });
        empty_response(StatusCode::OK)
    }

    async fn forward(&self, request: Request<Incoming>) -> Response<ProxyBody> {
        let uri = request.uri().clone();
        let target = event_target(&uri);
        match uri.scheme_str() {
            Some("http") => {}
            None => {
                let stop = Stop::failed(
                    StatusCode::BAD_REQUEST,
                    "this is a proxy: send absolute-form requests (GET http://host/path) or CONNECT host:port",
                );
                return self.stop(Via::Forward, &target, &stop);
            }
            Some("https") => {
                let stop = Stop::failed(
                    StatusCode::BAD_REQUEST,
                    "https goes through CONNECT host:443",
                );
                return self.stop(Via::Forward, &target, &stop);
            }
            Some(other) => {
                let stop = Stop::failed(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "scheme `{other}` is not proxied: only http (and https through CONNECT)"
                    ),
                );
                return self.stop(Via::Forward, &target, &stop);
            }
        }
        let decision = self.policy.decide_url(&uri.to_string());
        let (addresses, port) = match self.vet(decision).await {
            Ok(vetted) => vetted,
            Err(stop) => return self.stop(Via::Forward, &target, &stop),
        };
        if request.headers().contains_key(header::UPGRADE) {
            let stop = Stop::failed(
                StatusCode::BAD_REQUEST,
                "Upgrade over plain HTTP is not proxied; WebSockets go through CONNECT",
            );
            return self.stop(Via::Forward, &target, &stop);
        }
        let (upstream, address) = match self.connect(&addresses, port).await {
            Ok(opened) => opened,
            Err(stop) => return self.stop(Via::Forward, &target, &stop),
        };
        self.emit(Via::Forward, &target, Outcome::Allowed { address });
        self.counters.forwarded.fetch_add(1, Ordering::Relaxed);

        match self.exchange(request, upstream).await {
            Ok(response) => response,
            Err(error) => {
                let status = if is_timeout(&error) {
                    StatusCode::GATEWAY_TIMEOUT
                } else {
                    StatusCode::BAD_GATEWAY
                };
                let stop = Stop::failed(status, format!("the destination did not answer: {error}"));
                self.stop(Via::Forward, &target, &stop)
            }
        }
    }

    /// Send one request on its own upstream connection and return the response to relay.
    async fn exchange(
        &self,
        request: Request<Incoming>,
        upstream: Guarded<Box<dyn Upstream>>,
    ) -> Result<Response<ProxyBody>, hyper::Error> {
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await?;
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                result = connection => {
                    if let Err(error) = result {
                        tracing::debug!(%error, "forwarded connection ended with an error");
                    }
                }
                () = shutdown.cancelled() => {}
            }
        });

        let (mut parts, body) = request.into_parts();
        let authority = parts.uri.authority().map(ToString::to_string);
        parts.uri = origin_form(&parts.uri);
        parts.version = Version::HTTP_11;
        strip_hop_by_hop(&mut parts.headers);
        if let Some(host) = authority.and_then(|a| HeaderValue::from_str(&a).ok()) {
            // The upstream sees the host that was vetted, whatever the client's Host header said.
            parts.headers.insert(header::HOST, host);
        }
        let response = sender
            .send_request(Request::from_parts(parts, body))
            .await?;
        let (mut parts, body) = response.into_parts();
        strip_hop_by_hop(&mut parts.headers);
        Ok(Response::from_parts(parts, body.boxed_unsync()))
    }

    /// Vet, resolve once, vet every answer, then connect to a vetted address.
    async fn open(
        &self,
        decision: Decision,
    ) -> Result<(Guarded<Box<dyn Upstream>>, SocketAddr), Stop> {
        let (addresses, port) = self.vet(decision).await?;
        self.connect(&addresses, port).await
    }

    async fn vet(&self, decision: Decision) -> Result<(Vec<IpAddr>, u16), Stop> {
        match decision {
            Decision::Refuse(refusal) => Err(Stop::refused(&refusal)),
            Decision::Allow { ip, port, .. } => Ok((vec![ip.to_canonical()], port)),
            Decision::Resolve { name, port } => {
                let lookup =
                    tokio::time::timeout(self.limits.resolve_timeout, self.resolver.resolve(&name));
                let answers = match lookup.await {
                    Ok(Ok(answers)) => answers,
                    Ok(Err(error)) => {
                        return Err(Stop::failed(StatusCode::BAD_GATEWAY, error.to_string()));
                    }
                    Err(_) => {
                        return Err(Stop::failed(
                            StatusCode::GATEWAY_TIMEOUT,
                            format!("looking up `{name}` timed out"),
                        ));
                    }
                };
                let vetted = self
                    .policy
                    .decide_resolved(&name, port, &answers)
                    .map_err(|refusal| Stop::refused(&refusal))?;
                Ok((vetted, port))
            }
        }
    }

    async fn connect(
        &self,
        addresses: &[IpAddr],
        port: u16,
    ) -> Result<(Guarded<Box<dyn Upstream>>, SocketAddr), Stop> {
        let mut last = Stop::failed(StatusCode::BAD_GATEWAY, "no address to connect to");
        for &ip in addresses {
            let address = SocketAddr::new(ip, port);
            match tokio::time::timeout(self.limits.connect_timeout, self.connector.connect(address))
                .await
            {
                Ok(Ok(stream)) => {
                    let guarded = Guarded::new(
                        stream,
                        self.limits.idle_timeout,
                        self.limits.max_bytes_per_connection,
                        self.counters.upstream_bytes(),
                    );
                    return Ok((guarded, address));
                }
                Ok(Err(error)) => {
                    last = Stop::failed(
                        StatusCode::BAD_GATEWAY,
                        format!("connecting to {address} failed: {error}"),
                    );
                }
                Err(_) => {
                    last = Stop::failed(
                        StatusCode::GATEWAY_TIMEOUT,
                        format!("connecting to {address} timed out"),
                    );
                }
            }
        }
        Err(last)
    }

    fn stop(&self, via: Via, target: &str, stop: &Stop) -> Response<ProxyBody> {
        let outcome = match stop.refusal_class {
            Some(class) => {
                self.counters.count_refusal(class);
                Outcome::Refused {
                    reason: stop.reason.clone(),
                    class,
                }
            }
            None => Outcome::Failed {
                status: stop.status.as_u16(),
                reason: stop.reason.clone(),
            },
        };
        tracing::debug!(via = via.label(), target, status = stop.status.as_u16(), reason = %stop.reason, "egress stopped");
        self.emit(via, target, outcome);
        let header_name = if stop.refusal_class.is_some() {
            REFUSED_HEADER
        } else {
            "x-airlock-error"
        };
        text_response(stop.status, header_name, &stop.reason)
    }

    fn emit(&self, via: Via, target: &str, outcome: Outcome) {
        if let Some(sink) = &self.events {
            sink(ProxyEvent {
                at: SystemTime::now(),
                via,
                target: target.to_owned(),
                outcome,
            });
        }
    }
}

fn is_timeout(error: &hyper::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(io) = current.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::TimedOut
        {
            return true;
        }
        source = current.source();
    }
    false
}

/// `http://host:port/path` without the query, which may carry secrets the logs need not hold.
fn event_target(uri: &Uri) -> String {
    match (uri.scheme_str(), uri.authority()) {
        (Some(scheme), Some(authority)) => format!("{scheme}://{authority}{}", uri.path()),
        _ => uri.path().to_owned(),
    }
}

fn origin_form(uri: &Uri) -> Uri {
    let path = uri.path_and_query().map_or("/", |pq| pq.as_str());
    path.parse().unwrap_or_else(|_| Uri::from_static("/"))
}

/// Remove hop-by-hop headers (RFC 9110 §7.6.1), the ones `Connection` names, and every `Proxy-*`.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
        header::PROXY_AUTHENTICATE,
        header::PROXY_AUTHORIZATION,
        HeaderName::from_static("keep-alive"),
    ] {
        headers.remove(name);
    }
    let proxy_headers: Vec<HeaderName> = headers
        .keys()
        .filter(|name| name.as_str().starts_with("proxy-"))
        .cloned()
        .collect();
    for name in proxy_headers {
        headers.remove(name);
    }
}

fn empty_response(status: StatusCode) -> Response<ProxyBody> {
    let mut response = Response::new(Empty::new().map_err(|never| match never {}).boxed_unsync());
    *response.status_mut() = status;
    response
}

fn text_response(
    status: StatusCode,
    header_name: &'static str,
    reason: &str,
) -> Response<ProxyBody> {
    let body = format!("Airlock: {reason}\n");
    let mut response = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    // Header values must be visible ASCII; the body keeps the exact text.
    let printable: String = reason
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect();
    if let Ok(value) = HeaderValue::from_str(&printable) {
        headers.insert(HeaderName::from_static(header_name), value);
    }
    response
}
