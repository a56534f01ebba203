//! Session states on disk, as named contexts keep them and `airlock task` reads and writes them:
//! read bounded and held to the scope; written owner-only, whole or not at all.

use std::io::{Read, Write};
use std::path::Path;

use airlock_worker::{MAX_STATE_BYTES, Scope, SessionState, StateError};

/// Why a state file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    /// Reading failed.
    #[error("cannot read it: {0}")]
    Read(std::io::Error),
    /// What was read is not a state this task may start from.
    #[error(transparent)]
    Invalid(#[from] StateError),
    /// Writing failed (the directory is missing or not writable, or the disk is full).
    #[error("cannot write it: {0}; check the directory exists and is writable")]
    Write(std::io::Error),
}

/// A state from `reader`, bounded and held to `scope`.
///
/// # Errors
/// When it cannot be read, or is too large, malformed or outside `scope`.
pub fn read_state(reader: impl Read, scope: &Scope) -> Result<SessionState, StateFileError> {
    let bytes = read_bounded(reader, MAX_STATE_BYTES).map_err(StateFileError::Read)?;
    Ok(SessionState::parse(&bytes, scope)?)
}

/// Write `state` to `path` (0600): a private temporary file beside it, renamed over it, so it is
/// there whole or not at all.
///
/// # Errors
/// When the directory cannot take the file.
pub fn write_state(path: &Path, state: &SessionState) -> Result<(), StateFileError> {
    let mut file = tempfile::NamedTempFile::new_in(parent(path)).map_err(StateFileError::Write)?;
    let bytes = serde_json::to_vec(state).map_err(|e| StateFileError::Write(e.into()))?;
    file.write_all(&bytes).map_err(StateFileError::Write)?;
    file.persist(path)
        .map_err(|error| StateFileError::Write(error.error))?;
    Ok(())
}

/// At most `limit + 1` bytes: one past the limit, so what reads them can say it is over.
///
/// # Errors
/// When reading fails.
pub fn read_bounded(reader: impl Read, limit: usize) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader
        .take(u64::try_from(limit + 1).unwrap_or(u64::MAX))
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The directory `path` is in (`.` for a bare name).
#[must_use]
pub fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}
