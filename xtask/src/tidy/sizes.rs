//! The size rule: a file a reviewer can hold in their head. A source file (under `src/`,
//! `benches/` or `examples/`) has at most 600 lines, a test file (under `tests/`) at most 800; a
//! file that must be longer is named in [`EXCEPTIONS`] with its reason, so the choice is read in
//! review instead of made by drift.

use std::path::Path;

/// The most lines of a source file.
const SOURCE_LIMIT: usize = 600;
/// The most lines of a test file.
const TEST_LIMIT: usize = 800;

/// Files allowed past their limit: (path from the workspace root, why). Empty is the goal.
const EXCEPTIONS: &[(&str, &str)] = &[];

/// Which limit a file falls under, by where it lives; `None` for a file no limit applies to.
fn limit_for(relative: &Path) -> Option<usize> {
    let parts: Vec<&str> = relative
        .components()
        .filter_map(|part| part.as_os_str().to_str())
        .collect();
    // crates/NAME/<kind>/… or xtask/<kind>/…
    let kind = match parts.as_slice() {
        ["crates", _, kind, ..] | ["xtask", kind, ..] => *kind,
        _ => return None,
    };
    match kind {
        "src" | "benches" | "examples" => Some(SOURCE_LIMIT),
        "tests" => Some(TEST_LIMIT),
        _ => None,
    }
}

/// Every file over its limit that is not an exception, and every exception that no longer needs
/// to be one (so the list cannot go stale).
pub(super) fn check(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for top in ["crates", "xtask"] {
        for path in super::rust_files(&root.join(top)) {
            let relative = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            let lines = std::fs::read_to_string(&path).map_or(0, |text| text.lines().count());
            files.push((relative, lines));
        }
    }
    judge(&files, EXCEPTIONS)
}

/// The rule on (path, line count) pairs, with the exceptions given.
fn judge(files: &[(std::path::PathBuf, usize)], exceptions: &[(&str, &str)]) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, lines) in files {
        let Some(limit) = limit_for(path) else {
            continue;
        };
        let excepted = exceptions
            .iter()
            .any(|(name, _)| Path::new(name) == path.as_path());
        if *lines > limit && !excepted {
            problems.push(format!(
                "{} has {lines} lines, over the {limit} allowed: split it by job (a module per step, the parent the map), or add it to EXCEPTIONS in xtask/src/tidy/sizes.rs with the reason",
                path.display()
            ));
        }
        if *lines <= limit && excepted {
            problems.push(format!(
                "{} is within its {limit} lines now: remove it from EXCEPTIONS in xtask/src/tidy/sizes.rs",
                path.display()
            ));
        }
    }
    for (name, _) in exceptions {
        if !files
            .iter()
            .any(|(path, _)| Path::new(name) == path.as_path())
        {
            problems.push(format!(
                "EXCEPTIONS in xtask/src/tidy/sizes.rs names {name}, which does not exist: remove it"
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn files(list: &[(&str, usize)]) -> Vec<(PathBuf, usize)> {
        list.iter()
            .map(|(path, lines)| (PathBuf::from(path), *lines))
            .collect()
    }

    #[test]
    fn a_source_file_over_600_and_a_test_file_over_800_are_refused() {
        let tree = files(&[
            ("crates/a/src/lib.rs", 600),
            ("crates/a/src/big.rs", 601),
            ("crates/a/tests/run.rs", 800),
            ("crates/a/tests/huge.rs", 801),
            ("crates/a/benches/b.rs", 700),
            ("xtask/src/cluster.rs", 621),
            ("crates/a/build.rs", 5000),
        ]);
        let problems = judge(&tree, &[]);
        assert_eq!(problems.len(), 4, "{problems:?}");
        for (file, limit) in [
            ("crates/a/src/big.rs has 601 lines", 600),
            ("crates/a/tests/huge.rs has 801 lines", 800),
            ("crates/a/benches/b.rs has 700 lines", 600),
            ("xtask/src/cluster.rs has 621 lines", 600),
        ] {
            assert!(
                problems
                    .iter()
                    .any(|p| p.starts_with(file) && p.contains(&format!("the {limit} allowed"))),
                "{file}: {problems:?}"
            );
        }
    }

    #[test]
    fn an_exception_is_allowed_until_it_is_no_longer_needed_or_gone() {
        let tree = files(&[("crates/a/src/big.rs", 900), ("crates/a/src/small.rs", 10)]);
        assert!(judge(&tree, &[("crates/a/src/big.rs", "generated table")]).is_empty());
        let stale = judge(
            &tree,
            &[
                ("crates/a/src/small.rs", "was big once"),
                ("crates/a/src/gone.rs", "deleted"),
            ],
        );
        assert_eq!(stale.len(), 3, "{stale:?}");
        assert!(stale[0].starts_with("crates/a/src/big.rs has 900 lines"));
        assert!(stale[1].contains("small.rs is within its 600 lines now"));
        assert!(stale[2].contains("names crates/a/src/gone.rs, which does not exist"));
    }

    #[test]
    fn this_workspace_keeps_its_files_within_their_sizes() {
        assert_eq!(check(&crate::util::workspace_root()), Vec::<String>::new());
    }
}
