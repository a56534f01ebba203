//! `cargo xtask soak --serve-tasks N`: N tasks through one `airlock serve`'s JSON API, two clients
//! at a time, with the server's resident memory sampled as they go. A service that runs tens of
//! thousands of tasks must plateau, not grow with each one: the second half of a long run may add
//! at most [`MAX_LATE_GROWTH_MIB`].

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;

use crate::soak_support::{as_test_user, rss_mib, wait_for_no_container_of};
use crate::util::{curl_status, free_port, succeeds};

/// What the second half of a run (from the sample nearest its middle to the last) may add.
pub(crate) const MAX_LATE_GROWTH_MIB: f64 = 2.0;
/// Tasks between two memory samples.
const SAMPLE_EVERY: usize = 50;
/// The soak's bearer token (the server listens on loopback for this run alone).
const TOKEN: &str = "soak-token-0123456789abcdef";
/// Clients sending tasks at once, and the server's capacity.
const CLIENTS: usize = 2;

/// What the serve part saw.
pub(crate) struct ServeReport {
    pub(crate) tasks: usize,
    pub(crate) answered: usize,
    /// (tasks done, resident MiB), in order.
    pub(crate) samples: Vec<(usize, f64)>,
}

impl ServeReport {
    /// Growth over the second half: from the sample nearest the middle to the last.
    pub(crate) fn late_growth_mib(&self) -> f64 {
        let Some(&(_, last)) = self.samples.last() else {
            return 0.0;
        };
        let middle = self.tasks / 2;
        let from = self
            .samples
            .iter()
            .min_by_key(|(done, _)| done.abs_diff(middle))
            .map_or(last, |&(_, mib)| mib);
        last - from
    }
}

/// N tasks through one `airlock serve`, `CLIENTS` at a time; then SIGTERM, which must leave no
/// container. Each task opens the lab page and ends at its one-step limit (identical turns, so
/// tasks sharing the scripted worker never take each other's).
pub(crate) fn serve_tasks(
    airlock: &Path,
    work: &Path,
    site: u16,
    tasks: usize,
) -> anyhow::Result<ServeReport> {
    let turn = json!({"text": "Done.", "tool_calls": [{"name": "agent_browser", "input": {"args": ["open", format!("http://127.0.0.1:{site}/")]}}]});
    // A task takes three turns (the step; a second call, refused at the step limit; the report);
    // spare ones cover a retried turn.
    let script = work.join("serve.json");
    std::fs::write(
        &script,
        json!({"turns": vec![turn; tasks * 3 + 16]}).to_string(),
    )?;
    let _ = Command::new("chmod").arg("a+r").arg(&script).status();
    let port = free_port()?;
    let log = std::fs::File::create(work.join("serve.log"))?;
    let mut server = as_test_user(airlock)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--allow", &format!("127.0.0.1:{site}"), "--max-steps", "1"])
        .args(["--max-concurrent-tasks", &CLIENTS.to_string()])
        .arg("--model")
        .arg(format!("script:{}", script.display()))
        .env("AIRLOCK_TOKENS", TOKEN)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .context("starting airlock serve")?;
    let pid = server.id();
    let ran = run_clients(pid, port, tasks);
    // SIGTERM drains; the warm browser and any task's container must go with the server.
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_mins(3);
    while server.try_wait()?.is_none() {
        if Instant::now() > deadline {
            let _ = server.kill();
            let _ = server.wait();
            bail!("airlock serve did not stop within 180 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let report = ran?;
    if !wait_for_no_container_of(pid, Duration::from_secs(30)) {
        bail!("airlock serve left a container behind");
    }
    Ok(report)
}

/// Send the tasks from `CLIENTS` threads, sampling the server's memory every `SAMPLE_EVERY`.
fn run_clients(pid: u32, port: u16, tasks: usize) -> anyhow::Result<ServeReport> {
    let ready = Instant::now() + Duration::from_mins(1);
    while !succeeds(
        Command::new("curl")
            .args(["-fsS", "-o", "/dev/null"])
            .arg(format!("http://127.0.0.1:{port}/readyz")),
    ) {
        if Instant::now() > ready {
            bail!("airlock serve was not ready within 60 s (its log: target/soak/serve.log)");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(AtomicUsize::new(0));
    let samples = Arc::new(Mutex::new(vec![(0, rss_mib(pid)?)]));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (next, done, answered, samples) = (
                Arc::clone(&next),
                Arc::clone(&done),
                Arc::clone(&answered),
                Arc::clone(&samples),
            );
            std::thread::spawn(move || {
                while next.fetch_add(1, Ordering::Relaxed) < tasks {
                    if one_task(port) {
                        answered.fetch_add(1, Ordering::Relaxed);
                    }
                    let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if finished % SAMPLE_EVERY == 0 || finished == tasks {
                        if let Ok(mib) = rss_mib(pid) {
                            samples
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .push((finished, mib));
                        }
                        eprintln!("== serve: {finished} of {tasks} tasks");
                    }
                }
            })
        })
        .collect();
    for client in clients {
        let _ = client.join();
    }
    let mut samples = std::mem::take(&mut *samples.lock().unwrap_or_else(PoisonError::into_inner));
    samples.sort_by_key(|(done, _)| *done);
    Ok(ServeReport {
        tasks,
        answered: answered.load(Ordering::Relaxed),
        samples,
    })
}

/// One task through `POST /v1/tasks`: whether it was answered 200.
fn one_task(port: u16) -> bool {
    curl_status()
        .args(["--max-time", "120"])
        .args(["-H", &format!("authorization: Bearer {TOKEN}")])
        .args(["-H", "content-type: application/json"])
        .args(["--data", r#"{"task": "soak"}"#])
        .arg(format!("http://127.0.0.1:{port}/v1/tasks"))
        .output()
        .is_ok_and(|out| out.stdout == b"200")
}

/// The report's lines, and what it found wrong added to `leaks`.
pub(crate) fn report(serve: &anyhow::Result<ServeReport>, leaks: &mut Vec<String>) {
    match serve {
        Ok(report) => {
            println!(
                "\nairlock serve: {} of {} tasks answered; resident memory by tasks done:",
                report.answered, report.tasks
            );
            println!("| tasks | MiB |\n|---|---|");
            for (done, mib) in &report.samples {
                println!("| {done} | {mib:.1} |");
            }
            let late = report.late_growth_mib();
            println!(
                "second half: {late:+.1} MiB (at most {MAX_LATE_GROWTH_MIB} allowed once a run has {} tasks)",
                SAMPLE_EVERY * 4
            );
            if report.answered < report.tasks {
                leaks.push(format!(
                    "{} serve task(s) were not answered",
                    report.tasks - report.answered
                ));
            }
            // A short run (CI's) shows the curve; the plateau is judged on long ones.
            if report.tasks >= SAMPLE_EVERY * 4 && late > MAX_LATE_GROWTH_MIB {
                leaks.push(format!(
                    "airlock serve's memory still grew by {late:.1} MiB over the second half of its tasks"
                ));
            }
        }
        Err(error) => leaks.push(format!("the serve part failed: {error:#}")),
    }
}
