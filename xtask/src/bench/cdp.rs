//! Guarded CDP: the time from a Playwright client's connect to its first `page.goto` done, through
//! `airlock cdp` (a cold browser per connection, and one from the warm CDP pool) against
//! Playwright launching the same Chromium on the host. Measured inside the client (node's start
//! is not counted), as the test user, the 100-subresource page each time.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::processes::{Children, free_port, wait_for_port};
use super::stats::{Samples, is_warmup, rotation, table_header, table_row, total_rounds};

/// The client: `node cdp-connect.js (connect ENDPOINT | launch) URL` prints the milliseconds from
/// before connecting (or launching) to the page's `load`.
const CLIENT: &str = r"
const { chromium } = require('playwright-core');
const [mode, a, b] = process.argv.slice(2);
(async () => {
  const began = performance.now();
  const browser = mode === 'connect'
    ? await chromium.connectOverCDP(a)
    : await chromium.launch({ executablePath: '/usr/lib/chromium/chromium', headless: true });
  const url = mode === 'connect' ? b : a;
  const context = browser.contexts()[0] || (await browser.newContext());
  const page = context.pages()[0] || (await context.newPage());
  await page.goto(url, { waitUntil: 'load' });
  const elapsed = performance.now() - began;
  await browser.close();
  console.log(elapsed.toFixed(1));
})().catch((error) => { console.error(error); process.exit(1); });
";

/// `airlock cdp` on a free port as the test user, allowing the site, on the Docker socket
/// `docker_host` names (the default when `None`); its port.
pub(super) fn start_server(
    root: &Path,
    site: u16,
    pool: usize,
    docker_host: Option<&str>,
    children: &mut Children,
) -> anyhow::Result<u16> {
    let port = free_port()?;
    let mut server = Command::new("runuser");
    server.args(["-u", crate::integration::TEST_USER, "--", "env"]);
    if let Some(host) = docker_host {
        server.arg(format!("DOCKER_HOST={host}"));
    }
    let server = server
        .arg(root.join("target/release/airlock"))
        .args(["cdp", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--allow", &format!("127.0.0.1:{site}")])
        .args(["--cdp-pool-size", &pool.to_string()])
        .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    children.0.push(server);
    wait_for_port(port, "airlock cdp")?;
    Ok(port)
}

/// Wait (bounded) until the server holds a warm CDP browser, so nothing refills beside a
/// measurement.
fn wait_until_warm(port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_mins(1);
    while Instant::now() < deadline {
        let metrics = crate::util::output(
            Command::new("curl")
                .args(["-sS", "--max-time", "5"])
                .arg(format!("http://127.0.0.1:{port}/metrics")),
        )
        .unwrap_or_default();
        if metrics
            .lines()
            .any(|line| line.trim() == "airlock_warm_cdp_browsers 1")
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// Write the Playwright client for the test user; its path and the node modules it needs.
pub(super) fn client(root: &Path) -> anyhow::Result<(std::path::PathBuf, String)> {
    let modules = crate::clients::ensure_clients()?.node_modules;
    let script = root.join("target/bench/cdp-connect.js");
    fs::write(&script, CLIENT)?;
    let _ = Command::new("chmod").arg("a+r").arg(&script).status();
    Ok((script, modules))
}

pub(super) fn client_run(script: &Path, modules: &str, args: &[String]) -> Option<f64> {
    let output = Command::new("runuser")
        .args(["-u", crate::integration::TEST_USER, "--", "node"])
        .arg(script)
        .args(args)
        .env("NODE_PATH", modules)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    String::from_utf8_lossy(&output.stdout).trim().parse().ok()
}

pub(super) fn cdp(
    root: &Path,
    site: u16,
    rounds: usize,
    report: &mut String,
) -> anyhow::Result<()> {
    eprintln!("== guarded CDP: connect to first page.goto, cold and warm, against a host launch");
    let (script, modules) = client(root)?;
    let mut children = Children::default();
    let cold = start_server(root, site, 0, None, &mut children)?;
    let warm = start_server(root, site, 1, None, &mut children)?;
    let page = format!("http://127.0.0.1:{site}/page-0.html");
    let mut samples = [Samples::default(), Samples::default(), Samples::default()];
    for round in 0..total_rounds(rounds) {
        for contender in rotation(round, 3) {
            let args: Vec<String> = match contender {
                0 => vec!["launch".into(), page.clone()],
                1 => vec![
                    "connect".into(),
                    format!("http://127.0.0.1:{cold}/cdp"),
                    page.clone(),
                ],
                _ => {
                    if !wait_until_warm(warm) {
                        samples[2].record(None);
                        continue;
                    }
                    vec![
                        "connect".into(),
                        format!("http://127.0.0.1:{warm}/cdp"),
                        page.clone(),
                    ]
                }
            };
            let time = client_run(&script, &modules, &args);
            if !is_warmup(round) {
                samples[contender].record(time);
            }
        }
        // The warm server refills after its lease; let it finish before the next round.
        let _ = wait_until_warm(warm);
    }
    let _ = writeln!(
        report,
        "## Guarded CDP: a Playwright client's connect to its first page.goto done\n\n\
         Playwright (`playwright-core`) measures from before `connectOverCDP` (or `launch`) to the \
         100-subresource page's `load`. Airlock: `airlock cdp`, a sealed browser per connection \
         (container, proxy, Chromium on a DevTools pipe, every message through the guard), cold \
         and from the warm CDP pool. Baseline: Playwright launching the same Debian Chromium on \
         the host, on the host's own network.\n"
    );
    table_header(report);
    table_row(
        report,
        "Playwright launches Chromium on the host",
        &samples[0],
        None,
    );
    table_row(
        report,
        "airlock cdp, cold (a new sealed browser)",
        &samples[1],
        Some(&samples[0]),
    );
    table_row(
        report,
        "airlock cdp, warm pool",
        &samples[2],
        Some(&samples[0]),
    );
    let _ = writeln!(report);
    children.terminate();
    Ok(())
}
