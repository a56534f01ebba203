//! The container a task runs in, as a pure function of its options (snapshot-tested).

use std::collections::HashMap;
use std::path::PathBuf;

use bollard::models::{ContainerCreateBody, HostConfig, ResourcesUlimits};

/// Labels every task container carries.
pub(crate) const LABEL_TASK: &str = "airlock.task";
/// The process that owns the container (see [`crate::owner`]).
pub(crate) const LABEL_OWNER: &str = "airlock.owner";
/// The Airlock version that made it.
pub(crate) const LABEL_VERSION: &str = "airlock.version";

/// Where the egress proxy's directory is mounted inside the container.
pub(crate) const EGRESS_MOUNT: &str = "/egress";

/// Airlock's seccomp profile (`docker/seccomp.json`): ordinary calls allowed, the kernel's
/// privileged surface refused, plus exactly what Chromium's namespace sandbox needs (user, PID and
/// network namespaces, and `chroot`). Each rule says why in its `comment`.
pub const SECCOMP_PROFILE: &str = include_str!("../../../docker/seccomp.json");

/// CPU, memory and process limits of one task container.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resources {
    /// Memory limit; swap is set equal, so there is no swap.
    pub memory_mib: u32,
    /// CPUs (fractions allowed).
    pub cpus: f64,
    /// Most processes and threads.
    pub pids: u32,
    /// Most open files.
    pub nofile: u32,
    /// Size of the `/tmp` tmpfs, the only writable place.
    pub tmp_mib: u32,
    /// Size of `/dev/shm` for Chromium's shared memory; 0 keeps it in `/tmp` instead
    /// (`--disable-dev-shm-usage`), so one tmpfs bounds everything the browser writes.
    pub dev_shm_mib: u32,
}

impl Default for Resources {
    fn default() -> Self {
        Self {
            memory_mib: 1024,
            cpus: 1.5,
            pids: 512,
            nofile: 4096,
            tmp_mib: 512,
            dev_shm_mib: 0,
        }
    }
}

/// Everything the container spec depends on.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerOptions {
    /// The image tag.
    pub image: String,
    /// The task's id (also in the container's name).
    pub task_id: String,
    /// The owner label's value.
    pub owner: String,
    /// Airlock's version.
    pub version: String,
    /// The uid and gid the container runs as ([`crate::CONTAINER_USER`] unless configured).
    pub user: (u32, u32),
    /// The egress proxy's private directory on the host.
    pub socket_dir: PathBuf,
    /// How long the container lives if nobody removes it.
    pub lifetime_secs: u64,
    /// Limits.
    pub resources: Resources,
    /// Chromium's own sandbox (on unless the user opted out with `--no-browser-sandbox`).
    pub browser_sandbox: bool,
    /// The OCI runtime Docker runs the container with (`runc`, or `runsc` for gVisor).
    pub runtime: String,
    /// Whether the browser trusts an extra CA (the driver writes it before the launch).
    pub extra_ca: bool,
    /// What the browser launches with for its task's settings (`NAME=value`: a locale, a time
    /// zone; checked by the policy); empty for a browser made ahead of any task.
    pub launch_env: Vec<String>,
}

/// Where the driver writes the operator's extra CA in the container (its tmpfs), before the
/// browser launches.
pub(crate) const CA_DIR: &str = "/tmp/airlock-ca";
/// The CA file's name there.
pub(crate) const CA_NAME: &str = "ca.pem";

/// Runtimes whose containers use host sockets, which the relay can hand to the proxy. Any other
/// (gVisor's user-space kernel, a VM) gets the copying relay.
const HANDOFF_RUNTIMES: &[&str] = &["runc", "crun", "youki"];

/// The host's process limit for a container holding `pids` processes and threads under `runtime`.
///
/// Under runc the host's pids cgroup counts the container's own tasks. Under gVisor it counts the
/// sandbox's host threads instead: on the ptrace platform every guest thread that runs is traced
/// from a host stub thread, beside the sentry's own, so the same browser needs several times as
/// many host pids (the bench's 100-subresource page peaked at 554 host pids under runsc, 131
/// under runc). At the runc figure the sentry cannot start a stub and panics ("error
/// initializing first thread: resource temporarily unavailable"), which takes the browser down
/// in the middle of a page.
fn host_pids_limit(pids: u32, runtime: &str) -> i64 {
    if on_host_kernel(runtime) {
        i64::from(pids)
    } else {
        i64::from(pids) * USER_SPACE_KERNEL_PIDS_FACTOR
    }
}

/// How many host pids a user-space kernel (gVisor, ptrace platform) takes per guest task; see
/// [`host_pids_limit`].
const USER_SPACE_KERNEL_PIDS_FACTOR: i64 = 8;

/// Whether `runtime` runs containers on the host's kernel (runc and its kin), where the relay
/// hands sockets over and Docker can change a running container's CPU weight. Anything else
/// (gVisor under any name, a VM) is treated as a kernel of its own.
pub(crate) fn on_host_kernel(runtime: &str) -> bool {
    HANDOFF_RUNTIMES.contains(&runtime)
}

/// Whether the daemon's runtime `name`, whose program is `path`, is gVisor's runsc: by its
/// program, so a runsc registered as `gvisor` or `runsc-kvm` is known too.
pub(crate) fn is_gvisor(name: &str, path: Option<&str>) -> bool {
    name == "runsc"
        || path
            .and_then(|path| std::path::Path::new(path).file_name())
            .is_some_and(|program| program == "runsc")
}

/// `handoff` or `copy`: how the container's relay reaches the proxy under `runtime`.
pub fn relay_mode(runtime: &str) -> &'static str {
    if on_host_kernel(runtime) {
        "handoff"
    } else {
        "copy"
    }
}

impl ContainerOptions {
    /// The container's name.
    pub fn name(&self) -> String {
        format!("airlock-task-{}", self.task_id)
    }
}

/// The locked-down container: no network, read-only root, small noexec-free `/tmp` tmpfs, a uid
/// that owns nothing on the host, no capabilities, no new privileges, Airlock's seccomp profile (which lets
/// Chromium sandbox its renderers in user namespaces), memory/CPU/pids/nofile limits, the proxy
/// socket directory read-only at `/egress`, an init process, and a lifetime after which it exits
/// (and is removed) by itself.
pub fn container_spec(options: &ContainerOptions) -> ContainerCreateBody {
    let resources = options.resources;
    let memory = i64::from(resources.memory_mib) * 1024 * 1024;
    // Docker counts CPU in billionths; the value is small and positive, so the cast is exact enough.
    #[allow(clippy::cast_possible_truncation)]
    let nano_cpus = (resources.cpus * 1e9).round() as i64;
    let labels = HashMap::from([
        (LABEL_TASK.to_owned(), options.task_id.clone()),
        (LABEL_OWNER.to_owned(), options.owner.clone()),
        (LABEL_VERSION.to_owned(), options.version.clone()),
    ]);
    let tmpfs = HashMap::from([(
        "/tmp".to_owned(),
        // Chromium maps executable memory from files it keeps in /tmp (with --disable-dev-shm-usage),
        // so /tmp cannot be noexec; nosuid and nodev still apply. Shared memory stays here by
        // default: a sized /dev/shm loaded the bench's heavy page no faster (docs/benchmarks.md),
        // and one tmpfs then bounds all the browser writes.
        format!("rw,nosuid,nodev,size={}m,mode=1777", resources.tmp_mib),
    )]);
    ContainerCreateBody {
        image: Some(options.image.clone()),
        user: Some(format!("{}:{}", options.user.0, options.user.1)),
        env: Some(
            vec![
                format!("BROWSER_LIFETIME_SECONDS={}", options.lifetime_secs),
                format!(
                    "AIRLOCK_BROWSER_SANDBOX={}",
                    if options.browser_sandbox { "on" } else { "off" }
                ),
                format!("AIRLOCK_RELAY_MODE={}", relay_mode(&options.runtime)),
                format!(
                    "AIRLOCK_DEV_SHM={}",
                    if resources.dev_shm_mib > 0 {
                        "on"
                    } else {
                        "off"
                    }
                ),
            ]
            .into_iter()
            .chain(
                options
                    .extra_ca
                    .then(|| format!("AGENT_BROWSER_CA_CERT={CA_DIR}/{CA_NAME}")),
            )
            .chain(options.launch_env.iter().cloned())
            .collect(),
        ),
        labels: Some(labels),
        network_disabled: Some(true),
        host_config: Some(HostConfig {
            network_mode: Some("none".into()),
            readonly_rootfs: Some(true),
            tmpfs: Some(tmpfs),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(security_options(options.browser_sandbox)),
            memory: Some(memory),
            memory_swap: Some(memory),
            nano_cpus: Some(nano_cpus),
            pids_limit: Some(host_pids_limit(resources.pids, &options.runtime)),
            // Docker's own 64 MiB unless asked; Chromium leaves it unused while dev_shm_mib is 0.
            shm_size: (resources.dev_shm_mib > 0)
                .then(|| i64::from(resources.dev_shm_mib) * 1024 * 1024),
            ulimits: Some(vec![ResourcesUlimits {
                name: Some("nofile".into()),
                soft: Some(i64::from(resources.nofile)),
                hard: Some(i64::from(resources.nofile)),
            }]),
            binds: Some(vec![format!(
                "{}:{EGRESS_MOUNT}:ro",
                options.socket_dir.display()
            )]),
            ipc_mode: Some("private".into()),
            runtime: Some(options.runtime.clone()),
            init: Some(true),
            auto_remove: Some(true),
            ..HostConfig::default()
        }),
        ..ContainerCreateBody::default()
    }
}

/// `no-new-privileges` always; Airlock's seccomp profile when Chromium's sandbox is on (without it,
/// Docker's default profile, which refuses user namespaces: Chromium then runs `--no-sandbox`).
fn security_options(browser_sandbox: bool) -> Vec<String> {
    let mut options = vec!["no-new-privileges".to_owned()];
    if browser_sandbox {
        options.push(format!("seccomp={SECCOMP_PROFILE}"));
    }
    options
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gvisor_is_known_by_its_program_under_any_name() {
        assert!(is_gvisor("runsc", None));
        assert!(is_gvisor("gvisor", Some("/usr/bin/runsc")));
        assert!(is_gvisor("runsc-kvm", Some("/usr/local/bin/runsc")));
        assert!(!is_gvisor("runc", Some("runc")));
        assert!(!is_gvisor("kata", Some("/usr/bin/containerd-shim-kata-v2")));
        assert!(!is_gvisor("not-runsc", Some("/opt/runsc-wrapper")));
    }

    #[test]
    fn only_host_kernel_runtimes_hand_sockets_over_and_share_the_host_pids_count() {
        for runtime in ["runc", "crun", "youki"] {
            assert!(on_host_kernel(runtime));
            assert_eq!(relay_mode(runtime), "handoff");
            assert_eq!(host_pids_limit(100, runtime), 100);
        }
        // gVisor under another name is treated as the user-space kernel it is.
        for runtime in ["runsc", "gvisor", "kata"] {
            assert!(!on_host_kernel(runtime));
            assert_eq!(relay_mode(runtime), "copy");
            assert_eq!(host_pids_limit(100, runtime), 800);
        }
    }
}
