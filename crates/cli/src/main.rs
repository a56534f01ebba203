//! `airlock`: the command-line face of Airlock.

mod egress_check;
mod egress_flags;
mod proxy_cmd;
mod signals;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A real browser for AI agents, sealed so it cannot be turned against the machine it runs on.
#[derive(Debug, Parser)]
#[command(name = "airlock", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
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

/// Exit code for bad arguments, as clap uses for its own usage errors.
const USAGE_ERROR: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let result = match &cli.command {
        Command::Egress(EgressCommand::Check(args)) => egress_check::run(args),
        Command::Proxy(args) => runtime().and_then(|rt| rt.block_on(proxy_cmd::run(args))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(USAGE_ERROR)
        }
    }
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

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}
