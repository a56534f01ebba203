//! The `reference` rule: `docs/reference.md` (every flag with its variable, file key, default and
//! range; every metric) is generated from the binary's own definitions, and must match them.
//!
//! The generator lives beside the flags, in the `airlock` binary's tests (`reference_is_fresh`),
//! so this rule runs that one test. It is built with the whole workspace's features, as
//! `cargo test --workspace` builds it, so CI compiles it once.

use std::path::Path;
use std::process::Command;

/// A problem when the reference is stale (or cannot be checked), with the command that renews it.
pub(super) fn check(root: &Path) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let ran = Command::new(cargo)
        .current_dir(root)
        .args([
            "test",
            "--quiet",
            "--workspace",
            "--bin",
            "airlock",
            "--",
            "--exact",
            "reference::reference_is_fresh",
        ])
        .env_remove("AIRLOCK_UPDATE_REFERENCE")
        .output();
    match ran {
        Ok(output) if output.status.success() => Vec::new(),
        Ok(output) => vec![format!(
            "docs/reference.md does not match the flags and metrics: run `AIRLOCK_UPDATE_REFERENCE=1 cargo test -p airlock --bin airlock reference` and commit it\n{}",
            String::from_utf8_lossy(&output.stdout)
                .lines()
                .chain(String::from_utf8_lossy(&output.stderr).lines())
                .filter(|line| line.contains("stale") || line.contains("error"))
                .collect::<Vec<_>>()
                .join("\n")
        )],
        Err(error) => vec![format!(
            "cannot run cargo to check docs/reference.md: {error}"
        )],
    }
}
