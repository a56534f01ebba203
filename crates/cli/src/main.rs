//! `airlock`: the command-line face of Airlock.

mod boot;
mod browse_cmd;
mod browser_flags;
mod docker_browsers;
mod doctor_cmd;
mod egress_check;
mod egress_flags;
mod heap;
mod host_proxy;
mod mcp_cmd;
mod output;
mod privsep;
mod proxy_cmd;
#[cfg(test)]
mod reference;
mod route_flags;
mod secret_flags;
mod serve_cmd;
mod setting_flags;
mod settings;
mod signals;
mod state_file;
mod task_cmd;
mod task_live;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// A real browser for AI agents, sealed so it cannot be turned against the machine it runs on.
#[derive(Debug, Parser)]
#[command(name = "airlock", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one browser task with a worker model; prints the report (stdout), progress (stderr).
    Task(task_cmd::TaskArgs),
    /// Open a page in a sealed browser without any model: title, URL, snapshot and a screenshot.
    Browse(browse_cmd::BrowseArgs),
    /// Serve `browser_task` (or, with --direct, `agent_browser`) over MCP on stdio.
    Mcp(mcp_cmd::McpArgs),
    /// Serve Airlock over the network: MCP over streamable HTTP at /mcp, a JSON task API at
    /// /v1/tasks, health, readiness and Prometheus metrics. Drains on SIGTERM.
    Serve(serve_cmd::ServeArgs),
    /// Serve the guarded CDP endpoint alone: each Playwright, Puppeteer or browser-use connection
    /// to ws://ADDR/cdp (discovery at /json/version) drives its own sealed browser.
    Cdp(serve_cmd::CdpArgs),
    /// Check Docker, the image, the user and the model settings, each with its fix.
    Doctor(doctor_cmd::DoctorArgs),
    /// Remove task containers whose owning process is gone.
    Cleanup,
    /// The browser image.
    #[command(subcommand)]
    Image(ImageCommand),
    /// Ask the egress policy about destinations.
    #[command(subcommand)]
    Egress(EgressCommand),
    /// Run the egress proxy on its own on a Unix socket (for other sandboxes), printing each
    /// decision. Stops on Ctrl-C or SIGTERM and removes the socket.
    Proxy(proxy_cmd::ProxyArgs),
}

#[derive(Debug, Subcommand)]
enum EgressCommand {
    /// Print `allow`, `refuse` (with the reason) or `resolve` for each target. Exits 0 even when
    /// targets are refused, 2 for bad arguments.
    Check(egress_check::CheckArgs),
}

#[derive(Debug, Subcommand)]
enum ImageCommand {
    /// Print the command that builds the image this version expects.
    BuildCommand,
}

/// Exit code for bad input (flags, environment, config file), as clap uses for its own usage errors.
const BAD_INPUT: u8 = 2;
/// Exit code for everything else that fails: the task, Docker, the machine.
const FAILED: u8 = 1;

/// An error in what the user gave (a flag, an `AIRLOCK_*` variable, the config file): exit 2.
/// Every other error exits 1, so scripts can tell "fix your command" from "it did not work".
#[derive(Debug)]
pub struct BadInput(anyhow::Error);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for BadInput {}

/// Mark an error as bad input (exit 2).
pub fn bad_input(error: impl Into<anyhow::Error>) -> anyhow::Error {
    anyhow::Error::new(BadInput(error.into()))
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    init_logging();
    // Everything that starts or talks to a browser, started as root, runs unprivileged instead.
    let drops_root = !matches!(cli.command, Command::Egress(_) | Command::Image(_));
    if drops_root {
        match privsep::run_unprivileged_if_root() {
            Ok(Some(code)) => return ExitCode::from(code),
            Ok(None) => {}
            Err(error) => {
                eprintln!("error: {error:#}");
                return ExitCode::from(FAILED);
            }
        }
    }
    let sub = |name: &str| {
        matches
            .subcommand_matches(name)
            .cloned()
            .unwrap_or_default()
    };
    let result = match &cli.command {
        Command::Egress(EgressCommand::Check(args)) => egress_check::run(args).map(|()| 0),
        Command::Proxy(args) => block_on(proxy_cmd::run(args)).map(|()| 0),
        Command::Task(args) => block_on(task_cmd::run(args, &sub("task"))),
        Command::Browse(args) => block_on(browse_cmd::run(args, &sub("browse"))),
        Command::Mcp(args) => block_on(mcp_cmd::run(args, &sub("mcp"))),
        Command::Serve(args) => block_on(serve_cmd::run(args, &sub("serve"))),
        Command::Cdp(args) => block_on(serve_cmd::run_cdp(args, &sub("cdp"))),
        Command::Doctor(args) => block_on(doctor_cmd::run(args, &sub("doctor"))),
        Command::Cleanup => block_on(cleanup()),
        Command::Image(ImageCommand::BuildCommand) => {
            print_build_command();
            Ok(0)
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("error: {error:#}");
            let bad_input = error.chain().any(<dyn std::error::Error>::is::<BadInput>);
            ExitCode::from(if bad_input { BAD_INPUT } else { FAILED })
        }
    }
}

async fn cleanup() -> anyhow::Result<u8> {
    let driver = airlock_driver_docker::DockerDriver::connect(
        airlock_driver_docker::DriverConfig::default(),
    )
    .await?;
    let removed = driver.removed_orphans();
    if removed.is_empty() {
        println!("no orphaned task containers");
    }
    for name in removed {
        println!("removed {name}");
    }
    for dir in driver.removed_egress_dirs() {
        println!("removed {}", dir.display());
    }
    Ok(0)
}

fn print_build_command() {
    let checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map_or_else(|| ".".into(), |p| p.display().to_string());
    println!("cd {checkout} && cargo xtask image");
    println!(
        "# or, after `cargo xtask image` has prepared the build context:\ndocker build --build-arg BASE_IMAGE=debian:bookworm-slim --tag {} {checkout}/target/airlock-image",
        airlock_driver_docker::default_image()
    );
}

/// Logs go to stderr (stdout is for data); `RUST_LOG` sets the level, `warn` by default.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn block_on<T>(future: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(future)
}
