//! What the soak's parts share: running Airlock as the test user, waiting for its containers to
//! go, and reading a process's memory.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::integration::TEST_USER;
use crate::util::output;

/// A command run as the test user, keeping its pid (setpriv execs; it does not fork).
pub(crate) fn as_test_user(program: &Path) -> Command {
    let mut command = Command::new("setpriv");
    command
        .args([
            "--reuid",
            TEST_USER,
            "--regid",
            TEST_USER,
            "--init-groups",
            "--",
        ])
        .arg(program)
        .env("HOME", "/tmp")
        .env("AIRLOCK_CONFIG", "/nonexistent/airlock.toml");
    command
}

/// Whether, within `limit`, no task container names `pid` as its owner.
pub(crate) fn wait_for_no_container_of(pid: u32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let owners = output(Command::new("docker").args([
            "ps",
            "-a",
            "--filter",
            "label=airlock.task",
            "--format",
            "{{.Label \"airlock.owner\"}}",
        ]))
        .unwrap_or_default();
        if !owners
            .lines()
            .any(|owner| owner.contains(&format!("pid={pid};")))
        {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A process's resident memory in MiB.
pub(crate) fn rss_mib(pid: u32) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
        .context("no VmRSS")?;
    Ok(kib / 1024.0)
}
