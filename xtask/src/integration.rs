//! `cargo xtask integration`: the tests that need a real dockerd and the image.
//!
//! Airlock refuses to run as root, so when started as root this task builds the test binaries
//! as root, then runs them as a non-root user in the docker group (created if missing).

use std::collections::HashMap;
use std::process::Command;
use std::time::Instant;

use anyhow::bail;
use clap::Args;

use crate::util::{is_root, run_loud, succeeds, workspace_root};

/// The user the docker tests run as when xtask is started as root.
pub const TEST_USER: &str = "airlock-test";

/// Arguments of `cargo xtask integration`.
#[derive(Debug, Args)]
pub struct IntegrationArgs {
    /// Build the image first if it is missing (on by default; `--no-image` to skip).
    #[arg(long = "no-image", action = clap::ArgAction::SetFalse)]
    image: bool,
}

/// One row of the summary: a label, the test binary (package, test target), and the test to run
/// in it (`None` runs the whole binary).
struct Row {
    label: &'static str,
    package: &'static str,
    target: &'static str,
    test: Option<&'static str>,
}

const fn row(
    label: &'static str,
    package: &'static str,
    target: &'static str,
    test: Option<&'static str>,
) -> Row {
    Row {
        label,
        package,
        target,
        test,
    }
}

/// Everything that needs Docker: the driver and CLI suites, then the numbered scenarios.
const ROWS: &[Row] = &[
    row(
        "driver: sealed containers, image, cleanup",
        "airlock-driver-docker",
        "docker",
        None,
    ),
    row(
        "cli: airlock task (JSON, files, Ctrl-C)",
        "airlock",
        "task",
        None,
    ),
    row(
        "1. open, click through, read, keep a screenshot",
        "airlock",
        "scenarios",
        Some("scenario_1_open_click_read_and_keep_a_screenshot"),
    ),
    row(
        "2. without --allow the site is refused",
        "airlock",
        "scenarios",
        Some("scenario_2_without_the_allow_entry_the_site_is_refused_as_loopback"),
    ),
    row(
        "3. redirect/iframe/fetch/ws/numeric/DNS traps",
        "airlock",
        "scenarios",
        Some("scenario_3_every_trap_on_an_allowed_page_is_refused_and_the_page_still_loads"),
    ),
    row(
        "4. refused commands and flags",
        "airlock",
        "scenarios",
        Some("scenario_4_refused_commands_and_flags_get_reasons"),
    ),
    row(
        "5. step limit, time-out, cancellation",
        "airlock",
        "scenarios",
        Some("scenario_5_step_limit_time_out_and_cancellation_leave_no_container"),
    ),
    row(
        "6. SIGKILLed host, then airlock cleanup",
        "airlock",
        "scenarios",
        Some("scenario_6_a_killed_host_process_is_cleaned_up_by_airlock_cleanup"),
    ),
    row(
        "7. airlock mcp over stdio",
        "airlock",
        "mcp",
        Some("initialize_list_and_call_browser_task_with_progress_and_an_image"),
    ),
    row(
        "7b. MCP cancellation and stdin close clean up",
        "airlock",
        "mcp",
        Some("a_cancelled_call_and_a_closed_stdin_leave_no_container"),
    ),
    row(
        "7c. airlock mcp --direct",
        "airlock",
        "mcp",
        Some("direct_mode_gives_the_client_its_own_sealed_browser"),
    ),
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
    let mut results = Vec::new();
    for row in ROWS {
        let binary = &binaries[&(row.package.to_owned(), row.target.to_owned())];
        let mut test = if as_root {
            let mut command = Command::new("runuser");
            command.args(["-u", TEST_USER, "--"]).arg(binary);
            command
        } else {
            Command::new(binary)
        };
        test.current_dir(&root)
            .env("AIRLOCK_REQUIRE_DOCKER", "1")
            .env("AIRLOCK_IMAGE", crate::image::default_tag())
            .args(["--test-threads", "1"]);
        if let Some(name) = row.test {
            // A renamed test would otherwise "pass" by running nothing.
            let listed =
                crate::util::output(Command::new(binary).args(["--list", "--exact", name]))?;
            if !listed.lines().any(|line| line == format!("{name}: test")) {
                bail!(
                    "{} has no test named {name}: update ROWS in xtask/src/integration.rs",
                    row.target
                );
            }
            test.args(["--exact", name]);
        }
        eprintln!("== {}", row.label);
        let started = Instant::now();
        let passed = run_loud(&mut test).is_ok();
        results.push((row.label, passed, started.elapsed()));
    }
    println!("\n| scenario | result | seconds |\n|---|---|---|");
    for (label, passed, took) in &results {
        println!(
            "| {label} | {} | {:.1} |",
            if *passed { "pass" } else { "FAIL" },
            took.as_secs_f64()
        );
    }
    let failed = results.iter().filter(|(_, passed, _)| !passed).count();
    if failed > 0 {
        bail!("{failed} of {} integration rows failed", results.len());
    }
    Ok(())
}

/// Every integration-test executable of the workspace, by (package, target), built with the same
/// flags as `cargo test --workspace`, so nothing is compiled twice.
fn build_test_binaries() -> anyhow::Result<HashMap<(String, String), String>> {
    let out = crate::util::output(Command::new(env!("CARGO")).args([
        "test",
        "--workspace",
        "--no-run",
        "--message-format=json",
    ]))?;
    let mut binaries = HashMap::new();
    for message in out
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
    {
        let (Some(executable), Some(target), Some(package)) = (
            message["executable"].as_str(),
            message["target"]["name"].as_str(),
            message["package_id"].as_str(),
        ) else {
            continue;
        };
        if message["target"]["kind"][0] != "test" {
            continue;
        }
        // package_id is "path+file:///…/<dir>#<name>@<version>", or "…/<dir>#<version>" when the
        // directory is named like the package.
        let (path, tail) = package.rsplit_once('#').unwrap_or(("", package));
        let named = tail.split('@').next().unwrap_or(tail);
        let name = if named.starts_with(|c: char| c.is_ascii_digit()) {
            path.rsplit('/').next().unwrap_or(named)
        } else {
            named
        };
        binaries.insert((name.to_owned(), target.to_owned()), executable.to_owned());
    }
    for row in ROWS {
        if !binaries.contains_key(&(row.package.to_owned(), row.target.to_owned())) {
            bail!(
                "cargo built no test target {} in {}: update ROWS in xtask/src/integration.rs",
                row.target,
                row.package
            );
        }
    }
    Ok(binaries)
}

/// Create (or reuse) a non-root user in the docker group.
pub fn ensure_test_user() -> anyhow::Result<()> {
    if !succeeds(Command::new("id").arg(TEST_USER)) {
        run_loud(Command::new("useradd").args(["--create-home", "--shell", "/bin/sh", TEST_USER]))?;
    }
    run_loud(Command::new("usermod").args(["-aG", "docker", TEST_USER]))?;
    Ok(())
}
