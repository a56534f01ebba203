//! The runner that carries every command, and the warm pool's refill.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_share_one_runner_and_fall_back_to_an_exec_each_once_it_has_ended() {
    if !docker_ready() {
        return;
    }
    let site = serve_site();
    let since = unix_now();
    let (_driver, session) = started(lab_config(site)).await;
    let name = my_containers().pop().unwrap();
    let url = format!("http://127.0.0.1:{site}/");
    for _ in 0..5 {
        let opened = call(&session, json!({"args": ["open", &url]})).await;
        assert!(!opened.is_error(), "{}", opened.text);
    }
    let shot = call(&session, json!({"args": ["screenshot"]})).await;
    assert_eq!(shot.images.len(), 1, "{}", shot.text);
    // Start-up (relay wait and guide), five opens and a screenshot read back: all through the one
    // runner exec.
    let execs = execs_created(&name, &since);
    assert_eq!(execs.len(), 1, "{execs:?}");
    assert!(execs[0].contains("airlock-runner"), "{execs:?}");

    // The runner ends (killed here): later commands still work, an exec each.
    exec_in(&name, &["pkill", "-x", "airlock-runner"]);
    // A command sent before the driver saw the runner end is lost with it, and said to be; once
    // it has seen the end (it has, when that answer comes), commands take an exec each.
    let raced = call(&session, json!({"args": ["get", "url"]})).await;
    assert!(
        !raced.is_error() || raced.text.contains("whether it ran is unknown"),
        "{}",
        raced.text
    );
    let after = call(&session, json!({"args": ["get", "url"]})).await;
    assert!(!after.is_error(), "{}", after.text);
    assert!(after.text.contains(&url), "{}", after.text);
    let execs = execs_created(&name, &since);
    assert!(
        execs
            .iter()
            .any(|exec| exec.contains("agent-browser get url")),
        "{execs:?}"
    );
    session.dispose.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_in_flight_when_the_runner_ends_is_reported_as_unknown_not_run_again() {
    if !docker_ready() {
        return;
    }
    let site = serve_site();
    let (_driver, session) = started(lab_config(site)).await;
    let name = my_containers().pop().unwrap();
    let tool = Arc::clone(&session.tools[0]);
    let waiting =
        tokio::spawn(async move { tool.execute(json!({"args": ["wait", "5000"]})).await });
    // Once the command runs inside, end its runner.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !exec_in(&name, &["ps", "-eo", "args"]).contains("agent-browser wait 5000") {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never started"
        );
        tokio::task::yield_now().await;
    }
    exec_in(&name, &["pkill", "-x", "airlock-runner"]);
    // Told to the worker, who can look at the page before repeating it.
    let lost = waiting.await.unwrap().unwrap();
    assert!(lost.is_error(), "{}", lost.text);
    assert!(
        lost.text.contains("whether it ran is unknown"),
        "{}",
        lost.text
    );
    // The next command runs (by an exec of its own) and was not mixed up with the lost one.
    let url = call(&session, json!({"args": ["get", "url"]})).await;
    assert!(!url.is_error(), "{}", url.text);
    session.dispose.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_refills_only_after_the_taking_tasks_first_answer() {
    if !docker_ready() {
        return;
    }
    let site = serve_site();
    let driver = warm_pool_of_one(site).await;
    let session = driver
        .start(TaskContext::new(
            CancellationToken::new(),
            airlock_worker::TaskLimits::default(),
        ))
        .await
        .unwrap();
    assert!(session.warm);
    assert_eq!(driver.pool_refill_held(), Duration::ZERO);

    // While the task waits for its first answer (a second in the page), no browser is being
    // made beside it: the taken container stays the only one.
    let tool = Arc::clone(&session.tools[0]);
    let first = tokio::spawn(async move { tool.execute(json!({"args": ["wait", "1000"]})).await });
    let mut most = 0;
    while !first.is_finished() {
        most = most.max(my_containers().len());
        tokio::task::yield_now().await;
    }
    let answer = first.await.unwrap().unwrap();
    let answered = std::time::Instant::now();
    assert!(!answer.is_error(), "{}", answer.text);
    assert_eq!(most, 1, "a refill started before the task's first answer");
    // After it, the refill starts at once: not at the end of its patience (3 s from the take,
    // 2 s from this answer), which is all a refill that ignored answers would wait.
    while my_containers().len() < 2 {
        assert!(
            answered.elapsed() < std::time::Duration::from_millis(1500),
            "the refill waited out its patience instead of the task's first answer"
        );
        tokio::task::yield_now().await;
    }
    // The wait is counted: the refill was held from the take to the answer.
    assert!(
        driver.pool_refill_held() > Duration::ZERO,
        "the refill's wait for the first answer was not counted"
    );
    until_warm(&driver).await;
    session.dispose.dispose().await;
    driver.shutdown().await;
    assert!(my_containers().is_empty(), "{:?}", my_containers());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_finds_the_pool_empty_takes_over_the_refill_under_way() {
    if !docker_ready() {
        return;
    }
    let site = serve_site();
    let driver = warm_pool_of_one(site).await;
    let context = || {
        TaskContext::new(
            CancellationToken::new(),
            airlock_worker::TaskLimits::default(),
        )
    };
    let first = driver.start(context()).await.unwrap();
    assert!(first.warm);
    // The first task gives no answer, so the refill waits out its patience, makes its container
    // and then yields again (as long again) before starting it: a refill under way, far from done.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while my_containers().len() < 2 {
        assert!(std::time::Instant::now() < deadline, "no refill started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refill = my_containers();

    // The pool is empty: the next task takes that refill over rather than making a browser of
    // its own beside it.
    let second = driver.start(context()).await.unwrap();
    assert!(second.warm, "the task started cold beside the refill");
    // No browser was made for it: the driver counts it taken over, not cold. (The containers
    // themselves prove nothing more: once its patience for the first task's answer runs out, the
    // pool's next refill may make another, and on a busy machine it does.)
    assert!(
        refill.iter().all(|name| my_containers().contains(name)),
        "the refill's container went away: {refill:?} {:?}",
        my_containers()
    );
    assert_eq!(
        driver.pool_claims(),
        airlock_driver_docker::PoolClaims {
            warm: 1,
            taken_over: 1,
            cold: 0
        }
    );
    let opened = call(
        &second,
        json!({"args": ["open", format!("http://127.0.0.1:{site}/")]}),
    )
    .await;
    assert!(!opened.is_error(), "{}", opened.text);
    second.dispose.dispose().await;
    first.dispose.dispose().await;
    driver.shutdown().await;
    assert!(my_containers().is_empty(), "{:?}", my_containers());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_browser_writes_no_caches_to_its_tmpfs() {
    if !docker_ready() {
        return;
    }
    // A task's profile is fresh and thrown away with it: a shader cache there is never read
    // again, and the tmpfs it would fill is memory. The image's --disable-gpu-shader-disk-cache
    // keeps an idle browser (a warm one, on about:blank) from writing the four it did. Nor does
    // fontconfig write caches of its own: the image's are valid (its Dockerfile says why they
    // were not), so a launch does not rescan the fonts.
    let driver = warm_pool_of_one(serve_site()).await;
    let name = my_containers().pop().unwrap();
    let profile = exec_in(
        &name,
        &["find", "/tmp", "-maxdepth", "2", "-name", "Default"],
    );
    assert!(
        profile.contains("Default"),
        "no Chromium profile under /tmp: this check would prove nothing"
    );
    let caches = exec_in(
        &name,
        &[
            "find",
            "/tmp",
            "-type",
            "f",
            "-size",
            "+0",
            "(",
            "-path",
            "*/GPUCache/*",
            "-o",
            "-path",
            "*Dawn*",
            "-o",
            "-path",
            "*/fontconfig/*",
            ")",
        ],
    );
    assert!(caches.trim().is_empty(), "caches fill the tmpfs: {caches}");
    driver.shutdown().await;
    assert!(my_containers().is_empty(), "{:?}", my_containers());
}

/// A driver for the lab site on `site` whose pool of one holds a ready session.
async fn warm_pool_of_one(site: u16) -> DockerDriver {
    let config = airlock_driver_docker::DriverConfig {
        pool: airlock_driver_docker::PoolConfig {
            size: 1,
            ..airlock_driver_docker::PoolConfig::default()
        },
        ..lab_config(site)
    };
    let driver = DockerDriver::connect(config).await.unwrap();
    driver.check().await.unwrap();
    driver.start_pool().unwrap();
    until_warm(&driver).await;
    driver
}

/// Wait (bounded) until the driver's pool holds a ready session.
async fn until_warm(driver: &DockerDriver) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while driver.warm_sessions() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the pool did not fill: {:?}",
            driver.pool_error()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
