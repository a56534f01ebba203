//! `cargo xtask docker`: install and start what Airlock's sealed browsers run on, from the
//! distribution's packages: Docker's engine (`docker.io`), gVisor (`runsc`, from
//! bookworm-backports on Debian bookworm, registered with dockerd as a runtime), and what builds
//! the image's base from Debian packages when no registry answers (`mmdebstrap`, with `uidmap` so
//! a user can build it without root). It says exactly what it will install before it does, and
//! does nothing else. As root (the package manager needs it); Debian and Ubuntu.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::util::{is_root, run_loud, succeeds};

/// Docker's engine, gVisor's runtime, and the base image's builder.
const PACKAGES: &[&str] = &["docker.io", "runsc", "mmdebstrap", "uidmap"];
/// Where dockerd logs when this starts it.
const DOCKERD_LOG: &str = "/tmp/airlock-dockerd.log";

pub(crate) fn run() -> anyhow::Result<()> {
    if !is_root() {
        bail!("installing packages and starting dockerd needs root: run `sudo cargo xtask docker`");
    }
    install(
        PACKAGES,
        "Docker's engine, gVisor and the base image's builder",
    )?;
    newer_runsc()?;
    register_runsc()?;
    start_dockerd()
}

/// Install the packages of `list` that are missing, saying which first.
pub(crate) fn install(list: &[&str], what: &str) -> anyhow::Result<()> {
    let missing: Vec<&str> = list
        .iter()
        .copied()
        .filter(|package| !succeeds(Command::new("dpkg").args(["-s", package])))
        .collect();
    if missing.is_empty() {
        eprintln!("== {what}: already installed ({})", list.join(", "));
        return Ok(());
    }
    eprintln!(
        "== {what}: will install with apt-get: {} (and what they depend on)",
        missing.join(" ")
    );
    run_loud(Command::new("apt-get").args(["update", "-qq"]))?;
    run_loud(
        Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(&missing),
    )
}

/// The suite gVisor comes from on Debian bookworm: bookworm's own runsc (2022-12-19) has only the
/// ptrace platform on a machine without KVM; the backport (2024-07-29) defaults to systrap,
/// which traps system calls without a tracer process in between.
const RUNSC_SUITE: &str = "bookworm-backports";
/// The apt source added for it when the host has none (Debian's own archive and key).
const BACKPORTS_SOURCE: &str = "/etc/apt/sources.list.d/airlock-bookworm-backports.sources";

/// On Debian bookworm, runsc from [`RUNSC_SUITE`] (only runsc is taken from it); elsewhere the
/// distribution's runsc stays, and the driver checks whatever is registered as before.
fn newer_runsc() -> anyhow::Result<()> {
    let release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    if !release
        .lines()
        .any(|line| line == "VERSION_CODENAME=bookworm")
    {
        eprintln!(
            "== gVisor: keeping the distribution's runsc ({RUNSC_SUITE} is used on Debian bookworm only)"
        );
        return Ok(());
    }
    let installed = String::from_utf8_lossy(
        &Command::new("dpkg-query")
            .args(["-W", "-f=${Version}", "runsc"])
            .output()?
            .stdout,
    )
    .into_owned();
    if installed.contains("~bpo12") {
        eprintln!("== gVisor: runsc {installed}, from {RUNSC_SUITE}");
        return Ok(());
    }
    if !apt_has_suite(RUNSC_SUITE) {
        eprintln!(
            "== gVisor: adding {RUNSC_SUITE} to apt's sources ({BACKPORTS_SOURCE}), for runsc alone"
        );
        std::fs::write(
            BACKPORTS_SOURCE,
            format!(
                "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: {RUNSC_SUITE}\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
            ),
        )?;
    }
    eprintln!("== gVisor: will install runsc from {RUNSC_SUITE} (installed now: {installed})");
    run_loud(Command::new("apt-get").args(["update", "-qq"]))?;
    run_loud(
        Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args([
                "install",
                "-y",
                "-qq",
                "--no-install-recommends",
                "-t",
                RUNSC_SUITE,
                "runsc",
            ]),
    )
}

/// Whether one of apt's enabled source files names `suite`.
fn apt_has_suite(suite: &str) -> bool {
    let mut files = vec![std::path::PathBuf::from("/etc/apt/sources.list")];
    if let Ok(entries) = std::fs::read_dir("/etc/apt/sources.list.d") {
        files.extend(
            entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| {
                    path.extension()
                        .is_some_and(|ext| ext == "list" || ext == "sources")
                }),
        );
    }
    files.iter().any(|file| {
        std::fs::read_to_string(file).is_ok_and(|text| {
            text.lines()
                .any(|line| !line.trim_start().starts_with('#') && line.contains(suite))
        })
    })
}

/// dockerd's configuration, where runtimes are registered (the bench adds variants of its own).
pub(crate) const DAEMON_JSON: &str = "/etc/docker/daemon.json";

/// gVisor as a Docker runtime, merged into any existing `/etc/docker/daemon.json`:
/// `--network=none` (Airlock's containers never have a network) and `--host-uds=open` (the
/// copying relay reaches the proxy's socket).
fn register_runsc() -> anyhow::Result<()> {
    let path = std::path::Path::new(DAEMON_JSON);
    let mut config: serde_json::Value = match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON: fix it by hand", path.display()))?,
        Err(_) => serde_json::json!({}),
    };
    if !with_runsc(&mut config) {
        return Ok(());
    }
    std::fs::create_dir_all("/etc/docker")?;
    std::fs::write(path, serde_json::to_string_pretty(&config)?)?;
    eprintln!("== registered runsc with dockerd in {}", path.display());
    // A running daemon reloads its runtimes on SIGHUP.
    if succeeds(Command::new("docker").arg("version")) {
        let _ = Command::new("pkill")
            .args(["-HUP", "-xo", "dockerd"])
            .status();
        wait_until("dockerd to offer runsc", Duration::from_secs(10), || {
            Command::new("docker")
                .args(["info", "--format", "{{json .Runtimes}}"])
                .output()
                .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("runsc"))
        })?;
    }
    Ok(())
}

/// The platform runsc is registered with. systrap (the backport's default) costs a tenth of
/// ptrace per system call, but its stub threads spin while they wait: on two cores a page load
/// took more time and CPU under it than under ptrace (docs/benchmarks.md, gVisor's table, shows
/// both). Every runsc release has ptrace.
pub(crate) const RUNSC_PLATFORM: &str = "ptrace";

/// Add runsc to a daemon config, keeping everything else; whether anything changed.
fn with_runsc(config: &mut serde_json::Value) -> bool {
    let wanted = serde_json::json!({
        "path": "/usr/bin/runsc",
        "runtimeArgs": ["--network=none", "--host-uds=open", format!("--platform={RUNSC_PLATFORM}")],
    });
    if !config.is_object() {
        *config = serde_json::json!({});
    }
    if config["runtimes"]["runsc"] == wanted {
        return false;
    }
    if !config["runtimes"].is_object() {
        config["runtimes"] = serde_json::json!({});
    }
    config["runtimes"]["runsc"] = wanted;
    true
}

/// Start dockerd if nothing answers on its socket (a machine without systemd, like a CI runner).
fn start_dockerd() -> anyhow::Result<()> {
    if succeeds(Command::new("docker").arg("version")) {
        eprintln!("== dockerd answers");
        return Ok(());
    }
    eprintln!("== starting dockerd (its log: {DOCKERD_LOG})");
    let log = std::fs::File::create(DOCKERD_LOG)?;
    // `setsid --fork`: the daemon is nobody's child here. Left a child of `xtask ci`, it became
    // that process's zombie when the soak restarted Docker, and the soak then found two dockerds.
    let started = Command::new("setsid")
        .args(["--fork", "dockerd"])
        .stdout(log.try_clone()?)
        .stderr(log)
        .stdin(Stdio::null())
        .status()
        .context("could not start dockerd")?;
    if !started.success() {
        bail!("starting dockerd failed ({started}; see {DOCKERD_LOG})");
    }
    wait_until("dockerd to answer", Duration::from_mins(1), || {
        succeeds(Command::new("docker").arg("version"))
    })
}

/// Poll `done` until it holds (a daemon starts on its own schedule; there is nothing to wait on).
fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> anyhow::Result<()> {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > limit {
            bail!("timed out after {} s waiting for {what}", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn runsc_is_added_to_a_daemon_config_keeping_the_rest_and_only_once() {
        let mut config =
            json!({"log-level": "warn", "runtimes": {"crun": {"path": "/usr/bin/crun"}}});
        assert!(with_runsc(&mut config));
        assert_eq!(config["log-level"], "warn");
        assert_eq!(config["runtimes"]["crun"]["path"], "/usr/bin/crun");
        assert_eq!(
            config["runtimes"]["runsc"]["runtimeArgs"],
            json!(["--network=none", "--host-uds=open", "--platform=ptrace"])
        );
        assert!(!with_runsc(&mut config), "already there: nothing to write");
        let mut empty = json!({});
        assert!(with_runsc(&mut empty));
        assert_eq!(empty["runtimes"]["runsc"]["path"], "/usr/bin/runsc");
    }
}
