//! `airlock`: the command-line face of Airlock.

mod egress_check;
mod egress_flags;

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
    let result = match &cli.command {
        Command::Egress(EgressCommand::Check(args)) => egress_check::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(USAGE_ERROR)
        }
    }
}
