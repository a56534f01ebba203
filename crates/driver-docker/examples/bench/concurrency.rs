//! `bench concurrency`: sessions started at once, each to its first snapshot, held until all are
//! up so their containers are measured together. With `AIRLOCK_BENCH_HOLD` set, each level says
//! `{"starting": N}` before it starts and `{"holding": N}` once all are up, then waits for a line
//! on standard input before it disposes of them: `cargo xtask bench` reads every process's CPU
//! time in those containers (as root) in between.

use std::io::BufRead as _;
use std::sync::Arc;
use std::time::Instant;

use airlock_driver_docker::DockerDriver;
use airlock_worker::{BrowserDriver, CancellationToken, TaskContext, TaskLimits};
use serde_json::json;

use super::millis;

/// This process's CPU time so far (the driver, the proxy, the runtime), in ms (ticks are 10 ms).
fn own_cpu_ms() -> f64 {
    let [user, system] = airlock_testkit::host::cpu_ticks("self").unwrap_or_default();
    // Ticks of a benchmark's run fit an f64 exactly.
    #[allow(clippy::cast_precision_loss)]
    let ms = (user + system) as f64 * 10.0;
    ms
}

/// Say the level is up, and wait for the measurer's line.
async fn held_for_measurement(tasks: usize) {
    println!("{}", json!({ "holding": tasks }));
    let _ = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
    })
    .await;
}

/// The memory of every running task container, in MiB, from `docker stats`.
pub(crate) fn container_memory_mib() -> Vec<f64> {
    let ids = std::process::Command::new("docker")
        .args(["ps", "-q", "--filter", "label=airlock.task"])
        .output()
        .map(|out| {
            String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    if ids.is_empty() {
        return Vec::new();
    }
    let out = std::process::Command::new("docker")
        .args(["stats", "--no-stream", "--format", "{{.MemUsage}}"])
        .args(&ids)
        .output();
    let Ok(out) = out else { return Vec::new() };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let used = line.split('/').next()?.trim();
            let (number, unit) = used.split_at(used.find(|c: char| c.is_ascii_alphabetic())?);
            let value: f64 = number.trim().parse().ok()?;
            Some(match unit {
                "GiB" => value * 1024.0,
                "KiB" | "kB" => value / 1024.0,
                _ => value,
            })
        })
        .collect()
}

pub(crate) async fn concurrency_level(
    driver: Arc<DockerDriver>,
    url: &str,
    tasks: usize,
) -> serde_json::Value {
    if std::env::var_os("AIRLOCK_BENCH_HOLD").is_some() {
        println!("{}", json!({ "starting": tasks }));
    }
    let own_cpu_before = own_cpu_ms();
    let mut handles = Vec::new();
    let (snapshotted, mut all_up) = tokio::sync::mpsc::channel::<()>(tasks);
    let release = CancellationToken::new();
    for _ in 0..tasks {
        let driver = Arc::clone(&driver);
        let url = url.to_owned();
        let snapshotted = snapshotted.clone();
        let release = release.clone();
        handles.push(tokio::spawn(async move {
            let began = Instant::now();
            let session = driver
                .start(TaskContext::new(
                    CancellationToken::new(),
                    TaskLimits::default(),
                ))
                .await;
            if let Ok(session) = session {
                let opened = session.tools[0]
                    .execute(json!({"args": ["open", url]}))
                    .await;
                let shot = session.tools[0]
                    .execute(json!({"args": ["snapshot"]}))
                    .await;
                let ok =
                    matches!((&opened, &shot), (Ok(o), Ok(s)) if !o.is_error() && !s.is_error());
                let took = began.elapsed();
                let _ = snapshotted.send(()).await;
                // Hold the session until every task is up, so memory is measured together.
                release.cancelled().await;
                session.dispose.dispose().await;
                (ok, took)
            } else {
                let _ = snapshotted.send(()).await;
                (false, began.elapsed())
            }
        }));
    }
    drop(snapshotted);
    for _ in 0..tasks {
        all_up.recv().await;
    }
    let memory = container_memory_mib();
    let own_cpu_ms = own_cpu_ms() - own_cpu_before;
    if std::env::var_os("AIRLOCK_BENCH_HOLD").is_some() {
        held_for_measurement(tasks).await;
    }
    release.cancel();
    let mut times = Vec::new();
    let mut failures = 0;
    for handle in handles {
        let (ok, took) = handle.await.unwrap();
        if !ok {
            failures += 1;
        }
        times.push(millis(took));
    }
    json!({
        "tasks": tasks,
        "failures": failures,
        "times_ms": times,
        "memory_mib": memory,
        "own_cpu_ms": own_cpu_ms,
    })
}
