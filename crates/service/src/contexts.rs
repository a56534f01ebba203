//! Named contexts: a session state Airlock keeps between tasks (`--context NAME`, `context` in
//! `browser_task` and `POST /v1/tasks`). A task loads its context's state and saves the final one
//! back; one task at a time per context (a second is refused, not queued: the error says so).
//! Stored owner-only under `AIRLOCK_CONTEXTS_DIR`, else `$XDG_DATA_HOME/airlock/contexts`, else
//! `~/.local/share/airlock/contexts`, one directory per owner: `local` for the command line and
//! stdio, a digest of the token for `serve`, so tokens never share one.

use std::fs::{DirBuilder, File, OpenOptions};

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use airlock_worker::{Scope, SessionState};
use sha2::{Digest, Sha256};

/// The owner of the command line's and stdio's contexts.
pub const LOCAL_OWNER: &str = "local";

/// The owner name for a `serve` token: a digest, so the token is never on disk.
pub fn token_owner(token: &[u8]) -> String {
    let digest = Sha256::digest(token);
    format!("token-{}", hex::encode(&digest[..12]))
}

/// `O_NOFOLLOW`: a context's files are never reached through a symlink.
fn no_follow() -> i32 {
    // Invariant: the flag is 0o400000 on Linux, well inside an i32.
    i32::try_from(rustix::fs::OFlags::NOFOLLOW.bits()).unwrap_or(0)
}

/// Why a context's state could not be found, read or saved.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// No directory to keep contexts in.
    #[error("contexts need a home: set AIRLOCK_CONTEXTS_DIR (or XDG_DATA_HOME or HOME)")]
    NoHome,
    /// Its file could not be opened.
    #[error("cannot read context `{name}`: {source}")]
    Open {
        /// The context.
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// Its file could not be read, or holds no state this task may start from.
    #[error("context `{name}`: {source}")]
    Read {
        /// The context.
        name: String,
        /// Why.
        source: crate::state_file::StateFileError,
    },
    /// Its state could not be saved.
    #[error("cannot save context `{name}`: {source}")]
    Save {
        /// The context.
        name: String,
        /// Why.
        source: crate::state_file::StateFileError,
    },
}

/// Where contexts live, or why there is nowhere.
pub fn root() -> Result<PathBuf, ContextError> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("AIRLOCK_CONTEXTS_DIR") {
        return Ok(PathBuf::from(dir));
    }
    var("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".local/share")))
        .map(|data| data.join("airlock").join("contexts"))
        .ok_or(ContextError::NoHome)
}

/// Why a context could not be taken for a task.
#[derive(Debug, thiserror::Error)]
pub enum TakeError {
    /// The name is not one a context can have.
    #[error("context name `{0}` is not valid: use 1 to 64 letters, digits, `_` or `-`")]
    BadName(String),
    /// Another task holds it; it is free again when that task ends.
    #[error(
        "context `{0}` is in use by another task: one task at a time per context; try again when it ends"
    )]
    InUse(String),
    /// Its directory or lock file could not be opened.
    #[error("{what}: {source}; check the contexts directory (AIRLOCK_CONTEXTS_DIR)")]
    Io {
        /// What was being done.
        what: String,
        /// The system's error.
        source: std::io::Error,
    },
}

/// A context held by one task: its lock is released when this is dropped.
#[derive(Debug)]
pub struct ContextLease {
    name: String,
    path: PathBuf,
    // An exclusive `flock` on the lock file: released by the kernel however the process ends.
    _lock: File,
}

impl ContextLease {
    /// Take context `name` of `owner` under `root` for one task, or refuse if a task holds it.
    pub fn take(root: &Path, owner: &str, name: &str) -> Result<Self, TakeError> {
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(TakeError::BadName(name.chars().take(80).collect()));
        }
        let dir = root.join(owner);
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|source| TakeError::Io {
                what: format!("cannot make the contexts directory {}", dir.display()),
                source,
            })?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(no_follow())
            .open(dir.join(format!("{name}.lock")))
            .map_err(|source| TakeError::Io {
                what: format!("cannot open the lock of context `{name}`"),
                source,
            })?;
        if rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
            return Err(TakeError::InUse(name.to_owned()));
        }
        Ok(Self {
            name: name.to_owned(),
            path: dir.join(format!("{name}.json")),
            _lock: lock,
        })
    }

    /// The context's state for a task confined to `scope` (`None` for a new context).
    pub fn load(&self, scope: &Scope) -> Result<Option<SessionState>, ContextError> {
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(no_follow())
            .open(&self.path)
        {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => {
                return Err(ContextError::Open {
                    name: self.name.clone(),
                    source: error,
                });
            }
        };
        crate::state_file::read_state(file, scope)
            .map(Some)
            .map_err(|source| ContextError::Read {
                name: self.name.clone(),
                source,
            })
    }

    /// Save the task's final state (0600, written whole then renamed into place).
    pub fn save(&self, state: &SessionState) -> Result<(), ContextError> {
        crate::state_file::write_state(&self.path, state).map_err(|source| ContextError::Save {
            name: self.name.clone(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_is_held_by_one_task_kept_owner_only_and_per_owner() {
        let root = tempfile::tempdir().unwrap();
        let scope = Scope::parse(["shop.example"], [] as [&str; 0]).unwrap();
        let lease = ContextLease::take(root.path(), LOCAL_OWNER, "shop").unwrap();
        assert_eq!(lease.load(&scope).unwrap(), None);
        let busy = ContextLease::take(root.path(), LOCAL_OWNER, "shop").unwrap_err();
        assert!(
            matches!(&busy, TakeError::InUse(name) if name == "shop"),
            "{busy}"
        );
        assert!(
            busy.to_string().contains("in use by another task"),
            "{busy}"
        );
        let state: SessionState = serde_json::from_value(serde_json::json!({
            "cookies": [{"name": "sid", "value": "v-1234", "domain": "shop.example"}]
        }))
        .unwrap();
        lease.save(&state).unwrap();
        drop(lease);
        let again = ContextLease::take(root.path(), LOCAL_OWNER, "shop").unwrap();
        assert_eq!(again.load(&scope).unwrap(), Some(state));
        let meta = std::fs::metadata(root.path().join("local/shop.json")).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
            0o600
        );
        let dir = std::fs::metadata(root.path().join("local")).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&dir.permissions()) & 0o777,
            0o700
        );
        // Another owner's context of the same name is another context.
        let other = ContextLease::take(root.path(), &token_owner(b"t"), "shop").unwrap();
        assert_eq!(other.load(&scope).unwrap(), None);
        // A stored state outside the task's scope is refused, naming the cookie.
        let narrower = Scope::parse(["other.example"], [] as [&str; 0]).unwrap();
        let error = again.load(&narrower).unwrap_err().to_string();
        assert!(error.contains("cookie `sid` for shop.example") && !error.contains("v-1234"));
        for bad in ["", "../x", "a b", &"x".repeat(65)] {
            assert!(
                ContextLease::take(root.path(), LOCAL_OWNER, bad).is_err(),
                "{bad}"
            );
        }
    }
}
