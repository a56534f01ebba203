//! What the host and its user must be before any browser starts: not root, on the host or in the
//! container, and with the user namespaces Chromium's sandbox needs.

use crate::DockerError;

/// Whether the host lets an unprivileged process make a user namespace, as Chromium's sandbox
/// needs. `read` returns a `/proc/sys` file's text (tests pass their own).
pub(crate) fn user_namespaces(read: &dyn Fn(&str) -> Option<String>) -> Result<(), DockerError> {
    let value = |path: &str| read(path).and_then(|text| text.trim().parse::<u64>().ok());
    if value("/proc/sys/user/max_user_namespaces") == Some(0) {
        return Err(DockerError::NoUserNamespaces {
            why: "user.max_user_namespaces is 0".to_owned(),
            fix: "sysctl -w user.max_user_namespaces=15000",
        });
    }
    // Debian and Ubuntu kernels before 6.x had their own switch.
    if value("/proc/sys/kernel/unprivileged_userns_clone") == Some(0) {
        return Err(DockerError::NoUserNamespaces {
            why: "kernel.unprivileged_userns_clone is 0".to_owned(),
            fix: "sysctl -w kernel.unprivileged_userns_clone=1",
        });
    }
    // Ubuntu 23.10 and later let only AppArmor-profiled programs make them.
    if value("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == Some(1) {
        return Err(DockerError::NoUserNamespaces {
            why: "kernel.apparmor_restrict_unprivileged_userns is 1".to_owned(),
            fix: "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (or give dockerd's containers an AppArmor profile that allows userns)",
        });
    }
    Ok(())
}

/// The uid and gid every browser container runs as unless a library caller names others. It
/// owns nothing on the host: it is past the ranges Debian gives users (1000–59999), system
/// services (up to 65534), `/etc/subuid` blocks (from 100000, 65536 at a time) and systemd's
/// containers (524288–1879048191), and below systemd's foreign range (from 2147352576). A process
/// that escaped the container would find no file of its own, and no Airlock process to signal.
pub const CONTAINER_USER: (u32, u32) = (2_000_000_000, 2_000_000_000);

/// Neither this process nor the container may run as uid 0, and the container never runs as this
/// process's uid (which owns the proxy's sockets, the kept files and everything else of the user).
pub(crate) fn refuse_root(process_uid: u32, container_uid: u32) -> Result<(), DockerError> {
    if process_uid == 0 {
        return Err(DockerError::RunningAsRoot);
    }
    if container_uid == 0 {
        return Err(DockerError::RootContainerUser);
    }
    if container_uid == process_uid {
        return Err(DockerError::ContainerUserIsYours { uid: process_uid });
    }
    Ok(())
}

/// This process's real uid and gid, from `/proc/self/status`.
pub fn current_user() -> (u32, u32) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|id| id.parse().ok())
            // Unknown means we cannot prove we are not root; treat it as root.
            .unwrap_or(0)
    };
    (field("Uid:"), field("Gid:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_refused_on_the_host_and_in_the_container() {
        assert!(matches!(
            refuse_root(0, 1000),
            Err(DockerError::RunningAsRoot)
        ));
        assert!(matches!(
            refuse_root(1000, 0),
            Err(DockerError::RootContainerUser)
        ));
        assert!(matches!(refuse_root(0, 0), Err(DockerError::RunningAsRoot)));
        assert!(matches!(
            refuse_root(1000, 1000),
            Err(DockerError::ContainerUserIsYours { uid: 1000 })
        ));
        assert!(refuse_root(1000, CONTAINER_USER.0).is_ok());
    }

    #[test]
    fn user_namespaces_are_checked_where_each_kernel_switches_them() {
        let host = |settings: &[(&'static str, &'static str)]| {
            let settings = settings.to_vec();
            move |path: &str| {
                settings
                    .iter()
                    .find(|(name, _)| *name == path)
                    .map(|(_, value)| (*value).to_owned())
            }
        };
        assert!(
            user_namespaces(&host(&[("/proc/sys/user/max_user_namespaces", "15000\n")])).is_ok()
        );
        assert!(
            user_namespaces(&host(&[])).is_ok(),
            "a kernel without the switches allows them"
        );
        for (setting, value) in [
            ("/proc/sys/user/max_user_namespaces", "0"),
            ("/proc/sys/kernel/unprivileged_userns_clone", "0"),
            (
                "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
                "1",
            ),
        ] {
            let error = user_namespaces(&host(&[(setting, value)])).unwrap_err();
            let text = error.to_string();
            assert!(
                matches!(error, DockerError::NoUserNamespaces { .. }),
                "{setting}"
            );
            assert!(
                text.contains("sysctl -w") && text.contains("--no-browser-sandbox"),
                "{text}"
            );
        }
    }
}
