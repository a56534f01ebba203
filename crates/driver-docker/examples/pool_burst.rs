//! `pool_burst BURSTS URL`: bursts of tasks arriving faster than one browser starts, on a warm
//! pool of `AIRLOCK_BENCH_POOL_MIN` to `AIRLOCK_BENCH_POOL_MAX` browsers (a fixed pool when they
//! are equal). Each burst is 4 tasks 250 ms apart, and the next burst comes 20 s after the first
//! task of the last one (inside the pool's one-minute window). A task: a session, its page (`{n}`
//! in URL names a fresh one), a snapshot, dispose. Prints one JSON line: the tasks that started
//! warm, each task's time from arrival to its snapshot, and the whole run's time.

// A benchmark harness: a failed step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_driver_docker::{DockerDriver, DriverConfig, PoolConfig};
use airlock_policy::{EgressPolicy, Profile};
use airlock_worker::{BrowserDriver, CancellationToken, TaskContext, TaskLimits};
use serde_json::json;

const TASKS_PER_BURST: usize = 4;
const ARRIVALS_APART: Duration = Duration::from_millis(250);
const BURSTS_APART: Duration = Duration::from_secs(20);

fn env_size(name: &str) -> usize {
    std::env::var(name).map_or(0, |n| n.parse().unwrap())
}

/// One task, from its arrival to its first snapshot: whether it started warm, and its time.
async fn task(driver: Arc<DockerDriver>, url: String) -> (bool, f64) {
    let arrived = Instant::now();
    let context = TaskContext::new(CancellationToken::new(), TaskLimits::default());
    let session = driver.start(context).await.unwrap();
    for args in [json!(["open", url]), json!(["snapshot"])] {
        let output = session.tools[0]
            .execute(json!({ "args": args }))
            .await
            .unwrap();
        assert!(!output.is_error(), "{}", output.text);
    }
    let took = arrived.elapsed().as_secs_f64() * 1000.0;
    session.dispose.dispose().await;
    (session.warm, took)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (bursts, url) = (args[1].parse::<usize>().unwrap(), args[2].clone());
    let authority = url.trim_start_matches("http://").split('/').next().unwrap();
    let (min, max) = (
        env_size("AIRLOCK_BENCH_POOL_MIN"),
        env_size("AIRLOCK_BENCH_POOL_MAX"),
    );
    let driver = DockerDriver::connect(DriverConfig {
        egress: EgressPolicy::new(Profile::Public, None, [authority.parse().unwrap()]).unwrap(),
        pool: PoolConfig {
            size: min,
            max_size: max,
            ..PoolConfig::default()
        },
        ..DriverConfig::default()
    })
    .await
    .unwrap();
    driver.check().await.unwrap();
    driver.start_pool().unwrap();
    // Every contender starts from its resting state: its minimum ready.
    while driver.warm_sessions() < min {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let driver = Arc::new(driver);
    let began = Instant::now();
    let mut running = Vec::new();
    for burst in 0..bursts {
        let burst_start = began + BURSTS_APART * u32::try_from(burst).unwrap();
        tokio::time::sleep_until(burst_start.into()).await;
        for n in 0..TASKS_PER_BURST {
            let page = url.replace("{n}", &(burst * TASKS_PER_BURST + n).to_string());
            running.push(tokio::spawn(task(Arc::clone(&driver), page)));
            tokio::time::sleep(ARRIVALS_APART).await;
        }
    }
    let (mut warm, mut times) = (0, Vec::new());
    for handle in running {
        let (started_warm, took) = handle.await.unwrap();
        warm += usize::from(started_warm);
        times.push(took);
    }
    let seconds = began.elapsed().as_secs_f64();
    let claims = driver.pool_claims();
    println!(
        "{}",
        json!({"min": min, "max": max, "tasks": times.len(), "warm": warm, "times_ms": times,
               "seconds": seconds, "claims": [claims.warm, claims.taken_over, claims.cold]})
    );
    driver.shutdown().await;
}
