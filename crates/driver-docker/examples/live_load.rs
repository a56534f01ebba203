//! `live_load ROUNDS URL`: a page load in a task's browser with a live viewer attached against
//! without, in alternation (a warm-up round first, not printed). Each load is a fresh session
//! opening a fresh page (`{n}` in URL); with a viewer, the watch starts with the load and
//! counts the frames it receives from the load's start to 2 s after its end. Prints one JSON line:
//! the loads' times with and without, and the frames per second each watch received.

// A benchmark harness: a failed step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use airlock_driver_docker::{DockerDriver, DriverConfig, PoolConfig};
use airlock_policy::{EgressPolicy, Profile};
use airlock_worker::{BrowserDriver, CancellationToken, LiveSlot, TaskContext, TaskLimits};
use serde_json::json;

/// How long after a load the watch keeps counting.
const AFTER_LOAD: Duration = Duration::from_secs(2);

/// One load: its time in ms, and the frames per second a viewer received (with one).
async fn load(driver: &DockerDriver, url: &str, watched: bool) -> (f64, Option<f64>) {
    let slot = LiveSlot::default();
    let context =
        TaskContext::new(CancellationToken::new(), TaskLimits::default()).with_live(slot.clone());
    let session = driver.start(context).await.unwrap();
    let stop = CancellationToken::new();
    let began = Instant::now();
    // The watch starts with the load: the stream server comes up with the browser's daemon.
    let counting = watched.then(|| {
        let source = slot.source().unwrap();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut feed = source.watch().await.unwrap();
            let mut count = 0_u32;
            loop {
                tokio::select! {
                    changed = feed.frames.changed() => {
                        if changed.is_err() { break; }
                        count += 1;
                    }
                    () = stop.cancelled() => break,
                }
            }
            count
        })
    });
    let output = session.tools[0]
        .execute(json!({ "args": ["open", url] }))
        .await
        .unwrap();
    assert!(!output.is_error(), "{}", output.text);
    let took = began.elapsed();
    let fps = match counting {
        Some(counting) => {
            tokio::time::sleep(AFTER_LOAD).await;
            stop.cancel();
            let window = (took + AFTER_LOAD).as_secs_f64();
            let count = counting.await.unwrap();
            Some(f64::from(count) / window)
        }
        None => None,
    };
    session.dispose.dispose().await;
    (took.as_secs_f64() * 1000.0, fps)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (rounds, url) = (args[1].parse::<usize>().unwrap(), args[2].clone());
    let authority = url.trim_start_matches("http://").split('/').next().unwrap();
    let driver = DockerDriver::connect(DriverConfig {
        egress: EgressPolicy::new(Profile::Public, None, [authority.parse().unwrap()]).unwrap(),
        pool: PoolConfig {
            size: 0,
            ..PoolConfig::default()
        },
        ..DriverConfig::default()
    })
    .await
    .unwrap();
    driver.check().await.unwrap();
    let (mut with, mut without, mut fps) = (Vec::new(), Vec::new(), Vec::new());
    let mut page = 0;
    for round in 0..=rounds {
        // Which goes first alternates, so neither always follows the other.
        for watched in [round % 2 == 0, round % 2 == 1] {
            page += 1;
            let (took, rate) = load(&driver, &url.replace("{n}", &page.to_string()), watched).await;
            if round == 0 {
                continue;
            }
            if watched {
                with.push(took);
                fps.extend(rate);
            } else {
                without.push(took);
            }
        }
    }
    driver.shutdown().await;
    println!(
        "{}",
        json!({"with_ms": with, "without_ms": without, "frames_per_second": fps})
    );
}
