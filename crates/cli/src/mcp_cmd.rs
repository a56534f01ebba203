//! `airlock mcp`: an MCP server on stdio ([`airlock_service::mcp`] serves it).

use std::sync::Arc;

use airlock_service::mcp::{Mode, serve_stdio};
use airlock_worker::{BrowserDriver, TaskRunner};
use clap::{ArgMatches, Args};
use tokio_util::task::TaskTracker;

use crate::settings::{SettingFlags, Settings};

/// Arguments of `airlock mcp`.
#[derive(Debug, Args)]
pub(crate) struct McpArgs {
    /// Offer `agent_browser` (one sealed browser per MCP session, driven by the calling agent)
    /// instead of `browser_task` (a worker model does the task).
    #[arg(long)]
    direct: bool,
    #[command(flatten)]
    settings: SettingFlags,
}

/// Serve until stdin closes or SIGTERM, then cancel running tasks and wait for their cleanup.
pub(crate) async fn run(args: &McpArgs, matches: &ArgMatches) -> anyhow::Result<u8> {
    let settings = Settings::resolve(&args.settings, Some(matches))
        .map_err(crate::bad_input)?
        .with_default_pool(1);
    // The model first: a bad one is bad input, found before any browser starts warming.
    let model = if args.direct {
        None
    } else {
        Some(crate::boot::model(&settings).map_err(crate::bad_input)?)
    };
    let settings = if args.direct {
        settings.for_direct()
    } else {
        settings
    };
    let driver = crate::boot::ready_driver(&settings).await?;
    let mode = match model {
        None => Mode::direct(
            Arc::new(crate::docker_browsers::DockerBrowsers(Arc::clone(&driver))),
            TaskTracker::new(),
            None,
        ),
        Some(model) => Mode::Task(TaskRunner::new(
            Arc::clone(&driver) as Arc<dyn BrowserDriver>,
            model,
            settings.limits,
        )?),
    };
    let terminated = crate::signals::terminated();
    serve_stdio(mode, Arc::new(settings.for_tasks()), terminated).await?;
    driver.shutdown().await;
    Ok(0)
}
