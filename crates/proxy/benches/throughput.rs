//! The proxy against its baselines, measured in alternation in one process: CONNECT throughput vs a
//! direct loopback copy, and small plain-HTTP requests (rate and p99 latency) vs direct requests.
//! Airlock is measured both on `proxy.sock` and through the socket hand-off the container uses (a
//! TCP client whose connection a relay passes to the proxy). With `AIRLOCK_BENCH_TINYPROXY` set to
//! a tinyproxy's `ip:port` (as `cargo xtask bench` does), tinyproxy is measured alongside. With
//! `AIRLOCK_BENCH_FAR_NETNS` (a network namespace's file) and `AIRLOCK_BENCH_FAR_ADDRESS` (an IPv4
//! address there, reached through a shaped link), the servers listen in that namespace instead of
//! on loopback (`cargo xtask bench` makes both, as root).
//! Prints ratios; never fails for being slow. Run with `cargo bench -p airlock-proxy`.

// Benchmarks are test code: a failed setup step should stop the run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::cast_precision_loss)]

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_policy::{EgressPolicy, Profile};
use airlock_proxy::{EgressProxy, ProxyConfig, ProxyLimits};
use airlock_testkit::stats::{Samples, is_warmup, rotation, total_rounds};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};

const BULK_BYTES: usize = 256 * 1024 * 1024;
const ROUNDS: usize = 5;
const REQUESTS: usize = 2_000;
/// Across a link with a round trip of milliseconds each request takes two of them.
const FAR_REQUESTS: usize = 512;

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(quick));
}

async fn run(quick: bool) {
    let far = far_end();
    let bulk = bulk_server(far.as_ref());
    let small = small_server(far.as_ref());
    let policy = EgressPolicy::new(
        Profile::Public,
        None,
        [bulk, small].map(|a| a.to_string().parse().unwrap()),
    )
    .unwrap();
    let limits = ProxyLimits {
        max_bytes_per_connection: u64::MAX,
        max_connections: 4096,
        ..ProxyLimits::default()
    };
    let proxy = EgressProxy::start(
        ProxyConfig::new(policy)
            .with_limits(limits)
            .with_resolver(Arc::new(NoNames)),
    )
    .unwrap();
    let socket = proxy.socket_path().to_owned();
    let relay = start_relay(proxy.handoff_path().unwrap());
    let tinyproxy: Option<SocketAddr> =
        std::env::var("AIRLOCK_BENCH_TINYPROXY")
            .ok()
            .map(|address| {
                address
                    .parse()
                    .expect("AIRLOCK_BENCH_TINYPROXY must be ip:port")
            });

    let rounds = if quick { 2 } else { ROUNDS };
    let requests = match (quick, far.is_some()) {
        (true, false) => 300,
        (true, true) => FAR_REQUESTS / 4,
        (false, false) => REQUESTS,
        (false, true) => FAR_REQUESTS,
    };

    let via = |server| {
        let mut targets = vec![
            ("direct", Target::Direct(server)),
            (
                "Airlock, proxy.sock",
                Target::Socket(socket.clone(), server),
            ),
            ("Airlock, hand-off", Target::TcpProxy(relay, server)),
        ];
        if let Some(tinyproxy) = tinyproxy {
            targets.push(("tinyproxy", Target::TcpProxy(tinyproxy, server)));
        }
        targets
    };

    println!("## Proxy micro-benchmark ({rounds} rounds after a warm-up, contenders rotating)\n");
    bulk_table(&via(bulk), rounds).await;
    requests_table(&via(small), rounds, requests).await;
    proxy.stop().await;
}

/// CONNECT throughput, each contender in turn, with the CPU this process spent on it (client,
/// server and, but for tinyproxy, the proxy), split into user and kernel time: what the proxy adds
/// over a direct copy, and where.
async fn bulk_table(targets: &[(&str, Target)], rounds: usize) {
    let mut times: Vec<Samples> = vec![Samples::default(); targets.len()];
    let mut cpu = vec![[0_u64; 2]; targets.len()];
    for round in 0..total_rounds(rounds) {
        for index in rotation(round, targets.len()) {
            let before = airlock_testkit::host::cpu_ticks("self").unwrap_or_default();
            let took = bulk_run(&targets[index].1).await;
            if !is_warmup(round) {
                times[index].record(took.map(|t| t.as_secs_f64()));
                let after = airlock_testkit::host::cpu_ticks("self").unwrap_or_default();
                for kind in 0..2 {
                    cpu[index][kind] += after[kind].saturating_sub(before[kind]);
                }
            }
        }
    }
    println!(
        "| CONNECT bulk ({} MiB) | MiB/s (median) | failed | ratio (time / direct) | this process's CPU per transfer, ms: user / kernel |",
        BULK_BYTES >> 20
    );
    println!("|---|---|---|---|---|");
    let direct_time = times[0].summary().map(|s| s.median);
    for (index, (name, _)) in targets.iter().enumerate() {
        let failed = times[index].failed();
        // Ticks are 10 ms; summed over the rounds, then per transfer.
        let per = |ticks: u64| ticks as f64 * 10.0 / rounds as f64;
        let cpu = if name.starts_with("tinyproxy") {
            "– (another process)".to_owned()
        } else {
            format!("{:.0} / {:.0}", per(cpu[index][0]), per(cpu[index][1]))
        };
        match (times[index].summary(), direct_time) {
            (Some(time), Some(direct)) => println!(
                "| {name} | {:.0} | {failed} | {:.2}x | {cpu} |",
                mib_per_s(time.median),
                time.median / direct
            ),
            _ => println!("| {name} | – | {failed} | n/a: no successful run | {cpu} |"),
        }
    }
    println!();
}

/// Small-request rate and p99 at 1, 16 and 256 clients, each contender in turn.
async fn requests_table(targets: &[(&str, Target)], rounds: usize, requests: usize) {
    println!(
        "| small HTTP requests (GET, 16 B body) | clients | req/s (median) | p99 (median) | failed | ratio (rate direct / this) | the machine's CPU busy | the machine's CPU per request |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for clients in [1, 16, 256] {
        let mut rates: Vec<Samples> = vec![Samples::default(); targets.len()];
        let mut p99s: Vec<Samples> = vec![Samples::default(); targets.len()];
        // Busy and all ticks of the whole machine (every core) while each contender ran: whether
        // the rate was bounded by the cores (client, proxy, server and the link share them).
        let mut machine = vec![[0_u64; 2]; targets.len()];
        for round in 0..total_rounds(rounds) {
            for index in rotation(round, targets.len()) {
                let before = airlock_testkit::host::machine_cpu_ticks().unwrap_or_default();
                let run = requests_run(targets[index].1.clone(), clients, requests).await;
                if !is_warmup(round) {
                    rates[index].record(run.map(|(rate, _)| rate));
                    p99s[index].record(run.map(|(_, p99)| p99.as_secs_f64() * 1e3));
                    let after = airlock_testkit::host::machine_cpu_ticks().unwrap_or_default();
                    for kind in 0..2 {
                        machine[index][kind] += after[kind].saturating_sub(before[kind]);
                    }
                }
            }
        }
        let direct_rate = rates[0].summary().map(|s| s.median);
        // Every measured round sends the same number of requests (`requests_run`).
        let measured = ((requests / clients).max(1) * clients * rounds) as f64;
        for (index, (name, _)) in targets.iter().enumerate() {
            let failed = rates[index].failed();
            let [busy, all] = machine[index];
            let (busy, per_request) = if all == 0 {
                ("–".to_owned(), "–".to_owned())
            } else {
                // Ticks are 10 ms.
                (
                    format!("{:.0} %", busy as f64 * 100.0 / all as f64),
                    format!("{:.0} µs", busy as f64 * 10_000.0 / measured),
                )
            };
            match (rates[index].summary(), p99s[index].summary(), direct_rate) {
                (Some(rate), Some(p99), Some(direct)) => println!(
                    "| {name} | {clients} | {:.0} | {:.2} ms | {failed} | {:.2}x | {busy} | {per_request} |",
                    rate.median,
                    p99.median,
                    direct / rate.median
                ),
                _ => println!(
                    "| {name} | {clients} | – | – | {failed} | n/a: no successful run | {busy} | {per_request} |"
                ),
            }
        }
    }
}

/// `airlock-relay`'s loop, on a thread: accept TCP connections and pass each socket to the
/// proxy's hand-off socket. Returns where it listens.
fn start_relay(handoff: &std::path::Path) -> SocketAddr {
    let listener = listen().into_std().unwrap();
    listener.set_nonblocking(false).unwrap();
    let address = listener.local_addr().unwrap();
    let channel = std::os::unix::net::UnixStream::connect(handoff).unwrap();
    std::thread::spawn(move || airlock_relay::relay(&listener, &channel));
    address
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

fn mib_per_s(seconds: f64) -> f64 {
    (BULK_BYTES as f64 / (1024.0 * 1024.0)) / seconds
}

/// A loopback listener with a deep accept queue: with the default of 128, 256 clients connecting at
/// once overflow it and wait a 1 s SYN retransmission, which would measure the kernel, not the
/// proxy.
fn listen() -> TcpListener {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    socket.listen(4096).unwrap()
}

/// Where the servers listen when they are not on loopback: a network namespace and an address in it.
struct FarEnd {
    namespace: PathBuf,
    address: Ipv4Addr,
}

fn far_end() -> Option<FarEnd> {
    let namespace = std::env::var_os("AIRLOCK_BENCH_FAR_NETNS")?;
    let address = std::env::var("AIRLOCK_BENCH_FAR_ADDRESS")
        .expect("AIRLOCK_BENCH_FAR_ADDRESS must name the far end's IPv4 address")
        .parse()
        .expect("AIRLOCK_BENCH_FAR_ADDRESS must be an IPv4 address");
    Some(FarEnd {
        namespace: namespace.into(),
        address,
    })
}

/// A server's listener: on loopback, or in the far end's namespace (a socket stays in the namespace
/// it was made in, so a thread moves there to make it).
fn server_listener(far: Option<&FarEnd>) -> TcpListener {
    let Some(far) = far else { return listen() };
    let namespace = far.namespace.clone();
    let address = SocketAddr::new(IpAddr::V4(far.address), 0);
    let socket = std::thread::spawn(move || {
        let file = std::fs::File::open(&namespace).expect("the far end's namespace file opens");
        rustix::thread::move_into_link_name_space(
            std::os::fd::AsFd::as_fd(&file),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )
        .expect("this process may enter the far end's namespace (run as root)");
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(address).unwrap();
        socket
    })
    .join()
    .unwrap();
    socket.listen(4096).unwrap()
}

/// Writes `BULK_BYTES` to every connection after reading one line.
fn bulk_server(far: Option<&FarEnd>) -> SocketAddr {
    let listener = server_listener(far);
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

async fn drain<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S) -> io::Result<usize> {
    stream.write_all(b"g").await?;
    let mut buffer = vec![0_u8; 256 * 1024];
    let mut total = 0;
    loop {
        let n = stream.read(&mut buffer).await?;
        if n == 0 {
            return Ok(total);
        }
        total += n;
    }
}

/// One bulk transfer; `None` when it failed or came back short (counted, not timed).
async fn bulk_run(target: &Target) -> Option<Duration> {
    let start = Instant::now();
    let received = async {
        match target {
            Target::Direct(server) => drain(&mut TcpStream::connect(server).await?).await,
            Target::Socket(socket, server) => {
                let mut stream = UnixStream::connect(socket).await?;
                open_tunnel(&mut stream, *server).await?;
                drain(&mut stream).await
            }
            Target::TcpProxy(proxy, server) => {
                let mut stream = TcpStream::connect(proxy).await?;
                open_tunnel(&mut stream, *server).await?;
                drain(&mut stream).await
            }
        }
    }
    .await;
    match received {
        Ok(bytes) if bytes == BULK_BYTES => Some(start.elapsed()),
        Ok(bytes) => {
            eprintln!("a bulk run received {bytes} of {BULK_BYTES} bytes");
            None
        }
        Err(error) => {
            eprintln!("a bulk run failed: {error}");
            None
        }
    }
}

async fn open_tunnel<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    server: SocketAddr,
) -> io::Result<()> {
    stream
        .write_all(format!("CONNECT {server} HTTP/1.1\r\nHost: {server}\r\n\r\n").as_bytes())
        .await?;
    let head = read_head(stream).await?;
    if head.starts_with(b"HTTP/1.1 200") || head.starts_with(b"HTTP/1.0 200") {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "the tunnel was not opened: {}",
            String::from_utf8_lossy(&head)
        )))
    }
}

/// Not the testkit's `read_head`: that one bounds every byte with a time-out, which would be
/// measured here along with the proxy.
async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> io::Result<Vec<u8>> {
    let mut head = Vec::new();
    let mut byte = [0_u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).await?;
        head.push(byte[0]);
    }
    Ok(head)
}

/// Answers every request with a 16-byte body, then waits for the client to close first, so the
/// TIME_WAIT entries stay with the clients, as with a real server and browser.
fn small_server(far: Option<&FarEnd>) -> SocketAddr {
    let listener = server_listener(far);
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                if read_head(&mut stream).await.is_err() {
                    return;
                }
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 16\r\nconnection: close\r\n\r\n0123456789abcdef")
                    .await;
                let mut rest = [0_u8; 64];
                while matches!(stream.read(&mut rest).await, Ok(n) if n > 0) {}
            });
        }
    });
    address
}

#[derive(Clone)]
enum Target {
    /// The server itself.
    Direct(SocketAddr),
    /// Airlock's `proxy.sock`, then the server.
    Socket(PathBuf, SocketAddr),
    /// A proxy on TCP (the hand-off relay in front of Airlock, or tinyproxy), then the server.
    TcpProxy(SocketAddr, SocketAddr),
}

async fn one_request(target: &Target) -> io::Result<Duration> {
    let start = Instant::now();
    let mut response = Vec::new();
    match target {
        Target::Direct(server) => {
            let mut stream = TcpStream::connect(server).await?;
            stream
                .write_all(b"GET /x HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
                .await?;
            read_response(&mut stream, &mut response).await?;
        }
        Target::Socket(socket, server) => {
            let mut stream = UnixStream::connect(socket).await?;
            stream.write_all(proxied_get(*server).as_bytes()).await?;
            read_response(&mut stream, &mut response).await?;
        }
        Target::TcpProxy(proxy, server) => {
            let mut stream = TcpStream::connect(proxy).await?;
            stream.write_all(proxied_get(*server).as_bytes()).await?;
            read_response(&mut stream, &mut response).await?;
        }
    }
    Ok(start.elapsed())
}

/// Read until the fixed body has arrived, then let the caller close first (see `small_server`).
async fn read_response<S: AsyncRead + Unpin>(
    stream: &mut S,
    response: &mut Vec<u8>,
) -> io::Result<()> {
    let mut buffer = [0_u8; 1024];
    while !response.ends_with(b"0123456789abcdef") {
        let n = stream.read(&mut buffer).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        response.extend_from_slice(&buffer[..n]);
    }
    Ok(())
}

fn proxied_get(server: SocketAddr) -> String {
    format!("GET http://{server}/x HTTP/1.1\r\nHost: {server}\r\nConnection: close\r\n\r\n")
}

/// `requests` requests spread over `clients` concurrent clients: (requests per second, p99).
/// `None` when any request failed: the run is counted as failed, not timed.
async fn requests_run(target: Target, clients: usize, requests: usize) -> Option<(f64, Duration)> {
    let start = Instant::now();
    // At least one each: a quick run has fewer requests than the largest number of clients.
    let per_client = (requests / clients).max(1);
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let target = target.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_client);
            for _ in 0..per_client {
                latencies.push(one_request(&target).await?);
            }
            Ok::<_, io::Error>(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        match task.await {
            Ok(Ok(done)) => latencies.extend(done),
            Ok(Err(error)) => {
                eprintln!("a request failed: {error}");
                return None;
            }
            Err(error) => {
                eprintln!("a client task failed: {error}");
                return None;
            }
        }
    }
    let elapsed = start.elapsed();
    latencies.sort();
    let p99 = *latencies.get(latencies.len() * 99 / 100)?;
    Some((latencies.len() as f64 / elapsed.as_secs_f64(), p99))
}
