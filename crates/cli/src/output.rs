//! Writing kept screenshots and downloaded files: a private directory, private files, never
//! overwriting, no symlinks.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use airlock_worker::{Download, Image};
use anyhow::{Context, bail};

/// Make `dir` (mode 0700) if missing. An existing one must be a real directory (not a symlink)
/// that this user owns and nobody else can write to, so no one can swap or plant files in it.
pub(crate) fn prepare_dir(dir: &Path) -> anyhow::Result<()> {
    prepare_dir_for("--out", dir)
}

/// [`prepare_dir`] for the directory given as `flag`, which its errors name.
pub(crate) fn prepare_dir_for(flag: &str, dir: &Path) -> anyhow::Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => {
            bail!(
                "{flag} {} is a symlink: give a real directory",
                dir.display()
            )
        }
        Ok(meta) if !meta.is_dir() => bail!("{flag} {} is not a directory", dir.display()),
        Ok(meta) if meta.uid() != current_uid() => bail!(
            "{flag} {} belongs to uid {}, not to you: give a directory of your own (or a new path, which is created 0700)",
            dir.display(),
            meta.uid()
        ),
        Ok(meta) if meta.mode() & 0o022 != 0 => bail!(
            "{flag} {} can be written by other users (mode {:o}): run `chmod go-w {}`, or give a private directory",
            dir.display(),
            meta.mode() & 0o7777,
            dir.display()
        ),
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating {flag} {}", dir.display())),
        Err(error) => Err(error).with_context(|| format!("checking {flag} {}", dir.display())),
    }
}

/// A fresh private directory for a run's files when no `--out` was given, so a command works
/// from any directory (a shared `/tmp`, a checkout owned by someone else): `runs/<time>-<pid>`
/// under `$XDG_DATA_HOME/airlock` (else `~/.local/share/airlock`), else under the temp dir. Every
/// directory it makes is 0700, and the last one is new: nothing is reused.
pub(crate) fn default_run_dir() -> anyhow::Result<PathBuf> {
    // Started as root, the run's files go where root will take them back (`privsep.rs`).
    if let Some(dir) = std::env::var_os(crate::privsep::RUN_DIR_ENV) {
        let dir = PathBuf::from(dir);
        prepare_dir(&dir)?;
        return Ok(dir);
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|home| !home.is_empty())
                .map(|home| PathBuf::from(home).join(".local/share"))
        });
    let stamp = format!(
        "{}-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs()),
        std::process::id()
    );
    let under_data = data.map(|data| data.join("airlock").join("runs"));
    for parent in under_data
        .into_iter()
        .chain([std::env::temp_dir().join(format!("airlock-runs-{}", current_uid()))])
    {
        if fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&parent)
            .is_err()
            || prepare_dir(&parent).is_err()
        {
            continue;
        }
        let dir = parent.join(&stamp);
        if fs::DirBuilder::new().mode(0o700).create(&dir).is_ok() {
            return Ok(dir);
        }
    }
    bail!(
        "no private directory could be made for this run's files (in $XDG_DATA_HOME, ~/.local/share or the temp dir): pass --out DIR"
    )
}

/// Write each image as `<stem>-<n>.<ext>` (mode 0600), skipping names that exist.
pub(crate) fn save_images(
    dir: &Path,
    stem: &str,
    images: &[Image],
) -> anyhow::Result<Vec<PathBuf>> {
    prepare_dir(dir)?;
    let mut saved = Vec::with_capacity(images.len());
    let mut number = 1;
    for image in images {
        let ext = if image.media_type == "image/jpeg" {
            "jpg"
        } else {
            "png"
        };
        // Numbers go on across images, so each takes the next free one.
        let names = std::iter::from_fn(|| {
            let name = format!("{stem}-{number}.{ext}");
            number += 1;
            Some(name)
        });
        saved.push(write_new(dir, names, &image.data)?);
    }
    Ok(saved)
}

/// Write each downloaded file under its own name, prefixed `download-` (mode 0600; the name is
/// already plain: letters, digits, `.`, `_`, `-`), or `download-<n>-<name>` where that exists.
/// Nothing is run or opened.
pub(crate) fn save_downloads(dir: &Path, files: &[Download]) -> anyhow::Result<Vec<PathBuf>> {
    prepare_dir(dir)?;
    let mut saved = Vec::with_capacity(files.len());
    for file in files {
        let names = std::iter::once(format!("download-{}", file.name))
            .chain((2..).map(|number| format!("download-{number}-{}", file.name)));
        saved.push(write_new(dir, names, &file.data)?);
    }
    Ok(saved)
}

/// Write `<stem>.<ext>` (mode 0600), or `<stem>-<n>.<ext>` where that exists.
pub(crate) fn save_named(
    flag: &str,
    dir: &Path,
    stem: &str,
    ext: &str,
    bytes: &[u8],
) -> anyhow::Result<PathBuf> {
    prepare_dir_for(flag, dir)?;
    let names = std::iter::once(format!("{stem}.{ext}"))
        .chain((2..).map(|number| format!("{stem}-{number}.{ext}")));
    write_new(dir, names, bytes)
}

/// Write `bytes` (mode 0600) under the first of `names` that does not exist in `dir`.
fn write_new(
    dir: &Path,
    names: impl Iterator<Item = String>,
    bytes: &[u8],
) -> anyhow::Result<PathBuf> {
    for name in names {
        let path = dir.join(name);
        // create_new refuses existing files and symlinks alike: nothing is overwritten.
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(mut file) => {
                file.write_all(bytes)
                    .with_context(|| format!("writing {}", path.display()))?;
                return Ok(path);
            }
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => {
                return Err(error).with_context(|| format!("creating {}", path.display()));
            }
        }
    }
    bail!("no free file name in {}", dir.display())
}

/// This process's uid, as the owner of directories it may write into.
fn current_uid() -> u32 {
    airlock_driver_docker::current_user().0
}
