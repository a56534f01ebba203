//! `airlock-gate`: a Unix socket that speaks the Docker Engine API and forwards to the real
//! Docker socket only the calls Airlock's driver makes, with the arguments it makes them with.
//!
//! Whoever holds the Docker socket is root on the node. The server (`airlock serve`) holds only
//! this gate's socket instead: a create must describe Airlock's sealed container exactly, every
//! later call must name a container this gate made, and the gate writes every request it sends
//! itself (the client's bytes never reach dockerd). What is admitted is judged by
//! `airlock_policy::judge_docker_call` (pure, table-tested); this binary does the I/O around it:
//!
//! - `listener.rs`: the socket (its mode and group), connections, their bounds.
//! - `handle.rs`: one request: read within bounds, judge, check, forward, or refuse with `403`.
//! - `checks.rs`: what needs the daemon's or the disk's answer (is it the gate's container? is the
//!   bind a real directory?).
//! - `known.rs`: what the gate already established (its containers' ids, its execs), so later
//!   calls skip the daemon's answer and go to the id, not the name.
//! - `upstream.rs`: the real Docker socket.

mod checks;
mod handle;
mod known;
mod listener;
mod upstream;

use std::path::PathBuf;
use std::sync::Arc;

use airlock_policy::{GateLimits, GateRules};
use clap::Parser;

/// The Docker gate's settings.
#[derive(Debug, Parser)]
#[command(name = "airlock-gate", version, about)]
struct Args {
    /// Where the gate listens (give this to Airlock as DOCKER_HOST=unix://PATH).
    #[arg(long, default_value = "/run/airlock-gate/docker.sock")]
    listen: PathBuf,
    /// The group that may connect (the socket is 0660); without it, only the gate's own user.
    #[arg(long)]
    group: Option<String>,
    /// The real Docker socket.
    #[arg(long, default_value = "/var/run/docker.sock")]
    docker: PathBuf,
    /// The one image containers may be made from.
    #[arg(long, default_value = concat!("airlock-browser:", env!("CARGO_PKG_VERSION")))]
    image: String,
    /// A runtime containers may ask for (repeat for more).
    #[arg(long = "runtime", default_values_t = vec!["runc".to_owned()])]
    runtimes: Vec<String>,
    /// The directory holding the egress proxies' private directories (Airlock's temp directory).
    #[arg(long, default_value = "/tmp")]
    egress_parent: PathBuf,
    /// The value of the `airlock.gate` label on the containers this gate makes.
    #[arg(long, default_value = "airlock-gate")]
    id: String,
    /// Most client connections at once.
    #[arg(long, default_value_t = 256)]
    max_connections: usize,
    /// Admit the no-sandbox variant (an Airlock started with --no-browser-sandbox: Chromium
    /// without its own sandbox, under Docker's default seccomp profile). Refused without it.
    #[arg(long)]
    allow_no_browser_sandbox: bool,
}

/// Airlock's seccomp profile, exactly as the driver sends it.
const SECCOMP_PROFILE: &str = include_str!("../../../docker/seccomp.json");

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("AIRLOCK_GATE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(Args::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("airlock-gate: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let egress_parent = checks::egress_parent(&args.egress_parent)?;
    if args.id.is_empty()
        || !args
            .id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        anyhow::bail!("--id must be letters, digits and `-` (it is a label value)");
    }
    let rules = GateRules {
        image: args.image,
        runtimes: args.runtimes,
        egress_parent,
        gate_id: args.id,
        seccomp_profile: SECCOMP_PROFILE.to_owned(),
        allow_no_browser_sandbox: args.allow_no_browser_sandbox,
        limits: GateLimits::default(),
    };
    let docker = upstream::Docker::new(args.docker);
    docker.ping().await?;
    let gate = Arc::new(handle::Gate {
        rules,
        docker,
        known: known::Known::default(),
    });
    let listener = listener::Listener::bind(&args.listen, args.group.as_deref())?;
    tracing::info!(
        listen = %args.listen.display(),
        image = %gate.rules.image,
        runtimes = ?gate.rules.runtimes,
        allow_no_browser_sandbox = gate.rules.allow_no_browser_sandbox,
        "airlock-gate: forwarding only Airlock's sealed browsers"
    );
    listener.serve(gate, args.max_connections).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped unit starts the gate with arguments it takes, on the socket airlock.service
    /// names in DOCKER_HOST, for airlock.service's group.
    #[test]
    fn the_shipped_systemd_unit_parses_and_serves_airlock_services_socket() {
        let unit = include_str!("../../../deploy/airlock-gate.service");
        let start = unit.find("ExecStart=").unwrap() + "ExecStart=".len();
        let mut words = Vec::new();
        for line in unit[start..].lines() {
            words.extend(line.split_whitespace().filter(|word| *word != "\\"));
            if !line.trim_end().ends_with('\\') {
                break;
            }
        }
        assert_eq!(words[0], "/usr/local/bin/airlock-gate");
        let args = Args::try_parse_from(&words).unwrap();
        let server = include_str!("../../../deploy/airlock.service");
        assert!(server.contains(&format!(
            "Environment=DOCKER_HOST=unix://{}",
            args.listen.display()
        )));
        assert!(server.contains(&format!("Group={}", args.group.as_deref().unwrap())));
        assert_eq!(args.docker, PathBuf::from("/var/run/docker.sock"));
    }
}
