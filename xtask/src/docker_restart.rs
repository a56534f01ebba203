//! Restarting dockerd mid-task for the soak: through systemd where it manages Docker, otherwise
//! by stopping the one running daemon and starting it again with its own command line.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::util::{output, run_loud, succeeds};

/// Restart dockerd: through systemd where it manages Docker, otherwise by stopping the running
/// daemon and starting it again with the same command line, detached, as CI started it.
pub(crate) fn restart_docker() -> anyhow::Result<()> {
    if succeeds(Command::new("systemctl").args(["is-active", "--quiet", "docker"])) {
        return run_loud(Command::new("systemctl").args(["restart", "docker"]));
    }
    // pgrep lists zombies too: a daemon stopped by an earlier restart stays one where nothing
    // reaps orphans (a CI runner's init), and has no command line to start again.
    let listed = output(
        Command::new("pgrep")
            .args(["-x", "dockerd"])
            .stdout(Stdio::piped()),
    )
    .unwrap_or_default();
    let running: Vec<&str> = listed
        .split_whitespace()
        .filter(|pid| is_running(pid))
        .collect();
    let pid = match running.as_slice() {
        [pid] => (*pid).to_owned(),
        [] => bail!("no dockerd is running"),
        many => bail!(
            "{} dockerd processes run ({}): stop all but one",
            many.len(),
            many.join(", ")
        ),
    };
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))?;
    let argv: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|part| !part.is_empty())
        .map(|part| String::from_utf8_lossy(part).into_owned())
        .collect();
    run_loud(Command::new("kill").args(["-TERM", &pid]))?;
    let stopped = Instant::now() + Duration::from_mins(1);
    while is_running(&pid) {
        if Instant::now() > stopped {
            bail!("dockerd did not stop within 60 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (program, rest) = argv.split_first().context("dockerd had no command line")?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open("/tmp/airlock-soak-dockerd.log")?;
    // `setsid --fork`: the daemon is nobody's child here, so it outlives this command (as the one
    // it replaces did) and never lingers as a zombie of it.
    let started = Command::new("setsid")
        .arg("--fork")
        .arg(program)
        .args(rest)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .status()
        .context("starting dockerd again")?;
    if !started.success() {
        bail!("starting dockerd again failed ({started})");
    }
    let up = Instant::now() + Duration::from_mins(1);
    while !succeeds(Command::new("docker").arg("version")) {
        if Instant::now() > up {
            bail!("dockerd did not come back within 60 s (see /tmp/airlock-soak-dockerd.log)");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// Whether process `pid` runs (a zombie does not count: it has exited).
fn is_running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .next()?
                .to_owned();
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}
