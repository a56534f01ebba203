//! `cargo xtask bench`: how fast Airlock is against what a user would pick instead, measured in
//! alternation in one run and reported as ratios. Never fails for being slow.
//!
//! - Start-up: task requested → first snapshot of a local page through Airlock (container, proxy,
//!   agent-browser, Chromium), against bare agent-browser with Chromium on the host. Cold and warm.
//! - Page load: a page with 100 subresources, loaded by headless Chromium directly, through the
//!   Airlock proxy (behind `airlock-relay`, as in the container), through tinyproxy and through
//!   squid (Debian packages, installed if missing); over HTTP, then over HTTPS with a local CA.
//! - Proxy micro: the proxy crate's own harness (CONNECT throughput, small requests; tinyproxy as
//!   a peer) and the proxy's memory with idle tunnels.
//! - Concurrency: sessions at once until one fails or takes 3× a single one; memory per task.
//!
//! `--quick` runs a small version; the full run also writes `target/bench/report.md`.

use std::fmt::Write as _;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;

use crate::util::{is_root, output, run_loud, succeeds, workspace_root};

/// Arguments of `cargo xtask bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// A small run (a few rounds each), in a few minutes.
    #[arg(long)]
    quick: bool,
    /// Run only these benchmarks (repeatable); all of them by default.
    #[arg(long, value_enum)]
    only: Vec<Section>,
}

/// The benchmarks `cargo xtask bench` can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Section {
    Startup,
    PageLoad,
    ProxyMicro,
    IdleTunnels,
    Concurrency,
}

/// Median, p90, min and max of a sample, in milliseconds.
struct Summary {
    median: f64,
    p90: f64,
    min: f64,
    max: f64,
}

fn summarize(samples: &[f64]) -> Summary {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = |q: f64| {
        // Index of the q-quantile; samples are few, so the nearest rank is exact enough.
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let index = ((sorted.len() as f64 - 1.0) * q).round() as usize;
        sorted.get(index).copied().unwrap_or(f64::NAN)
    };
    Summary {
        median: at(0.5),
        p90: at(0.9),
        min: at(0.0),
        max: at(1.0),
    }
}

/// Processes the bench started, ended when it ends (or fails).
#[derive(Default)]
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Wait (bounded) until something accepts connections on the port.
fn wait_for_port(port: u16, what: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!("{what} did not listen on port {port} within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Wait (bounded) until a file exists, such as a socket a child process creates.
fn wait_for_path(path: &Path, what: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        if Instant::now() > deadline {
            bail!("{what} did not appear at {} within 10 s", path.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Start tinyproxy on a free port (room for the 256-client micro-benchmark), ended with `children`.
fn start_tinyproxy(conf: &Path, children: &mut Children) -> anyhow::Result<u16> {
    let port = free_port()?;
    fs::write(
        conf,
        format!(
            "Port {port}\nListen 127.0.0.1\nTimeout 60\nMaxClients 1024\nAllow 127.0.0.1\nLogLevel Critical\n"
        ),
    )?;
    children.0.push(
        Command::new("tinyproxy")
            .arg("-d")
            .arg("-c")
            .arg(conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    Ok(port)
}

pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    if !is_root() {
        bail!(
            "cargo xtask bench installs packages and runs Airlock as a separate non-root user: run it as root"
        );
    }
    let root = workspace_root();
    let out_dir = root.join("target/bench");
    fs::create_dir_all(&out_dir)?;
    let rounds = if args.quick { 3 } else { 10 };
    // Page loads are short and the noisiest, so they get more rounds.
    let load_rounds = if args.quick { 3 } else { 20 };
    let mut report = String::new();
    let _ = writeln!(
        report,
        "# Airlock benchmarks\n\nMeasured in one run, in alternation; times in ms. Ratios are Airlock / baseline.\n"
    );

    let agent_browser = prepare(&root)?;

    let mut children = Children::default();
    let site_port = free_port()?;
    let site_dir = out_dir.join("site");
    // Every load gets a page of its own (no cache): a warm-up round plus `load_rounds`, per mode.
    write_site(&site_dir, (load_rounds + 1) * LOADS_PER_ROUND)?;
    children.0.push(
        Command::new("python3")
            .args([
                "-m",
                "http.server",
                &site_port.to_string(),
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(&site_dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting the site server (python3)")?,
    );
    wait_for_port(site_port, "the site server")?;
    // Everyone must be able to read the site and run the binaries.
    let _ = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(&out_dir)
        .status();

    let wanted = |section| args.only.is_empty() || args.only.contains(&section);
    if wanted(Section::Startup) {
        startup(&root, &agent_browser, site_port, rounds, &mut report)?;
    }
    if wanted(Section::PageLoad) {
        page_load(
            &root,
            &agent_browser,
            site_port,
            load_rounds,
            &mut children,
            &mut report,
        )?;
    }
    if wanted(Section::ProxyMicro) {
        proxy_micro(&root, args.quick, &mut report)?;
    }
    if wanted(Section::IdleTunnels) {
        idle_tunnels(&root, if args.quick { 200 } else { 1000 }, &mut report)?;
    }
    if wanted(Section::Concurrency) {
        concurrency(
            &root,
            site_port,
            if args.quick { 4 } else { 12 },
            &mut report,
        )?;
    }

    println!("\n{report}");
    if !args.quick {
        let path = out_dir.join("report.md");
        fs::write(&path, &report)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Everything the benchmarks run: packages, the image, the test user, release builds, and the
/// host copy of agent-browser (returned).
fn prepare(root: &Path) -> anyhow::Result<PathBuf> {
    ensure_packages(&[
        "tinyproxy",
        "squid",
        "socat",
        "chromium",
        "openssl",
        "libnss3-tools",
    ])?;
    crate::image::run(&crate::image::ImageArgs::for_integration())?;
    crate::integration::ensure_test_user()?;
    run_loud(Command::new(env!("CARGO")).args([
        "build",
        "--release",
        "-p",
        "airlock",
        "-p",
        "airlock-driver-docker",
        "--example",
        "bench",
    ]))?;
    run_loud(Command::new(env!("CARGO")).args([
        "build",
        "--release",
        "-p",
        "airlock",
        "-p",
        "airlock-relay",
    ]))?;
    host_agent_browser(root)
}

fn ensure_packages(packages: &[&str]) -> anyhow::Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| !succeeds(Command::new("dpkg").args(["-s", p])))
        .collect();
    if !missing.is_empty() {
        run_loud(
            Command::new("apt-get")
                .args(["install", "-y", "-qq"])
                .args(&missing),
        )?;
    }
    // Debian starts these as services; the bench runs its own instances.
    for service in ["tinyproxy", "squid"] {
        let _ = Command::new("pkill").args(["-x", service]).status();
    }
    Ok(())
}

/// The agent-browser binary from the same checked tarball the image uses.
fn host_agent_browser(root: &Path) -> anyhow::Result<PathBuf> {
    let cache = root.join("target/airlock-cache");
    let tarball = fs::read_dir(&cache)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".tgz"))
        .context("no agent-browser tarball in target/airlock-cache: run cargo xtask image first")?;
    let dir = root.join("target/bench/agent-browser");
    fs::create_dir_all(&dir)?;
    run_loud(
        Command::new("tar")
            .arg("-xzf")
            .arg(&tarball)
            .arg("-C")
            .arg(&dir)
            .args([
                "--strip-components=1",
                "package/bin/agent-browser-linux-x64",
                "package/skill-data",
            ]),
    )?;
    let binary = dir.join("bin/agent-browser-linux-x64");
    // npm tarballs do not keep the execute bit.
    fs::set_permissions(&binary, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    Ok(binary)
}

// A 1×1 PNG.
const PIXEL: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52, 0, 0, 0,
    1, 0, 0, 0, 1, 8, 6, 0, 0, 0, 0x1f, 0x15, 0xc4, 0x89, 0, 0, 0, 0x0d, 0x49, 0x44, 0x41, 0x54,
    0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0, 0x1f, 0, 5, 0, 1, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0, 0,
    0, 0, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// Pages `page-N.html`, each with 100 subresources unique to it: 10 HTML documents (iframes), 30
/// stylesheets, 30 scripts and 30 images.
fn write_site(dir: &Path, pages: usize) -> anyhow::Result<()> {
    fs::create_dir_all(dir.join("res"))?;
    for i in 0..30 {
        fs::write(
            dir.join(format!("res/s{i}.css")),
            format!(".c{i} {{ color: #{i:02x}{i:02x}{i:02x}; padding: {i}px; }}\n").repeat(20),
        )?;
        fs::write(
            dir.join(format!("res/j{i}.js")),
            format!("window.v{i} = (window.v{i} || 0) + {i};\n").repeat(20),
        )?;
        fs::write(dir.join(format!("res/i{i}.png")), PIXEL)?;
    }
    for i in 0..10 {
        fs::write(
            dir.join(format!("res/f{i}.html")),
            format!(
                "<!doctype html><title>frame {i}</title><p>{}</p>",
                "frame text ".repeat(50)
            ),
        )?;
    }
    for page in 0..pages {
        let mut html = String::from("<!doctype html><html><head><title>bench</title>");
        for i in 0..30 {
            let _ = write!(html, "<link rel=stylesheet href=\"res/s{i}.css?p={page}\">");
        }
        for i in 0..30 {
            let _ = write!(html, "<script src=\"res/j{i}.js?p={page}\"></script>");
        }
        html.push_str("</head><body><h1>bench</h1>");
        for i in 0..30 {
            let _ = write!(html, "<img src=\"res/i{i}.png?p={page}\">");
        }
        for i in 0..10 {
            let _ = write!(
                html,
                "<iframe src=\"res/f{i}.html?p={page}\" width=40 height=20></iframe>"
            );
        }
        html.push_str("</body></html>");
        fs::write(dir.join(format!("page-{page}.html")), html)?;
    }
    Ok(())
}

/// How many page loads a round of the page-load benchmark makes (HTTP modes plus HTTPS modes).
const LOADS_PER_ROUND: usize = 9;

/// Flags the image gives Chromium, so the host baseline runs the same browser settings.
const CHROMIUM_ARGS: &str = "--no-sandbox,--disable-gpu,--disable-dev-shm-usage,--no-first-run,--disable-background-networking,--disable-component-update,--disable-sync,--disable-default-apps";

fn agent_browser_command(binary: &Path, session: &str, proxy: Option<&str>) -> Command {
    let mut command = Command::new(binary);
    command
        .args(["--session", session])
        .env("AGENT_BROWSER_EXECUTABLE_PATH", "/usr/bin/chromium")
        .env("AGENT_BROWSER_ARGS", CHROMIUM_ARGS)
        .env("AGENT_BROWSER_NO_VERSION_CHECK", "1")
        .env(
            "AGENT_BROWSER_SKILLS_DIR",
            binary
                .parent()
                .and_then(Path::parent)
                .unwrap_or(Path::new("."))
                .join("skill-data"),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(proxy) = proxy {
        command
            .env("AGENT_BROWSER_PROXY", proxy)
            .env("AGENT_BROWSER_PROXY_BYPASS", "<-loopback>");
    }
    command
}

fn timed(command: &mut Command) -> anyhow::Result<f64> {
    let began = Instant::now();
    let status = command.status()?;
    if !status.success() {
        bail!("benchmark command failed ({status})");
    }
    Ok(began.elapsed().as_secs_f64() * 1000.0)
}

fn startup(
    root: &Path,
    agent_browser: &Path,
    site: u16,
    rounds: usize,
    report: &mut String,
) -> anyhow::Result<()> {
    eprintln!("== start-up ({rounds} rounds, alternating)");
    let url = format!("http://127.0.0.1:{site}/page-0.html");
    let example = root.join("target/release/examples/bench");
    let (mut airlock_cold, mut airlock_warm, mut bare_cold, mut bare_warm) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut phases: Vec<serde_json::Value> = Vec::new();
    for round in 0..rounds {
        let line = output(
            Command::new("runuser")
                .args(["-u", crate::integration::TEST_USER, "--"])
                .arg(&example)
                .args(["startup", "1", &url]),
        )?;
        let value: serde_json::Value =
            serde_json::from_str(line.trim()).context("the startup example printed no JSON")?;
        airlock_cold.push(value["cold_ms"].as_f64().unwrap_or(f64::NAN));
        airlock_warm.push(value["warm_ms"].as_f64().unwrap_or(f64::NAN));
        phases.push(value);

        let session = format!("bench-{round}");
        let cold =
            timed(agent_browser_command(agent_browser, &session, None).args(["open", &url]))?
                + timed(agent_browser_command(agent_browser, &session, None).arg("snapshot"))?;
        let warm =
            timed(agent_browser_command(agent_browser, &session, None).args(["open", &url]))?
                + timed(agent_browser_command(agent_browser, &session, None).arg("snapshot"))?;
        let _ = agent_browser_command(agent_browser, &session, None)
            .arg("close")
            .status();
        bare_cold.push(cold);
        bare_warm.push(warm);
    }
    let _ = writeln!(report, "## Start-up: task requested → first snapshot\n");
    table_header(report);
    table_row(report, "bare agent-browser, cold", &bare_cold, None);
    table_row(report, "Airlock, cold", &airlock_cold, Some(&bare_cold));
    table_row(report, "bare agent-browser, warm", &bare_warm, None);
    table_row(report, "Airlock, warm", &airlock_warm, Some(&bare_warm));
    let _ = writeln!(report, "\nWhere Airlock's cold start goes (medians):\n");
    let _ = writeln!(report, "| phase | ms |\n|---|---|");
    for (key, label) in [
        (
            "session_start_ms",
            "session start: proxy, container create + start, relay ready, guide",
        ),
        (
            "first_open_ms",
            "first open: agent-browser daemon, Chromium launch, navigation",
        ),
        ("first_snapshot_ms", "first snapshot"),
        ("dispose_ms", "dispose (after the measurement)"),
    ] {
        let values: Vec<f64> = phases.iter().filter_map(|p| p[key].as_f64()).collect();
        let _ = writeln!(report, "| {label} | {:.0} |", summarize(&values).median);
    }
    let _ = writeln!(report);
    Ok(())
}

/// One way of loading pages: how the report names it, its session stem, its proxy (or none).
struct LoadMode {
    label: &'static str,
    name: &'static str,
    proxy: Option<String>,
}

fn page_load(
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
        let samples = measure_loads(agent_browser, &origin, modes, rounds, home, &mut page)?;
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
) -> anyhow::Result<Vec<Vec<f64>>> {
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
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for round in 0..=rounds {
        // Each round starts with a different mode, so no mode always runs first (or right after
        // the same neighbour) on a machine whose load drifts.
        for offset in 0..modes.len() {
            let index = (round + offset) % modes.len();
            let mode = &modes[index];
            let url = format!("{origin}/page-{page}.html");
            *page += 1;
            let status = command(mode).args(["open", &url]).status()?;
            if !status.success() {
                bail!("loading {url} through {} failed", mode.label);
            }
            let script = "(() => { const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime; })()";
            let measured = command(mode)
                .args(["eval", script])
                .stdout(Stdio::piped())
                .output()?;
            let value: f64 = String::from_utf8_lossy(&measured.stdout)
                .trim()
                .parse()
                .unwrap_or(f64::NAN);
            if round > 0 {
                samples[index].push(value);
            }
        }
    }
    for mode in modes {
        let _ = command(mode).arg("close").status();
    }
    Ok(samples)
}

fn write_load_table(report: &mut String, modes: &[LoadMode], samples: &[Vec<f64>]) {
    table_header(report);
    for (index, mode) in modes.iter().enumerate() {
        let baseline = (index > 0).then(|| samples[0].as_slice());
        table_row(report, mode.label, &samples[index], baseline);
    }
    let _ = writeln!(report);
}

/// The HTTPS copy of the site: its port, and a home whose NSS database trusts its CA.
struct HttpsSite {
    port: u16,
    home: PathBuf,
}

/// Serve the bench site over TLS (python's http.server with HTTP/1.1 keep-alive) with a
/// certificate for 127.0.0.1 from a CA made for this run, trusted through an NSS database in a
/// home of its own (nothing on the machine is changed).
fn start_https_site(root: &Path, children: &mut Children) -> anyhow::Result<HttpsSite> {
    let dir = root.join("target/bench/https");
    if dir.exists() {
        fs::remove_dir_all(&dir)?;
    }
    let home = dir.join("home");
    let nssdb = home.join(".pki/nssdb");
    fs::create_dir_all(&nssdb)?;
    let path = |name: &str| dir.join(name).display().to_string();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    run_quiet(
        Command::new("openssl")
            .args(["req", "-x509"])
            .args(ec)
            .args(["-keyout", &path("ca.key"), "-out", &path("ca.pem")])
            .args(["-days", "2", "-subj", "/CN=Airlock bench CA"])
            .args(["-addext", "basicConstraints=critical,CA:TRUE"])
            .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]),
    )?;
    run_quiet(
        Command::new("openssl")
            .arg("req")
            .args(ec)
            .args(["-keyout", &path("site.key"), "-out", &path("site.csr")])
            .args(["-subj", "/CN=127.0.0.1"]),
    )?;
    fs::write(
        dir.join("site.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )?;
    run_quiet(
        Command::new("openssl")
            .args(["x509", "-req", "-in", &path("site.csr")])
            .args(["-CA", &path("ca.pem"), "-CAkey", &path("ca.key")])
            .args(["-CAcreateserial", "-days", "2"])
            .args(["-extfile", &path("site.ext"), "-out", &path("site.pem")]),
    )?;
    let db = format!("sql:{}", nssdb.display());
    run_quiet(Command::new("certutil").args(["-N", "--empty-password", "-d", &db]))?;
    run_quiet(
        Command::new("certutil")
            .args(["-A", "-d", &db, "-n", "airlock-bench-ca", "-t", "C,,", "-i"])
            .arg(dir.join("ca.pem")),
    )?;

    let port = free_port()?;
    let server = r#"
import functools, http.server, ssl, sys
port, directory, cert, key = sys.argv[1:5]
class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), functools.partial(Handler, directory=directory))
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"#;
    children.0.push(
        Command::new("python3")
            .args(["-c", server, &port.to_string()])
            .arg(root.join("target/bench/site"))
            .arg(dir.join("site.pem"))
            .arg(dir.join("site.key"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting the HTTPS site server (python3)")?,
    );
    wait_for_port(port, "the HTTPS site server")?;
    Ok(HttpsSite { port, home })
}

/// Run a setup command, showing its output only if it fails.
fn run_quiet(command: &mut Command) -> anyhow::Result<()> {
    let out = command
        .output()
        .with_context(|| format!("starting {}", crate::util::display(command)))?;
    if !out.status.success() {
        bail!(
            "{} failed: {}",
            crate::util::display(command),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Where each proxy of the page-load benchmark listens.
struct Proxies {
    airlock: String,
    airlock_copied: String,
    tinyproxy: String,
    squid: String,
}

/// Start the Airlock proxy (behind `airlock-relay`, as in the container, and for comparison
/// behind a copying socat relay), tinyproxy and squid; return each load mode with its proxy URL.
fn start_proxies(root: &Path, sites: &[u16], children: &mut Children) -> anyhow::Result<Proxies> {
    let dir = root.join("target/bench/proxies");
    fs::create_dir_all(&dir)?;
    // Airlock's proxy on its sockets, with the relay the container uses.
    let socket = dir.join("airlock.sock");
    let handoff = dir.join("airlock-handoff.sock");
    let _ = fs::remove_file(&socket);
    let _ = fs::remove_file(&handoff);
    let mut airlock = Command::new(root.join("target/release/airlock"));
    airlock.arg("proxy");
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
    let airlock_port = free_port()?;
    children.0.push(
        Command::new(root.join("target/release/airlock-relay"))
            .args([
                "--listen",
                &format!("127.0.0.1:{airlock_port}"),
                "--handoff",
            ])
            .arg(&handoff)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
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
    ] {
        wait_for_port(port, what)?;
    }

    Ok(Proxies {
        airlock: format!("http://127.0.0.1:{airlock_port}"),
        airlock_copied: format!("http://127.0.0.1:{copied_port}"),
        tinyproxy: format!("http://127.0.0.1:{tinyproxy_port}"),
        squid: format!("http://127.0.0.1:{squid_port}"),
    })
}

fn proxy_micro(root: &Path, quick: bool, report: &mut String) -> anyhow::Result<()> {
    eprintln!("== proxy micro-benchmark");
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
        );
    if quick {
        command.args(["--", "--quick"]);
    }
    let text = output(&mut command)?;
    let _ = writeln!(
        report,
        "{}",
        text.trim().replace(
            "## Proxy micro-benchmark",
            "## Proxy micro-benchmark (crates/proxy/benches/throughput.rs)"
        )
    );
    let _ = writeln!(report);
    Ok(())
}

/// The resident memory of the `airlock proxy` process with `count` idle CONNECT tunnels open.
fn idle_tunnels(root: &Path, count: usize, report: &mut String) -> anyhow::Result<()> {
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
    let socket = root.join("target/bench/proxies/idle.sock");
    let _ = fs::remove_file(&socket);
    let mut children = Children::default();
    children.0.push(
        Command::new(root.join("target/release/airlock"))
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

fn concurrency(root: &Path, site: u16, max: usize, report: &mut String) -> anyhow::Result<()> {
    eprintln!("== concurrency (up to {max} sessions)");
    let url = format!("http://127.0.0.1:{site}/page-0.html");
    let lines = output(
        Command::new("runuser")
            .args(["-u", crate::integration::TEST_USER, "--"])
            .arg(root.join("target/release/examples/bench"))
            .args(["concurrency", &max.to_string(), &url]),
    )?;
    let _ = writeln!(
        report,
        "## Concurrency: sessions started at once, each to its first snapshot\n"
    );
    let _ = writeln!(
        report,
        "| sessions | failures | median ms | max ms | max / single | memory per task (MiB) |\n|---|---|---|---|---|---|"
    );
    let mut single = None;
    for line in lines.lines() {
        let Ok(level) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let times: Vec<f64> = level["times_ms"]
            .as_array()
            .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
            .unwrap_or_default();
        let memory: Vec<f64> = level["memory_mib"]
            .as_array()
            .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
            .unwrap_or_default();
        let summary = summarize(&times);
        let base = *single.get_or_insert(summary.max);
        #[allow(clippy::cast_precision_loss)]
        let per_task = if memory.is_empty() {
            f64::NAN
        } else {
            memory.iter().sum::<f64>() / memory.len() as f64
        };
        let _ = writeln!(
            report,
            "| {} | {} | {:.0} | {:.0} | {:.2}x | {per_task:.0} |",
            level["tasks"],
            level["failures"],
            summary.median,
            summary.max,
            summary.max / base
        );
    }
    let _ = writeln!(
        report,
        "\nThe run stops at the first level where a session fails or the slowest takes more than 3× a single session.\n"
    );
    Ok(())
}

fn table_header(report: &mut String) {
    let _ = writeln!(
        report,
        "| run | median | p90 | min | max | ratio (median) |\n|---|---|---|---|---|---|"
    );
}

fn table_row(report: &mut String, label: &str, samples: &[f64], baseline: Option<&[f64]>) {
    let s = summarize(samples);
    let ratio = baseline.map_or_else(
        || "baseline".to_owned(),
        |b| format!("{:.2}x", s.median / summarize(b).median),
    );
    let _ = writeln!(
        report,
        "| {label} | {:.0} | {:.0} | {:.0} | {:.0} | {ratio} |",
        s.median, s.p90, s.min, s.max
    );
}
