//! `cargo xtask ci`: every test, the way CI runs them, from a fresh machine. As root: it installs
//! what the tests need that is missing (Docker and gVisor through `cargo xtask docker`; Chromium,
//! CA certificates, Python's venv, curl, squid and microsocks from the distribution), then runs format,
//! lints, tidy, the unit and integration tests, the cluster proof and the soak. `.ci/run` is this
//! command.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::bail;

use crate::util::{is_root, run_loud, succeeds};

/// What the tests need besides Docker and the base image's builder: Chromium (the proxy's
/// real-browser test), CA certificates, python3-venv (the official MCP SDK
/// and the other Python clients live in a venv), curl (the cluster proof), and squid, microsocks
/// and openssl (parent proxies for the proxy's route tests, and squid's password file).
const TEST_PACKAGES: &[&str] = &[
    "chromium",
    "ca-certificates",
    "python3-venv",
    "curl",
    "squid",
    "microsocks",
    "openssl",
];

pub(crate) fn run() -> anyhow::Result<()> {
    if !is_root() {
        bail!(
            "the tests install packages, start dockerd, make a swarm and restart the daemon: run as root (sudo cargo xtask ci)"
        );
    }
    let started = Instant::now();
    let mut took: Vec<(String, Duration)> = Vec::new();
    let mut timed = |name: &str, step: &mut dyn FnMut() -> anyhow::Result<()>| {
        let start = Instant::now();
        let result = step();
        let spent = start.elapsed();
        eprintln!("== {name}: {} s", spent.as_secs());
        took.push((name.to_owned(), spent));
        result
    };
    timed("setup", &mut || {
        crate::docker::run()?;
        crate::docker::install(TEST_PACKAGES, "what the tests need")
    })?;
    eprintln!("== toolchain");
    run_loud(Command::new(cargo()).arg("--version"))?;
    if !succeeds(Command::new(cargo()).args(["clippy", "--version"])) {
        run_loud(Command::new("rustup").args(["component", "add", "clippy", "rustfmt"]))?;
    }
    // Root's build of what `cargo xtask browse` compiles: the user's proof starts from a copy of
    // it (front_door_fresh.rs says why), and root's proof and the tests reuse it.
    timed("compiling airlock", &mut || {
        run_loud(Command::new(cargo()).args(["build", "-p", "airlock"]))
    })?;
    timed(
        "front door, as a user",
        &mut crate::front_door_fresh::as_a_user_from_nothing,
    )?;
    timed(
        "front door, as root",
        &mut crate::front_door_fresh::as_root_from_no_image,
    )?;
    eprintln!("== the tests");
    for args in [
        &["fmt", "--all", "--", "--check"][..],
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        &["xtask", "tidy"],
        &["test", "--workspace"],
        &["xtask", "integration"],
        &["xtask", "cluster"],
        // Last: the soak restarts the Docker daemon.
        &["xtask", "soak", "--tasks", "10", "--serve-tasks", "20"],
    ] {
        timed(&args.join(" "), &mut || {
            run_loud(Command::new(cargo()).args(args))
        })?;
    }
    // Where the time went, so a slower CI shows which step grew.
    for (name, spent) in &took {
        eprintln!("{:>6} s  {name}", spent.as_secs());
    }
    eprintln!("{:>6} s  in all", started.elapsed().as_secs());
    eprintln!("== every test passed");
    Ok(())
}

/// The cargo that runs this xtask.
fn cargo() -> &'static str {
    env!("CARGO")
}
