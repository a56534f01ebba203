//! `cargo xtask eval`: Airlock measured on the job. A real model behind llama.cpp's
//! `llama-server` does MiniWoB++ tasks and the lab's own through `airlock task`, and the same
//! tasks through browser-use, alternating task by task; each page scores itself and the report
//! sets the two side by side (`target/eval/runs/<run>/report.md`; a complete full run also
//! writes `docs/eval.md`).
//!
//! A run keeps every result in `results.jsonl` as it goes, so running the same command again
//! carries on where it stopped (`--fresh` starts over).

mod lab;
mod outcome;
mod report;
mod server;
mod setup;
mod stop;
mod systems;
mod tasks;

use std::collections::BTreeSet;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::util::{output, workspace_root};
use outcome::{Outcome, System, classify};

/// What to run.
#[derive(Debug, clap::Args)]
pub(crate) struct EvalArgs {
    /// A smoke run: the fixed subset of tasks marked quick, with the 0.5B model.
    #[arg(long)]
    quick: bool,
    /// Any model Airlock takes (`openai/<model>` with `--base-url` and OPENAI_API_KEY, or
    /// `anthropic/<model>` with ANTHROPIC_API_KEY) instead of the local server's.
    #[arg(long, value_name = "PROVIDER/MODEL")]
    model: Option<String>,
    /// The OpenAI-compatible server for `--model openai/…` (none: OpenAI's own).
    #[arg(long, value_name = "URL", requires = "model")]
    base_url: Option<String>,
    /// Only these tasks (comma-separated names).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    tasks: Vec<String>,
    /// Only these systems (airlock, browser-use).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "NAMES",
        default_value = "airlock,browser-use"
    )]
    systems: Vec<String>,
    /// Most actions per task, for both systems.
    #[arg(long, default_value_t = 8)]
    max_steps: u32,
    /// Longest a task may take, in seconds, for both systems.
    #[arg(long, default_value_t = 240)]
    timeout: u64,
    /// Largest answer per model call, in tokens, for both systems (a small model can write
    /// calls until this stops it).
    #[arg(long, default_value_t = 1024)]
    max_answer_tokens: u32,
    /// Longest one model call may take, in seconds, for both systems (a cold 5,000-token
    /// prompt takes about two minutes on 2 cores).
    #[arg(long, default_value_t = 300)]
    model_timeout: u64,
    /// The run's name (its folder under target/eval/runs/); the same name resumes it.
    #[arg(long)]
    run: Option<String>,
    /// Start the run over, forgetting its results.
    #[arg(long)]
    fresh: bool,
    /// Measure this `airlock` binary instead of building the tree's (an earlier commit's
    /// build, to measure a change before and after with the same tasks, model and server).
    #[arg(long, value_name = "PATH")]
    airlock_bin: Option<PathBuf>,
}

/// The seed every page of a task gets: the same for both systems and every run.
/// Short, so no system shortens the start URL's query string in what its model reads
/// (browser-use does past 25 characters, and its model then opened a URL without the seed).
fn seed_of(task: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(format!("airlock-eval-1/{task}"));
    format!("s{}", crate::image::hex(&digest[..4]))
}

pub(crate) fn run(args: &EvalArgs) -> anyhow::Result<()> {
    let systems: Vec<System> = args
        .systems
        .iter()
        .map(|s| System::parse(s))
        .collect::<anyhow::Result<_>>()?;
    let chosen = tasks::chosen(&args.tasks, args.quick)?;
    let full = !args.quick && args.tasks.is_empty() && args.model.is_none() && systems.len() == 2;
    let run_name = args.run.clone().unwrap_or_else(|| {
        if args.quick {
            "quick"
        } else if full {
            "full"
        } else {
            "chosen"
        }
        .to_owned()
    });
    let dir = setup::home().join("runs").join(&run_name);
    if args.fresh && dir.exists() {
        fs::remove_dir_all(&dir)?;
    }
    fs::create_dir_all(&dir)?;

    eprintln!("== [1/5] what the eval needs (made once, under target/eval/)");
    setup::python_env()?;
    setup::host_chromium()?;
    let local_model = if args.quick {
        setup::MODEL_0_5B
    } else {
        setup::MODEL_1_5B
    };
    let local = if args.model.is_none() {
        Some((setup::llama_server()?, setup::model_file(&local_model)?))
    } else {
        None
    };
    let airlock_bin = airlock_ready(args, &systems)?;
    // From here the run has processes of its own to end: a stop ends them, not the run at once.
    stop::catch_signals();
    let server = match local {
        Some((binary, weights)) => Some(server::ModelServer::start(
            &binary,
            &weights,
            &dir.join("llama-server.log"),
        )?),
        None => None,
    };
    let (model, base_url) = match (&args.model, &server) {
        (Some(model), _) => (model.clone(), args.base_url.clone()),
        (None, Some(server)) => (
            format!("openai/{}", local_model.name),
            Some(server.base_url.clone()),
        ),
        (None, None) => bail!("no model and no server"),
    };
    eprintln!("== [3/5] the lab on loopback");
    let lab = lab::Lab::start(&dir)?;
    eprintln!(
        "   serving MiniWoB++ and the lab's pages on 127.0.0.1:{}",
        lab.port
    );
    let setup = systems::Setup {
        airlock_bin: airlock_bin.clone(),
        model: model.clone(),
        base_url,
        max_steps: args.max_steps,
        timeout: Duration::from_secs(args.timeout),
        max_answer_tokens: args.max_answer_tokens,
        model_timeout: Duration::from_secs(args.model_timeout),
        lab_port: lab.port,
    };

    let results_path = dir.join("results.jsonl");
    let mut outcomes = read_results(&results_path)?;
    let done: BTreeSet<(System, String)> = outcomes
        .iter()
        .map(|o| (o.system, o.task.clone()))
        .collect();
    let total = chosen.len() * systems.len();
    eprintln!(
        "== [4/5] {total} runs ({} tasks × {} systems), {} already done; results in {}",
        chosen.len(),
        systems.len(),
        done.len(),
        results_path.display()
    );
    run_all(&lab, &setup, &dir, &chosen, &systems, &done, &mut outcomes)?;

    eprintln!("== [5/5] the report");
    let header = header(args, full, server.is_some(), model, &airlock_bin);
    let text = report::render(&header, &outcomes);
    let report_path = dir.join("report.md");
    fs::write(&report_path, &text)?;
    eprintln!("wrote {}", report_path.display());
    if full && outcomes.len() == total {
        let docs = workspace_root().join("docs/eval.md");
        fs::write(&docs, &text)?;
        eprintln!("wrote {} (the report of record)", docs.display());
    }
    Ok(())
}

/// Docker, the browser image and the `airlock` binary measured (built from this tree unless
/// `--airlock-bin` names one), when Airlock is among the systems.
fn airlock_ready(args: &EvalArgs, systems: &[System]) -> anyhow::Result<PathBuf> {
    if systems.contains(&System::Airlock) {
        eprintln!("== [2/5] Docker, the browser image and airlock");
        crate::docker::run()?;
        crate::image::run(&crate::image::ImageArgs::for_integration())?;
        if args.airlock_bin.is_none() {
            crate::util::run_loud(std::process::Command::new(env!("CARGO")).args([
                "build",
                "--release",
                "-p",
                "airlock",
            ]))?;
        }
    }
    match &args.airlock_bin {
        Some(path) if !path.is_file() => bail!("--airlock-bin: {} is no file", path.display()),
        Some(path) => Ok(path.clone()),
        None => Ok(workspace_root().join("target/release/airlock")),
    }
}

/// Every chosen task on every system not already done, alternating systems task by task.
fn run_all(
    lab: &lab::Lab,
    setup: &systems::Setup,
    dir: &Path,
    chosen: &[tasks::EvalTask],
    systems: &[System],
    done: &BTreeSet<(System, String)>,
    outcomes: &mut Vec<Outcome>,
) -> anyhow::Result<()> {
    let results_path = dir.join("results.jsonl");
    let total = chosen.len() * systems.len();
    let mut index = done.len();
    for (position, task) in chosen.iter().enumerate() {
        let seed = seed_of(task.name);
        let instruction = match task.source {
            tasks::Source::MiniWob => lab.instruction(task, &seed)?,
            tasks::Source::Lab { instruction, .. } => instruction.to_owned(),
        };
        // Alternate which system goes first, so neither always meets a warm server.
        let mut order = systems.to_vec();
        if position % 2 == 1 {
            order.reverse();
        }
        for system in order {
            if done.contains(&(system, task.name.to_owned())) {
                continue;
            }
            index += 1;
            let outcome = run_one(lab, setup, dir, system, task, &seed, &instruction)?;
            if stop::asked() {
                // The task was cut short by the stop, not by itself: it is run again next time.
                bail!("stopped; the same command carries on from here");
            }
            eprintln!("[{index}/{total}] {}", progress_line(&outcome));
            append_result(&results_path, &outcome)?;
            outcomes.push(outcome);
        }
    }
    Ok(())
}

/// How the run was made, for the report.
fn header(
    args: &EvalArgs,
    full: bool,
    local_server: bool,
    model: String,
    airlock_bin: &Path,
) -> report::Header {
    let guide = std::env::var("AIRLOCK_GUIDE").unwrap_or_else(|_| "its default".to_owned());
    report::Header {
        kind: if args.quick {
            "--quick".to_owned()
        } else if full {
            "the full run".to_owned()
        } else {
            "a chosen set".to_owned()
        },
        model,
        server: if local_server {
            "llama.cpp's llama-server (built from PyPI's llama-cpp-python 0.3.36 source), --jinja, 2 slots, greedy, seed 1".to_owned()
        } else {
            "the provider's API".to_owned()
        },
        limits: format!(
            "{} steps, {} s; each model call at most {} tokens and {} s",
            args.max_steps, args.timeout, args.max_answer_tokens, args.model_timeout
        ),
        airlock: format!("{}, guide {guide}", airlock_bin.display()),
        commit: output(std::process::Command::new("git").args(["rev-parse", "--short", "HEAD"]))
            .unwrap_or_default()
            .trim()
            .to_owned(),
        date: output(std::process::Command::new("date").args(["-u", "+%Y-%m-%d"]))
            .unwrap_or_default()
            .trim()
            .to_owned(),
    }
}

/// One task on one system, scored by its page.
fn run_one(
    lab: &lab::Lab,
    setup: &systems::Setup,
    dir: &Path,
    system: System,
    task: &tasks::EvalTask,
    seed: &str,
    instruction: &str,
) -> anyhow::Result<Outcome> {
    let attempt = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let episode = format!("{}-{}-{attempt}", system.name(), task.name);
    let url = lab.url(task, &episode, seed);
    let task_dir: PathBuf = dir.join("tasks").join(&episode);
    fs::create_dir_all(&task_dir)?;
    // Airlock runs its worker as an unprivileged user when started as root: let it write here.
    make_open(&task_dir)?;
    let mut run = match system {
        System::Airlock => systems::airlock(setup, instruction, &url, &task_dir),
        System::BrowserUse => systems::browser_use(setup, instruction, &url, &task_dir),
    };
    let reported = lab.episodes()?.remove(&episode).unwrap_or_default();
    if task.source == tasks::Source::MiniWob
        && let Some(other) = reported.queries.iter().find(|q| *q != instruction)
    {
        // The page was loaded without the task's seed (browser-use shortens long query strings
        // in what its model reads, and the model then opens the shortened URL): whatever reward
        // followed was for another problem.
        run.signs.left_page = true;
        run.note = format!("the page showed {other:?}; {}", run.note);
    }
    let reward = reported.reward.as_ref().map(|r| r.0);
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    Ok(Outcome {
        system,
        task: task.name.to_owned(),
        seed: seed.to_owned(),
        instruction: instruction.to_owned(),
        reward,
        failure: classify(reward, reported.planted, &run.signs),
        steps: run.signs.steps,
        model_calls: run.model_calls,
        prompt_tokens: run.prompt_tokens,
        cached_tokens: run.cached_tokens,
        completion_tokens: run.completion_tokens,
        first_prompt_tokens: run.first_prompt_tokens,
        calls_read_from_text: run.calls_read_from_text,
        wall_ms: millis(run.wall),
        note: run.note,
    })
}

fn make_open(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o777))
        .with_context(|| format!("{}", dir.display()))
}

fn progress_line(o: &Outcome) -> String {
    let result = match o.failure {
        None if o.succeeded() => "success".to_owned(),
        None => "failure".to_owned(),
        Some(failure) => format!("failed: {}", failure.name()),
    };
    format!(
        "{} on {}: {result}; {} steps, {} prompt tokens ({} cached), {} completion, {:.0} s",
        o.task,
        o.system.name(),
        o.steps,
        o.prompt_tokens,
        o.cached_tokens,
        o.completion_tokens,
        Duration::from_millis(o.wall_ms).as_secs_f64()
    )
}

fn read_results(path: &Path) -> anyhow::Result<Vec<Outcome>> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error.into()),
    };
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line)
                .with_context(|| format!("{}: a line that is not a result: {line}", path.display()))
        })
        .collect()
}

fn append_result(path: &Path, outcome: &Outcome) -> anyhow::Result<()> {
    let mut file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    writeln!(file, "{}", serde_json::to_string(outcome)?)?;
    Ok(())
}
