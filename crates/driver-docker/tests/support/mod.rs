//! Helpers for the driver's Docker tests: the lab site, a driver opened on it, the checks every
//! sealed container must pass, and task runners that wait.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use airlock_driver_docker::{CONTAINER_USER, DockerDriver, DriverConfig, current_user};
use airlock_policy::{EgressPolicy, Profile};
use airlock_testkit::docker::{containers_of, image, inspect};
use airlock_testkit::site::site;
use airlock_worker::{BrowserDriver, BrowserSession, TaskLimits, ToolOutput};
use serde_json::json;

/// A site on this machine: `/` links to `/second`; `/traps` aims at forbidden places.
pub(crate) fn serve_site() -> u16 {
    let page = |body: &str| ("200 OK", String::new(), body.to_owned());
    site(move |_| {
        HashMap::from([
            ("/", page("<html><head><title>Airlock home</title></head><body><h1>Welcome</h1><a href=\"/second\">Second page</a></body></html>")),
            ("/second", page("<html><head><title>Second</title></head><body><p id=\"fact\">The answer is 42.</p></body></html>")),
            ("/redirect", ("302 Found", "location: http://169.254.169.254/latest/meta-data/\r\n".to_owned(), String::new())),
            ("/traps", page("<html><body><h1>Traps</h1><iframe src=\"http://127.0.0.1:8081/frame\"></iframe><script>fetch('http://10.0.0.1/secret').catch(() => {});</script></body></html>")),
        ])
    })
    .0
}

/// The driver settings every test starts from: the image under test, the lab site opened by one
/// exact entry, and no grace after a task's time limit.
pub(crate) fn lab_config(site: u16) -> DriverConfig {
    let policy = EgressPolicy::new(
        Profile::Public,
        None,
        [format!("127.0.0.1:{site}").parse().unwrap()],
    )
    .unwrap();
    DriverConfig {
        image: image(),
        egress: policy,
        lifetime_grace: Duration::ZERO,
        ..DriverConfig::default()
    }
}

/// A driver with `config`, checked, and a session started on it with the default limits.
pub(crate) async fn started(config: DriverConfig) -> (DockerDriver, BrowserSession) {
    let driver = DockerDriver::connect(config).await.unwrap();
    // A missing prerequisite (a runtime, user namespaces) fails here with its fix.
    driver.check().await.unwrap();
    let session = driver
        .start(airlock_worker::TaskContext::new(
            airlock_worker::CancellationToken::new(),
            TaskLimits::default(),
        ))
        .await
        .unwrap();
    (driver, session)
}

pub(crate) async fn driver(site: u16, limits_timeout: Duration) -> (DockerDriver, TaskLimits) {
    let driver = DockerDriver::connect(lab_config(site)).await.unwrap();
    driver.check().await.unwrap();
    let limits = TaskLimits {
        timeout: limits_timeout,
        ..TaskLimits::default()
    };
    (driver, limits)
}

pub(crate) async fn call(session: &BrowserSession, input: serde_json::Value) -> ToolOutput {
    session.tools[0].execute(input).await.unwrap()
}

/// The container matches the locked-down spec; returns the host's socket directory.
pub(crate) fn assert_sealed(name: &str) -> String {
    let info = inspect(name);
    let host = &info["HostConfig"];
    // Neither root nor the user who started it: a uid that owns nothing on the host.
    let (uid, gid) = CONTAINER_USER;
    assert_eq!(info["Config"]["User"], format!("{uid}:{gid}"));
    assert_ne!(uid, current_user().0);
    assert_ne!(uid, 0);
    assert_eq!(host["NetworkMode"], "none");
    assert_eq!(host["ReadonlyRootfs"], true);
    assert_eq!(host["CapDrop"], json!(["ALL"]));
    assert_eq!(
        host["SecurityOpt"],
        json!([
            "no-new-privileges",
            format!("seccomp={}", airlock_driver_docker::SECCOMP_PROFILE)
        ])
    );
    assert_eq!(host["Memory"], 1024 * 1024 * 1024);
    assert_eq!(host["MemorySwap"], 1024 * 1024 * 1024);
    assert_eq!(host["NanoCpus"], 1_500_000_000_i64);
    assert_eq!(host["PidsLimit"], 512);
    assert!(
        host["Tmpfs"]["/tmp"]
            .as_str()
            .unwrap()
            .contains("size=512m")
    );
    // Private IPC, and the kernel's files Docker hides or freezes stay hidden and frozen.
    assert_eq!(host["IpcMode"], "private");
    for masked in [
        "/proc/kcore",
        "/proc/keys",
        "/proc/timer_list",
        "/sys/firmware",
    ] {
        assert!(
            host["MaskedPaths"]
                .as_array()
                .unwrap()
                .contains(&json!(masked)),
            "{masked} is not masked"
        );
    }
    for frozen in ["/proc/sys", "/proc/sysrq-trigger", "/proc/bus"] {
        assert!(
            host["ReadonlyPaths"]
                .as_array()
                .unwrap()
                .contains(&json!(frozen)),
            "{frozen} is not read-only"
        );
    }
    let bind = host["Binds"][0].as_str().unwrap();
    assert!(bind.ends_with(":/egress:ro"), "{bind}");
    // The way out cannot be replaced from inside: the mount is read-only for the container.
    let replaced = Command::new("docker")
        .args([
            "exec",
            name,
            "sh",
            "-c",
            "rm -f /egress/proxy.sock && mv /egress/handoff.sock /egress/x",
        ])
        .output()
        .unwrap();
    assert!(
        !replaced.status.success()
            && String::from_utf8_lossy(&replaced.stderr).contains("Read-only file system"),
        "the container could change /egress: {}",
        String::from_utf8_lossy(&replaced.stderr)
    );
    let socket_dir = bind.trim_end_matches(":/egress:ro").to_owned();
    assert!(
        std::path::Path::new(&socket_dir)
            .join("proxy.sock")
            .exists()
    );
    let labels = &info["Config"]["Labels"];
    assert!(
        labels["airlock.owner"]
            .as_str()
            .unwrap()
            .contains(&format!("pid={}", std::process::id()))
    );
    assert_eq!(labels["airlock.version"], env!("CARGO_PKG_VERSION"));

    socket_dir
}

/// TCP to host loopback, private, metadata and public addresses, and DNS, all fail from inside.
pub(crate) fn assert_no_direct_way_out(name: &str) {
    // Direct ways out fail: TCP to host loopback, private, metadata and public addresses, and DNS.
    for target in [
        "127.0.0.1:3129",
        "10.0.0.1:80",
        "169.254.169.254:80",
        "1.1.1.1:443",
    ] {
        let (host, port) = target.split_once(':').unwrap();
        // bash's /dev/tcp makes a plain TCP connection; the image carries no network tools.
        let out = Command::new("docker")
            .args([
                "exec",
                name,
                "timeout",
                "3",
                "bash",
                "-c",
                &format!("exec 3<>/dev/tcp/{host}/{port}"),
            ])
            .output()
            .unwrap();
        // bash reports a failed connect with status 1 and the errno; 126/127 would mean the
        // probe itself is missing, and 124 a connect that hung instead of failing at once.
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{target}: the probe did not run as a connect attempt: {stderr}"
        );
        assert!(
            [
                "Connection refused",
                "Network is unreachable",
                "No route to host"
            ]
            .iter()
            .any(|refusal| stderr.contains(refusal)),
            "{target}: not refused by the network stack: {stderr}"
        );
    }
    let dns = Command::new("docker")
        .args(["exec", name, "getent", "hosts", "example.com"])
        .output()
        .unwrap();
    // getent exits 2 when the name is not found; 126/127 would mean it is missing.
    assert_eq!(
        dns.status.code(),
        Some(2),
        "DNS probe: {}",
        String::from_utf8_lossy(&dns.stderr)
    );
}

/// Removes a container started by hand, even when the test panics.
pub(crate) struct RemoveOnDrop(pub String);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rm", "-f", &self.0]).output();
    }
}

pub(crate) fn exec_in(name: &str, args: &[&str]) -> String {
    // Bounded on the host: an exec into a container that died can wait forever otherwise.
    let out = Command::new("timeout")
        .args(["60", "docker", "exec"])
        .arg(name)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Task containers owned by this test process.
pub(crate) fn my_containers() -> Vec<String> {
    containers_of(std::process::id())
}

/// The task `waiting_runner` is given.
pub(crate) fn wait_task() -> airlock_worker::TaskRequest {
    airlock_worker::TaskRequest {
        task: "wait".into(),
        url: None,
        scope: airlock_worker::Scope::default(),
        secrets: airlock_worker::Secrets::default(),
        state: None,
        return_state: false,
        uploads: airlock_worker::Uploads::default(),
        max_download_bytes: None,
        route: None,
        output_schema: None,
        browser: airlock_worker::BrowserSettings::default(),
    }
}

pub(crate) fn waiting_runner(
    driver: DockerDriver,
    limits: TaskLimits,
) -> airlock_worker::TaskRunner {
    let script = airlock_worker::Script {
        turns: vec![airlock_worker::ScriptedTurn {
            tool_calls: vec![airlock_worker::ScriptedCall {
                name: "agent_browser".into(),
                input: json!({"args": ["wait", "60000"]}),
            }],
            ..Default::default()
        }],
    };
    airlock_worker::TaskRunner::new(
        Arc::new(driver),
        Arc::new(airlock_worker::ScriptedModel::new(script)),
        limits,
    )
    .unwrap()
}
