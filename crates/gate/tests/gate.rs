//! `airlock-gate` against a real dockerd, as the non-root test user: the driver's sealed
//! sessions (cold, warm from the pool with its pause, unpause and CPU weight, CDP, gVisor) and
//! its orphan cleanup work through the gate unchanged, and what would own the node is refused:
//! a privileged create with `/` bound (by the real `docker` CLI pointed at the gate), a create
//! with a host bind, an exec as root or privileged in a task container, an exec into (or a
//! start, kill or pause of) a container the gate did not make, whose inspection shows only
//! whether it runs. dockerd's own event stream then shows that nothing else was made.
//!
//! Needs Docker and the image; without them the tests say so and pass, unless
//! `AIRLOCK_REQUIRE_DOCKER=1` (set by `cargo xtask integration`, which CI runs).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use airlock_driver_docker::{DockerDriver, DriverConfig, PoolConfig};
use airlock_policy::{EgressPolicy, Profile, Scope};
use airlock_testkit::docker::{docker_ready, image, unix_now};
use airlock_worker::{BrowserDriver, BrowserSession, CancellationToken, TaskContext, TaskLimits};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The gate, started as this user on a socket of its own; killed and its socket gone on drop.
struct Gate {
    child: Child,
    socket: PathBuf,
    id: String,
    _dir: tempfile::TempDir,
}

impl Gate {
    fn start(id: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("gate.sock");
        let mut child = Command::new(env!("CARGO_BIN_EXE_airlock-gate"))
            .arg("--listen")
            .arg(&socket)
            .args([
                "--image",
                &image(),
                "--runtime",
                "runc",
                "--runtime",
                "runsc",
            ])
            .arg("--egress-parent")
            .arg(std::env::temp_dir())
            .args(["--id", id])
            .env("AIRLOCK_GATE_LOG", "info")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // It says so once it listens; its later log goes on being read (and echoed) in the background.
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        for line in lines.by_ref() {
            let line = line.unwrap();
            eprintln!("gate: {line}");
            if line.contains("forwarding only") {
                break;
            }
        }
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                eprintln!("gate: {line}");
            }
        });
        assert!(socket.exists(), "the gate did not start");
        Self {
            child,
            socket,
            id: id.to_owned(),
            _dir: dir,
        }
    }
}

impl Drop for Gate {
    /// Also removes what it made, should a failed assertion have skipped the disposals.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let (_, made) = docker(
            None,
            &[
                "ps",
                "-aq",
                "--filter",
                &format!("label=airlock.gate={}", self.id),
            ],
        );
        for container in made.split_whitespace() {
            let _ = docker(None, &["rm", "-f", container]);
        }
    }
}

/// One HTTP/1.1 request on the gate's socket: the status and the body.
async fn ask(socket: &Path, method: &str, target: &str, body: &Value) -> (u16, String) {
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let request = format!(
        "{method} {target} HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    ask_raw(socket, request.as_bytes()).await
}

/// Bytes as they are on the gate's socket: the status and the body of the answer.
async fn ask_raw(socket: &Path, request: &[u8]) -> (u16, String) {
    let mut stream = tokio::net::UnixStream::connect(socket).await.unwrap();
    // The gate may answer and close before reading all of an oversized body.
    let _ = stream.write_all(request).await;
    let mut bytes = Vec::new();
    let _ = stream.read_to_end(&mut bytes).await;
    let answer = String::from_utf8_lossy(&bytes);
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

fn config(socket: &Path, site: u16, pool: usize) -> DriverConfig {
    DriverConfig {
        image: image(),
        egress: EgressPolicy::new(
            Profile::Public,
            None,
            [format!("127.0.0.1:{site}").parse().unwrap()],
        )
        .unwrap(),
        lifetime_grace: Duration::ZERO,
        docker_socket: Some(socket.to_owned()),
        pool: PoolConfig {
            size: pool,
            ..PoolConfig::default()
        },
        ..DriverConfig::default()
    }
}

async fn open_page(session: &BrowserSession, site: u16) -> String {
    let opened = session.tools[0]
        .execute(json!({"args": ["open", format!("http://127.0.0.1:{site}/")]}))
        .await
        .unwrap();
    assert!(!opened.is_error(), "{}", opened.text);
    opened.text
}

fn context() -> TaskContext {
    TaskContext::new(CancellationToken::new(), TaskLimits::default())
}

/// `docker` (the real CLI) with a command; its status and what it printed.
fn docker(host: Option<&Path>, args: &[&str]) -> (bool, String) {
    let mut command = Command::new("docker");
    if let Some(socket) = host {
        command.env("DOCKER_HOST", format!("unix://{}", socket.display()));
    }
    let out = command.args(args).output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The name of a running container gate `id` made.
fn made_through(id: &str) -> String {
    let (_, listed) = docker(
        None,
        &[
            "ps",
            "--filter",
            &format!("label=airlock.gate={id}"),
            "--format",
            "{{.Names}}",
        ],
    );
    listed
        .lines()
        .next()
        .expect("a container made through the gate")
        .to_owned()
}

/// A container made straight on dockerd (not through the gate), removed on drop.
struct Foreign(String);

impl Foreign {
    fn run(name: &str, labels: &[&str]) -> Self {
        let mut args = vec!["run", "-d", "--rm", "--network", "none", "--name", name];
        for label in labels {
            args.extend(["--label", label]);
        }
        args.extend(["--entrypoint", "sleep"]);
        let image = image();
        args.extend([image.as_str(), "300"]);
        let (ok, said) = docker(None, &args);
        assert!(ok, "{said}");
        Self(name.to_owned())
    }
}

impl Drop for Foreign {
    fn drop(&mut self) {
        let _ = docker(None, &["rm", "-f", &self.0]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_works_through_the_gate_and_what_would_own_the_node_is_refused() {
    if !docker_ready() {
        return;
    }
    let id = format!("gate-test-{}", std::process::id());
    let gate = Gate::start(&id);
    let site = airlock_testkit::site::simple_site("Through the gate", "Sealed and gated");
    let since = unix_now();

    // The driver, unchanged, on the gate's socket: check, a warm pool, a task, a cold task.
    let driver = DockerDriver::connect(config(&gate.socket, site, 1))
        .await
        .unwrap();
    driver.check().await.unwrap();
    driver.start_pool().unwrap();
    let warm = driver.start(context()).await.unwrap();
    assert!(open_page(&warm, site).await.contains("Through the gate"));
    let cold = DockerDriver::connect(config(&gate.socket, site, 0))
        .await
        .unwrap();
    let cold_session = cold.start(context()).await.unwrap();
    assert!(
        open_page(&cold_session, site)
            .await
            .contains("Through the gate")
    );
    let cdp = driver
        .start_cdp(Duration::from_secs(60), Scope::default(), None)
        .await
        .unwrap();

    // A task container, made through the gate.
    let task = made_through(&id);

    // What would own the node, each refused with its reason.
    let (ok, said) = docker(
        Some(&gate.socket),
        &[
            "run",
            "--rm",
            "--privileged",
            "-v",
            "/:/host",
            &image(),
            "true",
        ],
    );
    assert!(!ok && said.contains("airlock-gate refused"), "{said}");
    let (ok, said) = docker(
        Some(&gate.socket),
        &[
            "run",
            "--rm",
            "--network",
            "none",
            "-v",
            "/etc:/egress:ro",
            &image(),
            "true",
        ],
    );
    assert!(!ok && said.contains("airlock-gate refused"), "{said}");
    let attached = |user: Option<&str>, privileged: bool| {
        let mut body = json!({"AttachStdin": false, "AttachStdout": true, "AttachStderr": true,
                              "Cmd": ["/usr/local/bin/airlock-runner"]});
        if let Some(user) = user {
            body["User"] = json!(user);
        }
        if privileged {
            body["Privileged"] = json!(true);
        }
        body
    };
    for body in [
        attached(Some("0"), false),
        attached(Some("root"), false),
        attached(None, true),
    ] {
        let (status, said) = ask(
            &gate.socket,
            "POST",
            &format!("/v1.41/containers/{task}/exec"),
            &body,
        )
        .await;
        assert_eq!(status, 403, "{body}: {said}");
    }
    // An exec of the driver's own kind, into containers the gate did not make.
    let plain = Foreign::run(&format!("airlock-gate-foreign-{}", std::process::id()), &[]);
    let labelled = Foreign::run(
        &format!("airlock-gate-forged-{}", std::process::id()),
        &["airlock.task=forged", &format!("airlock.gate={id}-other")],
    );
    for foreign in [&plain.0, &labelled.0] {
        let (status, said) = ask(
            &gate.socket,
            "POST",
            &format!("/v1.41/containers/{foreign}/exec"),
            &attached(None, false),
        )
        .await;
        assert_eq!(status, 403, "{foreign}: {said}");
        for (method, path) in [("POST", "kill"), ("POST", "pause"), ("POST", "start")] {
            let (status, said) = ask(
                &gate.socket,
                method,
                &format!("/containers/{foreign}/{path}"),
                &Value::Null,
            )
            .await;
            assert_eq!(status, 403, "{method} {path} on {foreign}: {said}");
        }
        // Whether it runs, and nothing more (a replica asks it of another's container).
        let (status, said) = ask(
            &gate.socket,
            "GET",
            &format!("/containers/{foreign}/json"),
            &Value::Null,
        )
        .await;
        assert_eq!(status, 200, "{said}");
        let inspect: Value = serde_json::from_str(&said).unwrap();
        assert_eq!(
            inspect["State"],
            json!({"Running": true, "Status": "running"})
        );
        let mut keys: Vec<&String> = inspect.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["Id", "State"], "{said}");
    }
    // A list without Airlock's label, and events unfiltered, are refused too.
    let (status, _) = ask(
        &gate.socket,
        "GET",
        "/containers/json?all=true",
        &Value::Null,
    )
    .await;
    assert_eq!(status, 403);
    // Path tricks, a chunked body (read and judged, not passed on) and an oversized one.
    for target in [
        "/v1.41/containers/x/../../info",
        "/v1.41/containers/%2e%2e/json",
        "//v1.41/containers/json",
    ] {
        let (status, said) = ask(&gate.socket, "GET", target, &Value::Null).await;
        assert_eq!(status, 403, "{target}: {said}");
    }
    let privileged = br#"{"Image":"x","HostConfig":{"Privileged":true}}"#;
    let mut chunked = b"POST /v1.41/containers/create?name=airlock-task-c HTTP/1.1\r\nHost: docker\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_vec();
    chunked.extend(format!("{:x}\r\n", privileged.len()).as_bytes());
    chunked.extend(privileged);
    chunked.extend(b"\r\n0\r\n\r\n");
    let (status, said) = ask_raw(&gate.socket, &chunked).await;
    assert_eq!(status, 403, "{said}");
    let huge = json!({"Image": "x".repeat(300 * 1024)});
    let (status, said) = ask(
        &gate.socket,
        "POST",
        "/containers/create?name=airlock-task-h",
        &huge,
    )
    .await;
    assert_eq!(status, 403, "{said}");
    assert!(said.contains("bytes"), "{said}");

    // The host's details stay with dockerd: /info answers with the runtimes alone.
    let (status, info) = ask(&gate.socket, "GET", "/v1.41/info", &Value::Null).await;
    assert_eq!(status, 200, "{info}");
    let info: Value = serde_json::from_str(&info).unwrap();
    assert!(info["Runtimes"]["runc"].is_object(), "{info}");
    assert_eq!(info.as_object().unwrap().len(), 1, "{info}");

    // Everything ends cleanly through the gate, orphan cleanup included.
    cdp.dispose().await;
    warm.dispose.dispose().await;
    cold_session.dispose.dispose().await;
    driver.shutdown().await;
    cold.shutdown().await;
    driver.cleanup_orphans().await.unwrap();
    drop(plain);
    drop(labelled);

    // dockerd's own record: every container created or started since the start is either the
    // gate's (a sealed browser) or one of the two this test made directly.
    let (ok, events) = docker(
        None,
        &[
            "events",
            "--since",
            &since,
            "--until",
            &unix_now(),
            "--filter",
            "type=container",
            "--format",
            "{{.Action}} {{.Actor.Attributes.name}} {{index .Actor.Attributes \"airlock.gate\"}}",
        ],
    );
    assert!(ok, "{events}");
    let made: Vec<&str> = events
        .lines()
        .filter(|line| line.starts_with("create ") || line.starts_with("start "))
        .collect();
    assert!(
        made.iter().any(|line| line.ends_with(&format!(" {id}"))),
        "{events}"
    );
    for line in made {
        let through_gate =
            line.starts_with("create airlock-task-") || line.starts_with("start airlock-task-");
        let direct =
            line.contains("airlock-gate-foreign-") || line.contains("airlock-gate-forged-");
        assert!(
            (through_gate && line.ends_with(&format!(" {id}"))) || direct,
            "made behind the gate's back: {line}\n{events}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gvisor_session_works_through_the_gate() {
    if !docker_ready() {
        return;
    }
    let gate = Gate::start(&format!("gate-runsc-{}", std::process::id()));
    let site = airlock_testkit::site::simple_site("Under gVisor", "Through the gate");
    let driver = DockerDriver::connect(DriverConfig {
        runtime: "runsc".to_owned(),
        ..config(&gate.socket, site, 0)
    })
    .await
    .unwrap();
    driver.check().await.unwrap();
    let session = driver.start(context()).await.unwrap();
    assert!(open_page(&session, site).await.contains("Under gVisor"));
    session.dispose.dispose().await;
    driver.shutdown().await;
}

/// The gate remembers its containers by the id dockerd gave them, so a name it knows that later
/// means another container (removed behind its back, then taken by one made directly) reaches
/// nothing: the call goes to the id, which is gone, and the newcomer is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_name_taken_by_another_container_reaches_nothing() {
    if !docker_ready() {
        return;
    }
    let id = format!("gate-moved-{}", std::process::id());
    let gate = Gate::start(&id);
    let site = airlock_testkit::site::simple_site("Moved", "A name moved");
    let driver = DockerDriver::connect(config(&gate.socket, site, 0))
        .await
        .unwrap();
    let session = driver.start(context()).await.unwrap();
    assert!(open_page(&session, site).await.contains("Moved"));
    let name = made_through(&id);
    let (ok, said) = docker(None, &["rm", "-f", &name]);
    assert!(ok, "{said}");
    let newcomer = Foreign::run(&name, &["airlock.task=newcomer"]);
    for (method, path) in [("POST", "kill"), ("POST", "pause"), ("GET", "json")] {
        let (status, said) = ask(
            &gate.socket,
            method,
            &format!("/v1.41/containers/{name}/{path}"),
            &Value::Null,
        )
        .await;
        // An inspect of a container not the gate's shows whether it runs, nothing more.
        let refused = status == 404 || status == 403 || (method == "GET" && status == 200);
        assert!(refused, "{method} {path}: {status} {said}");
        assert!(!said.contains("\"Config\""), "{said}");
    }
    let (ok, state) = docker(
        None,
        &["inspect", "--format", "{{.State.Status}}", &newcomer.0],
    );
    assert!(ok && state.trim() == "running", "{state}");
    drop(newcomer);
    session.dispose.dispose().await;
    driver.shutdown().await;
}

/// A page that is one big button; pressing it retitles the page. Its label counts on, so the
/// page keeps changing: the screencast sends a frame when the page changes, and a still page
/// opened before the watch began may send none.
fn button_site() -> u16 {
    let page = "<!doctype html><title>Waiting</title><button id=b style=position:fixed;inset:0;width:100%;height:100% onclick=\"document.title='Pressed'\">press</button><script>let n=0;setInterval(()=>{document.getElementById('b').textContent='press '+(n++)},200)</script>";
    airlock_testkit::site::site(move |_| {
        std::collections::HashMap::from([("/", ("200 OK", String::new(), page.to_owned()))])
    })
    .0
}

/// The live view (the relay's exec to agent-browser's stream server) works through the gate: a
/// watch receives frames of the page, and a person's click sent through it reaches the page.
/// The gate refused that exec before it knew the live view's command.
async fn live_view_through_the_gate(runtime: &str) {
    let gate = Gate::start(&format!("gate-live-{runtime}-{}", std::process::id()));
    let site = button_site();
    let driver = DockerDriver::connect(DriverConfig {
        runtime: runtime.to_owned(),
        ..config(&gate.socket, site, 0)
    })
    .await
    .unwrap();
    let slot = airlock_worker::LiveSlot::default();
    let session = driver
        .start(context().with_live(slot.clone()))
        .await
        .unwrap();
    open_page(&session, site).await;
    let source = slot.source().expect("the driver offers a live view");
    let mut feed = tokio::time::timeout(Duration::from_secs(120), source.watch())
        .await
        .expect("the watch starts")
        .unwrap_or_else(|error| panic!("{runtime}: {error}"));
    tokio::time::timeout(
        Duration::from_secs(120),
        feed.frames.wait_for(Option::is_some),
    )
    .await
    .expect("a frame arrives")
    .unwrap();
    let input = feed.input.clone().expect("the live view takes input");
    for event in ["mousePressed", "mouseReleased"] {
        let click = serde_json::from_value(json!({"type": "input_mouse", "eventType": event,
            "x": 200.0, "y": 200.0, "button": "left", "clickCount": 1}))
        .unwrap();
        input.send(click).await.unwrap();
    }
    // The click travels through the stream on its own; the page's own state says it arrived.
    let waited = session.tools[0]
        .execute(json!({"args": ["wait", "--fn", "document.title === 'Pressed'"]}))
        .await
        .unwrap();
    assert!(
        !waited.is_error(),
        "{runtime}: the click never reached the page: {}",
        waited.text
    );
    drop(feed);
    session.dispose.dispose().await;
    driver.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_view_and_a_persons_input_work_through_the_gate() {
    if !docker_ready() {
        return;
    }
    live_view_through_the_gate("runc").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_view_works_through_the_gate_under_gvisor() {
    if !docker_ready() {
        return;
    }
    live_view_through_the_gate("runsc").await;
}
