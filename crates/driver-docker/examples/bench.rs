//! Measurements for `cargo xtask bench`, run as a non-root user in the docker group.
//!
//! `bench startup ROUNDS URL` prints one JSON line per round with the phases of a cold start
//! (driver session start, first open, first snapshot) and a warm open + snapshot in the same
//! session. `bench concurrency MAX URL` starts 1, 2, 4 … MAX sessions at once and prints, per
//! level, each session's time to its first snapshot and the containers' memory. `bench pageload
//! LOADS URL` opens URL LOADS times in one session and prints Chromium's own load-event times.
//! `AIRLOCK_RUNTIME` picks the container runtime (`runc` by default, `runsc` for gVisor);
//! `AIRLOCK_BENCH_DEV_SHM_MIB` gives Chromium a `/dev/shm` of that size instead of `/tmp`.

// A benchmark harness: a failed step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_driver_docker::{DockerDriver, DriverConfig};
use airlock_policy::{EgressPolicy, Profile};
use airlock_worker::{BrowserDriver, CancellationToken, TaskContext, TaskLimits};
use serde_json::json;

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

async fn driver(url: &str) -> DockerDriver {
    let authority = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let policy = EgressPolicy::new(Profile::Public, None, [authority.parse().unwrap()]).unwrap();
    DockerDriver::connect(DriverConfig {
        egress: policy,
        runtime: std::env::var("AIRLOCK_RUNTIME").unwrap_or_else(|_| "runc".to_owned()),
        resources: airlock_driver_docker::Resources {
            dev_shm_mib: std::env::var("AIRLOCK_BENCH_DEV_SHM_MIB")
                .map_or(0, |mib| mib.parse().unwrap()),
            ..airlock_driver_docker::Resources::default()
        },
        ..DriverConfig::default()
    })
    .await
    .unwrap()
}

async fn call(
    session: &airlock_worker::BrowserSession,
    args: serde_json::Value,
) -> airlock_worker::ToolOutput {
    let output = session.tools[0]
        .execute(json!({ "args": args }))
        .await
        .unwrap();
    assert!(!output.is_error, "{}", output.text);
    output
}

/// One cold start and one warm open + snapshot; the phases in milliseconds.
async fn startup_round(driver: &DockerDriver, url: &str) -> serde_json::Value {
    let requested = Instant::now();
    let session = driver
        .start(TaskContext::new(
            CancellationToken::new(),
            TaskLimits::default(),
        ))
        .await
        .unwrap();
    let started = requested.elapsed();
    call(&session, json!(["open", url])).await;
    let opened = requested.elapsed();
    call(&session, json!(["snapshot"])).await;
    let cold = requested.elapsed();
    let warm_began = Instant::now();
    call(&session, json!(["open", url])).await;
    call(&session, json!(["snapshot"])).await;
    let warm = warm_began.elapsed();
    let dispose_began = Instant::now();
    session.dispose.dispose().await;
    json!({
        "session_start_ms": millis(started),
        "first_open_ms": millis(opened.saturating_sub(started)),
        "first_snapshot_ms": millis(cold.saturating_sub(opened)),
        "cold_ms": millis(cold),
        "warm_ms": millis(warm),
        "dispose_ms": millis(dispose_began.elapsed()),
    })
}

/// The memory of every running task container, in MiB, from `docker stats`.
fn container_memory_mib() -> Vec<f64> {
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

async fn concurrency_level(
    driver: Arc<DockerDriver>,
    url: &str,
    tasks: usize,
) -> serde_json::Value {
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
                let ok = matches!((&opened, &shot), (Ok(o), Ok(s)) if !o.is_error && !s.is_error);
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
    json!({"tasks": tasks, "failures": failures, "times_ms": times, "memory_mib": memory})
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (mode, count, url) = (
        args[1].as_str(),
        args[2].parse::<usize>().unwrap(),
        args[3].clone(),
    );
    let driver = Arc::new(driver(&url).await);
    driver.check().await.unwrap();
    match mode {
        "startup" => {
            for _ in 0..count {
                println!("{}", startup_round(&driver, &url).await);
            }
        }
        "pageload" => {
            let session = driver
                .start(TaskContext::new(
                    CancellationToken::new(),
                    TaskLimits::default(),
                ))
                .await
                .unwrap();
            let script = "(() => { const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime; })()";
            let mut loads = Vec::new();
            // `{n}` in the URL names a fresh page for every load, so nothing comes from cache.
            for n in 0..count {
                call(
                    &session,
                    json!(["open", url.replace("{n}", &n.to_string())]),
                )
                .await;
                let measured = call(&session, json!(["eval", script])).await;
                let text = measured.text.trim();
                let load_ms = text.parse::<f64>().ok();
                if load_ms.is_none() {
                    // Counted as a failed load in the report; say what came back instead.
                    eprintln!("load {n}: no load time in the eval output: {text}");
                }
                loads.push(load_ms);
            }
            session.dispose.dispose().await;
            println!("{}", json!({ "loads_ms": loads }));
        }
        "concurrency" => {
            let mut tasks = 1;
            let mut single = None;
            while tasks <= count {
                let level = concurrency_level(Arc::clone(&driver), &url, tasks).await;
                println!("{level}");
                let slowest = level["times_ms"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(serde_json::Value::as_f64)
                    .fold(0.0, f64::max);
                let single_time = *single.get_or_insert(slowest);
                if level["failures"].as_u64() != Some(0) || slowest > 3.0 * single_time {
                    break;
                }
                tasks = if tasks < 2 { 2 } else { tasks + 2 };
            }
        }
        other => panic!("unknown mode {other}"),
    }
    driver.shutdown().await;
}
