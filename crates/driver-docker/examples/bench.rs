//! Measurements for `cargo xtask bench`, run as a non-root user in the docker group.
//!
//! `bench startup ROUNDS URL` prints one JSON line per round with the phases of a cold start
//! (driver session start, first open, first snapshot) and a warm open + snapshot in the same
//! session. `bench concurrency MAX URL` starts 1, 2, 4 … MAX sessions at once and prints, per
//! level, each session's time to its first snapshot and the containers' memory. `bench pageload
//! LOADS URL` opens URL LOADS times in one session and prints Chromium's own load-event times.
//! `bench warmpool ROUNDS URL` measures task requested → first snapshot with a browser taken
//! from a warm pool, its phases and Chromium's own load time (and the warm browser's idle memory); `bench pooltasks N URL` runs N one-page
//! tasks back to back with a pool of `AIRLOCK_BENCH_POOL` browsers (`{n}` in URL names a fresh
//! page per task); `bench claims N URL` times N claims from a pool of 2. `bench context 1 BASE` runs the context-economy tasks over the corpus under BASE (a fixed
//! worker strategy, cut against paged) and prints one JSON line per page and strategy, plus one
//! with the length of each snapshot form. `AIRLOCK_RUNTIME` picks the container runtime (`runc` by default, `runsc` for gVisor);
//! `AIRLOCK_BENCH_DEV_SHM_MIB` gives Chromium a `/dev/shm` of that size instead of `/tmp`.

// A benchmark harness: a failed step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_driver_docker::{DockerDriver, DriverConfig};
use airlock_policy::{EgressPolicy, Profile};
use airlock_worker::{BrowserDriver, CancellationToken, TaskContext, TaskLimits};
use serde_json::json;

#[path = "bench/cgroup.rs"]
mod cgroup;
#[path = "bench/concurrency.rs"]
mod concurrency;
use concurrency::{concurrency_level, container_memory_mib};

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

async fn driver(url: &str) -> DockerDriver {
    driver_with_pool(url, 0).await
}

/// A driver whose warm pool keeps `pool` browsers ready.
async fn driver_with_pool(url: &str, pool: usize) -> DockerDriver {
    let authority = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let policy = EgressPolicy::new(Profile::Public, None, [authority.parse().unwrap()]).unwrap();
    let driver = DockerDriver::connect(DriverConfig {
        egress: policy,
        runtime: std::env::var("AIRLOCK_RUNTIME").unwrap_or_else(|_| "runc".to_owned()),
        resources: airlock_driver_docker::Resources {
            dev_shm_mib: std::env::var("AIRLOCK_BENCH_DEV_SHM_MIB")
                .map_or(0, |mib| mib.parse().unwrap()),
            ..airlock_driver_docker::Resources::default()
        },
        pool: airlock_driver_docker::PoolConfig {
            size: pool,
            ..airlock_driver_docker::PoolConfig::default()
        },
        ..DriverConfig::default()
    })
    .await
    .unwrap();
    driver.start_pool().unwrap();
    driver
}

async fn call(
    session: &airlock_worker::BrowserSession,
    args: serde_json::Value,
) -> airlock_worker::ToolOutput {
    let output = session.tools[0]
        .execute(json!({ "args": args }))
        .await
        .unwrap();
    assert!(!output.is_error(), "{}", output.text);
    output
}

/// A session for one measured task, with the default limits.
async fn new_session(driver: &DockerDriver) -> airlock_worker::BrowserSession {
    driver
        .start(TaskContext::new(
            CancellationToken::new(),
            TaskLimits::default(),
        ))
        .await
        .unwrap()
}

/// One cold start and one warm open + snapshot; the phases in milliseconds.
async fn startup_round(driver: &DockerDriver, url: &str) -> serde_json::Value {
    let requested = Instant::now();
    let session = new_session(driver).await;
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

/// Wait (bounded) until the pool has `count` browsers ready.
async fn wait_warm(driver: &DockerDriver, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while driver.warm_sessions() < count {
        assert!(
            Instant::now() < deadline,
            "no warm browser within 120 s: {:?}",
            driver.pool_error()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Task requested → first snapshot with a browser from the warm pool; and the warm browser's
/// memory while it waited.
async fn warm_pool_round(url: &str) -> serde_json::Value {
    let driver = driver_with_pool(url, 1).await;
    wait_warm(&driver, 1).await;
    let idle_mib: f64 = container_memory_mib().iter().sum();
    let requested = Instant::now();
    let session = new_session(&driver).await;
    assert!(session.warm, "the session did not come from the pool");
    let started = requested.elapsed();
    call(&session, json!(["open", url])).await;
    let opened = requested.elapsed();
    call(&session, json!(["snapshot"])).await;
    let first_snapshot = requested.elapsed();
    // Chromium's own account of the navigation (after the measurement, so it costs nothing).
    let script = "(() => { const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime; })()";
    let load = call(&session, json!(["eval", script])).await;
    let started_ms = millis(started);
    let open_ms = millis(opened) - started_ms;
    let snapshot_ms = millis(first_snapshot) - millis(opened);
    session.dispose.dispose().await;
    driver.shutdown().await;
    json!({"warm_pool_ms": millis(first_snapshot), "take_ms": started_ms, "open_ms": open_ms,
        "snapshot_ms": snapshot_ms, "load_ms": load.text.trim().parse::<f64>().ok(),
        "warm_idle_mib": idle_mib})
}

/// Tasks of one heavy page each, back to back, with a pool of `AIRLOCK_BENCH_POOL` browsers:
/// the whole run's time, and each page's load time (the pool refills while the next task runs).
async fn pool_tasks(url: &str, tasks: usize) -> serde_json::Value {
    let pool = std::env::var("AIRLOCK_BENCH_POOL").map_or(0, |n| n.parse().unwrap());
    let driver = driver_with_pool(url, pool).await;
    if pool > 0 {
        // A pool of 2 starts full, or its second browser's making overlaps the first task.
        wait_warm(&driver, pool).await;
    }
    let script = "(() => { const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime; })()";
    let began = Instant::now();
    let mut loads = Vec::new();
    let mut warm = 0;
    for n in 0..tasks {
        let session = new_session(&driver).await;
        warm += usize::from(session.warm);
        call(
            &session,
            json!(["open", url.replace("{n}", &n.to_string())]),
        )
        .await;
        let measured = call(&session, json!(["eval", script])).await;
        loads.push(measured.text.trim().parse::<f64>().ok());
        call(&session, json!(["snapshot"])).await;
        session.dispose.dispose().await;
    }
    let seconds = began.elapsed().as_secs_f64();
    let refill_held_s = driver.pool_refill_held().as_secs_f64();
    let taken_over = driver.pool_claims().taken_over;
    driver.shutdown().await;
    json!({"pool": pool, "tasks": tasks, "warm": warm, "seconds": seconds, "loads_ms": loads,
        "refill_held_s": refill_held_s, "taken_over": taken_over})
}

/// Claims from a pool of 2, each disposed at once: take → session ready. A claim waits only for
/// one warm browser, so most are made while the pool starts another (a claim's worst case).
async fn claims(url: &str, count: usize) -> serde_json::Value {
    let driver = driver_with_pool(url, 2).await;
    wait_warm(&driver, 2).await;
    let mut claims = Vec::new();
    for _ in 0..count {
        wait_warm(&driver, 1).await;
        let requested = Instant::now();
        let session = new_session(&driver).await;
        // None: the pool was empty, a cold start (counted apart).
        claims.push(session.warm.then_some(millis(requested.elapsed())));
        session.dispose.dispose().await;
    }
    driver.shutdown().await;
    json!({ "claims_ms": claims })
}

/// The facts and pages of `cargo xtask bench --only context` (xtask writes the corpus).
const FACTS: [&str; 3] = ["start code", "middle code", "end code"];
const PAGES: [&str; 4] = ["article", "table", "links", "list"];

/// A worker that follows a fixed strategy, so what it is shown can be counted exactly: open the
/// page, take a screenshot (kept, so the full-size original can be weighed), read the page with
/// `snapshot`, then (when paging) search the kept output for each fact not
/// seen yet. It notes how many characters it had been shown when it first saw each fact.
struct Seeker {
    url: String,
    paged: bool,
    found_at: std::sync::Mutex<std::collections::BTreeMap<&'static str, u64>>,
}

impl Seeker {
    fn fact_value(text: &str, label: &str) -> Option<String> {
        let pattern = regex_lite(label);
        text.find(&pattern).map(|at| {
            text[at + pattern.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect()
        })
    }
}

/// "The start code is " as it appears in every form of output.
fn regex_lite(label: &str) -> String {
    format!("{label} is ")
}

impl airlock_worker::Model for Seeker {
    fn next_turn(
        &self,
        request: airlock_worker::ModelRequest,
    ) -> airlock_worker::BoxFuture<
        '_,
        Result<airlock_worker::AssistantTurn, airlock_worker::ModelError>,
    > {
        use airlock_worker::{AssistantTurn, Message, ToolCall};
        let mut shown_chars = 0_u64;
        let mut seen = String::new();
        let mut searched = Vec::new();
        let mut turns = 0;
        let mut last_id = None;
        for message in &request.messages {
            match message {
                Message::ToolResults { results } => {
                    for result in results {
                        let text = result.text();
                        shown_chars += text.chars().count() as u64;
                        if let Some(at) = text.find("[… out-") {
                            let id: String = text[at + "[… ".len()..]
                                .chars()
                                .take_while(|c| *c != ':')
                                .collect();
                            last_id = Some(id);
                        }
                        seen.push_str(&text);
                        // Facts seen by now were found with this many characters shown.
                        let mut found = self.found_at.lock().unwrap();
                        for label in FACTS {
                            if !found.contains_key(label)
                                && Self::fact_value(&seen, label).is_some()
                            {
                                found.insert(label, shown_chars);
                            }
                        }
                    }
                }
                Message::Assistant { turn } => {
                    turns += 1;
                    for call in &turn.tool_calls {
                        if let Some(find) = call.input["find"].as_str() {
                            searched.push(find.to_owned());
                        }
                    }
                }
                Message::User { .. } => {}
            }
        }
        let browser = |args: serde_json::Value| ToolCall {
            id: format!("call-{turns}"),
            name: "agent_browser".into(),
            input: args,
        };
        let call = match turns {
            0 => Some(browser(json!({"args": ["open", self.url]}))),
            1 => Some(browser(json!({"args": ["screenshot"], "keep": true}))),
            2 => Some(browser(json!({"args": ["snapshot"]}))),
            _ => {
                let found = self.found_at.lock().unwrap();
                let next = FACTS.iter().find(|label| {
                    !found.contains_key(*label) && !searched.iter().any(|s| s == *label)
                });
                match (self.paged, next, &last_id) {
                    (true, Some(label), Some(id)) => Some(ToolCall {
                        id: format!("call-{turns}"),
                        name: airlock_worker::READ_OUTPUT.into(),
                        input: json!({"id": id, "find": label}),
                    }),
                    _ => None,
                }
            }
        };
        let turn = match call {
            Some(call) => AssistantTurn {
                tool_calls: vec![call],
                ..AssistantTurn::default()
            },
            None => AssistantTurn {
                text: FACTS
                    .iter()
                    .map(|label| {
                        format!(
                            "{label}: {}",
                            Self::fact_value(&seen, label).unwrap_or_else(|| "not found".into())
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
                ..AssistantTurn::default()
            },
        };
        Box::pin(async move { Ok(turn) })
    }
}

/// One page, one strategy: the facts found (by the characters shown at the time), and the totals.
async fn context_run(
    driver: &Arc<DockerDriver>,
    url: &str,
    page: &str,
    paged: bool,
) -> serde_json::Value {
    let limits = if paged {
        TaskLimits::default()
    } else {
        // The old defaults: cut at 24,000 characters, nothing kept.
        TaskLimits {
            max_output_chars: 24_000,
            max_kept_output_bytes: 0,
            ..TaskLimits::default()
        }
    };
    let seeker = Arc::new(Seeker {
        url: url.to_owned(),
        paged,
        found_at: std::sync::Mutex::default(),
    });
    let runner = airlock_worker::TaskRunner::new(
        Arc::clone(driver) as Arc<dyn BrowserDriver>,
        Arc::clone(&seeker) as Arc<dyn airlock_worker::Model>,
        limits,
    )
    .unwrap();
    let request = airlock_worker::TaskRequest {
        task: "Find the start, middle and end codes".into(),
        url: Some(url.to_owned()),
        scope: airlock_worker::Scope::default(),
        secrets: airlock_worker::Secrets::default(),
        state: None,
        return_state: false,
        uploads: airlock_worker::Uploads::default(),
        max_download_bytes: None,
        route: None,
        output_schema: None,
        browser: airlock_worker::BrowserSettings::default(),
    };
    let result = runner.run(request, CancellationToken::new()).await.unwrap();
    assert_eq!(
        result.ended,
        airlock_worker::Ended::Completed,
        "{}",
        result.report
    );
    let found_at = seeker.found_at.lock().unwrap().clone();
    json!({
        "page": page,
        "strategy": if paged { "paged" } else { "today" },
        "found_at_chars": found_at,
        "report": result.report,
        "steps": result.steps_used,
        "chars_shown": result.context.chars_shown,
        "image_bytes_shown": result.context.image_bytes_shown,
        "kept_image_bytes": result.screenshots.iter().map(|s| s.data.len()).sum::<usize>(),
    })
}

/// How long each snapshot form's whole output is on a page.
async fn snapshot_forms(driver: &DockerDriver, url: &str, page: &str) -> serde_json::Value {
    let session = new_session(driver).await;
    call(&session, json!(["open", url])).await;
    let mut forms = serde_json::Map::new();
    for args in [
        vec!["snapshot"],
        vec!["snapshot", "-c"],
        vec!["snapshot", "-i"],
        vec!["get", "text", "body"],
    ] {
        let output = call(&session, json!(args)).await;
        forms.insert(args.join(" "), json!(output.text.chars().count()));
    }
    // Screenshots as taken (and kept) against as shown to the model.
    let mut shots = serde_json::Map::new();
    for args in [vec!["screenshot"], vec!["screenshot", "--full"]] {
        // A page too tall for Chromium fails `--full`: recorded, not fatal.
        let output = session.tools[0]
            .execute(json!({ "args": args }))
            .await
            .unwrap();
        let Some(taken) = output.images.first().cloned() else {
            eprintln!("{page}: {} gave no image: {}", args.join(" "), output.text);
            shots.insert(args.join(" "), json!({"error": output.text}));
            continue;
        };
        let shown =
            airlock_worker::fit_for_model(taken.clone(), TaskLimits::default().max_image_side);
        shots.insert(
            args.join(" "),
            json!({"taken_bytes": taken.data.len(), "shown_bytes": shown.data.len(), "shown_type": shown.media_type}),
        );
    }
    session.dispose.dispose().await;
    json!({"page": page, "forms": forms, "screenshots": shots})
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
            let session = new_session(&driver).await;
            let script = "(() => { const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime; })()";
            let mut loads = Vec::new();
            let cpu_before = cgroup::task_container_cpu_ms();
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
            // The container's CPU for all the loads (and their evals), user and system.
            let cpu = cgroup::task_container_cpu_ms()
                .zip(cpu_before)
                .map(|(after, before)| [after[0] - before[0], after[1] - before[1]]);
            session.dispose.dispose().await;
            println!(
                "{}",
                json!({ "loads_ms": loads, "cpu_user_system_ms": cpu })
            );
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
        "warmpool" => {
            for _ in 0..count {
                println!("{}", warm_pool_round(&url).await);
            }
        }
        "pooltasks" => println!("{}", pool_tasks(&url, count).await),
        "claims" => println!("{}", claims(&url, count).await),
        "context" => {
            for page in PAGES {
                let page_url = format!("{url}{page}.html");
                for paged in [false, true] {
                    println!("{}", context_run(&driver, &page_url, page, paged).await);
                }
                println!("{}", snapshot_forms(&driver, &page_url, page).await);
            }
        }
        other => panic!("unknown mode {other}"),
    }
    driver.shutdown().await;
}
