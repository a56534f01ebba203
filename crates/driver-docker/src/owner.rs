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

/// This process as a short tag for directory names: `b<first 8 of boot id>p<pid>s<start time>`.
pub(crate) fn dir_tag() -> String {
    let pid = std::process::id();
    format!(
        "b{}p{pid}s{}",
        short_boot_id(),
        start_time(pid).unwrap_or_default()
    )
}

/// Whether the process named in a proxy directory's name (`airlock-egress-<tag>-XXXXXX`, the tag
/// from [`dir_tag`]) is gone. `None` when the name carries no tag we write: leave it alone.
pub(crate) fn dir_owner_gone(name: &str) -> Option<bool> {
    let tag = name
        .strip_prefix(airlock_proxy::DIR_PREFIX)?
        .rsplit_once('-')?
        .0;
    let rest = tag.strip_prefix('b')?;
    let (boot, rest) = rest.split_once('p')?;
    let (pid, start) = rest.split_once('s')?;
    let pid: u32 = pid.parse().ok()?;
    if boot.len() != 8 || start.is_empty() || !start.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if boot != short_boot_id() {
        return Some(true);
    }
    Some(start_time(pid).is_none_or(|now| now != start))
}

/// The first eight hex digits of the boot id: enough to tell boots apart, short enough for paths.
fn short_boot_id() -> String {
    boot_id()
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(8)
        .collect()
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

    #[test]
    fn a_directory_tag_names_its_process() {
        let mine = format!("airlock-egress-{}-AbC123", dir_tag());
        assert_eq!(dir_owner_gone(&mine), Some(false), "{mine}");
        let boot = short_boot_id();
        let dead = format!("airlock-egress-b{boot}p{}s1-XyZ789", std::process::id());
        assert_eq!(dir_owner_gone(&dead), Some(true));
        let other_boot = format!("airlock-egress-b00000000p{}s1-XyZ789", std::process::id());
        assert_eq!(dir_owner_gone(&other_boot), Some(true));
        for foreign in [
            "airlock-egress-AbC123",
            "airlock-egress-bzzzp1s1-x",
            "something-else",
            "airlock-egress-b1234abcdp1s-x",
        ] {
            assert_eq!(dir_owner_gone(foreign), None, "{foreign}");
        }
    }
}
