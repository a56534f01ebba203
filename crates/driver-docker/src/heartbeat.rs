//! A liveness signal an owner's successor can read on the node, for owners whose process cannot
//! be seen from there: a replica in a PID namespace of its own with no Docker container to ask
//! about (a Kubernetes pod). The engine names the replica (`AIRLOCK_OWNER`, the pod's name from
//! the downward API); each process of it keeps a file named after itself (that name, its pid and
//! start time) fresh in the state directory, every [`BEAT_EVERY`]. An owner whose file is older
//! than [`STALE_AFTER`], or gone, is gone, and what it left is removed.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tokio::task::JoinHandle;

/// The variable that names this replica.
pub(crate) const OWNER_ENV: &str = "AIRLOCK_OWNER";
/// How often a live owner refreshes its file.
pub(crate) const BEAT_EVERY: Duration = Duration::from_secs(10);
/// How old a file may be before its owner counts as gone: six missed beats.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(60);
/// The directory of heartbeat files, in the state directory (the temp dir; `/var/lib/airlock`
/// in the server image, mounted from the node, so a successor on the node sees it).
const DIR_NAME: &str = "airlock-owners";

/// Where heartbeat files live.
pub(crate) fn default_dir() -> PathBuf {
    std::env::temp_dir().join(DIR_NAME)
}

/// Whether `name` can name a replica: 1 to 63 of `[A-Za-z0-9.-]` (a pod's name fits).
pub(crate) fn valid_name(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
}

/// This process's heartbeat name, `<AIRLOCK_OWNER>.<pid>.<start time>`, when the engine named
/// the replica: unique per process, so a restarted replica of the same name never keeps its
/// predecessor's leftovers alive.
pub(crate) fn own_instance(start_time: &str) -> Option<String> {
    let name = std::env::var(OWNER_ENV).ok()?;
    valid_name(&name).then(|| format!("{name}.{}.{start_time}", std::process::id()))
}

/// Whether the heartbeat of `instance` in `dir` is fresh at `now`.
pub(crate) fn beating(dir: &Path, instance: &str, now: SystemTime) -> bool {
    // An instance name from a label is text anyone who can label a container chose: no paths.
    if !instance
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        || instance.is_empty()
        || instance.starts_with('.')
    {
        return false;
    }
    std::fs::metadata(dir.join(instance))
        .and_then(|meta| meta.modified())
        .is_ok_and(|at| now.duration_since(at).unwrap_or_default() < STALE_AFTER)
}

/// Keeps this process's heartbeat fresh while it lives; removes the file when dropped.
#[derive(Debug)]
pub(crate) struct Heartbeat {
    path: PathBuf,
    beating: JoinHandle<()>,
}

impl Heartbeat {
    /// Start beating as `instance` in `dir` (made 0700 if missing). Call within a Tokio runtime.
    pub(crate) fn start(dir: &Path, instance: &str) -> std::io::Result<Self> {
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(dir)?;
        let path = dir.join(instance);
        std::fs::write(&path, b"")?;
        let touched = path.clone();
        let beating = tokio::spawn(async move {
            let mut every = tokio::time::interval(BEAT_EVERY);
            loop {
                every.tick().await;
                let now = std::fs::FileTimes::new().set_modified(SystemTime::now());
                if let Err(error) = std::fs::File::options()
                    .write(true)
                    .open(&touched)
                    .and_then(|file| file.set_times(now))
                {
                    tracing::warn!(%error, path = %touched.display(), "could not refresh this replica's heartbeat");
                }
            }
        });
        Ok(Self { path, beating })
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.beating.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_file_beats_and_a_stale_or_missing_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        std::fs::write(dir.path().join("pod-a.7.100"), b"").unwrap();
        let stale = std::fs::File::create(dir.path().join("pod-b.7.100")).unwrap();
        stale
            .set_times(
                std::fs::FileTimes::new().set_modified(now - STALE_AFTER - Duration::from_secs(1)),
            )
            .unwrap();
        assert!(beating(dir.path(), "pod-a.7.100", now));
        assert!(!beating(dir.path(), "pod-b.7.100", now));
        assert!(!beating(dir.path(), "pod-c.7.100", now), "no file: gone");
        for hostile in ["../pod-a.7.100", ".", "..", "a/b", ""] {
            assert!(!beating(dir.path(), hostile, now), "{hostile}");
        }
        assert!(valid_name("airlock-7d9f8-x2k4p") && !valid_name("a;b") && !valid_name(""));
    }

    #[tokio::test]
    async fn a_heartbeat_keeps_its_file_while_it_lives_and_removes_it_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let beats = dir.path().join("airlock-owners");
        let heartbeat = Heartbeat::start(&beats, "pod-a.7.100").unwrap();
        assert!(beating(&beats, "pod-a.7.100", SystemTime::now()));
        drop(heartbeat);
        assert!(!beats.join("pod-a.7.100").exists());
    }
}
