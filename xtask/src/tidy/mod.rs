//! `cargo xtask tidy`: the rules that keep the house in order, checked on the real tree.
//!
//! - `layers`: the diagram in ARCHITECTURE.md against Cargo's real dependency graph (arrows point
//!   down only, pure crates do no I/O, the test kit is dev-only).
//! - `sizes`: a source file stays within 600 lines and a test file within 800, but for the listed
//!   exceptions, each with its reason.
//! - `circles`: no modules of one crate import each other in a circle, of two or more (what they
//!   share is a module of its own).
//! - `reference`: the generated `docs/reference.md` matches the flags and metrics.

mod circles;
mod layers;
mod reference;
mod sizes;

use anyhow::{Context, bail};

use crate::util::workspace_root;

pub(crate) fn run() -> anyhow::Result<()> {
    let root = workspace_root();
    let architecture =
        std::fs::read_to_string(root.join("ARCHITECTURE.md")).context("reading ARCHITECTURE.md")?;
    let metadata = layers::metadata(&root)?;
    let crates = layers::crates(&metadata, &root)?;
    let mut problems = layers::check_layers(&architecture, &crates);
    for name in layers::pure_crates(&architecture) {
        problems.extend(layers::check_pure_source(&root, &name, &crates));
    }
    problems.extend(sizes::check(&root));
    problems.extend(circles::check(&root));
    problems.extend(reference::check(&root));
    if problems.is_empty() {
        println!(
            "tidy: the layers in ARCHITECTURE.md hold ({} crates); no file over its size; no circles of modules; the reference is fresh",
            crates.len()
        );
        return Ok(());
    }
    for problem in &problems {
        eprintln!("tidy: {problem}");
    }
    bail!("{} problem(s) found by tidy", problems.len())
}

/// Every `.rs` file below `dir`, sorted, never through a symlink.
pub(crate) fn rust_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() && path.extension().is_some_and(|ext| ext == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}
