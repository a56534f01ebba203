//! `airlock serve` and `airlock cdp`: flags to a [`airlock_service::server`], served until
//! SIGTERM or SIGINT, then drained (its module doc tells what each endpoint does).

mod args;
mod tls;
mod token_scope;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use airlock_driver_docker::DockerDriver;
use airlock_service::capacity::Admission;
use airlock_service::metrics::Metrics;
use airlock_service::scope_request::Ceiling;
use airlock_service::server::LeaseLimits;
use airlock_service::server::{
    Callers, Endpoints, Keeping, Listening, McpMode, ServerParts, Stopping, build,
};
use airlock_worker::{BrowserDriver, TaskRunner};
use anyhow::Context;
use clap::ArgMatches;
use tokio::net::TcpListener;

pub(crate) use args::{CdpArgs, ServeArgs};

use crate::docker_browsers::DockerBrowsers;
use crate::settings::Settings;
use args::{ServiceArgs, tokens};

/// What `serve` keeps of finished tasks, per token, checked.
fn keeping(args: &ServeArgs) -> anyhow::Result<Keeping> {
    if !(1..=1000).contains(&args.keep_tasks) {
        anyhow::bail!(
            "--keep-tasks {} is out of range: keep 1 to 1000 finished tasks per token (AIRLOCK_KEEP_TASKS)",
            args.keep_tasks
        );
    }
    if !(1 << 20..=4 << 30).contains(&args.keep_task_bytes) {
        anyhow::bail!(
            "--keep-task-bytes {} is out of range: give 1048576 (1 MiB) to 4294967296 (4 GiB) (AIRLOCK_KEEP_TASK_BYTES)",
            args.keep_task_bytes
        );
    }
    Ok(Keeping {
        tasks: args.keep_tasks,
        bytes: args.keep_task_bytes,
    })
}

/// Serve until SIGTERM or SIGINT, then drain and exit 0 with nothing left behind.
pub(crate) async fn run(args: &ServeArgs, matches: &ArgMatches) -> anyhow::Result<u8> {
    if args.direct && args.stateless {
        return Err(crate::bad_input(anyhow::anyhow!(
            "--direct and --stateless cannot go together: --direct keeps a sealed browser in one server's MCP session, so every request of that session must reach the same server, and --stateless keeps no sessions. Behind a load balancer, run --direct with session affinity on the Mcp-Session-Id header, or use browser_task with --stateless"
        )));
    }
    let mcp = McpMode {
        direct: args.direct,
        stateless: args.stateless,
    };
    let keeping = keeping(args).map_err(crate::bad_input)?;
    serve(
        args.listen,
        &args.service,
        matches,
        (Endpoints::All, keeping),
        mcp,
    )
    .await
}

/// `airlock cdp`: the guarded CDP endpoint alone, until SIGTERM or SIGINT.
pub(crate) async fn run_cdp(args: &CdpArgs, matches: &ArgMatches) -> anyhow::Result<u8> {
    serve(
        args.listen,
        &args.service,
        matches,
        (Endpoints::CdpOnly, Keeping::default()),
        McpMode::default(),
    )
    .await
}

/// The lease limits, checked.
fn lease_limits(args: &ServiceArgs) -> anyhow::Result<LeaseLimits> {
    if !(10..=86_400).contains(&args.cdp_timeout) {
        anyhow::bail!(
            "--cdp-timeout {} is out of range: use 10 to 86400 seconds (AIRLOCK_CDP_TIMEOUT)",
            args.cdp_timeout
        );
    }
    if !(5..=args.cdp_timeout).contains(&args.cdp_idle_timeout) {
        anyhow::bail!(
            "--cdp-idle-timeout {} is out of range: use 5 seconds up to --cdp-timeout ({}) (AIRLOCK_CDP_IDLE_TIMEOUT)",
            args.cdp_idle_timeout,
            args.cdp_timeout
        );
    }
    Ok(LeaseLimits {
        lease: Duration::from_secs(args.cdp_timeout),
        idle: Duration::from_secs(args.cdp_idle_timeout),
        dialogs: args.cdp_dialogs,
    })
}

/// The settings, with each endpoint set's default pools, and the CDP lease limits.
fn service_settings(
    args: &ServiceArgs,
    matches: &ArgMatches,
    endpoints: Endpoints,
) -> anyhow::Result<(Settings, LeaseLimits)> {
    // `serve` keeps one task browser warm, `cdp` one CDP browser.
    let mut settings = Settings::resolve(&args.settings, Some(matches))?
        .with_default_pool(usize::from(endpoints == Endpoints::All));
    let limits = lease_limits(args)?;
    let cdp_pool_size = args
        .cdp_pool_size
        .unwrap_or(usize::from(endpoints == Endpoints::CdpOnly));
    if cdp_pool_size > 8 {
        anyhow::bail!(
            "--cdp-pool-size {cdp_pool_size} is over 8: each warm browser holds a container's memory; use 0 to 8 (AIRLOCK_CDP_POOL_SIZE)"
        );
    }
    settings.driver.pool.cdp_size = cdp_pool_size;
    settings.driver.pool.cdp_lease = limits.lease;
    Ok((settings, limits))
}

async fn serve(
    listen: SocketAddr,
    args: &ServiceArgs,
    matches: &ArgMatches,
    (endpoints, keeping): (Endpoints, Keeping),
    mcp: McpMode,
) -> anyhow::Result<u8> {
    let (settings, limits) =
        service_settings(args, matches, endpoints).map_err(crate::bad_input)?;
    // Bound first, so the Host check knows the real port (with --listen …:0, the kernel's pick).
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("--listen {listen}: cannot listen there"))
        .map_err(crate::bad_input)?;
    let local = listener.local_addr().unwrap_or(listen);
    let metrics_listener = bind_metrics(args.metrics_listen).await?;
    let tokens = tokens(args).map_err(crate::bad_input)?;
    let ceilings = token_scope::ceilings(
        &tokens,
        &settings.scope,
        (
            &settings.secrets,
            &airlock_service::scope_request::RouteNames::of(&settings.driver.routes),
        ),
    )
    .map_err(crate::bad_input)?;
    let callers = Callers::new(
        local,
        tokens.into_iter().map(|(entry, _)| entry.token).collect(),
        &args.allowed_hosts,
        &args.allowed_origins,
    )
    .map_err(crate::bad_input)?
    .with_ceilings(ceilings, Arc::new(Ceiling::server(settings.scope.clone())));
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls::acceptor(cert, key).map_err(crate::bad_input)?),
        _ => None,
    };
    let admission = admission_for(args, settings.limits.max_concurrent_tasks);
    // The model first: a bad one is bad input, found before any browser starts warming.
    let model = if mcp.direct || endpoints == Endpoints::CdpOnly {
        None
    } else {
        Some(crate::boot::model(&settings).map_err(crate::bad_input)?)
    };
    let settings = if mcp.direct {
        settings.for_direct()
    } else {
        settings
    };
    let driver = crate::boot::ready_driver(&settings).await?;
    announce_image(&driver, endpoints, &admission.metrics).await;
    let runner = match model {
        None => None,
        Some(model) => Some(TaskRunner::new(
            Arc::clone(&driver) as Arc<dyn BrowserDriver>,
            model,
            settings.limits,
        )?),
    };
    let terminated = crate::signals::terminated();
    let built = build(ServerParts {
        endpoints,
        mcp,
        tls: tls.is_some(),
        cdp: limits,
        callers,
        admission: Arc::clone(&admission),
        runner,
        browsers: Arc::new(DockerBrowsers(Arc::clone(&driver))),
        max_sessions: args.max_sessions,
        tasks: settings.for_tasks(),
        keeping,
    });
    let name = announce(endpoints, tls.is_some(), local);
    let listening = Listening::start(
        (listener, tls, built.router),
        metrics_listener.map(|listener| (listener, built.metrics_router)),
        name,
        &admission.metrics,
    );

    terminated.await;
    let stopping = Stopping {
        name,
        admission,
        drain_timeout: Duration::from_secs(args.drain_timeout),
        shutdown: built.shutdown,
        tracker: built.tracker,
        listening,
    };
    stopping.run().await;
    driver.shutdown().await;
    eprintln!("{name}: stopped");
    Ok(0)
}

/// Say which Chromium the browser image carries and how old it is, and put both in the metrics.
async fn announce_image(driver: &DockerDriver, endpoints: Endpoints, metrics: &Metrics) {
    match driver.image_age().await {
        Ok(age) => {
            // The warning when stale came from `ready_driver`; this is the start's own line.
            eprintln!(
                "{}: {}",
                endpoints.name(),
                age.describe(std::time::SystemTime::now())
            );
            metrics.set_image(age.chromium.as_deref(), age.built_unix_seconds());
        }
        Err(error) => tracing::warn!("the browser image's age is unknown: {error}"),
    }
}

/// Admission: `capacity` slots and a queue (twice that unless set).
fn admission_for(args: &ServiceArgs, capacity: usize) -> Arc<Admission> {
    Admission::new(
        capacity,
        args.max_queued_tasks.unwrap_or(capacity * 2),
        Duration::from_secs(args.queue_timeout),
    )
}

/// Say where the server listens (tests and scripts wait for this line); the name it logs under.
fn announce(endpoints: Endpoints, tls: bool, local: SocketAddr) -> &'static str {
    let scheme = if tls { "https" } else { "http" };
    let name = endpoints.name();
    match endpoints {
        Endpoints::All => eprintln!(
            "{name}: listening on {scheme}://{local} (mcp at /mcp, tasks at /v1/tasks, cdp at /cdp, dashboard at /ui)"
        ),
        Endpoints::CdpOnly => eprintln!(
            "{name}: listening on {scheme}://{local} (cdp at /cdp; discovery at /json/version)"
        ),
    }
    name
}

/// The `--metrics-listen` listener, if asked for; bad input when it cannot be bound.
async fn bind_metrics(at: Option<std::net::SocketAddr>) -> anyhow::Result<Option<TcpListener>> {
    let Some(at) = at else { return Ok(None) };
    let listener = TcpListener::bind(at).await.map_err(|error| {
        crate::bad_input(anyhow::anyhow!(
            "--metrics-listen {at}: cannot listen there: {error}"
        ))
    })?;
    Ok(Some(listener))
}
