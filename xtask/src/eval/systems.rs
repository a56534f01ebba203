//! Running one task on one system: `airlock task` in its sealed browser, or browser-use on the
//! host's Chromium, both with the same model, instruction, page and limits.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::outcome::Signs;
use super::{setup, stop};
use crate::util::workspace_root;

/// The model both systems use, and the limits both run under.
#[derive(Debug, Clone)]
pub(super) struct Setup {
    /// The `airlock` binary measured.
    pub airlock_bin: PathBuf,
    /// As `airlock --model` takes it: `openai/<name>` or `anthropic/<name>`.
    pub model: String,
    /// The OpenAI-compatible server, when not the provider's own.
    pub base_url: Option<String>,
    /// Most actions per task.
    pub max_steps: u32,
    /// Longest a task may take.
    pub timeout: Duration,
    /// Largest answer per model call, in tokens.
    pub max_answer_tokens: u32,
    /// Longest one model call may take.
    pub model_timeout: Duration,
    /// The lab's port, the one destination the sealed browser may reach.
    pub lab_port: u16,
}

/// What a system's run gave, before the lab's verdict.
#[derive(Debug, Clone, Default)]
pub(super) struct Run {
    /// What the run showed.
    pub signs: Signs,
    /// Model calls.
    pub model_calls: u64,
    /// Input tokens, cached included.
    pub prompt_tokens: u64,
    /// Of those, read from the prompt cache.
    pub cached_tokens: u64,
    /// Output tokens.
    pub completion_tokens: u64,
    /// The first call's input tokens.
    pub first_prompt_tokens: u64,
    /// Calls read from text.
    pub calls_read_from_text: u64,
    /// Wall time.
    pub wall: Duration,
    /// One line on what happened.
    pub note: String,
}

/// How much longer than the task's own limit a system may take to stop by itself.
const GRACE: Duration = Duration::from_mins(2);

/// Run `instruction` at `url` through `airlock task`, its record kept in `dir`.
pub(super) fn airlock(setup: &Setup, instruction: &str, url: &str, dir: &Path) -> Run {
    let record = dir.join("record");
    let mut command = Command::new(&setup.airlock_bin);
    command
        .args(["task", "--json", "--record"])
        .arg(&record)
        .arg("--allow")
        .arg(format!("127.0.0.1:{}", setup.lab_port))
        .args(["--model", &setup.model])
        .args(["--max-steps", &setup.max_steps.to_string()])
        .args(["--timeout", &setup.timeout.as_secs().to_string()])
        // As the environment, not flags: an earlier build (--airlock-bin) that has no such
        // settings runs with its own fixed ones instead of refusing the flags.
        .env(
            "AIRLOCK_MAX_ANSWER_TOKENS",
            setup.max_answer_tokens.to_string(),
        )
        .env(
            "AIRLOCK_MODEL_TIMEOUT",
            setup.model_timeout.as_secs().to_string(),
        )
        .args(["--url", url])
        .arg(instruction);
    if let Some(base_url) = &setup.base_url {
        command.args(["--base-url", base_url]);
    }
    let started = Instant::now();
    let answer = run_bounded(
        &mut command,
        setup.timeout + GRACE,
        &dir.join("airlock.log"),
    );
    let wall = started.elapsed();
    let mut run = Run {
        wall,
        ..Run::default()
    };
    let result = match answer {
        Ok(stdout) => serde_json::from_slice::<Value>(&stdout).ok(),
        Err(why) => {
            run.signs.system_error = true;
            run.note = why;
            return run;
        }
    };
    let Some(result) = result else {
        run.signs.system_error = true;
        "airlock printed no result (see airlock.log)".clone_into(&mut run.note);
        return run;
    };
    let ended = result["ended"].as_str().unwrap_or("failed");
    run.signs.timed_out = ended == "timed_out";
    run.signs.step_limit = ended == "step_limit";
    run.signs.system_error = ended == "failed" || ended == "cancelled";
    run.signs.steps = result["steps_used"].as_u64().unwrap_or(0);
    let record = std::fs::read(record.join("record.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .unwrap_or(Value::Null);
    read_record(&record, &mut run);
    let report: String = result["report"]
        .as_str()
        .unwrap_or("")
        .chars()
        .take(200)
        .collect();
    run.note = format!("ended {ended}: {}", report.replace('\n', " "));
    run
}

/// The record's turns and steps: tokens, and what became of each call.
fn read_record(record: &Value, run: &mut Run) {
    let empty = Vec::new();
    let turns = record["turns"].as_array().unwrap_or(&empty);
    let input = |usage: &Value| {
        usage["input_tokens"].as_u64().unwrap_or(0)
            + usage["cache_read_tokens"].as_u64().unwrap_or(0)
            + usage["cache_write_tokens"].as_u64().unwrap_or(0)
    };
    run.model_calls = turns.len() as u64;
    run.prompt_tokens = turns.iter().map(|t| input(&t["usage"])).sum();
    run.cached_tokens = turns
        .iter()
        .map(|t| t["usage"]["cache_read_tokens"].as_u64().unwrap_or(0))
        .sum();
    run.completion_tokens = turns
        .iter()
        .map(|t| t["usage"]["output_tokens"].as_u64().unwrap_or(0))
        .sum();
    run.first_prompt_tokens = turns.first().map_or(0, |t| input(&t["usage"]));
    run.calls_read_from_text = turns
        .iter()
        .filter(|t| t["call_read_from_text"].as_bool() == Some(true))
        .count() as u64;
    for step in record["steps"].as_array().unwrap_or(&empty) {
        match step["verdict"]["kind"].as_str() {
            Some("refused") => run.signs.refused += 1,
            Some("failed" | "not_run") => run.signs.failed += 1,
            _ => {}
        }
    }
}

/// Run `instruction` at `url` through browser-use, its browser profile in `dir`.
pub(super) fn browser_use(setup: &Setup, instruction: &str, url: &str, dir: &Path) -> Run {
    let (provider, model) = setup
        .model
        .split_once('/')
        .unwrap_or(("openai", &setup.model));
    let profile = dir.join("profile");
    let mut command = Command::new(setup::python());
    command
        .arg(workspace_root().join("xtask/src/eval/peer.py"))
        .args([instruction, url, provider, model])
        .arg(setup.base_url.as_deref().unwrap_or(""))
        .arg(setup.max_steps.to_string())
        .arg(setup.timeout.as_secs().to_string())
        .arg(&profile)
        .arg(setup.max_answer_tokens.to_string())
        .arg(setup.model_timeout.as_secs().to_string());
    let started = Instant::now();
    let answer = run_bounded(
        &mut command,
        setup.timeout + GRACE,
        &dir.join("browser-use.log"),
    );
    let _ = std::fs::remove_dir_all(&profile);
    let mut run = Run {
        wall: started.elapsed(),
        ..Run::default()
    };
    let result = match answer {
        Ok(stdout) => String::from_utf8_lossy(&stdout)
            .lines()
            .rev()
            .find_map(|line| serde_json::from_str::<Value>(line).ok()),
        Err(why) => {
            run.signs.system_error = true;
            run.note = why;
            return run;
        }
    };
    let Some(result) = result else {
        run.signs.system_error = true;
        "browser-use printed no result (see browser-use.log)".clone_into(&mut run.note);
        return run;
    };
    let number = |key: &str| result[key].as_u64().unwrap_or(0);
    let steps = number("steps");
    let done = result["done"].as_bool().unwrap_or(false);
    run.signs.timed_out = result["timed_out"].as_bool().unwrap_or(false);
    run.signs.step_limit = !done && steps >= u64::from(setup.max_steps);
    run.signs.invalid_answers = number("steps_without_valid_output");
    run.signs.steps = steps.saturating_sub(run.signs.invalid_answers);
    run.signs.failed = number("action_errors");
    run.model_calls = number("model_calls");
    run.prompt_tokens = number("prompt_tokens");
    run.cached_tokens = number("cached_tokens");
    run.completion_tokens = number("completion_tokens");
    run.first_prompt_tokens = number("first_prompt_tokens");
    let last: String = result["final"]
        .as_str()
        .unwrap_or("")
        .chars()
        .take(200)
        .collect();
    run.note = format!(
        "{}: {}",
        if done { "done" } else { "not done" },
        last.replace('\n', " ")
    );
    run
}

/// Run a command to its end or `limit`, its stderr in `log`; its stdout, or why not.
fn run_bounded(command: &mut Command, limit: Duration, log: &Path) -> Result<Vec<u8>, String> {
    let stdout_path: PathBuf = log.with_extension("out");
    let (Ok(err), Ok(out)) = (
        std::fs::File::create(log),
        std::fs::File::create(&stdout_path),
    ) else {
        return Err(format!("could not write {}", log.display()));
    };
    let mut child = match command
        .stdout(out)
        .stderr(err)
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
    {
        Ok(child) => child,
        Err(error) => {
            return Err(format!(
                "could not start {}: {error}",
                command.get_program().display()
            ));
        }
    };
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() < limit && !stop::asked() => {
                // A child that may run for minutes: checking twice a second costs nothing.
                std::thread::sleep(Duration::from_millis(500));
            }
            _ => {
                stop::end_group(&mut child);
                break None;
            }
        }
    };
    let stdout = std::fs::read(&stdout_path).unwrap_or_default();
    match status {
        None if stop::asked() => Err("stopped: the run was asked to stop".to_owned()),
        None => Err(format!("killed after {limit:?}: it did not stop by itself")),
        Some(_) => Ok(stdout),
    }
}
