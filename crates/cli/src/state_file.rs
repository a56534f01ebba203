//! The files `airlock task` takes and writes: session states (`--state`, `--save-state`, through
//! [`airlock_service::state_file`], never through a symlink) and files to upload (`--file`: read
//! bounded, named by their file name).

use std::path::Path;

use airlock_service::state_file::{parent, read_bounded, read_state, write_state};
use airlock_worker::{MAX_UPLOAD_BYTES, Scope, SessionState, Uploads};
use anyhow::Context;

/// Read a state file for a task confined to `scope`.
pub(crate) fn read(path: &Path, scope: &Scope) -> anyhow::Result<SessionState> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("--state {}: cannot read it", path.display()))?;
    read_state(file, scope).map_err(|e| anyhow::anyhow!("--state {}: {e:#}", path.display()))
}

/// Refuse, before the task runs, a `--save-state` path whose directory is missing or that is a
/// symlink or not a regular file.
pub(crate) fn check_writable(path: &Path) -> anyhow::Result<()> {
    let dir = parent(path);
    if !dir.is_dir() {
        anyhow::bail!(
            "--save-state {}: the directory {} does not exist",
            path.display(),
            dir.display()
        );
    }
    if let Ok(meta) = path.symlink_metadata()
        && !meta.file_type().is_file()
    {
        anyhow::bail!(
            "--save-state {}: it exists and is not a regular file (a symlink?): name a new file",
            path.display()
        );
    }
    Ok(())
}

/// Write `--save-state` (0600, whole or not at all).
pub(crate) fn write(path: &Path, state: &SessionState) -> anyhow::Result<()> {
    check_writable(path)?;
    write_state(path, state).map_err(|e| anyhow::anyhow!("--save-state {}: {e:#}", path.display()))
}

/// The `--file`s, each read bounded and named by its file name.
pub(crate) fn uploads(paths: &[std::path::PathBuf]) -> anyhow::Result<Uploads> {
    let files = paths
        .iter()
        .map(|path| {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .with_context(|| format!("--file {}: it names no file", path.display()))?
                .to_owned();
            let bytes = std::fs::File::open(path)
                .and_then(|file| read_bounded(file, MAX_UPLOAD_BYTES))
                .with_context(|| format!("--file {}: cannot read it", path.display()))?;
            Ok((name, bytes))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Uploads::new(files).map_err(|e| anyhow::anyhow!("--file: {e}"))
}
