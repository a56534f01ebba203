//! `airlock proxy`: run the egress proxy on its own, for other sandboxes, logging each decision.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use airlock_proxy::{EgressProxy, Outcome, ProxyConfig, ProxyError, ProxyEvent};
use clap::Args;
use serde::Serialize;

use crate::egress_flags::EgressFlags;

/// Arguments of `airlock proxy`.
#[derive(Debug, Args)]
pub(crate) struct ProxyArgs {
    /// Where to create the Unix socket. It must not exist yet; it is removed on exit.
    #[arg(long, value_name = "PATH")]
    socket: PathBuf,

    /// Also take connections handed off by `airlock-relay` on this Unix socket (it passes each
    /// accepted TCP connection itself, so no relay copies bytes). Must not exist; removed on exit.
    #[arg(long, value_name = "PATH")]
    handoff_socket: Option<PathBuf>,

    #[command(flatten)]
    egress: EgressFlags,

    #[command(flatten)]
    routes: crate::route_flags::RouteFlags,

    /// Resolve names with this nameserver (`ip:port`) instead of the system's. Repeatable.
    #[arg(long = "nameserver", value_name = "ADDR")]
    nameservers: Vec<SocketAddr>,

    /// Trust this CA (a PEM file: certificates only) as well as the public roots for TLS to an
    /// `https://` parent (a company's proxy is usually signed by the company's CA). Repeatable.
    #[arg(long = "ca-cert", value_name = "FILE")]
    ca_certs: Vec<PathBuf>,

    /// Print each decision as a JSON object instead of a line of text.
    #[arg(long)]
    json: bool,

    /// The most client connections (and so tunnels) open at once; more get 503.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    max_connections: u32,
}

/// One decision as printed with `--json`.
#[derive(Debug, Serialize)]
struct DecisionLine<'a> {
    time: String,
    via: &'static str,
    target: &'a str,
    verdict: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    address: Option<SocketAddr>,
    /// The route an allowed connection left by.
    #[serde(skip_serializing_if = "Option::is_none")]
    route: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    class: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    /// A closed connection's bytes to the destination and from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes_up: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes_down: Option<u64>,
}

impl<'a> DecisionLine<'a> {
    fn from_event(event: &'a ProxyEvent) -> Self {
        let mut line = Self {
            time: humantime::format_rfc3339_millis(event.at).to_string(),
            via: event.via.label(),
            target: &event.target,
            verdict: "allow",
            address: None,
            route: None,
            status: None,
            class: None,
            reason: None,
            bytes_up: None,
            bytes_down: None,
        };
        match &event.outcome {
            Outcome::Allowed { address, route } => {
                line.address = Some(*address);
                line.route = Some(route);
            }
            Outcome::Closed { up, down, .. } => {
                line.verdict = "closed";
                line.bytes_up = Some(*up);
                line.bytes_down = Some(*down);
            }
            Outcome::Refused { reason, class, .. } => {
                line.verdict = "refuse";
                line.status = Some(403);
                line.class = Some(class);
                line.reason = Some(reason);
            }
            Outcome::Failed {
                status,
                class,
                reason,
            } => {
                line.verdict = "fail";
                line.status = Some(*status);
                line.class = Some(class);
                line.reason = Some(reason);
            }
        }
        line
    }

    fn text(&self) -> String {
        let head = format!(
            "{} {} {} {}",
            self.time, self.verdict, self.via, self.target
        );
        match (self.address, self.status, self.reason) {
            (Some(address), _, _) => match self.route {
                Some(route) if route != airlock_policy::DIRECT => {
                    format!("{head} -> {address} (route {route})")
                }
                _ => format!("{head} -> {address}"),
            },
            (_, Some(status), Some(reason)) => format!("{head}: {status} {reason}"),
            _ => match (self.bytes_up, self.bytes_down) {
                (Some(up), Some(down)) => format!("{head}: {up} bytes up, {down} down"),
                _ => head,
            },
        }
    }
}

/// Run until Ctrl-C or SIGTERM, then stop cleanly (the socket is removed).
pub(crate) async fn run(args: &ProxyArgs) -> anyhow::Result<()> {
    let policy = args.egress.policy().map_err(crate::bad_input)?;
    let routes = crate::settings::routes_of(&args.routes).map_err(crate::bad_input)?;
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<ProxyEvent>();
    let limits = airlock_proxy::ProxyLimits {
        max_connections: usize::try_from(args.max_connections).unwrap_or(usize::MAX),
        ..airlock_proxy::ProxyLimits::default()
    };
    let parent_cas =
        crate::settings::ca::read_ca_files(&args.ca_certs).map_err(crate::bad_input)?;
    let mut config = ProxyConfig::new(policy)
        .with_routes(routes)
        .with_parent_cas(parent_cas)
        .with_limits(limits)
        .with_events(Arc::new(move |event| {
            // The printer only goes away at shutdown, when losing the last lines is harmless.
            let _ = sender.send(event);
        }));
    if !args.nameservers.is_empty() {
        config = config
            .with_nameservers(&args.nameservers)
            .map_err(crate::bad_input)?;
    }
    // Listen for the stop signals before saying we listen, so an early SIGTERM still cleans up.
    let terminated = crate::signals::terminated();
    let proxy = EgressProxy::start_at(&args.socket, args.handoff_socket.as_deref(), config)
        .map_err(|error| match &error {
            ProxyError::SocketExists { path } => {
                let flag = if args.handoff_socket.as_deref() == Some(path.as_path()) {
                    "--handoff-socket"
                } else {
                    "--socket"
                };
                crate::bad_input(anyhow::anyhow!(
                    "{} already exists: remove it, or choose another {flag} path",
                    path.display()
                ))
            }
            _ => anyhow::Error::new(error).context(format!(
                "starting the egress proxy on {}",
                args.socket.display()
            )),
        })?;
    match proxy.handoff_path() {
        Some(handoff) => eprintln!(
            "airlock proxy: listening on {}; hand-offs on {}",
            proxy.socket_path().display(),
            handoff.display()
        ),
        None => eprintln!(
            "airlock proxy: listening on {}",
            proxy.socket_path().display()
        ),
    }

    let json = args.json;
    let printer = tokio::spawn(async move {
        while let Some(event) = receiver.recv().await {
            let line = DecisionLine::from_event(&event);
            let text = if json {
                serde_json::to_string(&line).unwrap_or_default()
            } else {
                line.text()
            };
            let mut out = std::io::stdout().lock();
            if writeln!(out, "{text}").and_then(|()| out.flush()).is_err() {
                break;
            }
        }
    });

    terminated.await;
    let stats = proxy.stats();
    proxy.stop().await;
    printer.abort();
    // Whoever read our log may be gone by now; a failed last line is no reason to fail the stop.
    let _ = writeln!(
        std::io::stderr(),
        "airlock proxy: stopped after {} connections, {} bytes up, {} bytes down, {} refusals",
        stats.connections,
        stats.bytes_up,
        stats.bytes_down,
        stats.refusals.values().sum::<u64>()
    );
    Ok(())
}
