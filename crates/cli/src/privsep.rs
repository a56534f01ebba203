//! Started as root, Airlock gives root up before it does anything else, the way OpenSSH separates
//! privileges: it runs itself again as an unprivileged user, in the Docker socket's group (so it
//! can still start containers) and with no other group, and only waits for that child. Nothing
//! that parses bytes from a browser (the egress proxy, the CDP relay, MCP, the worker's tools)
//! runs as root. The browser's container runs as neither root nor this user, but as the driver's
//! [`airlock_driver_docker::CONTAINER_USER`], which owns nothing on the host.
//!
//! The user is the person who asked when `sudo` says who (`SUDO_UID`/`SUDO_GID`), so the files
//! Airlock keeps are theirs; otherwise `nobody` (65534), which owns nothing on the host, and the
//! files a run keeps are handed to root when it ends. SIGTERM sent to the parent (systemd, `kill`)
//! is passed on; Ctrl-C reaches the child from the terminal itself.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// Set in the child, which never separates again.
const CHILD_ENV: &str = "AIRLOCK_PRIVSEP_CHILD";
/// Where a run keeps its files when the child cannot name a home of its own (set by the parent).
pub(crate) const RUN_DIR_ENV: &str = "AIRLOCK_RUN_DIR";
/// The user (and group) a root start runs as when no one is named by `sudo`.
const NOBODY: u32 = 65534;

/// Who the child runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Drop {
    uid: u32,
    /// The Docker socket's group: the only group the child keeps.
    gid: u32,
    home: PathBuf,
    /// Whether the files the run keeps go back to root at its end (no `sudo` user to own them).
    hand_back: bool,
}

/// When this process is root: run the command again as an unprivileged user and return its exit
/// code. `None` when not root (go on as usual).
pub(crate) fn run_unprivileged_if_root() -> anyhow::Result<Option<u8>> {
    if std::env::var_os(CHILD_ENV).is_some() || airlock_driver_docker::current_user().0 != 0 {
        return Ok(None);
    }
    // A daemon that is not a local socket is refused by the driver with its own reason.
    let Some(socket) = docker_socket() else {
        return Ok(None);
    };
    let socket_gid = std::fs::metadata(&socket)
        .with_context(|| {
            format!(
                "started as root, Airlock runs as an unprivileged user in the Docker socket's group, but {} cannot be read: start dockerd (`cargo xtask docker`)",
                socket.display()
            )
        })?
        .gid();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let drop = choose(
        std::env::var("SUDO_UID").ok().as_deref(),
        socket_gid,
        &passwd,
    )?;
    let run_dir = if drop.hand_back {
        Some(private_run_dir(drop.uid)?)
    } else {
        None
    };
    eprintln!(
        "airlock: started as root; running as uid {} (group {}, the Docker socket's) so nothing that reads a browser's bytes runs as root",
        drop.uid, drop.gid
    );
    let code = crate::block_on(wait_for_child(&drop, run_dir.as_deref()))?;
    if let Some(dir) = run_dir {
        hand_back(&dir);
    }
    Ok(Some(code))
}

/// The Docker socket: `DOCKER_HOST` when it is a unix socket, the default when it is unset,
/// `None` when it names a remote daemon.
fn docker_socket() -> Option<PathBuf> {
    match std::env::var("DOCKER_HOST") {
        Ok(host) if !host.is_empty() => host.strip_prefix("unix://").map(PathBuf::from),
        _ => Some(PathBuf::from("/var/run/docker.sock")),
    }
}

/// Who to run as: the `sudo` user when named (their home from `passwd`), else `nobody`; always in
/// the Docker socket's group, which must not be root's own.
fn choose(sudo_uid: Option<&str>, socket_gid: u32, passwd: &str) -> anyhow::Result<Drop> {
    if socket_gid == 0 {
        bail!(
            "the Docker socket belongs to group root, so only root can use it, and Airlock gives root up before it starts anything: give the socket a group (Debian's docker.io uses `docker`), or start Airlock as a user in that group"
        );
    }
    let sudo_uid = sudo_uid
        .and_then(|uid| uid.parse::<u32>().ok())
        .filter(|uid| *uid != 0);
    Ok(match sudo_uid {
        Some(uid) => Drop {
            uid,
            gid: socket_gid,
            home: home_of(passwd, uid).unwrap_or_else(|| PathBuf::from("/nonexistent")),
            hand_back: false,
        },
        None => Drop {
            uid: NOBODY,
            gid: socket_gid,
            home: PathBuf::from("/nonexistent"),
            hand_back: true,
        },
    })
}

/// A user's home directory from `/etc/passwd` text.
fn home_of(passwd: &str, uid: u32) -> Option<PathBuf> {
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        let home = fields.get(5)?;
        (fields.get(2)?.parse::<u32>().ok()? == uid).then(|| PathBuf::from(home))
    })
}

/// A fresh private directory (0700, never one that existed) for the child's files, owned by it;
/// root takes it back at the end.
fn private_run_dir(uid: u32) -> anyhow::Result<PathBuf> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    let dir = std::env::temp_dir().join(format!("airlock-run-{}-{stamp}", std::process::id()));
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(&dir)
        .with_context(|| format!("making {} for the run's files", dir.display()))?;
    std::os::unix::fs::chown(&dir, Some(uid), None)
        .with_context(|| format!("giving {} to uid {uid}", dir.display()))?;
    Ok(dir)
}

/// Run this command again as `drop` and wait for it, passing SIGTERM on.
async fn wait_for_child(drop: &Drop, run_dir: Option<&Path>) -> anyhow::Result<u8> {
    let exe = std::env::current_exe().context("finding this program to run it unprivileged")?;
    let mut command = std::process::Command::new(exe);
    std::os::unix::process::CommandExt::uid(&mut command, drop.uid);
    std::os::unix::process::CommandExt::gid(&mut command, drop.gid);
    command
        .args(std::env::args_os().skip(1))
        .env(CHILD_ENV, "1")
        .env("HOME", &drop.home)
        // Root's own places, which the child could not use.
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_RUNTIME_DIR");
    if let Some(dir) = run_dir {
        command.env(RUN_DIR_ENV, dir);
    }
    // Listening before the child exists, so a signal in between is not lost.
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut child = command
        .spawn()
        .context("running Airlock as an unprivileged user")?;
    let pid = child.id().to_string();
    let mut waited = tokio::task::spawn_blocking(move || child.wait());
    let status = loop {
        tokio::select! {
            status = &mut waited => break status??,
            _ = terminate.recv() => {
                let _ = std::process::Command::new("kill").args(["-TERM", &pid]).status();
            }
            // The terminal sends Ctrl-C to the child too; the parent only outlives it.
            _ = interrupt.recv() => {}
        }
    };
    Ok(status
        .code()
        .and_then(|code| u8::try_from(code).ok())
        .unwrap_or(1))
}

/// Give the run's files to root, who asked for them; remove the directory if it kept nothing.
fn hand_back(dir: &Path) {
    let entries: Vec<PathBuf> = walk(dir);
    if entries.is_empty() {
        let _ = std::fs::remove_dir_all(dir);
        return;
    }
    for path in std::iter::once(dir.to_path_buf()).chain(entries) {
        // Never through a link the child made.
        let is_link =
            std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.file_type().is_symlink());
        if !is_link {
            let _ = std::os::unix::fs::chown(&path, Some(0), Some(0));
        }
    }
}

/// Everything below `dir`, without following links.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                pending.push(path.clone());
            }
            found.push(path);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str =
        "root:x:0:0:root:/root:/bin/bash\nalice:x:1001:1001::/home/alice:/bin/sh\n";

    #[test]
    fn root_becomes_the_sudo_user_or_nobody_in_the_sockets_group() {
        let alice = choose(Some("1001"), 105, PASSWD).unwrap();
        assert_eq!(
            alice,
            Drop {
                uid: 1001,
                gid: 105,
                home: PathBuf::from("/home/alice"),
                hand_back: false,
            }
        );
        for sudo in [None, Some("0"), Some("not a number")] {
            let nobody = choose(sudo, 105, PASSWD).unwrap();
            assert_eq!(
                (nobody.uid, nobody.gid, nobody.hand_back),
                (NOBODY, 105, true)
            );
        }
        let error = choose(None, 0, PASSWD).unwrap_err().to_string();
        assert!(error.contains("belongs to group root"), "{error}");
    }

    #[test]
    fn files_kept_are_handed_back_and_an_empty_run_leaves_nothing() {
        let empty = private_run_dir(airlock_driver_docker::current_user().0).unwrap();
        hand_back(&empty);
        assert!(!empty.exists(), "an empty run directory was left");
        let kept = tempfile::tempdir().unwrap();
        std::fs::write(kept.path().join("browse-1.png"), b"png").unwrap();
        hand_back(kept.path());
        assert!(kept.path().join("browse-1.png").exists());
    }
}
