//! Stopping an eval run without leaving anything behind: every process the run starts (the
//! model server, the lab, each task's `airlock` or browser-use with its Chromium) runs in a
//! process group of its own, and Ctrl-C or SIGTERM ends the run between checks: a task's
//! group is asked to stop (so `airlock` removes its container), then killed; the server and
//! the lab are killed as the run unwinds.

use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static ASKED: AtomicBool = AtomicBool::new(false);

/// How long a task's processes get to stop by themselves before they are killed.
const GRACE: Duration = Duration::from_secs(15);

/// Catch Ctrl-C and SIGTERM for the rest of the run (once; a second call changes nothing).
pub(super) fn catch_signals() {
    let _ = ctrlc::set_handler(|| {
        eprintln!("xtask eval: stopping (the task in progress ends, then its processes)");
        ASKED.store(true, Ordering::SeqCst);
    });
}

/// Whether the run was asked to stop.
pub(super) fn asked() -> bool {
    ASKED.load(Ordering::SeqCst)
}

/// Signal the process group `child` leads.
fn signal_group(child: &Child, signal: &str) {
    let _ = Command::new("kill")
        .args([signal, "--", &format!("-{}", child.id())])
        .status();
}

/// Ask the group `child` leads to stop, give it [`GRACE`], then kill what is left, and reap
/// `child`.
pub(super) fn end_group(child: &mut Child) {
    signal_group(child, "-TERM");
    let asked_at = Instant::now();
    while asked_at.elapsed() < GRACE {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        // Waiting on processes that are tidying up: nothing to wait on but their exit.
        std::thread::sleep(Duration::from_millis(200));
    }
    signal_group(child, "-KILL");
    let _ = child.wait();
}

/// Kill the group `child` leads at once, and reap `child` (the server and the lab keep nothing).
pub(super) fn kill_group(child: &mut Child) {
    signal_group(child, "-KILL");
    let _ = child.wait();
}
