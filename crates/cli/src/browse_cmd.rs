//! `airlock browse`: open one page in a sealed browser, no model at all.

use std::path::PathBuf;

use airlock_worker::{BrowserDriver, CancellationToken, TaskContext, ToolOutput};
use anyhow::bail;
use clap::{ArgMatches, Args};
use serde_json::json;

use crate::settings::{SettingFlags, Settings};

/// Arguments of `airlock browse`.
#[derive(Debug, Args)]
pub(crate) struct BrowseArgs {
    /// The page to open (http or https).
    #[arg(value_name = "URL")]
    url: String,
    /// Where to save the screenshot (created 0700 if missing; an existing one must be yours and
    /// private). Without it: a fresh private directory under ~/.local/share/airlock/runs, named
    /// in the output.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print title, URL, snapshot and refusals as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    browser: crate::browser_flags::BrowserFlags,
    #[command(flatten)]
    settings: SettingFlags,
}

/// Open the page, print its title, URL and snapshot, save a screenshot.
pub(crate) async fn run(args: &BrowseArgs, matches: &ArgMatches) -> anyhow::Result<u8> {
    let settings = Settings::resolve(&args.settings, Some(matches)).map_err(crate::bad_input)?;
    if let Some(out) = &args.out {
        crate::output::prepare_dir(out).map_err(crate::bad_input)?;
    }
    let browser = args
        .browser
        .settings(settings.max_viewport)
        .map_err(crate::bad_input)?;
    let driver = crate::boot::ready_driver(&settings).await?;
    let context = TaskContext::new(CancellationToken::new(), settings.limits)
        .with_scope(settings.scope.clone())
        .with_browser(browser);
    let session = driver.start(context.clone()).await?;
    let tool = &session.tools[0];
    let call = |args: serde_json::Value| tool.execute(json!({"args": args}));
    let steps = async {
        let opened = call(json!(["open", args.url])).await?;
        let title = call(json!(["get", "title"])).await?;
        let url = call(json!(["get", "url"])).await?;
        let snapshot = call(json!(["snapshot"])).await?;
        let shot = tool
            .execute(json!({"args": ["screenshot"], "keep": true}))
            .await?;
        Ok::<_, airlock_worker::ToolFailure>((opened, title, url, snapshot, shot))
    };
    let outcome = steps.await;
    session.dispose.dispose().await;
    driver.shutdown().await;
    let (opened, title, url, snapshot, shot) = outcome?;
    if opened.is_error() {
        bail!("the page did not open: {}", opened.text);
    }
    // The default directory is made only now, when there is something to keep in it.
    let out = match &args.out {
        Some(out) => out.clone(),
        None => crate::output::default_run_dir()?,
    };
    let saved = crate::output::save_images(&out, "browse", &context.kept_screenshots())?;
    let first_line =
        |output: &ToolOutput| output.text.lines().next().unwrap_or_default().to_owned();
    let refusals = context.refusals();
    let failures = context.failures();
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "title": first_line(&title),
                "url": first_line(&url),
                "snapshot": snapshot.text,
                "screenshot": saved.first(),
                "egress_refusals": refusals,
                "egress_failures": failures,
            }))?
        );
    } else {
        println!(
            "{}\n{}\n\n{}",
            first_line(&title),
            first_line(&url),
            snapshot.text
        );
        for path in &saved {
            eprintln!("saved {}", path.display());
        }
        if shot.is_error() {
            eprintln!("screenshot failed: {}", shot.text);
        }
        for refusal in &refusals {
            eprintln!("egress refused {}: {}", refusal.target, refusal.reason);
        }
        for failure in &failures {
            eprintln!("egress failed {}: {}", failure.target, failure.reason);
        }
    }
    Ok(0)
}
