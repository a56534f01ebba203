//! Page load: a page with 100 subresources, direct and through each proxy, over HTTP and HTTPS;
//! and through Airlock on a route through squid (a parent), what a company's proxy costs.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use super::processes::{
    Children, agent_browser_command, free_port, start_tinyproxy, wait_for_path, wait_for_port,
};
use super::site::start_https_site;
use super::stats::{Samples, is_warmup, rotation, table_header, table_row, total_rounds};

/// How many page loads a round of the page-load benchmark makes (HTTP modes plus HTTPS modes).
pub(super) const LOADS_PER_ROUND: usize = 11;

/// One way of loading pages: how the report names it, its session stem, its proxy (or none).
struct LoadMode {
    label: &'static str,
    name: &'static str,
    proxy: Option<String>,
}

pub(super) fn page_load(
    root: &Path,
    agent_browser: &Path,
    site: u16,
    rounds: usize,
    children: &mut Children,
    report: &mut String,
) -> anyhow::Result<()> {
    eprintln!("== page load ({rounds} rounds, alternating; http, then https)");
    let https = start_https_site(root, children)?;
    let proxies = start_proxies(root, &[site, https.port], children)?;
    let mode = |label, name, proxy: Option<&String>| LoadMode {
        label,
        name,
        proxy: proxy.cloned(),
    };
    let modes = [
        mode("direct", "direct", None),
        mode(
            "Airlock (relay hands off sockets, as in the container)",
            "airlock",
            Some(&proxies.airlock),
        ),
        mode("tinyproxy", "tinyproxy", Some(&proxies.tinyproxy)),
        mode("squid", "squid", Some(&proxies.squid)),
        mode(
            "Airlock on a route through squid (--parent, pinned)",
            "airlock-routed",
            Some(&proxies.airlock_routed),
        ),
        // A comparison for plain HTTP only: the last mode, left out of the HTTPS table.
        mode(
            "Airlock behind a copying relay (socat, what the image used before)",
            "airlock-copied",
            Some(&proxies.airlock_copied),
        ),
    ];
    let variants = [
        (
            "## Page load: 100 subresources over HTTP, load event (Chromium's own timing)",
            format!("http://127.0.0.1:{site}"),
            &modes[..],
            None,
        ),
        (
            "## Page load: the same page over HTTPS (proxies tunnel with CONNECT; a local CA that Chromium trusts; HTTP/1.1 keep-alive)",
            format!("https://127.0.0.1:{}", https.port),
            &modes[..modes.len() - 1],
            Some(https.home.as_path()),
        ),
    ];
    let mut page = 0;
    for (heading, origin, modes, home) in variants {
        let samples = measure_loads(agent_browser, &origin, modes, rounds, home, &mut page);
        let _ = writeln!(report, "{heading}\n");
        write_load_table(report, modes, &samples);
    }
    Ok(())
}

/// Load a fresh page per mode per round, in alternation (rotating which mode goes first), and
/// return each mode's load times. A warm-up load per mode launches its browser and is not measured.
fn measure_loads(
    agent_browser: &Path,
    origin: &str,
    modes: &[LoadMode],
    rounds: usize,
    home: Option<&Path>,
    page: &mut usize,
) -> Vec<Samples> {
    let scheme = origin.split(':').next().unwrap_or("http");
    let command = |mode: &LoadMode| {
        let mut command = agent_browser_command(
            agent_browser,
            &format!("load-{scheme}-{}", mode.name),
            mode.proxy.as_deref(),
        );
        if let Some(home) = home {
            // Chromium reads trusted certificates from $HOME/.pki/nssdb.
            command.env("HOME", home);
        }
        command
    };
    let mut samples: Vec<Samples> = vec![Samples::default(); modes.len()];
    for round in 0..total_rounds(rounds) {
        // Each round starts with a different mode, so no mode always runs first (or right after
        // the same neighbour) on a machine whose load drifts.
        for index in rotation(round, modes.len()) {
            let mode = &modes[index];
            let url = format!("{origin}/page-{page}.html");
            *page += 1;
            let opened = command(mode)
                .args(["open", &url])
                .status()
                .is_ok_and(|status| status.success());
            let script = "(() => { const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime; })()";
            let value = if opened {
                command(mode)
                    .args(["eval", script])
                    .stdout(Stdio::piped())
                    .output()
                    .ok()
                    .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
            } else {
                eprintln!("loading {url} through {} failed", mode.label);
                None
            };
            if !is_warmup(round) {
                samples[index].record(value);
            }
        }
    }
    for mode in modes {
        let _ = command(mode).arg("close").status();
    }
    samples
}

fn write_load_table(report: &mut String, modes: &[LoadMode], samples: &[Samples]) {
    table_header(report);
    for (index, mode) in modes.iter().enumerate() {
        let baseline = (index > 0).then(|| &samples[0]);
        table_row(report, mode.label, &samples[index], baseline);
    }
    let _ = writeln!(report);
}

/// Where each proxy of the page-load benchmark listens.
struct Proxies {
    airlock: String,
    airlock_routed: String,
    airlock_copied: String,
    tinyproxy: String,
    squid: String,
}

/// Start the Airlock proxy (behind `airlock-relay`, as in the container, and for comparison
/// behind a copying socat relay), tinyproxy and squid; return each load mode with its proxy URL.
fn start_proxies(root: &Path, sites: &[u16], children: &mut Children) -> anyhow::Result<Proxies> {
    let dir = super::processes::proxies_dir(root)?;
    // Airlock's proxy on its sockets, with the relay the container uses.
    let (airlock_port, socket) = airlock_behind_relay(root, sites, &[], "plain", children)?;
    // The same proxy behind a relay that copies bytes (what the image used before the hand-off).
    let copied_port = free_port()?;
    children.0.push(
        Command::new("socat")
            .arg(format!(
                "TCP-LISTEN:{copied_port},bind=127.0.0.1,reuseaddr,fork,nodelay"
            ))
            .arg(format!("UNIX-CONNECT:{}", socket.display()))
            .spawn()?,
    );
    let tinyproxy_port = start_tinyproxy(&dir.join("tinyproxy.conf"), children)?;
    let squid_port = free_port()?;
    // The same proxy again, its allowed destinations reached through squid.
    let (routed_port, _) = airlock_behind_relay(
        root,
        sites,
        &[
            "--parent",
            &format!("squid=http://127.0.0.1:{squid_port}"),
            "--route",
            "squid",
        ],
        "routed",
        children,
    )?;
    let squid_conf = dir.join("squid.conf");
    fs::write(
        &squid_conf,
        format!(
            "http_port 127.0.0.1:{squid_port}\nhttp_access allow all\ncache deny all\naccess_log none\ncache_log {}\npid_filename {}\ncoredump_dir {}\n",
            dir.join("squid-cache.log").display(),
            dir.join("squid.pid").display(),
            dir.display()
        ),
    )?;
    children.0.push(
        Command::new("squid")
            .arg("-N")
            .arg("-f")
            .arg(&squid_conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    for (port, what) in [
        (airlock_port, "airlock-relay"),
        (tinyproxy_port, "tinyproxy"),
        (squid_port, "squid"),
        (copied_port, "the socat relay"),
        (routed_port, "the routed Airlock proxy's relay"),
    ] {
        wait_for_port(port, what)?;
    }

    Ok(Proxies {
        airlock: format!("http://127.0.0.1:{airlock_port}"),
        airlock_routed: format!("http://127.0.0.1:{routed_port}"),
        airlock_copied: format!("http://127.0.0.1:{copied_port}"),
        tinyproxy: format!("http://127.0.0.1:{tinyproxy_port}"),
        squid: format!("http://127.0.0.1:{squid_port}"),
    })
}

/// An Airlock proxy allowing `sites`, with `extra` arguments, behind the relay the container uses;
/// the relay's port, and the proxy's own socket.
fn airlock_behind_relay(
    root: &Path,
    sites: &[u16],
    extra: &[&str],
    name: &str,
    children: &mut Children,
) -> anyhow::Result<(u16, std::path::PathBuf)> {
    let dir = super::processes::proxies_dir(root)?;
    let socket = dir.join(format!("airlock-{name}.sock"));
    let handoff = dir.join(format!("airlock-{name}-handoff.sock"));
    let _ = fs::remove_file(&socket);
    let _ = fs::remove_file(&handoff);
    let mut airlock = super::processes::airlock_as_test_user(root)?;
    airlock.arg("proxy").args(extra);
    for site in sites {
        airlock.args(["--allow", &format!("127.0.0.1:{site}")]);
    }
    children.0.push(
        airlock
            .arg("--socket")
            .arg(&socket)
            .arg("--handoff-socket")
            .arg(&handoff)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    wait_for_path(&handoff, "the Airlock proxy's hand-off socket")?;
    let port = free_port()?;
    children.0.push(
        Command::new(root.join("target/release/airlock-relay"))
            .args(["--listen", &format!("127.0.0.1:{port}"), "--handoff"])
            .arg(&handoff)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    Ok((port, socket))
}
