//! Chromium's own traffic: a browser asks the egress proxy for nothing no page asked for, left
//! idle in a task after a sign-in or warm in the pool for its whole life there, under runc and
//! under gVisor.
//! Every destination such a request could name fails or is refused here (no public DNS), so the
//! proxy reports each one: to the worker after a command, or, before a task takes the browser,
//! in the driver's count of unasked requests.

use airlock_driver_docker::PoolConfig;

use super::*;

/// How long the browsers are left alone: the minute, and the pool's max age.
const IDLE: Duration = Duration::from_secs(60);

/// A task signs in on the lab's login site (a sign-in wakes Chromium's password services, such as
/// its leak check, which would ask Google about the typed credentials), then leaves its browser
/// idle: the next command's answer carries whatever the proxy refused or failed meanwhile.
/// Returns that answer and the unasked count.
async fn idle_in_a_task(runtime: &'static str) -> (String, u64) {
    let (login, posted) = airlock_testkit::login::login_site("ada", "correct-horse-battery", "");
    let (driver, session) = started(DriverConfig {
        runtime: runtime.to_owned(),
        ..lab_config(login)
    })
    .await;
    for args in [
        json!(["open", format!("http://127.0.0.1:{login}/login")]),
        json!(["fill", "#user", "ada"]),
        json!(["fill", "#password", "correct-horse-battery"]),
        json!(["click", "#go"]),
        json!(["wait", "--url", "**/account"]),
    ] {
        let done = call(&session, json!({ "args": args })).await;
        assert!(!done.is_error(), "{runtime}: {args}: {}", done.text);
    }
    assert_eq!(posted.lock().unwrap().len(), 1, "{runtime}: not signed in");
    // Idleness is what is under test, not a wait for something to happen.
    tokio::time::sleep(IDLE).await;
    let looked = call(&session, json!({"args": ["get", "url"]})).await;
    session.dispose.dispose().await;
    (looked.text, driver.unasked_requests())
}

/// A warm browser sits in the pool until it is replaced at its max age; the one after it is
/// taken by a task. Returns what the driver counted before any task took a browser, and after.
async fn warm_in_the_pool(runtime: &'static str, site: u16) -> (u64, u64) {
    let config = DriverConfig {
        runtime: runtime.to_owned(),
        pool: PoolConfig {
            size: 1,
            max_age: IDLE,
            ..PoolConfig::default()
        },
        ..lab_config(site)
    };
    let driver = DockerDriver::connect(config).await.unwrap();
    driver.check().await.unwrap();
    driver.start_pool().unwrap();
    until_warm(&driver, 1).await;
    until_warm(&driver, 0).await;
    until_warm(&driver, 1).await;
    let before_any_task = driver.unasked_requests();
    let session = driver
        .start(TaskContext::new(
            CancellationToken::new(),
            airlock_worker::TaskLimits::default(),
        ))
        .await
        .unwrap();
    let looked = call(&session, json!({"args": ["get", "url"]})).await;
    assert!(
        !looked.text.contains("egress proxy"),
        "{runtime}: {}",
        looked.text
    );
    session.dispose.dispose().await;
    driver.shutdown().await;
    (before_any_task, driver.unasked_requests())
}

/// Until the pool holds `count` warm browsers. The pool replaces a browser at its max age and
/// nothing tells when: 1, then 0 while the next is made, then 1 again.
async fn until_warm(driver: &DockerDriver, count: usize) {
    let deadline = std::time::Instant::now() + IDLE + Duration::from_secs(90);
    while driver.warm_sessions() != count {
        assert!(
            std::time::Instant::now() < deadline,
            "the pool never held {count}: {:?}",
            driver.pool_error()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_browser_left_alone_asks_for_nothing_in_a_task_or_warm_under_runc_and_gvisor() {
    if !docker_ready() {
        return;
    }
    let site = serve_site();
    // All four at once: the minute is the same minute for each.
    let (idle_runc, idle_gvisor, warm_runc, warm_gvisor) = tokio::join!(
        idle_in_a_task("runc"),
        idle_in_a_task("runsc"),
        warm_in_the_pool("runc", site),
        warm_in_the_pool("runsc", site)
    );
    // Every finding at once, so a failure shows the whole picture.
    let mut asked = Vec::new();
    for (runtime, (text, unasked)) in [("runc", idle_runc), ("runsc", idle_gvisor)] {
        if text.contains("egress proxy") || unasked > 0 {
            asked.push(format!(
                "{runtime}, idle in a task: {unasked} before it took the browser; after: {text}"
            ));
        }
    }
    for (runtime, (before, after)) in [("runc", warm_runc), ("runsc", warm_gvisor)] {
        if (before, after) != (0, 0) {
            asked.push(format!(
                "{runtime}, warm in the pool: {before} in its {} s there, {after} by the time a task took the next",
                IDLE.as_secs()
            ));
        }
    }
    assert!(
        asked.is_empty(),
        "browsers asked for what no page asked for:\n{}",
        asked.join("\n")
    );
}
