//! `cargo xtask integration`: the tests that need a real dockerd and the image.
//!
//! Airlock refuses to run as root, so when started as root this task builds the test binaries
//! as root, then runs them as a non-root user in the docker group (created if missing).

use std::process::Command;

use anyhow::{Context, bail};
use clap::Args;

use crate::util::{is_root, run_loud, succeeds, workspace_root};

/// The user the docker tests run as when xtask is started as root.
const TEST_USER: &str = "airlock-test";

/// Arguments of `cargo xtask integration`.
#[derive(Debug, Args)]
pub struct IntegrationArgs {
    /// Build the image first if it is missing (on by default; `--no-image` to skip).
    #[arg(long = "no-image", action = clap::ArgAction::SetFalse)]
    image: bool,
}

/// Test binaries (package, test target) that need Docker.
const DOCKER_TESTS: &[(&str, &str)] = &[
    ("airlock-driver-docker", "docker"),
    ("airlock", "mcp"),
    ("airlock", "task"),
];

pub fn run(args: &IntegrationArgs) -> anyhow::Result<()> {
    if !succeeds(Command::new("docker").arg("version")) {
        bail!(
            "this needs a running Docker daemon: install Debian's docker.io and start dockerd, then run `cargo xtask integration` again"
        );
    }
    if args.image {
        crate::image::run(&crate::image::ImageArgs::for_integration())?;
    }
    let root = workspace_root();
    let binaries = build_test_binaries()?;
    let as_root = is_root();
    if as_root {
        ensure_test_user()?;
    }
    for binary in binaries {
        let mut test = if as_root {
            let mut command = Command::new("runuser");
            command.args(["-u", TEST_USER, "--"]).arg(&binary);
            command
        } else {
            Command::new(&binary)
        };
        test.current_dir(&root)
            .env("AIRLOCK_REQUIRE_DOCKER", "1")
            .env("AIRLOCK_IMAGE", crate::image::default_tag())
            .args(["--test-threads", "1"]);
        run_loud(&mut test)?;
    }
    Ok(())
}

/// `cargo test --no-run` for each docker test target, returning the executables.
fn build_test_binaries() -> anyhow::Result<Vec<String>> {
    let mut binaries = Vec::new();
    for (package, target) in DOCKER_TESTS {
        let out = crate::util::output(Command::new(env!("CARGO")).args([
            "test",
            "--no-run",
            "--message-format=json",
            "--package",
            package,
            "--test",
            target,
        ]))?;
        let executable = out
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .find_map(|message| {
                let is_target =
                    message["target"]["name"] == *target && message["profile"]["test"] == true;
                is_target
                    .then(|| message["executable"].as_str().map(str::to_owned))
                    .flatten()
            })
            .with_context(|| {
                format!("cargo did not report the executable of {package} --test {target}")
            })?;
        binaries.push(executable);
    }
    Ok(binaries)
}

/// Create (or reuse) a non-root user in the docker group.
fn ensure_test_user() -> anyhow::Result<()> {
    if !succeeds(Command::new("id").arg(TEST_USER)) {
        run_loud(Command::new("useradd").args(["--create-home", "--shell", "/bin/sh", TEST_USER]))?;
    }
    run_loud(Command::new("usermod").args(["-aG", "docker", TEST_USER]))?;
    Ok(())
}
