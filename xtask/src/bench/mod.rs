//! `cargo xtask bench`: how fast Airlock is against what a user would pick instead, measured in
//! alternation in one run and reported as ratios. Never fails for being slow.
//!
//! - Start-up: task requested → first snapshot of a local page through Airlock (container, proxy,
//!   agent-browser, Chromium), against bare agent-browser with Chromium on the host. Cold and warm.
//! - Page load: a page with 100 subresources, loaded by headless Chromium directly, through the
//!   Airlock proxy (behind `airlock-relay`, as in the container), through tinyproxy and through
//!   squid (Debian packages, installed if missing); over HTTP, then over HTTPS with a local CA.
//! - Proxy micro: the proxy crate's own harness (CONNECT throughput, small requests; tinyproxy as
//!   a peer), again with the destinations behind a shaped link (1 Gbit/s, 5 ms round trip), and
//!   the proxy's memory with idle tunnels.
//! - Concurrency: sessions at once until one fails or takes 3× a single one; memory per task.
//! - Pool: one-page tasks back to back with no warm pool and pools of 1 and 2: tasks per minute,
//!   and the page load of a task while the pool refills beside it.
//! - Serve: a one-page task through `POST /v1/tasks` against `airlock task`, and throughput with
//!   1, 2 and 4 clients.
//! - CDP: a Playwright client's connect to its first page.goto through `airlock cdp` (cold and
//!   from the warm CDP pool) against Playwright launching the same Chromium on the host.
//! - Idle memory: an idle warm browser's memory by process, and its container's cgroup account.
//! - Context: characters and image bytes shown to a worker to find facts planted in demanding
//!   pages, cut (the old default) against paged.
//!
//! `--quick` runs a small version. Every run writes `target/bench/report.md`; a full run of every
//! section also writes `docs/benchmarks.md`, the report of record (committed, with the machine it
//! ran on), which every figure in README.md and ARCHITECTURE.md quotes, followed by `changes.md`:
//! what each change made for a goal of the report did when it landed.

mod bench_runtimes;
mod cdp;
mod concurrency;
mod container;
mod context;
mod dev_shm;
mod gate;
mod gvisor;
mod gvisor_cause;
mod gvisor_options;
mod gvisor_releases;
mod idle_memory;
mod link;
mod live;
mod page_load;
mod pool;
mod pprof;
mod processes;
mod proxy;
mod sentry_profile;
mod serve;
mod site;
mod startup;
mod stats;

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use clap::Args;

use crate::util::{is_root, run_loud, succeeds, workspace_root};
use processes::{Children, free_port, wait_for_port};

/// What #32's changes did when each landed, kept by hand and added to every report of record
/// after this run's own sections.
const CHANGES: &str = include_str!("changes.md");

/// Arguments of `cargo xtask bench`.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
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
    ProxyLink,
    IdleTunnels,
    Concurrency,
    Gvisor,
    DevShm,
    Context,
    Serve,
    Pool,
    Cdp,
    Gate,
    Live,
    IdleMemory,
}

pub(crate) fn run(args: &BenchArgs) -> anyhow::Result<()> {
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
    let agent_browser = prepare(&root)?;
    let mut report = report_header(args.quick);

    let mut children = Children::default();
    let site_port = serve_site(&out_dir.join("site"), load_rounds, &mut children)?;
    // Everyone must be able to read the site and run the binaries.
    let _ = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(&out_dir)
        .status();

    let wanted = |section| args.only.is_empty() || args.only.contains(&section);
    if wanted(Section::Startup) {
        // As many rounds as page loads: the warm pool against a warm host browser on a new page
        // is a difference of tens of milliseconds in about 800, which 10 rounds did not settle
        // (1.12x in the report of record, 1.00x in an `--only` run of the same code).
        startup::startup(&root, &agent_browser, site_port, load_rounds, &mut report);
    }
    if wanted(Section::PageLoad) {
        page_load::page_load(
            &root,
            &agent_browser,
            site_port,
            load_rounds,
            &mut children,
            &mut report,
        )?;
    }
    if wanted(Section::ProxyMicro) {
        proxy::proxy_micro(&root, args.quick, &mut report)?;
    }
    if wanted(Section::ProxyLink) {
        proxy::proxy_link(&root, args.quick, &mut report)?;
    }
    if wanted(Section::IdleTunnels) {
        proxy::idle_tunnels(&root, if args.quick { 200 } else { 1000 }, &mut report)?;
    }
    // The in-container comparisons: rounds of sessions, and page loads per session.
    let (session_rounds, loads) = if args.quick { (2, 2) } else { (5, 4) };
    if wanted(Section::Gvisor) {
        gvisor::gvisor(&root, site_port, session_rounds, loads, &mut report);
        let pages = format!("http://127.0.0.1:{site_port}/page-{{n}}.html");
        sentry_profile::sentry_profile(&root, &pages, loads, &mut report);
        gvisor_options::gvisor_options(&root, &pages, session_rounds.min(3), loads, &mut report);
    }
    if wanted(Section::DevShm) {
        dev_shm::dev_shm(&root, site_port, session_rounds, loads, &mut report);
    }
    if wanted(Section::Pool) {
        pool::pool(
            &root,
            site_port,
            if args.quick { 1 } else { 3 },
            if args.quick { (4, 10) } else { (8, 100) },
            &mut report,
        );
    }
    if wanted(Section::Serve) {
        serve::serve(&root, site_port, rounds, &mut report)?;
    }
    if wanted(Section::Cdp) {
        cdp::cdp(&root, site_port, rounds, &mut report)?;
    }
    if wanted(Section::Gate) {
        gate::gate(&root, site_port, args.quick, &mut report)?;
    }
    if wanted(Section::Live) {
        live::live(&root, site_port, load_rounds, &mut report);
    }
    if wanted(Section::IdleMemory) {
        idle_memory::idle_memory(&root, &mut report)?;
    }
    if wanted(Section::Context) {
        context::context(&root, site_port, &mut report);
    }
    if wanted(Section::Concurrency) {
        concurrency::concurrency(
            &root,
            site_port,
            if args.quick { 4 } else { 12 },
            &mut report,
        )?;
    }

    println!("\n{report}");
    let path = out_dir.join("report.md");
    fs::write(&path, &report)?;
    eprintln!("wrote {}", path.display());
    if !args.quick && args.only.is_empty() {
        let record = root.join("docs/benchmarks.md");
        fs::create_dir_all(root.join("docs"))?;
        fs::write(&record, format!("{report}{CHANGES}"))?;
        eprintln!(
            "wrote {} (the report of record: commit it)",
            record.display()
        );
    }
    Ok(())
}

/// Write the benchmark's pages and serve them on loopback; the port.
/// The report's title, how it was measured, and the machine.
fn report_header(quick: bool) -> String {
    let mut report = String::new();
    let _ = writeln!(
        report,
        "# Airlock benchmarks\n\nWritten by `cargo xtask bench`{}. Measured in one run: every section runs a \
         warm-up round first (not recorded), then rotates which contender goes first in each round. \
         Times in ms; ratios are the contender's median over the baseline's in the same run; failed \
         attempts are counted in their own column, never averaged in.\n",
        if quick { " --quick" } else { "" }
    );
    let _ = writeln!(report, "{}", machine_description());
    report
}

fn serve_site(site_dir: &Path, load_rounds: usize, children: &mut Children) -> anyhow::Result<u16> {
    let site_port = free_port()?;
    // Every load gets a page of its own (no cache): a warm-up round plus `load_rounds`, per mode.
    site::write_site(site_dir, (load_rounds + 1) * page_load::LOADS_PER_ROUND)?;
    context::write_corpus(site_dir)?;
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
            .arg(site_dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting the site server (python3)")?,
    );
    wait_for_port(site_port, "the site server")?;
    Ok(site_port)
}

/// The machine a report was measured on: what a reader needs to weigh its numbers.
fn machine_description() -> String {
    let first_line = |command: &mut Command| {
        crate::util::output(command)
            .ok()
            .and_then(|text| text.lines().next().map(str::trim).map(str::to_owned))
            .unwrap_or_else(|| "unknown".to_owned())
    };
    let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|kib| kib.split_whitespace().next()?.parse::<u64>().ok())
        .map_or_else(
            || "unknown".to_owned(),
            |kib| format!("{} GiB", kib / (1024 * 1024)),
        );
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|line| {
            line.strip_prefix("model name")
                .and_then(|rest| rest.split_once(':'))
        })
        .map_or_else(|| "unknown".to_owned(), |(_, name)| name.trim().to_owned());
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    format!(
        "## The machine\n\n| what | value |\n|---|---|\n| date | {} |\n| CPU | {cores} cores, {cpu} |\n| memory | {memory} |\n| kernel | {} |\n| Docker | {} |\n| Chromium on the host (bare agent-browser, direct loads, the other proxies) | {} |\n| Chromium in the image (Airlock) | {} |\n| agent-browser | {} |\n| gVisor (each row of its tables names the release and platform) | {} |\n| Rust | {} |\n",
        first_line(Command::new("date").args(["-u", "+%Y-%m-%d %H:%M UTC"])),
        first_line(Command::new("uname").args(["-sr"])),
        first_line(Command::new("docker").args([
            "version",
            "--format",
            "{{.Server.Version}} (API {{.Server.APIVersion}})"
        ])),
        // The binary itself: Debian's wrapper script prints noise of its own.
        first_line(Command::new("/usr/lib/chromium/chromium").arg("--version")),
        first_line(&mut version_in_image("/usr/lib/chromium/chromium")),
        first_line(&mut version_in_image("agent-browser")),
        first_line(Command::new("runsc").arg("--version")),
        first_line(Command::new("rustc").arg("--version")),
    )
}

/// `PROGRAM --version` run in the browser image, with no network.
fn version_in_image(program: &str) -> Command {
    let mut command = Command::new("docker");
    command
        .args(["run", "--rm", "--network", "none", "--entrypoint", program])
        .arg(crate::image::default_tag())
        .arg("--version");
    command
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
        "--example",
        "pool_burst",
        "--example",
        "live_load",
    ]))?;
    run_loud(Command::new(env!("CARGO")).args([
        "build",
        "--release",
        "-p",
        "airlock",
        "-p",
        "airlock-relay",
        "-p",
        "airlock-gate",
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
