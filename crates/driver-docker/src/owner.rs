//! Who owns a task container, and whether that owner is still alive.
//!
//! The owner label is `boot=<boot id>;pid=<pid>;start=<process start time>;ns=<PID namespace>`,
//! plus `;ctr=<container id>` when the owner itself runs in a container (the server image). A
//! container is an orphan when its owner ran in another boot, or when no process with that pid and
//! start time runs now (the start time guards against a reused pid). A pid means something only
//! in its own PID namespace: an owner in another one (another replica's container on the same
//! daemon) is judged by whether its container still runs, and one in another namespace with no
//! container named is left alone. Without that, every replica would take the others' live
//! containers for orphans. An owner the engine named (`AIRLOCK_OWNER`, a Kubernetes pod with no
//! Docker container to ask about) adds `;hb=<its heartbeat>`, and in another namespace it is
//! judged by that heartbeat (`heartbeat.rs`).

use std::fs;

use crate::heartbeat;

/// What is known of an owner.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Liveness {
    /// Its process runs.
    Alive,
    /// Its process is gone.
    Gone,
    /// Its process is in another PID namespace, inside this container: alive while it runs.
    InContainer(String),
    /// Nothing can be told (a label not written by us, or another namespace with no container).
    Unknown,
}

/// The owner label for this process.
pub(crate) fn this_process() -> String {
    let pid = std::process::id();
    let mut label = format!(
        "boot={};pid={pid};start={};ns={}",
        boot_id().unwrap_or_default(),
        start_time(pid).unwrap_or_default(),
        pid_namespace().unwrap_or_default()
    );
    if let Some(container) = own_container_id() {
        label.push_str(&format!(";ctr={container}"));
    }
    if let Some(instance) = own_heartbeat() {
        label.push_str(&format!(";hb={instance}"));
    }
    label
}

/// This process's heartbeat name, when the engine named its replica.
pub(crate) fn own_heartbeat() -> Option<String> {
    heartbeat::own_instance(&start_time(std::process::id()).unwrap_or_default())
}

/// Whether the process named by an owner label is gone (`false` when that cannot be told here).
#[cfg(test)]
pub(crate) fn is_gone(owner: &str) -> bool {
    liveness(owner) == Liveness::Gone
}

/// What an owner label says of its process.
pub(crate) fn liveness(owner: &str) -> Liveness {
    liveness_with(owner, &heartbeat::default_dir())
}

/// [`liveness`], reading heartbeats in `beats`.
fn liveness_with(owner: &str, beats: &std::path::Path) -> Liveness {
    let field = |name: &str| {
        owner
            .split(';')
            .find_map(|part| part.strip_prefix(name)?.strip_prefix('='))
    };
    let (Some(boot), Some(pid), Some(start)) = (field("boot"), field("pid"), field("start")) else {
        // A label we cannot read was not written by us; leave such containers alone.
        return Liveness::Unknown;
    };
    if boot != boot_id().unwrap_or_default() {
        return Liveness::Gone;
    }
    // Labels written before namespaces were recorded name this namespace's pids.
    if let Some(ns) = field("ns")
        && Some(ns) != pid_namespace().as_deref()
    {
        return match (field("ctr"), field("hb")) {
            (Some(container), _) if is_container_id(container) => {
                Liveness::InContainer(container.to_owned())
            }
            (_, Some(instance)) => by_heartbeat(beats, instance),
            _ => Liveness::Unknown,
        };
    }
    let Ok(pid) = pid.parse::<u32>() else {
        return Liveness::Unknown;
    };
    if start_time(pid).is_none_or(|now| now != start) {
        Liveness::Gone
    } else {
        Liveness::Alive
    }
}

/// An owner seen only through its heartbeat: alive while its file is fresh.
fn by_heartbeat(beats: &std::path::Path, instance: &str) -> Liveness {
    if heartbeat::beating(beats, instance, std::time::SystemTime::now()) {
        Liveness::Alive
    } else {
        Liveness::Gone
    }
}

/// This process's PID namespace, as the inode number in `/proc/self/ns/pid`, in hex.
fn pid_namespace() -> Option<String> {
    let link = fs::read_link("/proc/self/ns/pid").ok()?;
    let text = link.to_str()?;
    let inode: u64 = text
        .strip_prefix("pid:[")?
        .strip_suffix(']')?
        .parse()
        .ok()?;
    Some(format!("{inode:x}"))
}

/// The id of the Docker container this process runs in, if it runs in one: read from the
/// container's own bind mounts (`/var/lib/docker/containers/<id>/hostname`), which Docker makes
/// in every container whatever its hostname is set to.
fn own_container_id() -> Option<String> {
    if !std::path::Path::new("/.dockerenv").exists() {
        return None;
    }
    let mounts = fs::read_to_string("/proc/self/mountinfo").ok()?;
    container_id_in(&mounts)
}

fn container_id_in(mountinfo: &str) -> Option<String> {
    mountinfo.lines().find_map(|line| {
        let (_, after) = line.split_once("/containers/")?;
        let id = after.split('/').next()?;
        let rest = after.get(id.len()..)?;
        (is_container_id(id) && (rest.starts_with("/hostname") || rest.starts_with("/resolv.conf")))
            .then(|| id.to_owned())
    })
}

fn is_container_id(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// This process as a short tag for directory names:
/// `b<first 8 of boot id>p<pid>s<start time>n<PID namespace, hex>[h<first 12 of container id>]`
/// (separators that are not hex digits).
pub(crate) fn dir_tag() -> String {
    let pid = std::process::id();
    let mut tag = format!(
        "b{}p{pid}s{}n{}",
        short_boot_id(),
        start_time(pid).unwrap_or_default(),
        pid_namespace().unwrap_or_default()
    );
    if let Some(container) = own_container_id() {
        tag.push('h');
        tag.push_str(container.get(..12).unwrap_or_default());
    }
    if let Some(instance) = own_heartbeat() {
        // After `_`, which no other part holds: the heartbeat name is parsed off first.
        tag.push('_');
        tag.push_str(&instance);
    }
    tag
}

/// What the process named in a proxy directory's name (`airlock-egress-<tag>-XXXXXX`, the tag
/// from [`dir_tag`]) is known to be. `None` when the name carries no tag we write: leave it alone.
pub(crate) fn dir_owner(name: &str) -> Option<Liveness> {
    dir_owner_with(name, &heartbeat::default_dir())
}

/// [`dir_owner`], reading heartbeats in `beats`.
fn dir_owner_with(name: &str, beats: &std::path::Path) -> Option<Liveness> {
    let tag = name
        .strip_prefix(airlock_proxy::DIR_PREFIX)?
        .rsplit_once('-')?
        .0;
    let (tag, instance) = match tag.split_once('_') {
        Some((tag, instance)) => (tag, Some(instance)),
        None => (tag, None),
    };
    let rest = tag.strip_prefix('b')?;
    let (boot, rest) = rest.split_once('p')?;
    let (pid, rest) = rest.split_once('s')?;
    // Tags written before namespaces were recorded end at the start time.
    let (start, ns, container) = match rest.split_once('n') {
        None => (rest, None, None),
        Some((start, rest)) => match rest.split_once('h') {
            None => (start, Some(rest), None),
            Some((ns, container)) => (start, Some(ns), Some(container)),
        },
    };
    let pid: u32 = pid.parse().ok()?;
    if boot.len() != 8 || start.is_empty() || !start.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if boot != short_boot_id() {
        return Some(Liveness::Gone);
    }
    if let Some(ns) = ns
        && Some(ns) != pid_namespace().as_deref()
    {
        return Some(match (container, instance) {
            (Some(short), _)
                if short.len() == 12 && short.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                Liveness::InContainer(short.to_owned())
            }
            (_, Some(instance)) => by_heartbeat(beats, instance),
            _ => Liveness::Unknown,
        });
    }
    Some(if start_time(pid).is_none_or(|now| now != start) {
        Liveness::Gone
    } else {
        Liveness::Alive
    })
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
        // Another PID namespace: a pid there says nothing here.
        let ns = pid_namespace().unwrap();
        let foreign = format!("boot={boot};pid=1;start=1;ns=1{ns}");
        assert_eq!(liveness(&foreign), Liveness::Unknown);
        let id = "a".repeat(64);
        assert_eq!(
            liveness(&format!("{foreign};ctr={id}")),
            Liveness::InContainer(id)
        );
        assert_eq!(
            liveness(&format!("boot={boot};pid=1;start=1;ns=1{ns};ctr=../x")),
            Liveness::Unknown
        );
        // The same namespace, written out: judged by the pid as before.
        assert!(is_gone(&format!(
            "boot={boot};pid={};start=1;ns={ns}",
            std::process::id()
        )));
    }

    #[test]
    fn the_own_container_id_is_read_from_dockers_mounts() {
        let id = "0123456789abcdef".repeat(4);
        let mountinfo = format!(
            "600 590 0:50 / / rw,relatime - overlay overlay rw\n\
             612 590 259:1 /var/lib/docker/containers/{id}/resolv.conf /etc/resolv.conf rw - ext4 /dev/root rw\n\
             613 590 259:1 /var/lib/docker/containers/{id}/hostname /etc/hostname rw - ext4 /dev/root rw\n"
        );
        assert_eq!(container_id_in(&mountinfo), Some(id));
        assert_eq!(
            container_id_in("600 590 0:50 / / rw - overlay overlay rw\n"),
            None
        );
        assert_eq!(
            container_id_in("1 2 3 /var/lib/docker/containers/short/hostname /etc/hostname\n"),
            None
        );
    }

    #[test]
    fn a_directory_tag_names_its_process() {
        let mine = format!("airlock-egress-{}-AbC123", dir_tag());
        assert_eq!(dir_owner(&mine), Some(Liveness::Alive), "{mine}");
        let boot = short_boot_id();
        let dead = format!("airlock-egress-b{boot}p{}s1-XyZ789", std::process::id());
        assert_eq!(dir_owner(&dead), Some(Liveness::Gone));
        let other_boot = format!("airlock-egress-b00000000p{}s1-XyZ789", std::process::id());
        assert_eq!(dir_owner(&other_boot), Some(Liveness::Gone));
        let ns = pid_namespace().unwrap();
        let same_ns = format!(
            "airlock-egress-b{boot}p{}s1n{ns}-XyZ789",
            std::process::id()
        );
        assert_eq!(dir_owner(&same_ns), Some(Liveness::Gone));
        let other_ns = format!("airlock-egress-b{boot}p1s1n1{ns}-XyZ789");
        assert_eq!(dir_owner(&other_ns), Some(Liveness::Unknown));
        let in_container = format!("airlock-egress-b{boot}p1s1n1{ns}h0123456789ab-XyZ789");
        assert_eq!(
            dir_owner(&in_container),
            Some(Liveness::InContainer("0123456789ab".to_owned()))
        );
        for foreign in [
            "airlock-egress-AbC123",
            "airlock-egress-bzzzp1s1-x",
            "something-else",
            "airlock-egress-b1234abcdp1s-x",
        ] {
            assert_eq!(dir_owner(foreign), None, "{foreign}");
        }
    }

    #[test]
    fn a_replica_in_another_namespace_is_judged_by_its_heartbeat() {
        // Two owners in PID namespaces other than this one, as two pods on one node are: one
        // still beats, the other stopped (killed, its pod gone).
        let beats = tempfile::tempdir().unwrap();
        std::fs::write(beats.path().join("airlock-a.7.100"), b"").unwrap();
        let stopped = std::fs::File::create(beats.path().join("airlock-b.7.100")).unwrap();
        stopped
            .set_times(std::fs::FileTimes::new().set_modified(
                std::time::SystemTime::now()
                    - heartbeat::STALE_AFTER
                    - std::time::Duration::from_secs(1),
            ))
            .unwrap();
        let boot = boot_id().unwrap();
        let ns = pid_namespace().unwrap();
        let label = |instance: &str| format!("boot={boot};pid=7;start=100;ns=1{ns};hb={instance}");
        assert_eq!(
            liveness_with(&label("airlock-a.7.100"), beats.path()),
            Liveness::Alive
        );
        assert_eq!(
            liveness_with(&label("airlock-b.7.100"), beats.path()),
            Liveness::Gone
        );
        assert_eq!(
            liveness_with(&label("airlock-c.7.100"), beats.path()),
            Liveness::Gone
        );
        // Their proxy directories, likewise.
        let short = short_boot_id();
        let dir = |instance: &str| format!("airlock-egress-b{short}p7s100n1{ns}_{instance}-AbC123");
        assert_eq!(
            dir_owner_with(&dir("airlock-a.7.100"), beats.path()),
            Some(Liveness::Alive)
        );
        assert_eq!(
            dir_owner_with(&dir("airlock-b.7.100"), beats.path()),
            Some(Liveness::Gone)
        );
        // Without a heartbeat an owner in another namespace is still left alone.
        assert_eq!(
            dir_owner_with(
                &format!("airlock-egress-b{short}p7s100n1{ns}-AbC123"),
                beats.path()
            ),
            Some(Liveness::Unknown)
        );
    }
}
