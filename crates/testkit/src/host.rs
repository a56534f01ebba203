//! What the host's `/proc` and cgroup file systems say of a process, for benchmarks that account
//! for where CPU time went: the process's own CPU time, and the cgroup directory that holds it.

use std::path::{Path, PathBuf};

/// `pid`'s CPU time so far (`"self"` for this process), in clock ticks (100 a second on Linux):
/// user, then system.
pub fn cpu_ticks(pid: &str) -> Option<[u64; 2]> {
    stat_cpu_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The user and system ticks of one `/proc/PID/stat` line.
fn stat_cpu_ticks(stat: &str) -> Option<[u64; 2]> {
    // The command name may hold spaces and parentheses: fields are counted from the last `)`,
    // after which the state is field 3, and utime and stime are fields 14 and 15.
    let (_, after_name) = stat.rsplit_once(')')?;
    let mut fields = after_name.split_whitespace().skip(11);
    Some([fields.next()?.parse().ok()?, fields.next()?.parse().ok()?])
}

/// The whole machine's CPU time so far, in clock ticks summed over its cores, from `/proc/stat`:
/// busy (every kind but idle and I/O wait), then all.
pub fn machine_cpu_ticks() -> Option<[u64; 2]> {
    machine_ticks(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Busy and all ticks of `/proc/stat`'s first (`cpu`) line.
fn machine_ticks(stat: &str) -> Option<[u64; 2]> {
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // user nice system idle iowait irq softirq steal (guest time is already counted in user).
    let all: u64 = ticks.iter().take(8).sum();
    let waiting = ticks.get(3)? + ticks.get(4)?;
    Some([all.saturating_sub(waiting), all])
}

/// The directory of `pid`'s cgroup for `controller` (`memory`, `cpuacct`): cgroup v1's hierarchy
/// that holds the controller (mounted under the controllers' joined names, as `cpu,cpuacct`), or
/// the one cgroup v2 tree.
pub fn cgroup_dir(pid: &str, controller: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let path = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == controller) {
            return Some(Path::new("/sys/fs/cgroup").join(controllers).join(path));
        }
        (controllers.is_empty() && Path::new("/sys/fs/cgroup/cgroup.controllers").exists())
            .then(|| Path::new("/sys/fs/cgroup").join(path))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_counted_from_the_last_parenthesis_of_the_name() {
        let stat = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 17 5 0 0 20 0 1 0 99";
        assert_eq!(stat_cpu_ticks(stat), Some([17, 5]));
        assert_eq!(stat_cpu_ticks("42 (cut short) S 1"), None);
    }

    #[test]
    fn the_machine_is_busy_for_all_but_its_idle_and_io_wait_ticks() {
        let stat = "cpu  100 2 30 500 7 1 4 6 9 0\ncpu0 50 1 15 250 3 0 2 3 4 0\n";
        assert_eq!(machine_ticks(stat), Some([143, 650]));
        assert_eq!(machine_ticks("cpu0 1 2 3\n"), None);
        assert!(machine_cpu_ticks().is_some());
    }

    #[test]
    fn this_process_has_ticks_and_a_memory_cgroup() {
        assert!(cpu_ticks("self").is_some());
        assert!(cgroup_dir("self", "memory").is_some_and(|dir| dir.exists()));
    }
}
