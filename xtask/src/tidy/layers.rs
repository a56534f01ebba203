//! The layers rule: the diagram under "## Layers" in ARCHITECTURE.md, checked against what Cargo
//! actually builds.
//!
//! - The diagram is read top to bottom: each line that names `crates/NAME` puts those crates on
//!   one layer. A crate may depend only on crates on lower lines (never on one above it or beside
//!   it).
//! - Every crate under `crates/` is in the diagram, and everything the diagram names exists.
//! - A crate whose heading says `(pure)` has no I/O: no async runtime, network, process or file
//!   crate anywhere in its dependency tree, and no `std::fs`, `std::net` sockets, `std::process`,
//!   `std::env`, `std::thread` or `std::os` in its source.
//! - A crate with `publish = false` (the test kit) is dev-only: no crate depends on it except as a
//!   dev-dependency, and it depends on no workspace crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use anyhow::Context;

use crate::util::output;

/// Crates that do I/O or run an async runtime: never in a pure crate's dependency tree.
const IO_CRATES: &[&str] = &[
    "tokio",
    "async-std",
    "smol",
    "mio",
    "futures-io",
    "hyper",
    "reqwest",
    "hickory-resolver",
    "hickory-proto",
    "bollard",
    "rustix",
    "libc",
    "nix",
    "socket2",
    "tempfile",
];

/// Source text that means I/O in a pure crate.
const IO_PATHS: &[&str] = &[
    "std::fs",
    "std::process",
    "std::env",
    "std::thread",
    "std::os",
    "std::io::stdin",
    "std::io::stdout",
    "TcpStream",
    "TcpListener",
    "UdpSocket",
    "UnixStream",
    "ToSocketAddrs",
];

/// How a dependency is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Normal,
    Dev,
    Build,
}

/// What tidy needs to know of one workspace crate.
#[derive(Debug, Clone)]
pub(super) struct Crate {
    /// The package name (`airlock-proxy`).
    name: String,
    /// Its directory under `crates/` (`proxy`), or `None` for members elsewhere (xtask).
    dir: Option<String>,
    /// `publish = false`.
    dev_only: bool,
    /// Workspace crates it depends on, by package name, with how.
    depends_on: Vec<(String, Kind)>,
    /// Every package in its normal (non-dev) dependency tree, itself excluded.
    tree: BTreeSet<String>,
}

/// `cargo metadata` with its resolved graph, for this machine's target only.
pub(super) fn metadata(root: &Path) -> anyhow::Result<serde_json::Value> {
    let version = output(Command::new("rustc").arg("-vV"))?;
    let host = version
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .context("rustc -vV printed no host triple")?;
    let text = output(Command::new(env!("CARGO")).current_dir(root).args([
        "metadata",
        "--format-version",
        "1",
        "--locked",
        "--filter-platform",
        host,
    ]))?;
    serde_json::from_str(&text).context("reading cargo metadata")
}

/// The workspace's crates from `cargo metadata` (with its resolved graph).
pub(super) fn crates(metadata: &serde_json::Value, root: &Path) -> anyhow::Result<Vec<Crate>> {
    let members: BTreeSet<&str> = metadata["workspace_members"]
        .as_array()
        .context("cargo metadata has no workspace_members")?
        .iter()
        .filter_map(serde_json::Value::as_str)
        .collect();
    let packages = metadata["packages"].as_array().context("no packages")?;
    let name_of: BTreeMap<&str, &str> = packages
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, p["name"].as_str()?)))
        .collect();
    let member_names: BTreeSet<&str> = members
        .iter()
        .filter_map(|id| name_of.get(id).copied())
        .collect();
    // The resolved graph: package id → (dependency id, is it a normal or build dependency).
    let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for node in metadata["resolve"]["nodes"]
        .as_array()
        .context("no resolve graph")?
    {
        let Some(id) = node["id"].as_str() else {
            continue;
        };
        let deps = node["deps"].as_array().into_iter().flatten().filter(|dep| {
            dep["dep_kinds"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|kind| kind["kind"].as_str() != Some("dev"))
        });
        graph.insert(id, deps.filter_map(|dep| dep["pkg"].as_str()).collect());
    }
    let crates_dir = root.join("crates");
    let mut crates = Vec::new();
    for package in packages
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| members.contains(id)))
    {
        let name = package["name"]
            .as_str()
            .context("a package without a name")?
            .to_owned();
        let manifest = Path::new(package["manifest_path"].as_str().unwrap_or_default());
        let dir = manifest
            .parent()
            .filter(|dir| dir.parent() == Some(crates_dir.as_path()))
            .and_then(|dir| dir.file_name())
            .map(|dir| dir.to_string_lossy().into_owned());
        let dev_only = package["publish"].as_array().is_some_and(Vec::is_empty);
        let depends_on = package["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|dep| {
                let dep_name = dep["name"].as_str()?;
                member_names.contains(dep_name).then(|| {
                    let kind = match dep["kind"].as_str() {
                        Some("dev") => Kind::Dev,
                        Some("build") => Kind::Build,
                        _ => Kind::Normal,
                    };
                    (dep_name.to_owned(), kind)
                })
            })
            .collect();
        let mut tree = BTreeSet::new();
        let mut stack: Vec<&str> = package["id"].as_str().into_iter().collect();
        while let Some(id) = stack.pop() {
            for &dep in graph.get(id).into_iter().flatten() {
                if tree.insert(name_of.get(dep).copied().unwrap_or(dep).to_owned()) {
                    stack.push(dep);
                }
            }
        }
        crates.push(Crate {
            name,
            dir,
            dev_only,
            depends_on,
            tree,
        });
    }
    Ok(crates)
}

/// The diagram's layers, top first: the `crates/NAME` directories each line names.
fn layers(architecture: &str) -> Vec<Vec<String>> {
    let mut in_layers = false;
    let mut in_diagram = false;
    let mut layers = Vec::new();
    for line in architecture.lines() {
        if line.starts_with("## ") {
            if in_layers && in_diagram {
                break;
            }
            in_layers = line.trim() == "## Layers";
            continue;
        }
        if !in_layers {
            continue;
        }
        if line.trim_start().starts_with("```") {
            if in_diagram {
                break;
            }
            in_diagram = true;
            continue;
        }
        if !in_diagram {
            continue;
        }
        let named: Vec<String> = line
            .split_whitespace()
            .filter_map(|word| word.strip_prefix("crates/"))
            .map(|dir| {
                dir.trim_end_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_')
                    .to_owned()
            })
            .collect();
        if !named.is_empty() {
            layers.push(named);
        }
    }
    layers
}

/// The package names whose heading in ARCHITECTURE.md says `(pure)`: "### `airlock-address` (pure)".
pub(super) fn pure_crates(architecture: &str) -> Vec<String> {
    architecture
        .lines()
        .filter_map(|line| line.strip_prefix("### `"))
        .filter_map(|rest| rest.split_once('`'))
        .filter(|(_, after)| after.contains("(pure)"))
        .map(|(name, _)| name.to_owned())
        .collect()
}

/// Every rule that needs only the document and the dependency graph.
pub(super) fn check_layers(architecture: &str, crates: &[Crate]) -> Vec<String> {
    let mut problems = Vec::new();
    let layers = layers(architecture);
    if layers.is_empty() {
        problems.push(
            "ARCHITECTURE.md has no diagram of crates/… in a code block under \"## Layers\""
                .to_owned(),
        );
        return problems;
    }
    let rank_of_dir: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(rank, line)| line.iter().map(move |dir| (dir.as_str(), rank)))
        .collect();
    let by_name: BTreeMap<&str, &Crate> = crates.iter().map(|c| (c.name.as_str(), c)).collect();
    let rank = |name: &str| {
        by_name
            .get(name)
            .and_then(|c| c.dir.as_deref())
            .and_then(|dir| rank_of_dir.get(dir).copied())
    };
    for dir in rank_of_dir.keys() {
        if !crates.iter().any(|c| c.dir.as_deref() == Some(*dir)) {
            problems.push(format!("the diagram names crates/{dir}, which is not a workspace crate: remove it or fix its name"));
        }
    }
    for krate in crates {
        let Some(dir) = &krate.dir else { continue };
        let Some(own) = rank_of_dir.get(dir.as_str()).copied() else {
            problems.push(format!("crates/{dir} ({}) is missing from the diagram under \"## Layers\" in ARCHITECTURE.md: add it on the line below everything that depends on it", krate.name));
            continue;
        };
        for (dep, kind) in &krate.depends_on {
            let Some(dependency) = by_name.get(dep.as_str()) else {
                continue;
            };
            if dependency.dev_only {
                if *kind != Kind::Dev {
                    problems.push(format!("{} depends on {dep}, which is dev-only (publish = false): make it a dev-dependency", krate.name));
                }
                continue;
            }
            if krate.dev_only {
                problems.push(format!("{} is dev-only (publish = false) but depends on {dep}: test support must not depend on what it tests", krate.name));
                continue;
            }
            match rank(dep) {
                Some(theirs) if theirs > own => {}
                Some(theirs) => problems.push(format!(
                    "{} depends on {dep}, which the diagram puts {}: arrows point down only, so move a line in ARCHITECTURE.md or remove the dependency",
                    krate.name,
                    if theirs == own { "beside it" } else { "above it" }
                )),
                None => {}
            }
        }
    }
    for name in pure_crates(architecture) {
        let Some(krate) = by_name.get(name.as_str()) else {
            problems.push(format!(
                "ARCHITECTURE.md calls {name} pure, but there is no such crate"
            ));
            continue;
        };
        for io in IO_CRATES.iter().filter(|io| krate.tree.contains(**io)) {
            problems.push(format!("{name} is pure, but {io} is in its dependency tree (`cargo tree -p {name} -i {io}` shows how): keep I/O in the crates above it"));
        }
    }
    problems
}

/// A pure crate's source names no I/O.
pub(super) fn check_pure_source(root: &Path, name: &str, crates: &[Crate]) -> Vec<String> {
    let Some(dir) = crates
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.dir.as_deref())
    else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    for path in super::rust_files(&root.join("crates").join(dir).join("src")) {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        problems.extend(io_in_source(&text).into_iter().map(|(line, io)| {
            format!(
                "{name} is pure, but {}:{line} uses {io}: keep I/O in the crates above it",
                path.strip_prefix(root).unwrap_or(&path).display()
            )
        }));
    }
    problems
}

/// The lines (1-based) of `text` that name an I/O path, outside comments.
fn io_in_source(text: &str) -> Vec<(usize, &'static str)> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .flat_map(|(index, line)| {
            IO_PATHS
                .iter()
                .filter(move |io| line.contains(**io))
                .map(move |io| (index + 1, *io))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::workspace_root;

    const DOC: &str = "# Architecture\n\n## Layers\n\n```\ncrates/top          the binary\n   |\ncrates/left   crates/right\n   |\ncrates/base         pure: no I/O\n\ncrates/kit          dev-only\n```\n\n## Crates\n\n### `base` (pure)\n### `left`\n";

    fn krate(name: &str, deps: &[(&str, Kind)], tree: &[&str]) -> Crate {
        Crate {
            name: name.to_owned(),
            dir: Some(name.to_owned()),
            dev_only: name == "kit",
            depends_on: deps.iter().map(|(d, k)| ((*d).to_owned(), *k)).collect(),
            tree: tree.iter().map(|t| (*t).to_owned()).collect(),
        }
    }

    fn sound() -> Vec<Crate> {
        vec![
            krate(
                "top",
                &[
                    ("left", Kind::Normal),
                    ("base", Kind::Normal),
                    ("kit", Kind::Dev),
                ],
                &[],
            ),
            krate("left", &[("base", Kind::Normal), ("kit", Kind::Dev)], &[]),
            krate("right", &[], &["tokio"]),
            krate("base", &[("kit", Kind::Dev)], &["idna"]),
            krate("kit", &[], &["tokio"]),
        ]
    }

    #[test]
    fn the_diagram_is_read_top_down_with_siblings_on_one_line() {
        assert_eq!(
            layers(DOC),
            vec![
                vec!["top"],
                vec!["left", "right"],
                vec!["base"],
                vec!["kit"]
            ]
        );
        assert_eq!(pure_crates(DOC), vec!["base"]);
        assert_eq!(check_layers(DOC, &sound()), Vec::<String>::new());
    }

    #[test]
    fn a_dependency_on_a_crate_above_or_beside_is_refused() {
        let mut crates = sound();
        crates[3].depends_on.push(("left".into(), Kind::Normal));
        crates[1].depends_on.push(("right".into(), Kind::Dev));
        let problems = check_layers(DOC, &crates);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("left depends on right, which the diagram puts beside it"));
        assert!(problems[1].contains("base depends on left, which the diagram puts above it"));
    }

    #[test]
    fn a_crate_missing_from_the_diagram_and_a_stale_name_are_refused() {
        let mut crates = sound();
        crates.push(krate("new", &[], &[]));
        crates.retain(|c| c.name != "right");
        let problems = check_layers(DOC, &crates);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems
                .iter()
                .any(|p| p.contains("crates/right, which is not a workspace crate"))
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("crates/new (new) is missing from the diagram"))
        );
    }

    #[test]
    fn a_pure_crate_with_io_in_its_tree_or_source_is_refused() {
        let mut crates = sound();
        crates[3].tree.insert("tokio".into());
        let problems = check_layers(DOC, &crates);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("base is pure, but tokio is in its dependency tree"));

        let source = "use std::net::IpAddr;\n// std::fs in a comment is fine\nfn f() { std::fs::read(\"x\"); }\nlet s = TcpStream::connect(a);\n";
        assert_eq!(io_in_source(source), vec![(3, "std::fs"), (4, "TcpStream")]);
    }

    #[test]
    fn the_test_kit_is_only_a_dev_dependency_and_depends_on_nothing_of_ours() {
        let mut crates = sound();
        crates[1].depends_on.push(("kit".into(), Kind::Normal));
        crates[4].depends_on.push(("base".into(), Kind::Normal));
        let problems = check_layers(DOC, &crates);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("left depends on kit, which is dev-only"));
        assert!(problems[1].contains("kit is dev-only (publish = false) but depends on base"));
    }

    #[test]
    fn this_workspace_holds_its_own_layers() {
        // The real document and the real graph: the same check CI runs.
        let root = workspace_root();
        let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
        let metadata = metadata(&root).unwrap();
        let crates = crates(&metadata, &root).unwrap();
        assert!(
            crates
                .iter()
                .any(|c| c.name == "airlock-proxy" && c.tree.contains("tokio"))
        );
        assert_eq!(check_layers(&architecture, &crates), Vec::<String>::new());
    }
}
