//! The Docker driver against a real dockerd and the real image, as a non-root user.
//!
//! These tests need Docker, the `airlock-browser` image and a non-root user in the docker group.
//! Without them they say so and pass, unless `AIRLOCK_REQUIRE_DOCKER=1` (set by
//! `cargo xtask integration`, which CI runs), where a missing prerequisite fails the test.

// Scenario tests read top to bottom; splitting them would hide the story.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

#[path = "../support/mod.rs"]
mod support;

mod adaptive_pool;
mod runner_pool;
mod sandbox;
mod unasked;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use airlock_driver_docker::{CONTAINER_USER, DockerDriver, DockerError, DriverConfig, Guide};
use airlock_policy::{EgressPolicy, Profile};
use airlock_testkit::docker::{
    docker_ready, egress_dir_of, execs_created, image, task_containers, unix_now,
    wait_until_removed,
};
use airlock_worker::{BrowserDriver, CancellationToken, TaskContext, ToolStatus};
use serde_json::json;
use support::{
    RemoveOnDrop, assert_no_direct_way_out, assert_sealed, call, driver, exec_in, lab_config,
    my_containers, serve_site, started, wait_task, waiting_runner,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_sealed_browses_the_allowed_site_and_leaves_nothing_behind() {
    if !docker_ready() {
        return;
    }
    let site = serve_site();
    let (driver, limits) = driver(site, Duration::from_secs(120)).await;
    let before = my_containers();
    let context = TaskContext::new(CancellationToken::new(), limits);
    let session = driver.start(context.clone()).await.unwrap();
    assert!(
        session.guide.contains("[\"snapshot\", \"-i\"]") && session.guide.len() < 3_000,
        "by default the worker reads Airlock's short guide in call form: {}",
        session.guide
    );
    assert_eq!(session.tools[0].definition().name, "agent_browser");

    // This process's own: other test binaries may run containers meanwhile.
    let created: Vec<String> = my_containers()
        .into_iter()
        .filter(|c| !before.contains(c))
        .collect();
    assert_eq!(created.len(), 1, "{created:?}");
    let name = created[0].clone();
    let socket_dir = assert_sealed(&name);
    assert_no_direct_way_out(&name);

    // Through the proxy, the allowed site works: open, click through, read.
    let opened = call(
        &session,
        json!({"args": ["open", format!("http://127.0.0.1:{site}/")]}),
    )
    .await;
    assert!(!opened.is_error(), "{}", opened.text);
    assert!(opened.text.contains("Airlock home"), "{}", opened.text);
    // The short guide shows a snapshot line as agent-browser prints one.
    let snapshot = call(&session, json!({"args": ["snapshot", "-i"]})).await;
    let line = snapshot
        .text
        .lines()
        .find(|line| line.contains("[ref=e"))
        .unwrap_or_else(|| panic!("no ref in the snapshot: {}", snapshot.text));
    assert!(line.trim_start().starts_with("- "), "{line}");
    assert!(session.guide.contains("`- button \"Submit\" [ref=e3]`"));
    let clicked = call(
        &session,
        json!({"args": ["find", "text", "Second page", "click"]}),
    )
    .await;
    assert!(!clicked.is_error(), "{}", clicked.text);
    let fact = call(&session, json!({"args": ["get", "text", "#fact"]})).await;
    assert!(fact.text.contains("The answer is 42."), "{}", fact.text);
    let shot = call(
        &session,
        json!({"args": ["screenshot", "/etc/evil.png"], "keep": true}),
    )
    .await;
    assert!(!shot.is_error(), "{}", shot.text);
    assert!(
        shot.images[0].data.starts_with(b"\x89PNG\r\n\x1a\n"),
        "not a PNG"
    );
    assert!(shot.text.contains("Kept"), "{}", shot.text);

    // Refused commands never reach the container.
    for args in [
        json!(["download", "@e1", "/tmp/x"]),
        json!(["open", "file:///etc/passwd"]),
        json!(["goto", "chrome://settings"]),
        json!(["open", "--proxy=http://evil:1", "http://example.com"]),
    ] {
        let refused = call(&session, json!({"args": args})).await;
        assert!(
            matches!(refused.status, ToolStatus::Refused { .. })
                && refused.text.starts_with("Refused:"),
            "{args}: {}",
            refused.text
        );
    }

    session.dispose.dispose().await;
    assert!(
        !task_containers().contains(&name),
        "the container was left behind"
    );
    assert!(
        !std::path::Path::new(&socket_dir).exists(),
        "the socket directory was left behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_browsers_own_guide_comes_from_the_container_when_chosen() {
    if !docker_ready() {
        return;
    }
    let site = serve_site();
    let driver = DockerDriver::connect(DriverConfig {
        guide: Guide::AgentBrowser,
        ..lab_config(site)
    })
    .await
    .unwrap();
    let limits = airlock_worker::TaskLimits::default();
    let session = driver
        .start(TaskContext::new(CancellationToken::new(), limits))
        .await
        .unwrap();
    // agent-browser 0.41's `skills get core`, printed by the binary in the image.
    assert!(
        session.guide.contains("# agent-browser core") && session.guide.len() > 10_000,
        "{}",
        session.guide
    );
    assert!(
        session
            .prompt
            .starts_with("How to run the commands in the guide"),
        "its shell command lines need the call form told: {}",
        session.prompt
    );
    session.dispose.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_requests_from_a_page_are_refused_and_reported_to_the_worker() {
    if !docker_ready() {
        return;
    }
    let site = serve_site();
    let (driver, limits) = driver(site, Duration::from_secs(120)).await;
    let context = TaskContext::new(CancellationToken::new(), limits);
    let session = driver.start(context.clone()).await.unwrap();
    let traps = call(
        &session,
        json!({"args": ["open", format!("http://127.0.0.1:{site}/traps")]}),
    )
    .await;
    let waited = call(&session, json!({"args": ["wait", "500"]})).await;
    let redirect = call(
        &session,
        json!({"args": ["open", format!("http://127.0.0.1:{site}/redirect")]}),
    )
    .await;
    let after = call(&session, json!({"args": ["get", "url"]})).await;
    let told = [traps.text, waited.text, redirect.text, after.text].join("\n");
    for refused in [
        "http://127.0.0.1:8081/frame",
        "http://10.0.0.1/secret",
        "http://169.254.169.254/latest/meta-data/",
    ] {
        assert!(
            told.contains(&format!("The egress proxy refused \"{refused}\"")),
            "{refused} not reported:\n{told}"
        );
    }
    let recorded: Vec<String> = context.refusals().into_iter().map(|r| r.target).collect();
    assert!(
        recorded.iter().any(|t| t.contains("169.254.169.254")),
        "{recorded:?}"
    );
    session.dispose.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_left_alone_exits_by_itself_after_its_lifetime() {
    if !docker_ready() {
        return;
    }
    let site = serve_site();
    // The lifetime is the task's time limit (5 s) plus the grace (zero in these tests).
    let lifetime = Duration::from_secs(5);
    let (driver, limits) = driver(site, lifetime).await;
    let before_start = std::time::SystemTime::now();
    let session = driver
        .start(TaskContext::new(CancellationToken::new(), limits))
        .await
        .unwrap();
    let name = my_containers()
        .pop()
        .expect("this process runs a task container");
    // Nothing touches the container now: Docker's own events say when it died and why.
    assert!(
        wait_until_removed(&name, before_start, Duration::from_secs(60)),
        "the container did not exit and go within 60 s"
    );
    let since = before_start
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .saturating_sub(1);
    let events = Command::new("docker")
        .args([
            "events",
            "--since",
            &since.to_string(),
            "--until",
            &(std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
                + 1)
            .to_string(),
            "--filter",
            &format!("container={name}"),
            "--format",
            "{{.Status}} {{.TimeNano}}",
        ])
        .output()
        .unwrap();
    let events = String::from_utf8_lossy(&events.stdout);
    let at = |status: &str| {
        events.lines().find_map(|line| {
            let (event, nanos) = line.split_once(' ')?;
            (event == status).then(|| nanos.trim().parse::<u128>().unwrap())
        })
    };
    let started = at("start").unwrap_or_else(|| panic!("no start event: {events}"));
    let died = at("die").unwrap_or_else(|| panic!("no die event: {events}"));
    assert!(
        at("kill").is_none(),
        "something killed the container instead of it exiting by itself: {events}"
    );
    assert!(
        died - started >= lifetime.as_nanos(),
        "the container ran {} ms, less than its lifetime: {events}",
        (died - started) / 1_000_000
    );
    session.dispose.dispose().await;
    assert!(!task_containers().contains(&name));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_task_mid_command_leaves_nothing_behind() {
    if !docker_ready() {
        return;
    }
    let site = serve_site();
    let (driver, limits) = driver(site, Duration::from_secs(120)).await;
    let cancel = CancellationToken::new();
    let progress_cancel = cancel.clone();
    let runner =
        waiting_runner(driver, limits).with_progress(Arc::new(move |_| progress_cancel.cancel()));
    let result = runner.run(wait_task(), cancel).await.unwrap();
    assert_eq!(result.ended, airlock_worker::Ended::Cancelled);
    assert!(
        my_containers().is_empty(),
        "a cancelled task left its container"
    );
}

/// Run as a child process by the next test: start a session, print its container, then wait to be killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helper_host_process_that_gets_killed() {
    let Ok(site) = std::env::var("AIRLOCK_HELPER_SITE") else {
        return; // Only meaningful when started by the test below.
    };
    let (driver, limits) = driver(site.parse().unwrap(), Duration::from_secs(300)).await;
    let _session = driver
        .start(TaskContext::new(CancellationToken::new(), limits))
        .await
        .unwrap();
    let mine = my_containers()
        .pop()
        .expect("this process runs a task container");
    println!("CONTAINER={mine}");
    std::future::pending::<()>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_host_process_leaves_an_orphan_that_the_next_driver_removes() {
    if !docker_ready() {
        return;
    }
    let site = serve_site();
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "helper_host_process_that_gets_killed",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("AIRLOCK_HELPER_SITE", site.to_string())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap());
    let name = loop {
        let mut line = String::new();
        let read = tokio::time::timeout(
            Duration::from_secs(60),
            tokio::io::AsyncBufReadExt::read_line(&mut lines, &mut line),
        )
        .await
        .expect("the helper started a session within 60 s")
        .unwrap();
        assert!(read > 0, "the helper ended without starting a session");
        // libtest prints "test name ... " before the helper's own line.
        if let Some(found) = line.trim().split("CONTAINER=").nth(1) {
            break found.to_owned();
        }
    };
    child.start_kill().unwrap(); // SIGKILL: no destructor, no dispose.
    child.wait().await.unwrap();
    assert!(
        task_containers().contains(&name),
        "the container should outlive its killed owner"
    );
    let egress = egress_dir_of(&name);
    assert!(
        egress.join("sockets/handoff.sock").exists(),
        "the proxy directory should outlive its killed owner"
    );
    // As if it was killed while a refill had this container frozen: the orphan is paused, and a
    // paused container cannot exit by itself at the end of its lifetime.
    let paused = std::process::Command::new("docker")
        .args(["pause", &name])
        .output()
        .unwrap();
    assert!(paused.status.success(), "{paused:?}");

    let (driver, _) = driver(site, Duration::from_secs(60)).await; // connecting cleans up orphans
    assert!(
        !task_containers().contains(&name),
        "the orphan {name} was not removed"
    );
    assert!(
        !egress.exists(),
        "the orphaned {} was left",
        egress.display()
    );
    assert!(driver.removed_egress_dirs().contains(&egress));
}

/// The image itself, run by hand with the lockdown flags and a proxy socket: pinned tools, the
/// guide, the managed policy, a page through the socket, and no traffic the page did not cause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_runs_locked_down_and_the_proxy_sees_only_what_the_page_causes() {
    if !docker_ready() {
        return;
    }
    let site = serve_site();
    let events: Arc<std::sync::Mutex<Vec<airlock_proxy::ProxyEvent>>> = Arc::default();
    let sink = Arc::clone(&events);
    let policy = EgressPolicy::new(
        Profile::Public,
        None,
        [format!("127.0.0.1:{site}").parse().unwrap()],
    )
    .unwrap();
    let proxy = airlock_proxy::EgressProxy::start(
        airlock_proxy::ProxyConfig::new(policy)
            .with_events(Arc::new(move |e| sink.lock().unwrap().push(e))),
    )
    .unwrap();
    // The container's own uid, not this user's: the relay reaches the sockets all the same.
    let (uid, gid) = CONTAINER_USER;
    let out = Command::new("docker")
        .args([
            "run",
            "-d",
            "--network",
            "none",
            "--read-only",
            "--tmpfs",
            "/tmp",
            "--cap-drop",
            "ALL",
        ])
        .args([
            "--security-opt",
            "no-new-privileges",
            "--security-opt",
            &format!("seccomp={}", seccomp_profile_path().display()),
            "--init",
            "--user",
            &format!("{uid}:{gid}"),
        ])
        .args([
            "-v",
            &format!("{}:/egress:ro", proxy.socket_dir().display()),
        ])
        .args([
            "--label",
            "airlock.task=image-test",
            "--label",
            "airlock.owner=test",
        ])
        .arg(image())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let name = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let _remove = RemoveOnDrop(name.clone());
    exec_in(
        &name,
        &[
            "sh",
            "-c",
            "timeout 15 sh -c 'until [ -e /tmp/.airlock-relay-ready ]; do sleep 0.02; done'",
        ],
    );

    assert_eq!(
        exec_in(&name, &["agent-browser", "--version"]).trim(),
        "agent-browser 0.41.2"
    );
    assert!(exec_in(&name, &["chromium", "--version"]).contains("Chromium"));
    assert!(exec_in(&name, &["agent-browser", "skills", "get", "core"]).contains("name: core"));
    let policy: serde_json::Value = serde_json::from_str(&exec_in(
        &name,
        &["cat", "/etc/chromium/policies/managed/airlock.json"],
    ))
    .unwrap();
    assert_eq!(policy["WebRtcIPHandling"], "disable_non_proxied_udp");
    assert_eq!(policy["DownloadRestrictions"], 3);
    // A PDF is a download (which a task may allow), never the built-in viewer's extension page.
    assert_eq!(policy["AlwaysOpenPdfExternally"], true);
    assert!(exec_in(&name, &["sh", "-c", "pdftotext -v 2>&1"]).contains("pdftotext"));
    for scheme in [
        "file://*",
        "chrome://*",
        "view-source:*",
        "devtools://*",
        "ftp://*",
    ] {
        assert!(
            policy["URLBlocklist"]
                .as_array()
                .unwrap()
                .contains(&json!(scheme)),
            "{scheme}"
        );
    }
    assert_eq!(exec_in(&name, &["id", "-u"]).trim(), uid.to_string());

    let opened = exec_in(
        &name,
        &[
            "agent-browser",
            "open",
            &format!("http://127.0.0.1:{site}/"),
        ],
    );
    assert!(opened.contains("Airlock home"), "{opened}");
    assert!(exec_in(&name, &["agent-browser", "snapshot"]).contains("heading \"Welcome\""));
    // Give Chromium two seconds of its own time in which background traffic would show up.
    exec_in(&name, &["agent-browser", "wait", "2000"]);
    let seen: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .map(|e| e.target.clone())
        .collect();
    assert!(!seen.is_empty());
    let site_prefix = format!("http://127.0.0.1:{site}/");
    let foreign: Vec<&String> = seen
        .iter()
        .filter(|t| !t.starts_with(&site_prefix))
        .collect();
    assert!(
        foreign.is_empty(),
        "the proxy saw requests the page did not cause: {foreign:#?}"
    );
    // Every connection Chromium made reached the proxy as a socket handed off by airlock-relay,
    // not through some other path.
    let stats = proxy.stats();
    assert!(stats.handed_off > 0, "{stats:?}");
    assert_eq!(stats.handed_off, stats.connections, "{stats:?}");
    assert_eq!(stats.handoff_refusals, 0, "{stats:?}");
    // The image carries no general network tool an attacker could use inside.
    for tool in ["socat", "curl", "wget", "nc"] {
        let found = Command::new("docker")
            .args(["exec", &name, "sh", "-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        assert!(!found.status.success(), "{tool} is in the image");
    }
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_task_leaves_nothing_behind() {
    if !docker_ready() {
        return;
    }
    let site = serve_site();
    let (driver, limits) = driver(site, Duration::from_secs(5)).await;
    let result = waiting_runner(driver, limits)
        .run(wait_task(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(result.ended, airlock_worker::Ended::TimedOut);
    assert!(
        my_containers().is_empty(),
        "a timed-out task left its container"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_task_future_still_removes_its_container() {
    if !docker_ready() {
        return;
    }
    let site = serve_site();
    let (driver, limits) = driver(site, Duration::from_secs(120)).await;
    let docker = driver.docker().clone();
    let (started, mut running) = tokio::sync::mpsc::unbounded_channel();
    let runner = waiting_runner(driver, limits).with_progress(Arc::new(move |_| {
        let _ = started.send(());
    }));
    let task = tokio::spawn(async move { runner.run(wait_task(), CancellationToken::new()).await });
    running.recv().await.unwrap();
    let name = my_containers().pop().expect("the task's container runs");
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    // Dropping the task spawned its dispose; wait for Docker to report the container removed.
    let options = bollard::query_parameters::WaitContainerOptionsBuilder::new()
        .condition("removed")
        .build();
    let mut removal = docker.wait_container(&name, Some(options));
    let _ = tokio::time::timeout(
        Duration::from_secs(30),
        futures_util::StreamExt::next(&mut removal),
    )
    .await
    .expect("the container was removed within 30 s");
    assert!(!task_containers().contains(&name));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_image_is_its_own_error_naming_the_command_that_builds_it() {
    if !docker_ready() {
        return;
    }
    let config = DriverConfig {
        image: "airlock-browser:no-such-tag".to_owned(),
        ..DriverConfig::default()
    };
    let driver = DockerDriver::connect(config).await.unwrap();
    let error = driver.check().await.unwrap_err();
    assert!(
        matches!(
            error.downcast_ref::<DockerError>(),
            Some(DockerError::ImageMissing { image }) if image == "airlock-browser:no-such-tag"
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("cargo xtask image"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_skips_check_still_cannot_start_a_container_as_root_or_as_itself() {
    if !docker_ready() {
        return;
    }
    let me = airlock_driver_docker::current_user();
    for user in [(0, 0), me] {
        let config = DriverConfig {
            image: image(),
            user: Some(user),
            ..DriverConfig::default()
        };
        let driver = DockerDriver::connect(config).await.unwrap();
        let context = TaskContext::new(
            CancellationToken::new(),
            airlock_worker::TaskLimits::default(),
        );
        let Err(error) = driver.start(context).await else {
            panic!("a session started with container user {user:?}")
        };
        let refused = match error.downcast_ref::<DockerError>() {
            Some(DockerError::RootContainerUser) => user.0 == 0,
            Some(DockerError::ContainerUserIsYours { uid }) => *uid == me.0,
            _ => false,
        };
        assert!(refused, "{user:?}: {error:?}");
        assert!(my_containers().is_empty(), "{:?}", my_containers());
    }
}

/// The profile the driver passes inline, as a file for `docker run` by hand.
fn seccomp_profile_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docker/seccomp.json")
}
