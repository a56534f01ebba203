//! A sealed browser's container seen from the host, as root: which cgroup holds it, and what each
//! of its processes is.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The directory of `pid`'s cgroup for `controller` (`memory`, `cpuacct`).
pub(super) fn cgroup_dir(pid: &str, controller: &str) -> anyhow::Result<PathBuf> {
    airlock_testkit::host::cgroup_dir(pid, controller)
        .with_context(|| format!("no {controller} cgroup for process {pid}"))
}

/// The processes in the cgroup `dir`.
pub(super) fn processes_in(dir: &Path) -> Vec<String> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// What a process is, from its command line. Chromium's children rewrite theirs into one
/// space-separated title, so it is read as words.
pub(super) fn role_of(pid: &str) -> String {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let words: Vec<String> = String::from_utf8_lossy(&raw)
        .split(['\0', ' '])
        .filter(|word| !word.is_empty())
        .map(str::to_owned)
        .collect();
    let program = words
        .first()
        .and_then(|first| first.rsplit('/').next())
        .unwrap_or("?")
        .to_owned();
    let flag = |name: &str| {
        words
            .iter()
            .find_map(|word| word.strip_prefix(name))
            .map(str::to_owned)
    };
    if program == "chrome_crashpad_handler" {
        return "chromium: crash handler".to_owned();
    }
    if !(program.starts_with("chrom") || program.starts_with("agent-browser-chrome")) {
        return program;
    }
    match flag("--type=").as_deref() {
        None => "chromium: browser".to_owned(),
        Some("utility") => format!(
            "chromium: utility ({})",
            flag("--utility-sub-type=").unwrap_or_default()
        ),
        Some("zygote") if words.iter().any(|word| word == "--no-zygote-sandbox") => {
            "chromium: zygote (unsandboxed, for the GPU process)".to_owned()
        }
        Some(kind) => format!("chromium: {kind}"),
    }
}

/// A process's CPU time (user and system) so far, in clock ticks (100 a second on Linux).
pub(super) fn cpu_ticks(pid: &str) -> Option<u64> {
    airlock_testkit::host::cpu_ticks(pid).map(|[user, system]| user + system)
}
