//! The proxy against its baseline, measured in alternation in one process: CONNECT throughput vs a
//! direct loopback copy, and small plain-HTTP requests (rate and p99 latency) vs direct requests.
//! Prints ratios; never fails for being slow. Run with `cargo bench -p airlock-proxy`.

// Benchmarks are test code: a failed setup step should stop the run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::cast_precision_loss)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_policy::{EgressPolicy, Profile};
use airlock_proxy::{EgressProxy, Limits, ProxyConfig};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};

const BULK_BYTES: usize = 256 * 1024 * 1024;
const ROUNDS: usize = 5;
const REQUESTS: usize = 2_000;

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(quick));
}

async fn run(quick: bool) {
    let bulk = bulk_server().await;
    let small = small_server().await;
    let policy = EgressPolicy::new(
        Profile::Public,
        None,
        [bulk, small].map(|a| format!("127.0.0.1:{}", a.port()).parse().unwrap()),
    )
    .unwrap();
    let limits = Limits {
        max_bytes_per_connection: u64::MAX,
        ..Limits::default()
    };
    let proxy = EgressProxy::start(
        ProxyConfig::new(policy)
            .with_limits(limits)
            .with_resolver(Arc::new(NoNames)),
    )
    .unwrap();
    let socket = proxy.socket_path().to_owned();

    let rounds = if quick { 2 } else { ROUNDS };
    let requests = if quick { 300 } else { REQUESTS };

    println!("## Proxy micro-benchmark ({rounds} alternating rounds)\n");
    let mut direct = Vec::new();
    let mut proxied = Vec::new();
    for _ in 0..rounds {
        direct.push(bulk_direct(bulk).await);
        proxied.push(bulk_proxied(&socket, bulk).await);
    }
    let d = median(&mut direct);
    let p = median(&mut proxied);
    println!(
        "| CONNECT bulk ({} MiB) | direct | proxy | ratio (proxy/direct time) |",
        BULK_BYTES >> 20
    );
    println!("|---|---|---|---|");
    println!(
        "| MiB/s (median) | {:.0} | {:.0} | {:.2}x |\n",
        mib_per_s(d),
        mib_per_s(p),
        p.as_secs_f64() / d.as_secs_f64()
    );

    println!(
        "| small HTTP requests | clients | direct req/s | proxy req/s | direct p99 | proxy p99 | ratio (rate direct/proxy) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for clients in [1, 16, 256] {
        let mut direct_runs = Vec::new();
        let mut proxy_runs = Vec::new();
        for _ in 0..rounds {
            direct_runs.push(requests_run(Target::Direct(small), clients, requests).await);
            proxy_runs
                .push(requests_run(Target::Proxy(socket.clone(), small), clients, requests).await);
        }
        let (d_rate, d_p99) = best_of(&direct_runs);
        let (p_rate, p_p99) = best_of(&proxy_runs);
        println!(
            "| GET 16 B body | {clients} | {d_rate:.0} | {p_rate:.0} | {:.2} ms | {:.2} ms | {:.2}x |",
            d_p99.as_secs_f64() * 1e3,
            p_p99.as_secs_f64() * 1e3,
            d_rate / p_rate
        );
    }
    proxy.stop().await;
}

struct NoNames;
impl airlock_proxy::Resolver for NoNames {
    fn resolve<'a>(
        &'a self,
        name: &'a str,
    ) -> airlock_proxy::BoxFuture<'a, Result<Vec<std::net::IpAddr>, airlock_proxy::ResolveError>>
    {
        Box::pin(async move {
            Err(airlock_proxy::ResolveError::NotFound {
                name: name.to_owned(),
            })
        })
    }
}

fn mib_per_s(time: Duration) -> f64 {
    (BULK_BYTES as f64 / (1024.0 * 1024.0)) / time.as_secs_f64()
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The median rate and the p99 of the run with the median rate.
fn best_of(runs: &[(f64, Duration)]) -> (f64, Duration) {
    let mut sorted = runs.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    sorted[sorted.len() / 2]
}

/// Writes `BULK_BYTES` to every connection after reading one line.
async fn bulk_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let chunk = vec![7_u8; 256 * 1024];
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let chunk = chunk.clone();
            tokio::spawn(async move {
                let mut go = [0_u8; 1];
                if stream.read_exact(&mut go).await.is_err() {
                    return;
                }
                let mut left = BULK_BYTES;
                while left > 0 {
                    let n = left.min(chunk.len());
                    if stream.write_all(&chunk[..n]).await.is_err() {
                        return;
                    }
                    left -= n;
                }
            });
        }
    });
    address
}

async fn drain<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S) -> usize {
    stream.write_all(b"g").await.unwrap();
    let mut buffer = vec![0_u8; 256 * 1024];
    let mut total = 0;
    loop {
        let n = stream.read(&mut buffer).await.unwrap();
        if n == 0 {
            return total;
        }
        total += n;
    }
}

async fn bulk_direct(server: SocketAddr) -> Duration {
    let start = Instant::now();
    let mut stream = TcpStream::connect(server).await.unwrap();
    assert_eq!(drain(&mut stream).await, BULK_BYTES);
    start.elapsed()
}

async fn bulk_proxied(socket: &PathBuf, server: SocketAddr) -> Duration {
    let start = Instant::now();
    let mut stream = UnixStream::connect(socket).await.unwrap();
    stream
        .write_all(format!("CONNECT {server} HTTP/1.1\r\nHost: {server}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    read_head(&mut stream).await;
    assert_eq!(drain(&mut stream).await, BULK_BYTES);
    start.elapsed()
}

async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> Vec<u8> {
    let mut head = Vec::new();
    let mut byte = [0_u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    head
}

/// Answers every request with a 16-byte body and closes.
async fn small_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                read_head(&mut stream).await;
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 16\r\nconnection: close\r\n\r\n0123456789abcdef")
                    .await;
            });
        }
    });
    address
}

#[derive(Clone)]
enum Target {
    Direct(SocketAddr),
    Proxy(PathBuf, SocketAddr),
}

async fn one_request(target: &Target) -> Duration {
    let start = Instant::now();
    let mut response = Vec::new();
    match target {
        Target::Direct(server) => {
            let mut stream = TcpStream::connect(server).await.unwrap();
            stream
                .write_all(b"GET /x HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
                .await
                .unwrap();
            stream.read_to_end(&mut response).await.unwrap();
        }
        Target::Proxy(socket, server) => {
            let mut stream = UnixStream::connect(socket).await.unwrap();
            let request = format!(
                "GET http://{server}/x HTTP/1.1\r\nHost: {server}\r\nConnection: close\r\n\r\n"
            );
            stream.write_all(request.as_bytes()).await.unwrap();
            stream.read_to_end(&mut response).await.unwrap();
        }
    }
    assert!(response.ends_with(b"0123456789abcdef"));
    start.elapsed()
}

/// `requests` requests spread over `clients` concurrent clients: (requests per second, p99).
async fn requests_run(target: Target, clients: usize, requests: usize) -> (f64, Duration) {
    let start = Instant::now();
    let per_client = requests / clients;
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let target = target.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_client);
            for _ in 0..per_client {
                latencies.push(one_request(&target).await);
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    let elapsed = start.elapsed();
    latencies.sort();
    let p99 = latencies[latencies.len() * 99 / 100];
    (latencies.len() as f64 / elapsed.as_secs_f64(), p99)
}
