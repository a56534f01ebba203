//! Who owns a task container, and whether that owner is still alive.
//!
//! The owner label is `boot=<boot id>;pid=<pid>;start=<process start time>`. A container is an
//! orphan when its owner ran in another boot, or when no process with that pid and start time runs
//! now (the start time guards against a reused pid).

use std::fs;

/// The owner label for this process.
pub fn this_process() -> String {
    let pid = std::process::id();
    format!(
        "boot={};pid={pid};start={}",
        boot_id().unwrap_or_default(),
        start_time(pid).unwrap_or_default()
    )
}

/// Whether the process named by an owner label is gone.
pub fn is_gone(owner: &str) -> bool {
    let field = |name: &str| {
        owner
            .split(';')
            .find_map(|part| part.strip_prefix(name)?.strip_prefix('='))
    };
    let (Some(boot), Some(pid), Some(start)) = (field("boot"), field("pid"), field("start")) else {
        // A label we cannot read was not written by us; leave such containers alone.
        return false;
    };
    if boot != boot_id().unwrap_or_default() {
        return true;
    }
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    start_time(pid).is_none_or(|now| now != start)
}

fn boot_id() -> Option<String> {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|id| id.trim().to_owned())
}

/// Field 22 of `/proc/<pid>/stat`: the process's start time in clock ticks since boot.
fn start_time(pid: u32) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses; fields after it are plain.
    let after_name = stat.rsplit_once(')')?.1;
    after_name.split_whitespace().nth(19).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_dead_pid_is_gone() {
        let me = this_process();
        assert!(!is_gone(&me), "{me}");
        let boot = boot_id().unwrap();
        assert!(is_gone(&format!(
            "boot={boot};pid={};start=1",
            std::process::id()
        )));
        assert!(is_gone(&format!(
            "boot=another-boot;pid={};start=0",
            std::process::id()
        )));
        assert!(!is_gone("written by someone else"));
    }
}
