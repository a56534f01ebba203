//! The CPU time of the one task container running, from its cgroup (readable by any user): what
//! the container's processes spent in their own code (user) and in the host's kernel (system).
//! Under gVisor that is the Sentry and the processes it traces, so the split shows where the
//! runtime's cost lands.

/// User and system CPU ms of the one task container running now; `None` unless exactly one runs.
pub(crate) fn task_container_cpu_ms() -> Option<[f64; 2]> {
    let pids = airlock_testkit::docker::task_container_pids();
    let [pid] = pids.as_slice() else {
        return None;
    };
    let dir = airlock_testkit::host::cgroup_dir(pid, "cpuacct")?;
    if let Ok(stat) = std::fs::read_to_string(dir.join("cpuacct.stat")) {
        // cgroup v1: USER_HZ ticks (100 a second).
        return Some([field(&stat, "user")? * 10.0, field(&stat, "system")? * 10.0]);
    }
    let stat = std::fs::read_to_string(dir.join("cpu.stat")).ok()?;
    Some([
        field(&stat, "user_usec")? / 1e3,
        field(&stat, "system_usec")? / 1e3,
    ])
}

fn field(stat: &str, name: &str) -> Option<f64> {
    stat.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}
