//! The gate for tests that need Docker, and the task containers they leave or must not leave.

use std::process::Command;

/// The image under test: `AIRLOCK_IMAGE` (set by `cargo xtask integration`), else this version's.
pub fn image() -> String {
    std::env::var("AIRLOCK_IMAGE")
        .unwrap_or_else(|_| format!("airlock-browser:{}", env!("CARGO_PKG_VERSION")))
}

/// Whether Docker, the image and a non-root user are here. Without them the test should return
/// early; with `AIRLOCK_REQUIRE_DOCKER=1` (set by `cargo xtask integration`, which CI runs) a
/// missing prerequisite panics instead, so CI never passes by skipping. With
/// `AIRLOCK_DOCKER_TESTS_LOG=FILE` the calling test is recorded there as one that needs Docker.
pub fn docker_ready() -> bool {
    let required = std::env::var("AIRLOCK_REQUIRE_DOCKER").is_ok_and(|v| v == "1");
    let missing = if is_root() {
        Some(
            "these tests run as a non-root user (Airlock refuses root); `cargo xtask integration` runs them as one"
                .to_owned(),
        )
    } else if !Command::new("docker")
        .args(["image", "inspect", &image()])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        Some(format!(
            "Docker with the image {} is needed: run `cargo xtask image`",
            image()
        ))
    } else {
        None
    };
    if let Ok(log) = std::env::var("AIRLOCK_DOCKER_TESTS_LOG") {
        record_docker_test(&log);
    }
    match missing {
        None => true,
        Some(why) if required => panic!("{why}"),
        Some(why) => {
            eprintln!("skipped: {why}");
            false
        }
    }
}

/// Append the calling test's name (libtest names each test's thread after it) to `log`, so
/// `cargo xtask integration` knows which tests needed Docker without a hand-kept list.
fn record_docker_test(log: &str) {
    use std::io::Write as _;
    let name = std::thread::current()
        .name()
        .unwrap_or("<unnamed test thread>")
        .to_owned();
    let binary = std::env::current_exe()
        .ok()
        .and_then(|path| path.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap_or_else(|error| panic!("cannot record Docker tests in {log}: {error}"));
    writeln!(file, "{binary}\t{name}").unwrap();
}

/// Whether this process's real uid is 0.
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}

/// Every container labelled `airlock.task`, by name, with its `airlock.owner` label.
fn task_containers_with_owners() -> Vec<(String, String)> {
    listed_task_containers().expect("docker ps failed")
}

/// Every container labelled `airlock.task` with its owner, or `None` if the daemon (or a gate
/// in front of it, which lets no one list containers) refused the listing.
fn listed_task_containers() -> Option<Vec<(String, String)>> {
    let out = Command::new("docker")
        .args([
            "ps",
            "-a",
            "--filter",
            "label=airlock.task",
            "--format",
            "{{.Names}}\t{{.Label \"airlock.owner\"}}",
        ])
        .output()
        .ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| line.split_once('\t'))
            .map(|(name, owner)| (name.to_owned(), owner.to_owned()))
            .collect()
    })
}

/// The names of every task container (`airlock.task` label) on this daemon.
pub fn task_containers() -> Vec<String> {
    task_containers_with_owners()
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

/// The host's process id of every running task container's first process (what `/proc` and
/// the cgroup files know it by), in one `docker inspect`; empty when none runs or Docker will
/// not say (the bench reads CPU through it even with `DOCKER_HOST` on airlock-gate, which
/// refuses a listing: that reading is then left out, not the run).
pub fn task_container_pids() -> Vec<String> {
    let names: Vec<String> = listed_task_containers()
        .unwrap_or_default()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    if names.is_empty() {
        return Vec::new();
    }
    let Ok(out) = Command::new("docker")
        .args(["inspect", "-f", "{{.State.Pid}}"])
        .args(&names)
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        // A container that stopped meanwhile has pid 0.
        .filter(|pid| *pid != "0")
        .map(str::to_owned)
        .collect()
}

/// The names of the task containers whose owner label names process `pid`.
pub fn containers_of(pid: u32) -> Vec<String> {
    let marker = format!("pid={pid};");
    task_containers_with_owners()
        .into_iter()
        .filter(|(_, owner)| owner.contains(&marker))
        .map(|(name, _)| name)
        .collect()
}

/// `docker inspect NAME`, parsed.
pub fn inspect(name: &str) -> serde_json::Value {
    let out = Command::new("docker")
        .args(["inspect", name])
        .output()
        .unwrap();
    assert!(out.status.success(), "docker inspect {name}");
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()[0].clone()
}

/// The proxy's private directory whose `sockets` folder a task container has bind-mounted as its
/// way out (`/egress`).
pub fn egress_dir_of(container: &str) -> std::path::PathBuf {
    let info = inspect(container);
    let bind = info["HostConfig"]["Binds"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .find_map(|bind| bind.strip_suffix(":/egress:ro"))
        .unwrap_or_else(|| panic!("{container} has no /egress bind: {info}"));
    let mounted = std::path::Path::new(bind);
    assert_eq!(
        mounted.file_name().and_then(|name| name.to_str()),
        Some("sockets"),
        "{container} mounts {bind}, not a proxy's sockets folder"
    );
    mounted
        .parent()
        .unwrap_or_else(|| panic!("{bind} has no parent"))
        .to_owned()
}

/// Wait, by Docker's own event stream, until `container` is destroyed (events since `since`
/// count, so a removal that already happened is seen too). False if `timeout` passes first.
pub fn wait_until_removed(
    container: &str,
    since: std::time::SystemTime,
    timeout: std::time::Duration,
) -> bool {
    use std::io::BufRead;
    let since = since
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .saturating_sub(1);
    let mut events = Command::new("docker")
        .args([
            "events",
            "--since",
            &since.to_string(),
            "--filter",
            &format!("container={container}"),
            "--filter",
            "event=destroy",
            "--format",
            "{{.Status}}",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = events.stdout.take().unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let read = std::io::BufReader::new(stdout).read_line(&mut line);
        let _ = sender.send(read.is_ok_and(|n| n > 0));
    });
    let destroyed = receiver.recv_timeout(timeout).unwrap_or(false);
    let _ = events.kill();
    let _ = events.wait();
    destroyed
}

/// Wait, by Docker's own event stream, until process `pid` owns at least `count` task
/// containers. False if `timeout` passes first.
pub fn wait_for_containers_of(pid: u32, count: usize, timeout: std::time::Duration) -> bool {
    use std::io::BufRead;
    // Listen first, then look: a container that starts in between is seen either way.
    let mut events = Command::new("docker")
        .args([
            "events",
            "--filter",
            "event=start",
            "--filter",
            "label=airlock.task",
            "--format",
            "{{.ID}}",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = events.stdout.take().unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    let _ = sender.send(());
    std::thread::spawn(move || {
        for _ in std::io::BufReader::new(stdout).lines() {
            if sender.send(()).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + timeout;
    let mut reached = false;
    while let Ok(()) =
        receiver.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
    {
        if containers_of(pid).len() >= count {
            reached = true;
            break;
        }
    }
    let _ = events.kill();
    let _ = events.wait();
    reached
}

/// The commands Docker started execs for in `name` since `since` (`docker events`, which keeps
/// them after the exec has ended, unlike the container's own list).
pub fn execs_created(name: &str, since: &str) -> Vec<String> {
    let until = unix_now();
    let out = Command::new("docker")
        .args(["events", "--since", since, "--until", &until])
        .args(["--filter", &format!("container={name}")])
        .args(["--filter", "event=exec_create", "--format", "{{.Action}}"])
        .output()
        .expect("docker runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Now, as `docker events --since/--until` reads a time.
pub fn unix_now() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{}.{:09}", now.as_secs(), now.subsec_nanos())
}

/// The sockets a container listens on, as `/proc/net/tcp{,6}` spells their local address
/// (`0100007F:0C38` is 127.0.0.1:3128), read from the container's own view.
pub fn listening(container: &str) -> Vec<String> {
    let output = Command::new("docker")
        .args(["exec", container, "cat", "/proc/net/tcp", "/proc/net/tcp6"])
        .output()
        .expect("docker exec runs");
    assert!(output.status.success(), "cannot read {container}'s sockets");
    let mut listening: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // `sl local_address rem_address st …`; state 0A is LISTEN.
            (fields.get(3) == Some(&"0A")).then(|| fields[1].to_owned())
        })
        .collect();
    listening.sort();
    listening.dedup();
    listening
}

/// The port of a `/proc/net/tcp` local address.
pub fn port_of(local: &str) -> Option<u16> {
    let (_, port) = local.rsplit_once(':')?;
    u16::from_str_radix(port, 16).ok()
}
