//! `cargo xtask integration`: the tests that need a real dockerd and the image.
//!
//! Airlock refuses to run as root, so when started as root this task builds the test binaries
//! as root, then runs them as a non-root user in the docker group (created if missing).
//!
//! Every integration-test binary of the workspace, and each library's unit tests, run whole, with
//! Docker required (`AIRLOCK_REQUIRE_DOCKER=1`: a test whose prerequisites are missing fails
//! instead of skipping). Each binary runs its tests one at a time; two binaries run side by side
//! (a machine's tests must hold on a busy machine anyway), except what `lanes.rs` names, which looks
//! at the daemon as a whole and runs by itself afterwards.
//! The summary's rows are the tests that asked for Docker (recorded by the test kit's gate), so a
//! new Docker test shows up by itself. An ignored test, a filtered one, an integration binary that
//! runs no test, a failed one, or a proxy directory left in the temp dir fails the run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::bail;
use clap::Args;

mod binary_run;
mod lanes;

use crate::util::{egress_dirs, is_root, run_loud, succeeds, workspace_root};
use binary_run::run_binary;
use lanes::Run;

/// The user the docker tests run as when xtask is started as root.
pub(crate) const TEST_USER: &str = "airlock-test";

/// Arguments of `cargo xtask integration`.
#[derive(Debug, Args)]
pub(crate) struct IntegrationArgs {
    /// Build the image first if it is missing (on by default; `--no-image` to skip).
    #[arg(long = "no-image", action = clap::ArgAction::SetFalse)]
    image: bool,
}

/// Readable names for the scenarios the summary table is known for; any other Docker test is
/// listed under its own name. Rows come from the test binaries, not from this list.
const LABELS: &[(&str, &str)] = &[
    (
        "scenario_1_open_click_read_and_keep_a_screenshot",
        "1. open, click through, read, keep a screenshot",
    ),
    (
        "scenario_2_without_the_allow_entry_the_site_is_refused_as_loopback",
        "2. without --allow the site is refused",
    ),
    (
        "scenario_3_every_trap_on_an_allowed_page_is_refused_and_the_page_still_loads",
        "3. redirect/iframe/fetch/ws/numeric/DNS traps",
    ),
    (
        "scenario_4_refused_commands_and_flags_get_reasons",
        "4. refused commands and flags",
    ),
    (
        "scenario_5_step_limit_time_out_and_cancellation_leave_no_container",
        "5. step limit, time-out, cancellation",
    ),
    (
        "scenario_6_a_killed_host_process_is_cleaned_up_by_airlock_cleanup",
        "6. SIGKILLed host, then airlock cleanup",
    ),
    (
        "initialize_list_and_call_browser_task_with_progress_and_an_image",
        "7. airlock mcp over stdio",
    ),
    (
        "a_cancelled_call_and_a_closed_stdin_leave_no_container",
        "7b. MCP cancellation and stdin close clean up",
    ),
    (
        "direct_mode_gives_the_client_its_own_sealed_browser",
        "7c. airlock mcp --direct",
    ),
    (
        "a_direct_session_lasts_until_left_idle_not_to_the_task_limits",
        "7d. airlock mcp --direct lasts until left idle",
    ),
    (
        "scenario_8_what_the_proxy_saw_reaches_the_worker_the_person_and_the_json",
        "8. a proxy failure is told as the proxy saw it",
    ),
    (
        "playwright_drives_the_sealed_browser_and_the_seal_holds",
        "9. CDP: Playwright (Node), guard and seal",
    ),
    (
        "the_escape_traps_fail_through_cdp_too",
        "9a. CDP: scenario 3's traps, through CDP",
    ),
    (
        "puppeteer_on_serve_closes_the_browser_and_its_container_goes",
        "9b. CDP: Puppeteer on serve, browser.close()",
    ),
    (
        "python_playwright_and_browser_use_drive_sealed_browsers",
        "9c. CDP: Python Playwright and browser-use",
    ),
    (
        "two_clients_get_two_browsers_and_closing_one_leaves_the_other",
        "9d. CDP: two clients, two browsers, no DevTools port",
    ),
];

/// The scenarios that run a second time with every container under gVisor (`--runtime runsc`).
const GVISOR_SCENARIOS: &[&str] = &[
    "scenario_1_open_click_read_and_keep_a_screenshot",
    "scenario_2_without_the_allow_entry_the_site_is_refused_as_loopback",
    "scenario_3_every_trap_on_an_allowed_page_is_refused_and_the_page_still_loads",
    "scenario_4_refused_commands_and_flags_get_reasons",
];

pub(crate) fn run(args: &IntegrationArgs) -> anyhow::Result<()> {
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
    let clients = crate::clients::ensure_clients()?;
    let egress_before = egress_dirs();
    let log_dir = tempfile_dir()?;
    let log = format!("{log_dir}/docker-tests.log");
    let artifacts_text = artifacts_dir(&root, as_root)?;
    let image = crate::image::default_tag();
    let root_text = root.display().to_string();
    // Every test binary runs, as the non-root user, with Docker required: a Docker test in any
    // binary, old or new, runs for real here (as root it would only skip).
    let mut runs: Vec<Run> = Vec::new();
    let env = [
        ("AIRLOCK_REQUIRE_DOCKER", "1"),
        ("AIRLOCK_DOCKER_TESTS_LOG", log.as_str()),
        ("AIRLOCK_IMAGE", image.as_str()),
        // The test user cannot run cargo; snapshot tests find the workspace from this, and
        // compare without writing.
        ("INSTA_WORKSPACE_ROOT", root_text.as_str()),
        ("INSTA_UPDATE", "no"),
        ("AIRLOCK_TEST_PYTHON", clients.python.as_str()),
        ("AIRLOCK_TEST_NODE_MODULES", clients.node_modules.as_str()),
        ("AIRLOCK_TEST_MITMDUMP", clients.mitmdump.as_str()),
        ("AIRLOCK_TEST_ARTIFACTS", artifacts_text.as_str()),
    ];
    let test_command = |binary: &str| test_command(binary, as_root, &root, &env);
    runs.extend(lanes::run_every_binary(&binaries, &test_command)?);
    // The end-to-end scenarios once more, with every container under gVisor.
    let mut gvisor = Vec::new();
    if let Some(scenarios) = binaries.get(&("airlock".to_owned(), "scenarios".to_owned())) {
        for name in GVISOR_SCENARIOS {
            eprintln!("== {name} under gVisor (runsc)");
            let mut test = test_command(scenarios);
            test.env("AIRLOCK_RUNTIME", "runsc").args(["--exact", name]);
            gvisor.push((*name, run_binary(&mut test, None)?));
        }
    }
    let recorded = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&log_dir);
    let docker_tests: BTreeSet<(String, String)> = recorded
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .map(|(binary, test)| (binary.to_owned(), test.to_owned()))
        .collect();

    let mut problems = report(&runs, &docker_tests);
    println!("\n| scenario under gVisor (runsc) | result |\n|---|---|");
    for (name, run) in &gvisor {
        let label = LABELS
            .iter()
            .find(|(test, _)| test == name)
            .map_or(*name, |(_, label)| label);
        let result = run
            .results
            .iter()
            .find(|(test, _)| test == name)
            .map_or("did not run", |(_, result)| result.as_str());
        println!("| {label} | {result} |");
        if result != "ok" || !run.passed {
            problems.push(format!("{name} under gVisor: {result}"));
        }
    }
    if gvisor.len() != GVISOR_SCENARIOS.len() {
        problems.push("the scenarios binary was not built: nothing ran under gVisor".to_owned());
    }
    // The front door as root, through sudo and as a user (only root can start all three).
    if as_root {
        problems.extend(crate::front_door::check(&root, TEST_USER)?);
    }
    let left: Vec<String> = egress_dirs().difference(&egress_before).cloned().collect();
    if !left.is_empty() {
        problems.push(format!(
            "proxy directories were left behind: {}",
            left.join(", ")
        ));
    }
    if !problems.is_empty() {
        for problem in &problems {
            eprintln!("integration: {problem}");
        }
        bail!("{} integration problem(s)", problems.len());
    }
    Ok(())
}

/// Print the summary table and return what is wrong with the runs.
fn report(runs: &[Run], docker_tests: &BTreeSet<(String, String)>) -> Vec<String> {
    let mut problems = Vec::new();
    println!("\n| Docker test | binary | result |\n|---|---|---|");
    for (package, target, binary, run, _) in runs {
        let file = std::path::Path::new(binary)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for (test, result) in &run.results {
            if docker_tests.contains(&(file.clone(), test.clone())) {
                let label = LABELS
                    .iter()
                    .find(|(name, _)| name == test)
                    .map_or(test.as_str(), |(_, label)| label);
                println!("| {label} | {package}/{target} | {result} |");
            }
            if result == "ignored" {
                problems.push(format!(
                    "{package}/{target}: {test} is ignored; CI runs every test"
                ));
            }
        }
        // A library may have no unit tests; an integration test binary must have some.
        if run.results.is_empty() && target != "lib" {
            problems.push(format!("{package}/{target} ran no test"));
        }
        if run.filtered > 0 {
            problems.push(format!(
                "{package}/{target} filtered out {} test(s)",
                run.filtered
            ));
        }
        if !run.passed {
            problems.push(format!("{package}/{target} failed"));
        }
    }
    let total: usize = runs.iter().map(|(.., run, _)| run.results.len()).sum();
    let seconds: f64 = runs.iter().map(|(.., took)| took.as_secs_f64()).sum();
    println!(
        "\n{} Docker tests among {total} tests in {} binaries, as a non-root user, {seconds:.0} s of the binaries' time (two run at once)",
        docker_tests.len(),
        runs.len()
    );
    let mut slowest: Vec<(&str, &str, Duration)> = runs
        .iter()
        .flat_map(|(_, target, _, run, _)| {
            run.took
                .iter()
                .map(move |(test, took)| (target.as_str(), test.as_str(), *took))
        })
        .collect();
    slowest.sort_by_key(|&(.., took)| std::cmp::Reverse(took));
    println!("\n| slowest test | binary | s |\n|---|---|---|");
    for (target, test, took) in slowest.iter().take(12) {
        println!("| {test} | {target} | {:.0} |", took.as_secs_f64());
    }
    if docker_tests.is_empty() {
        problems.push("no test asked for Docker: the gate did not record any".to_owned());
    }
    for (test, _) in LABELS {
        if !docker_tests.iter().any(|(_, name)| name == test) {
            problems.push(format!("the scenario {test} did not run: update LABELS in xtask/src/integration.rs if it was renamed"));
        }
    }
    problems
}

/// Where the tests keep what a person should look at afterwards (a task's record, screenshots
/// of its page): `target/test-artifacts`, writable by the test user.
fn artifacts_dir(root: &Path, as_root: bool) -> anyhow::Result<String> {
    let artifacts = root.join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts)?;
    if as_root {
        run_loud(
            Command::new("chown")
                .args(["-R", TEST_USER])
                .arg(&artifacts),
        )?;
    }
    Ok(artifacts.display().to_string())
}

/// One test binary's command: as the test user when run as root, with Docker required.
fn test_command(binary: &str, as_root: bool, root: &Path, env: &[(&str, &str)]) -> Command {
    let mut test = if as_root {
        let mut command = Command::new("runuser");
        command.args(["-u", TEST_USER, "--"]).arg(binary);
        command
    } else {
        Command::new(binary)
    };
    test.current_dir(root)
        .envs(env.iter().copied())
        .args(["--test-threads", "1"]);
    test
}

/// A fresh directory the test user can write its record into.
fn tempfile_dir() -> anyhow::Result<String> {
    let dir = std::env::temp_dir().join(format!("airlock-integration-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    // The tests run as another user; the directory is this run's alone and removed after it.
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))?;
    Ok(dir.display().to_string())
}

/// Every integration-test executable of the workspace, by (package, target), built with the same
/// flags as `cargo test --workspace`, so nothing is compiled twice.
fn build_test_binaries() -> anyhow::Result<BTreeMap<(String, String), String>> {
    let out = crate::util::output(Command::new(env!("CARGO")).args([
        "test",
        "--workspace",
        "--no-run",
        "--message-format=json",
    ]))?;
    let mut binaries = BTreeMap::new();
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
        // Integration tests, and each library's unit tests (a few need Docker, such as the warm
        // pool's freezer, and run for real only here).
        let target = match message["target"]["kind"][0].as_str() {
            Some("test") => target,
            Some("lib") => "lib",
            _ => continue,
        };
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
    Ok(binaries)
}

/// Create (or reuse) a non-root user in the docker group.
pub(crate) fn ensure_test_user() -> anyhow::Result<()> {
    if !succeeds(Command::new("id").arg(TEST_USER)) {
        run_loud(Command::new("useradd").args(["--create-home", "--shell", "/bin/sh", TEST_USER]))?;
    }
    run_loud(Command::new("usermod").args(["-aG", "docker", TEST_USER]))?;
    Ok(())
}
