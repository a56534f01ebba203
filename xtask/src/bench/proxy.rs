//! The proxy on its own: the proxy crate's micro-benchmark (with tinyproxy as its peer), on
//! loopback and with its destinations behind a shaped link, and the memory of `airlock proxy`
//! holding idle tunnels.

use std::fmt::Write as _;
use std::fs;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

use super::link::{self, Shape, ShapedLink};
use super::processes::{Children, start_tinyproxy, wait_for_path, wait_for_port};
use crate::util::output;

pub(super) fn proxy_micro(root: &Path, quick: bool, report: &mut String) -> anyhow::Result<()> {
    eprintln!("== proxy micro-benchmark");
    let text = throughput_bench(root, quick, &[])?;
    let _ = writeln!(
        report,
        "{}\n",
        text.trim().replace(
            "## Proxy micro-benchmark",
            "## Proxy micro-benchmark (crates/proxy/benches/throughput.rs)"
        )
    );
    Ok(())
}

/// The same harness with its destinations behind a shaped link (see `link.rs`): what a deployment
/// sees, where the browser's side is loopback and the destination's a network. The loopback table
/// stays as the worst case.
pub(super) fn proxy_link(root: &Path, quick: bool, report: &mut String) -> anyhow::Result<()> {
    let shape = Shape {
        bits_per_second: 1_000_000_000,
        one_way: Duration::from_micros(2500),
    };
    eprintln!("== proxy over a shaped link ({})", shape.describe());
    let link = ShapedLink::up(shape)?;
    let text = throughput_bench(
        root,
        quick,
        &[
            (
                "AIRLOCK_BENCH_FAR_NETNS",
                format!("/run/netns/{}", link::NAMESPACE),
            ),
            ("AIRLOCK_BENCH_FAR_ADDRESS", link::FAR_ADDRESS.to_owned()),
        ],
    )?;
    let dropped = link.dropped();
    drop(link);
    let _ = writeln!(
        report,
        "{}\n\nThe destinations sit in a network namespace of their own behind a link of {} (`xtask/src/bench/link.rs`: this kernel has no `netem`, so the link is paced in user space); the clients and the proxies stay on this host's loopback, as a browser and Airlock are. Packets dropped at the link's full queue in the whole section: {dropped}.\n",
        text.trim().replace(
            "## Proxy micro-benchmark",
            "## Proxy over a shaped link (crates/proxy/benches/throughput.rs, destinations behind a network)"
        ),
        shape.describe()
    );
    Ok(())
}

/// Runs the proxy crate's throughput bench with tinyproxy as the peer; `env` says where the
/// destinations are when they are not on loopback.
fn throughput_bench(root: &Path, quick: bool, env: &[(&str, String)]) -> anyhow::Result<String> {
    // tinyproxy as the peer, with room for the 256-client run.
    let mut children = Children::default();
    let tinyproxy_port = start_tinyproxy(
        &root.join("target/bench/proxies/tinyproxy-micro.conf"),
        &mut children,
    )?;
    wait_for_port(tinyproxy_port, "tinyproxy")?;
    let mut command = Command::new(env!("CARGO"));
    command
        .args(["bench", "-p", "airlock-proxy", "--bench", "throughput"])
        .env(
            "AIRLOCK_BENCH_TINYPROXY",
            format!("127.0.0.1:{tinyproxy_port}"),
        )
        .envs(env.iter().map(|(name, value)| (name, value)));
    if quick {
        command.args(["--", "--quick"]);
    }
    output(&mut command)
}

/// The resident memory of the `airlock proxy` process with `count` idle CONNECT tunnels open.
pub(super) fn idle_tunnels(root: &Path, count: usize, report: &mut String) -> anyhow::Result<()> {
    use std::io::{BufRead, BufReader, Write};
    eprintln!("== proxy memory with {count} idle tunnels");
    // A server that accepts and holds every connection, so tunnels stay open and idle.
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let socket = super::processes::proxies_dir(root)?.join("idle.sock");
    let _ = fs::remove_file(&socket);
    let mut children = Children::default();
    children.0.push(
        super::processes::airlock_as_test_user(root)?
            .args([
                "proxy",
                "--allow",
                &format!("127.0.0.1:{port}"),
                "--max-connections",
            ])
            .arg((count + 16).to_string())
            .arg("--socket")
            .arg(&socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    wait_for_path(&socket, "the Airlock proxy's socket")?;
    let pid = children.0[0].id();
    let rss = || -> anyhow::Result<f64> {
        let status = fs::read_to_string(format!("/proc/{pid}/status"))?;
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .context("no VmRSS")?;
        Ok(kib / 1024.0)
    };
    let before = rss()?;
    let mut tunnels = Vec::with_capacity(count);
    for _ in 0..count {
        let mut stream = std::os::unix::net::UnixStream::connect(&socket)?;
        write!(
            stream,
            "CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
        )?;
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut line = String::new();
        reader.read_line(&mut line)?;
        if !line.starts_with("HTTP/1.1 200") {
            bail!("a tunnel did not open: {line}");
        }
        tunnels.push(stream);
    }
    let after = rss()?;
    #[allow(clippy::cast_precision_loss)]
    let per_tunnel_kib = (after - before) * 1024.0 / count as f64;
    let _ = writeln!(
        report,
        "## Proxy memory with idle tunnels\n\n| tunnels | RSS before (MiB) | RSS after (MiB) | per tunnel (KiB) |\n|---|---|---|---|\n| {count} | {before:.1} | {after:.1} | {per_tunnel_kib:.1} |\n"
    );
    drop(tunnels);
    Ok(())
}
