//! `cargo xtask ci`: every test, the way CI runs them, from a fresh machine. As root: it installs
//! what the tests need that is missing (Docker and gVisor through `cargo xtask docker`; Chromium,
//! debootstrap, CA certificates, Python's venv and curl from the distribution), then runs format,
//! lints, tidy, the unit and integration tests, the cluster proof and the soak. `.ci/run` is this
//! command.

use std::process::Command;

use anyhow::bail;

use crate::util::{is_root, run_loud, succeeds};

/// What the tests need besides Docker: Chromium (the proxy's real-browser test), debootstrap (the
/// image's base when no registry answers), CA certificates, python3-venv (the official MCP SDK
/// and the other Python clients live in a venv) and curl (the cluster proof).
const TEST_PACKAGES: &[&str] = &[
    "debootstrap",
    "chromium",
    "ca-certificates",
    "python3-venv",
    "curl",
];

pub fn run() -> anyhow::Result<()> {
    if !is_root() {
        bail!(
            "the tests install packages, start dockerd, make a swarm and restart the daemon: run as root (sudo cargo xtask ci)"
        );
    }
    crate::docker::run()?;
    crate::docker::install(TEST_PACKAGES, "what the tests need")?;
    eprintln!("== toolchain");
    run_loud(Command::new(cargo()).arg("--version"))?;
    if !succeeds(Command::new(cargo()).args(["clippy", "--version"])) {
        run_loud(Command::new("rustup").args(["component", "add", "clippy", "rustfmt"]))?;
    }
    front_door_from_no_image()?;
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
        run_loud(Command::new(cargo()).args(args))?;
    }
    eprintln!("== every test passed");
    Ok(())
}

/// The cargo that runs this xtask.
fn cargo() -> &'static str {
    env!("CARGO")
}

/// README's front-door command, as root, from a state with no browser image: it must build the
/// image and end with a real page seen through the seal (a lab page, reached through an explicit
/// `--allow`). The same as a user, and through sudo, is `cargo xtask integration`'s front door.
fn front_door_from_no_image() -> anyhow::Result<()> {
    eprintln!("== the front door from no image: cargo xtask browse, as root");
    let _ = Command::new("docker")
        .args(["rmi", "--force", &crate::image::default_tag()])
        .stdout(std::process::Stdio::null())
        .status();
    let port = airlock_testkit::site::simple_site("Front door", "Seen through the seal");
    let url = format!("http://127.0.0.1:{port}/");
    let browse = Command::new(cargo())
        .args([
            "xtask",
            "browse",
            &url,
            "--allow",
            &format!("127.0.0.1:{port}"),
        ])
        .stderr(std::process::Stdio::piped())
        .output()?;
    let stdout = String::from_utf8_lossy(&browse.stdout);
    let stderr = String::from_utf8_lossy(&browse.stderr);
    eprint!("{stderr}");
    print!("{stdout}");
    // Its stdout also carries the image build's log; the page's title is a line of its own.
    if !browse.status.success() || !stdout.lines().any(|line| line == "Front door") {
        bail!(
            "the front door did not show the page ({}): {}",
            browse.status,
            stdout.trim()
        );
    }
    let Some(saved) = stderr.lines().find_map(|line| line.strip_prefix("saved ")) else {
        bail!("the front door kept no screenshot");
    };
    let _ = std::fs::remove_file(saved);
    if let Some(dir) = std::path::Path::new(saved).parent() {
        let _ = std::fs::remove_dir(dir);
    }
    eprintln!("== the front door showed the page through the seal");
    Ok(())
}
