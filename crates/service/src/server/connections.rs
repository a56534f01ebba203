//! Connections: accepting them (bounded, with TLS when configured), serving each with hyper, and
//! the order in which a stop ends them.
//!
//! Why that order: draining first turns `/readyz` 503 and lets running work finish within its
//! time; then the listeners stop and each open connection finishes the answer it is writing (a
//! task frees its slot before its result reaches the client, so cancelling first would end that
//! stream without its result, which the cluster proof's rolling update caught); only then does
//! the shutdown token end what remains.

use std::sync::Arc;
use std::time::Duration;

use airlock_worker::CancellationToken;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;
use tower::Layer;

use prometheus_client::metrics::counter::Counter;

use super::write_deadline::WriteDeadline;
use crate::capacity::Admission;

/// Connections open at once; the next waits in the kernel's backlog.
const MAX_CONNECTIONS: usize = 512;
/// A client must send its request head within this.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The TLS handshake must finish within this.
const TLS_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest one write may wait for a client to read (one that pipelines requests and never
/// reads its answers is cut off then).
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// After draining, open connections (SSE streams) get this long to close.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The listeners being served (the main one and, with `--metrics-listen`, the metrics one) and
/// the connections they accepted.
pub struct Listening {
    stop: CancellationToken,
    connections: TaskTracker,
    loops: Vec<tokio::task::JoinHandle<()>>,
}

impl Listening {
    /// Serve `main` (over TLS when given), and `metrics` on a listener of its own.
    pub fn start(
        main: (TcpListener, Option<tokio_rustls::TlsAcceptor>, Router),
        metrics: Option<(TcpListener, Router)>,
        name: &str,
        counted: &crate::metrics::Metrics,
    ) -> Self {
        let failures = &counted.accept_failures;
        let stop = CancellationToken::new();
        let connections = TaskTracker::new();
        let (listener, tls, router) = main;
        let mut loops = vec![tokio::spawn(accept_loop(
            listener,
            tls,
            router,
            stop.clone(),
            connections.clone(),
            failures.clone(),
            MAX_CONNECTIONS,
        ))];
        if let Some((listener, router)) = metrics {
            loops.push(accept_metrics(
                listener,
                name,
                router,
                &stop,
                &connections,
                failures.clone(),
            ));
        }
        Self {
            stop,
            connections,
            loops,
        }
    }

    /// Stop accepting (the loops end at once, whatever the connections do); the connections
    /// still open, to wait for.
    async fn stop(self) -> TaskTracker {
        self.stop.cancel();
        for accepting in self.loops {
            let _ = accepting.await;
        }
        self.connections
    }
}

/// What a stop ends, in order.
pub struct Stopping {
    /// The name the server logs under.
    pub name: &'static str,
    /// Turned to draining first: new work is refused, `/readyz` answers 503.
    pub admission: Arc<Admission>,
    /// How long running work may take to finish before it is cancelled.
    pub drain_timeout: Duration,
    /// Cancels what still runs when the time is up.
    pub shutdown: CancellationToken,
    /// What the drain waits for.
    pub tracker: TaskTracker,
    /// The listeners, closed once the work is gone.
    pub listening: Listening,
}

impl Stopping {
    /// Drain: refuse new work and give running tasks and leases the drain time; stop accepting
    /// and let each open connection finish the answer it is writing; then end what still runs
    /// and wait for its cleanup.
    pub async fn run(self) {
        let name = self.name;
        self.admission.drain();
        eprintln!("{name}: draining (new tasks and CDP clients are refused; /readyz answers 503)");
        let drained = tokio::time::timeout(self.drain_timeout, self.admission.idle()).await;
        if drained.is_err() {
            eprintln!(
                "{name}: {} tasks or CDP leases still ran after --drain-timeout {} s; ending them",
                self.admission.running(),
                self.drain_timeout.as_secs()
            );
        }
        // A task that finished has freed its slot before its result is written to its client:
        // each connection finishes the answer it is on (bounded), and only then is anything
        // cancelled, or a stream would end without the result it was about to carry.
        let connections = self.listening.stop().await;
        connections.close();
        let _ = tokio::time::timeout(CLOSE_GRACE, connections.wait()).await;
        // Cancels what still runs, ends every --direct session's browser, every CDP lease and
        // the MCP streams still open.
        self.shutdown.cancel();
        self.tracker.close();
        self.tracker.wait().await;
        // The tasks just cancelled owe their clients an answer ("cancelled", with what they
        // kept): the process outlives its writing (bounded).
        let _ = tokio::time::timeout(CLOSE_GRACE, connections.wait()).await;
    }
}

/// Accept connections until `stop`, each served by hyper (HTTP/1.1 with upgrades for /cdp, a
/// header time limit), over TLS when configured. Once `stop` fires, each connection finishes the
/// request it is on and closes; `connections` tracks them so the caller can wait (bounded).
async fn accept_loop(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    router: Router,
    stop: CancellationToken,
    connections: TaskTracker,
    failures: Counter,
    max_connections: usize,
) {
    let slots = Arc::new(Semaphore::new(max_connections));
    let mut backoff = AcceptBackoff::default();
    loop {
        // Raced with the stop: with every slot held by a long answer (a task's progress stream),
        // waiting for one would hold the drain past its bounds.
        let permit = tokio::select! {
            permit = Arc::clone(&slots).acquire_owned() => permit,
            () = stop.cancelled() => break,
        };
        let Ok(permit) = permit else {
            break;
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.cancelled() => break,
        };
        let (stream, peer) = match accepted {
            Ok((stream, peer)) => {
                backoff.reset();
                (WriteDeadline::new(stream, WRITE_TIMEOUT), peer)
            }
            Err(error) => {
                failures.inc();
                // Out of descriptors (or memory), the same connection fails again at once: wait,
                // or the loop spins at full CPU and floods the log.
                if let Some(pause) = backoff.after(&error) {
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        () = stop.cancelled() => break,
                    }
                }
                continue;
            }
        };
        let service =
            TowerToHyperService::new(axum::Extension(ClientAddr(peer.ip())).layer(router.clone()));
        let tls = tls.clone();
        let stop = stop.clone();
        connections.spawn(async move {
            match tls {
                None => serve_connection(TokioIo::new(stream), service, &stop).await,
                Some(acceptor) => {
                    let Ok(Ok(stream)) =
                        tokio::time::timeout(TLS_TIMEOUT, acceptor.accept(stream)).await
                    else {
                        return;
                    };
                    serve_connection(TokioIo::new(stream), service, &stop).await;
                }
            }
            drop(permit);
        });
    }
}

/// How the accept loop waits after a failure: not at all for a connection the peer aborted;
/// from 10 ms doubling to 1 s while the process is out of descriptors or memory. Each failure is
/// counted (`airlock_accept_failures_total`); the log says so once per second at most.
#[derive(Debug, Default)]
struct AcceptBackoff {
    pause: Option<Duration>,
    logged: Option<tokio::time::Instant>,
    unlogged: u64,
}

impl AcceptBackoff {
    const FIRST: Duration = Duration::from_millis(10);
    const MOST: Duration = Duration::from_secs(1);

    fn reset(&mut self) {
        self.pause = None;
    }

    /// How long to wait after `error`, if at all.
    fn after(&mut self, error: &std::io::Error) -> Option<Duration> {
        let exhausted = matches!(
            error.raw_os_error(),
            Some(code) if code == rustix::io::Errno::MFILE.raw_os_error()
                || code == rustix::io::Errno::NFILE.raw_os_error()
                || code == rustix::io::Errno::NOBUFS.raw_os_error()
                || code == rustix::io::Errno::NOMEM.raw_os_error()
        );
        let now = tokio::time::Instant::now();
        if self
            .logged
            .is_none_or(|at| now.duration_since(at) >= Duration::from_secs(1))
        {
            tracing::warn!(%error, more = self.unlogged, "accepting a connection failed");
            self.logged = Some(now);
            self.unlogged = 0;
        } else {
            self.unlogged += 1;
        }
        if !exhausted {
            return None;
        }
        let pause = self
            .pause
            .map_or(Self::FIRST, |pause| (pause * 2).min(Self::MOST));
        self.pause = Some(pause);
        Some(pause)
    }
}

/// Serve one connection until it ends, or until `stop`: then let it finish its request and close.
/// The address a request's connection came from (a balancer's, behind one).
#[derive(Debug, Clone, Copy)]
pub(super) struct ClientAddr(pub(super) std::net::IpAddr);

/// The router, with the connection's address in every request's extensions.
type Served = TowerToHyperService<axum::middleware::AddExtension<Router, ClientAddr>>;

async fn serve_connection<I>(io: I, service: Served, stop: &CancellationToken)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    // With upgrades, so /cdp can become a WebSocket; the upgraded socket then lives in the
    // lease's own task, which the server's task tracker waits for.
    let connection = builder.serve_connection(io, service).with_upgrades();
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        () = stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}

/// Serve `/metrics` alone on its own listener, stopped with the main one.
fn accept_metrics(
    listener: TcpListener,
    name: &str,
    router: Router,
    stop: &CancellationToken,
    connections: &TaskTracker,
    failures: Counter,
) -> tokio::task::JoinHandle<()> {
    if let Ok(at) = listener.local_addr() {
        eprintln!("{name}: metrics on http://{at}/metrics (no token: restrict who reaches it)");
    }
    tokio::spawn(accept_loop(
        listener,
        None,
        router,
        stop.clone(),
        connections.clone(),
        failures,
        MAX_CONNECTIONS,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With every slot held by an answer that never ends (a task's progress stream), a stop
    /// still ends the accept loop at once: the drain's later bounds then hold.
    #[tokio::test]
    async fn a_stop_ends_the_accept_loop_while_every_slot_is_held() {
        let router = Router::new().route(
            "/stream",
            axum::routing::get(|| async {
                axum::body::Body::from_stream(futures_util::stream::pending::<
                    Result<axum::body::Bytes, std::io::Error>,
                >())
            }),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let connections = TaskTracker::new();
        let accepting = tokio::spawn(accept_loop(
            listener,
            None,
            router,
            stop.clone(),
            connections.clone(),
            Counter::default(),
            1,
        ));
        // The one slot: a request whose answer streams forever.
        let mut client = tokio::net::TcpStream::connect(at).await.unwrap();
        tokio::io::AsyncWriteExt::write_all(
            &mut client,
            b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n",
        )
        .await
        .unwrap();
        let mut head = [0u8; 12];
        tokio::io::AsyncReadExt::read_exact(&mut client, &mut head)
            .await
            .unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(10), accepting)
            .await
            .expect("the accept loop waited for a slot after the stop")
            .unwrap();
    }

    fn os_error(errno: rustix::io::Errno) -> std::io::Error {
        std::io::Error::from_raw_os_error(errno.raw_os_error())
    }

    #[tokio::test(start_paused = true)]
    async fn out_of_descriptors_the_loop_waits_longer_each_time_and_logs_once_a_second() {
        let mut backoff = AcceptBackoff::default();
        let emfile = os_error(rustix::io::Errno::MFILE);
        let pauses: Vec<Duration> = (0..9).filter_map(|_| backoff.after(&emfile)).collect();
        let millis: Vec<u128> = pauses.iter().map(Duration::as_millis).collect();
        assert_eq!(millis, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        assert_eq!(
            backoff.unlogged, 8,
            "one warning for nine failures in the same second"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        backoff.after(&emfile);
        assert_eq!(backoff.unlogged, 0, "the next second logs again");
        // A connection the peer aborted is no reason to wait; an accepted one resets the wait.
        assert_eq!(
            backoff.after(&os_error(rustix::io::Errno::CONNABORTED)),
            None
        );
        backoff.reset();
        assert_eq!(backoff.after(&emfile), Some(AcceptBackoff::FIRST));
    }
}
