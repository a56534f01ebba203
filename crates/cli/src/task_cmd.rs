//! `airlock task`: run one browser task with a worker model and print its report.

use std::path::PathBuf;
use std::sync::Arc;

use airlock_worker::{
    BrowserDriver, CancellationToken, Ended, TaskRequest, TaskResult, TaskRunner,
};
use anyhow::Context;
use clap::{ArgMatches, Args};
use serde_json::json;

use crate::settings::{SettingFlags, Settings};
use airlock_service::contexts::ContextLease;

/// Arguments of `airlock task`.
#[derive(Debug, Args)]
pub(crate) struct TaskArgs {
    /// What the browser worker should do.
    #[arg(value_name = "TASK")]
    task: String,
    /// Where to start.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// Write kept screenshots here (created 0700 if missing; files 0600; nothing is overwritten).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Write the task's flight record here: `record.json` and `record.html`, a page that opens
    /// offline (created 0700 if missing; files 0600; nothing is overwritten).
    #[arg(long, value_name = "DIR")]
    record: Option<PathBuf>,
    /// Print the whole result as JSON instead of the report.
    #[arg(long)]
    json: bool,
    /// Start from this session state (Playwright storageState JSON: cookies and localStorage);
    /// every cookie and origin must lie inside the allowed domains.
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
    /// Write the browser's final session state here (0600), restricted to the allowed domains.
    #[arg(long, value_name = "FILE")]
    save_state: Option<PathBuf>,
    /// Start from the named context Airlock keeps and save the final state back into it (one
    /// task at a time per context; see AIRLOCK_CONTEXTS_DIR).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["state", "save_state"])]
    context: Option<String>,
    /// A file the worker may upload (by its name, into a file input on a page inside the allowed
    /// domains). Repeatable; at most 8 files, 10 MiB each.
    #[arg(long = "file", value_name = "PATH")]
    files: Vec<PathBuf>,
    /// Watch the task on a page at a loopback address of its own, printed at start (its link
    /// works once); there a person may help when the worker asks for one.
    #[arg(long)]
    live: bool,
    /// A JSON Schema file the answer must match: the worker hands its answer in and is told
    /// where it does not match; stdout gets the answer as JSON (the report goes to stderr), or
    /// with `--json` the result's `data`. Exit 1 when no answer matched.
    #[arg(long, value_name = "FILE")]
    output_schema: Option<PathBuf>,
    #[command(flatten)]
    browser: crate::browser_flags::BrowserFlags,
    #[command(flatten)]
    settings: SettingFlags,
}

/// The state a task starts from (`--state`, or `--context`'s), with the context's lease.
fn starting_state(
    args: &TaskArgs,
    scope: &airlock_worker::Scope,
) -> anyhow::Result<(Option<airlock_worker::SessionState>, Option<ContextLease>)> {
    if let Some(path) = &args.save_state {
        crate::state_file::check_writable(path)?;
    }
    if let Some(path) = &args.state {
        return Ok((Some(crate::state_file::read(path, scope)?), None));
    }
    let Some(name) = &args.context else {
        return Ok((None, None));
    };
    let root = airlock_service::contexts::root().context("--context")?;
    let lease = ContextLease::take(&root, airlock_service::contexts::LOCAL_OWNER, name)
        .context("--context")?;
    let state = lease.load(scope).context("--context")?;
    Ok((state, Some(lease)))
}

/// Run the task; the exit code says how it ended (0 completed or step limit, 1 otherwise).
pub(crate) async fn run(args: &TaskArgs, matches: &ArgMatches) -> anyhow::Result<u8> {
    let settings = Settings::resolve(&args.settings, Some(matches)).map_err(crate::bad_input)?;
    if let Some(out) = &args.out {
        crate::output::prepare_dir(out).map_err(crate::bad_input)?;
    }
    if let Some(dir) = &args.record {
        crate::output::prepare_dir_for("--record", dir).map_err(crate::bad_input)?;
    }
    // The lease is held until the task ends: a second task on its context is refused meanwhile.
    let (state, lease) = starting_state(args, &settings.scope).map_err(crate::bad_input)?;
    let uploads = crate::state_file::uploads(&args.files).map_err(crate::bad_input)?;
    let output_schema = args
        .output_schema
        .as_deref()
        .map(output_schema)
        .transpose()
        .map_err(crate::bad_input)?;
    let browser = args
        .browser
        .settings(settings.max_viewport)
        .map_err(crate::bad_input)?;
    let model = crate::boot::model(&settings).map_err(crate::bad_input)?;
    let driver = crate::boot::ready_driver(&settings).await?;
    let progress: airlock_worker::ProgressSink = Arc::new(|progress| {
        eprintln!(
            "step {}/{}: {}",
            progress.step, progress.max_steps, progress.summary
        );
    });
    let runner = TaskRunner::new(
        Arc::clone(&driver) as Arc<dyn BrowserDriver>,
        model,
        settings.limits,
    )?
    .with_progress(Arc::clone(&progress));
    let cancel = CancellationToken::new();
    let on_signal = cancel.clone();
    let terminated = crate::signals::terminated();
    tokio::spawn(async move {
        terminated.await;
        eprintln!("cancelling: removing the task's container…");
        on_signal.cancel();
    });
    let request = TaskRequest {
        task: args.task.clone(),
        url: args.url.clone(),
        scope: settings.scope.clone(),
        secrets: settings.secrets.clone(),
        state,
        return_state: args.save_state.is_some() || lease.is_some(),
        uploads,
        max_download_bytes: settings.max_download_bytes,
        route: None,
        output_schema,
        browser,
    };
    let (mut result, record) = if args.live {
        let browsers = Arc::new(crate::docker_browsers::DockerBrowsers(Arc::clone(&driver)));
        let both = (browsers as Arc<dyn airlock_service::Browsers>, &settings);
        crate::task_live::run(&runner, request, cancel, both, progress).await?
    } else if args.record.is_some() {
        let window = airlock_worker::TaskWindow::default();
        let (result, record) = runner.run_recorded(request, cancel, None, &window).await?;
        let files = crate::task_live::RecordFiles {
            json: serde_json::to_vec_pretty(&record)?,
            html: airlock_service::record_page::render(&record).into_bytes(),
        };
        (result, Some(files))
    } else {
        (runner.run(request, cancel).await?, None)
    };
    driver.shutdown().await;
    if let (Some(dir), Some(record)) = (&args.record, &record) {
        let json_path = crate::output::save_named("--record", dir, "record", "json", &record.json)?;
        let page_path = crate::output::save_named("--record", dir, "record", "html", &record.html)?;
        eprintln!(
            "saved the task's record in {} and {}",
            json_path.display(),
            page_path.display()
        );
    }
    // The state goes to its file or its context, never to stdout.
    if let Some(state) = result.state.take() {
        if let Some(path) = &args.save_state {
            crate::state_file::write(path, &state)?;
            eprintln!("saved the session state in {}", path.display());
        }
        if let (Some(lease), Some(name)) = (&lease, &args.context) {
            lease.save(&state)?;
            eprintln!("saved the session state in context `{name}`");
        }
    }

    let (saved, downloaded) = save_files(args, &result)?;
    print_result(args, &result, &saved, &downloaded)?;
    Ok(match result.ended {
        Ended::Completed | Ended::StepLimit | Ended::TokenBudget => 0,
        Ended::TimedOut | Ended::Cancelled | Ended::Failed | Ended::NoValidAnswer => 1,
    })
}

/// `--output-schema`'s file, read and checked.
fn output_schema(path: &std::path::Path) -> anyhow::Result<airlock_worker::OutputSchema> {
    // Pretty-printed, a schema within the compact bound fits in this many times over.
    let most = airlock_worker::MAX_SCHEMA_BYTES * 8;
    let text = std::fs::File::open(path)
        .and_then(|file| airlock_service::state_file::read_bounded(file, most))
        .with_context(|| format!("--output-schema: reading {}", path.display()))?;
    if text.len() > most {
        anyhow::bail!(
            "--output-schema: {} is over {most} bytes; a schema is at most {} bytes as compact JSON",
            path.display(),
            airlock_worker::MAX_SCHEMA_BYTES
        );
    }
    let schema: serde_json::Value = serde_json::from_slice(&text)
        .with_context(|| format!("--output-schema: {} is not JSON", path.display()))?;
    airlock_worker::OutputSchema::new(schema)
        .map_err(|e| anyhow::anyhow!("--output-schema {}: {e}", path.display()))
}

/// Print the result: as JSON (files by path), or the report on stdout and the rest on stderr.
fn print_result(
    args: &TaskArgs,
    result: &TaskResult,
    saved: &[std::path::PathBuf],
    downloaded: &[std::path::PathBuf],
) -> anyhow::Result<()> {
    if args.json {
        let mut value = serde_json::to_value(result)?;
        // The images are in the files; the JSON says where (and how big) instead of repeating them.
        value["screenshots"] = result
            .screenshots
            .iter()
            .enumerate()
            .map(|(i, image)| json!({"media_type": image.media_type, "bytes": image.data.len(), "path": saved.get(i)}))
            .collect();
        value["downloads"] = result
            .downloads
            .iter()
            .zip(downloaded)
            .map(|(file, path)| json!({"name": file.name, "media_type": file.media_type, "bytes": file.bytes, "path": path}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        match (&args.output_schema, &result.data) {
            // A program asked for data: stdout is only the answer, so it pipes.
            (Some(_), data) => {
                eprintln!("{}", result.report);
                if let Some(data) = data {
                    println!("{}", serde_json::to_string_pretty(data)?);
                }
            }
            (None, _) => println!("{}", result.report),
        }
        for refusal in &result.egress_refusals {
            let times = match refusal.count {
                0 | 1 => String::new(),
                count => format!(" ({count} times)"),
            };
            eprintln!(
                "egress refused {:?}: {}{times}",
                refusal.target, refusal.reason
            );
        }
        if result.egress_refusals_not_listed > 0 {
            eprintln!(
                "egress refused {} more requests, not listed",
                result.egress_refusals_not_listed
            );
        }
        for failure in &result.egress_failures {
            eprintln!("egress failed {:?}: {}", failure.target, failure.reason);
        }
        for path in saved {
            eprintln!("saved {}", path.display());
        }
        for (file, path) in result.downloads.iter().zip(downloaded) {
            eprintln!(
                "downloaded {} ({} bytes, {}) into {}",
                file.name,
                file.bytes,
                file.media_type,
                path.display()
            );
        }
        eprintln!("{}", cost_line(result));
        if !result.screenshots.is_empty() && args.out.is_none() {
            eprintln!(
                "{} screenshot(s) kept; pass --out DIR to save them",
                result.screenshots.len()
            );
        }
    }
    Ok(())
}

/// Write the kept screenshots (with `--out`) and the downloaded files: the caller allowed
/// downloads to have them, so without `--out` they go to a fresh private directory.
fn save_files(
    args: &TaskArgs,
    result: &TaskResult,
) -> anyhow::Result<(Vec<std::path::PathBuf>, Vec<std::path::PathBuf>)> {
    let saved = match &args.out {
        Some(out) => crate::output::save_images(out, "screenshot", &result.screenshots)?,
        None => Vec::new(),
    };
    let downloaded = match (&args.out, result.downloads.is_empty()) {
        (_, true) => Vec::new(),
        (Some(out), false) => crate::output::save_downloads(out, &result.downloads)?,
        (None, false) => {
            crate::output::save_downloads(&crate::output::default_run_dir()?, &result.downloads)?
        }
    };
    Ok((saved, downloaded))
}

/// One line on what the task cost: steps, tokens, and what the worker was shown.
fn cost_line(result: &TaskResult) -> String {
    let usage = &result.usage;
    let context = &result.context;
    format!(
        "{} steps; {} tokens ({} input, {} cache read, {} cache write, {} output of which {} thinking); \
         shown {} characters and {} images ({} bytes); {} long outputs kept, {} pages read",
        result.steps_used,
        usage.total(),
        usage.input_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.output_tokens,
        usage.thinking_tokens,
        context.chars_shown,
        context.images_shown,
        context.image_bytes_shown,
        context.outputs_kept,
        context.output_reads,
    )
}
