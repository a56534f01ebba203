//! The files `airlock task` takes and writes: session states (`--state`, `--save-state`: read
//! bounded and held to the scope; written owner-only, whole or not at all, never through a
//! symlink) and files to upload (`--file`: read bounded, named by their file name).

use std::io::{Read, Write};
use std::path::Path;

use airlock_worker::{MAX_STATE_BYTES, MAX_UPLOAD_BYTES, Scope, SessionState, Uploads};
use anyhow::Context;

/// Read a state file for a task confined to `scope`.
pub fn read(path: &Path, scope: &Scope) -> anyhow::Result<SessionState> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("--state {}: cannot read it", path.display()))?;
    let mut bytes = Vec::new();
    file.take(u64::try_from(MAX_STATE_BYTES + 1).unwrap_or(u64::MAX))
        .read_to_end(&mut bytes)
        .with_context(|| format!("--state {}: cannot read it", path.display()))?;
    SessionState::parse(&bytes, scope)
        .map_err(|e| anyhow::anyhow!("--state {}: {e}", path.display()))
}

/// Refuse, before the task runs, a `--save-state` path whose directory is missing or that is a
/// symlink or not a regular file.
pub fn check_writable(path: &Path) -> anyhow::Result<()> {
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

/// Write the state (0600): to a private temporary file beside it, then renamed over it.
pub fn write(path: &Path, state: &SessionState) -> anyhow::Result<()> {
    check_writable(path)?;
    let mut file = tempfile::NamedTempFile::new_in(parent(path))
        .with_context(|| format!("--save-state {}: cannot write there", path.display()))?;
    file.write_all(&serde_json::to_vec_pretty(state)?)?;
    file.persist(path)
        .with_context(|| format!("--save-state {}: cannot write it", path.display()))?;
    Ok(())
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// The `--file`s, each read bounded and named by its file name.
pub fn uploads(paths: &[std::path::PathBuf]) -> anyhow::Result<Uploads> {
    let files = paths
        .iter()
        .map(|path| {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .with_context(|| format!("--file {}: it names no file", path.display()))?
                .to_owned();
            let file = std::fs::File::open(path)
                .with_context(|| format!("--file {}: cannot read it", path.display()))?;
            let mut bytes = Vec::new();
            file.take(u64::try_from(MAX_UPLOAD_BYTES + 1).unwrap_or(u64::MAX))
                .read_to_end(&mut bytes)
                .with_context(|| format!("--file {}: cannot read it", path.display()))?;
            Ok((name, bytes))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Uploads::new(files).map_err(|e| anyhow::anyhow!("--file: {e}"))
}
