//! The no-circles rule: no modules of one crate import each other in a circle, of two (`a` needs
//! `b` and `b` needs `a`) or of more (`a → b → c → a`). Modules in a circle cannot be read,
//! tested or moved alone; what they share belongs in a module of its own. Circles are found whole,
//! as the strongly connected components of the graph of imports, and each is shown as one loop.
//!
//! Read from the source, not the compiler: each crate root (`src/lib.rs`, `src/main.rs`,
//! `src/bin/*.rs`, and each file directly under `tests/`, `benches/`, `examples/`) is followed
//! through its `mod NAME;` declarations. A module refers to another through `crate::`, `super::`
//! and `self::` paths anywhere in its text, and through `use` of a child's name. A name the
//! target re-exports (`use`, `pub use`) is followed to where it comes from, so a circle cannot
//! hide behind a parent's re-export. A parent and its own descendants may refer to each other
//! (a parent is the map of its children); inline `mod NAME { … }` blocks belong to their file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod graph;

use graph::circles;

/// A module by its path from the crate root (`["serve_cmd", "gate"]`); the root is `[]`.
type ModPath = Vec<String>;

/// One module of one crate tree, as read from its file.
#[derive(Debug, Default)]
struct Module {
    file: PathBuf,
    /// Its children declared with `mod NAME;`.
    children: BTreeSet<String>,
    /// Every crate-internal path it names, made absolute, with the text as written.
    references: Vec<(ModPath, String)>,
    /// Names its `use` items bring in: alias → absolute path.
    imports: BTreeMap<String, ModPath>,
}

/// Every pair of modules that import each other, in every crate tree under `crates/` and
/// `xtask/`.
pub(super) fn check(root: &Path) -> Vec<String> {
    let mut crate_dirs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .collect();
    crate_dirs.push(root.join("xtask"));
    crate_dirs.sort();
    let mut problems = Vec::new();
    for dir in crate_dirs {
        for crate_root in crate_roots(&dir) {
            let tree = read_tree(&crate_root, &|path| std::fs::read_to_string(path).ok());
            problems.extend(circles(&tree).into_iter().map(|circle| {
                let shown = |path: &Path| path.strip_prefix(root).unwrap_or(path).display().to_string();
                let files: Vec<String> = circle.files.iter().map(|file| shown(file)).collect();
                let mut around = files.clone();
                around.push(files[0].clone());
                let names: Vec<String> = files
                    .iter()
                    .zip(&circle.names)
                    .map(|(file, names)| format!("{file} names `{names}`"))
                    .collect();
                format!(
                    "{} import each other in a circle ({}): move what they share into a module of its own",
                    around.join(" → "),
                    names.join("; "),
                )
            }));
        }
    }
    problems
}

/// The files each of which is the root of one crate tree.
fn crate_roots(dir: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["src/lib.rs", "src/main.rs"]
        .iter()
        .map(|name| dir.join(name))
        .filter(|path| path.is_file())
        .collect();
    for sub in ["src/bin", "tests", "benches", "examples"] {
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir.join(sub))
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.is_file() && path.extension().is_some_and(|ext| ext == "rs"))
            .collect();
        found.sort();
        roots.extend(found);
    }
    roots
}

/// Follow `mod NAME;` from a root file. `read` returns a file's text (tests pass their own).
fn read_tree(
    root_file: &Path,
    read: &dyn Fn(&Path) -> Option<String>,
) -> BTreeMap<ModPath, Module> {
    let mut texts: BTreeMap<ModPath, (PathBuf, String)> = BTreeMap::new();
    let mut pending = vec![(ModPath::new(), root_file.to_path_buf(), true)];
    while let Some((path, file, owns_dir)) = pending.pop() {
        let Some(text) = read(&file) else { continue };
        let dir = if owns_dir {
            file.parent().map(Path::to_path_buf).unwrap_or_default()
        } else {
            file.with_extension("")
        };
        for child in declared_children(&text) {
            let flat = dir.join(format!("{child}.rs"));
            let nested = dir.join(&child).join("mod.rs");
            let (child_file, child_owns_dir) = if read(&flat).is_some() {
                (flat, false)
            } else {
                (nested, true)
            };
            let mut child_path = path.clone();
            child_path.push(child);
            pending.push((child_path, child_file, child_owns_dir));
        }
        texts.insert(path, (file, text));
    }
    let mut tree: BTreeMap<ModPath, Module> = BTreeMap::new();
    for (path, (file, text)) in &texts {
        let children = declared_children(text).into_iter().collect();
        tree.insert(
            path.clone(),
            Module {
                file: file.clone(),
                children,
                ..Module::default()
            },
        );
    }
    let paths: Vec<ModPath> = tree.keys().cloned().collect();
    for path in paths {
        let text = &texts[&path].1;
        let children = tree[&path].children.clone();
        let (references, imports) = references_of(text, &path, &children);
        if let Some(module) = tree.get_mut(&path) {
            module.references = references;
            module.imports = imports;
        }
    }
    tree
}

/// The names of `mod NAME;` declarations (not inline `mod NAME { … }` blocks).
fn declared_children(text: &str) -> Vec<String> {
    code_lines(text)
        .filter_map(|(line, _)| {
            let rest = strip_visibility(line.trim());
            let rest = rest.strip_prefix("mod ")?;
            let name = rest.strip_suffix(';')?.trim();
            is_ident(name).then(|| name.to_owned())
        })
        .collect()
}

/// `pub`, `pub(crate)`, `pub(super)`, `pub(in …)` removed from the start of an item.
fn strip_visibility(line: &str) -> &str {
    let Some(rest) = line.strip_prefix("pub") else {
        return line;
    };
    let rest = match rest.strip_prefix('(') {
        Some(inner) => inner.split_once(')').map_or(rest, |(_, after)| after),
        None => rest,
    };
    rest.strip_prefix(' ').unwrap_or(line)
}

fn is_ident(word: &str) -> bool {
    !word.is_empty()
        && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !word.starts_with(|c: char| c.is_ascii_digit())
}

/// Lines outside comments, each with how many inline `mod NAME {` blocks enclose it (a `super`
/// there first leaves the block, not the file's module).
fn code_lines(text: &str) -> impl Iterator<Item = (&str, usize)> {
    let mut depth: i64 = 0;
    let mut inline_starts: Vec<i64> = Vec::new();
    text.lines().filter_map(move |line| {
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            return None;
        }
        let code = trimmed.split(" //").next().unwrap_or(trimmed);
        let item = strip_visibility(code.trim());
        let opens_inline = item
            .strip_prefix("mod ")
            .and_then(|rest| rest.trim_end().strip_suffix('{'))
            .is_some_and(|name| is_ident(name.trim()));
        let enclosing = inline_starts.len();
        for c in code.chars() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if inline_starts.last() == Some(&depth) {
                        inline_starts.pop();
                    }
                }
                _ => {}
            }
        }
        if opens_inline {
            inline_starts.push(depth - 1);
        }
        Some((code, enclosing))
    })
}

/// The crate-internal paths `text` names, made absolute from module `here`, and what its `use`
/// items bring in.
fn references_of(
    text: &str,
    here: &[String],
    children: &BTreeSet<String>,
) -> (Vec<(ModPath, String)>, BTreeMap<String, ModPath>) {
    let mut references = Vec::new();
    let mut imports = BTreeMap::new();
    let mut statement = String::new();
    let mut statement_depth = 0;
    for (line, inline) in code_lines(text) {
        let item = strip_visibility(line.trim());
        if statement.is_empty() && item.starts_with("use ") {
            statement_depth = inline;
        }
        if !statement.is_empty() || item.starts_with("use ") {
            statement.push_str(line.trim());
            statement.push(' ');
            if line.contains(';') {
                let body = strip_visibility(statement.trim())
                    .trim_start_matches("use ")
                    .trim_end_matches([';', ' ']);
                for (written, alias) in expand_use(body) {
                    let segments: Vec<&str> = written.split("::").collect();
                    let Some(absolute) = absolute(&segments, here, statement_depth, children, true)
                    else {
                        continue;
                    };
                    if alias != "*" && alias != "self" {
                        imports.insert(alias, absolute.clone());
                    }
                    references.push((absolute, written));
                }
                statement.clear();
            }
            continue;
        }
        for written in inline_paths(line) {
            let segments: Vec<&str> = written.split("::").collect();
            if let Some(absolute) = absolute(&segments, here, inline, children, false) {
                references.push((absolute, written));
            }
        }
    }
    (references, imports)
}

/// A `use` body (`crate::a::{b, c::{self, D as E}}`) as (full path, the name it binds).
fn expand_use(body: &str) -> Vec<(String, String)> {
    let compact: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    expand_into(&compact, "", &mut out);
    out
}

fn expand_into(body: &str, prefix: &str, out: &mut Vec<(String, String)>) {
    let body = body.trim();
    if let Some(open) = body.find('{') {
        let head = body[..open].trim().trim_end_matches("::");
        let inner = body[open + 1..].trim_end().trim_end_matches('}');
        let base = join(prefix, head);
        for part in split_top_level(inner) {
            expand_into(part, &base, out);
        }
        return;
    }
    if body.is_empty() {
        return;
    }
    let (path, alias) = match body.split_once(" as ") {
        Some((path, alias)) => (path.trim(), alias.trim().to_owned()),
        None => (body, body.rsplit("::").next().unwrap_or(body).to_owned()),
    };
    if path == "self" {
        let alias = prefix.rsplit("::").next().unwrap_or(prefix).to_owned();
        out.push((prefix.to_owned(), alias));
    } else {
        out.push((join(prefix, path), alias));
    }
}

fn join(prefix: &str, rest: &str) -> String {
    match (prefix.is_empty(), rest.is_empty()) {
        (true, _) => rest.to_owned(),
        (_, true) => prefix.to_owned(),
        _ => format!("{prefix}::{rest}"),
    }
}

/// Split at commas that are not inside braces.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (index, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// `crate::…`, `super::…` and `self::…` paths written in a line of code.
fn inline_paths(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let bytes = line.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(offset) = line[from..].find(start) {
            let at = from + offset;
            from = at + start.len();
            let before = at.checked_sub(1).map(|i| bytes[i]);
            if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':') {
                continue;
            }
            let end = line[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .map_or(line.len(), |len| at + len);
            found.push(line[at..end].trim_end_matches(':').to_owned());
        }
    }
    found
}

/// A written path made absolute from `here`, or `None` when it leaves the crate.
fn absolute(
    segments: &[&str],
    here: &[String],
    inline: usize,
    children: &BTreeSet<String>,
    in_use: bool,
) -> Option<ModPath> {
    let (mut base, mut rest): (ModPath, &[&str]) = match segments.first().copied()? {
        "crate" => (Vec::new(), &segments[1..]),
        "self" => (here.to_vec(), &segments[1..]),
        "super" => {
            let mut base = here.to_vec();
            let mut rest = segments;
            let mut inline_left = inline;
            while rest.first() == Some(&"super") {
                if inline_left > 0 {
                    inline_left -= 1;
                } else {
                    base.pop()?;
                }
                rest = &rest[1..];
            }
            (base, rest)
        }
        first if in_use && children.contains(first) => (here.to_vec(), segments),
        _ => return None,
    };
    while let Some((first, tail)) = rest.split_first() {
        base.push((*first).to_owned());
        rest = tail;
    }
    Some(base)
}

/// The module a path lands in: its longest module prefix, following re-exports of the name after
/// it (a few hops at most).
fn owning_module(tree: &BTreeMap<ModPath, Module>, path: &[String]) -> Option<ModPath> {
    let mut path = path.to_vec();
    for _ in 0..4 {
        let mut module: ModPath = Vec::new();
        let mut index = 0;
        while index < path.len() {
            let mut next = module.clone();
            next.push(path[index].clone());
            if !tree.contains_key(&next) {
                break;
            }
            module = next;
            index += 1;
        }
        let Some(name) = path.get(index) else {
            return Some(module);
        };
        match tree.get(&module).and_then(|m| m.imports.get(name)) {
            Some(target) if target != &path => {
                let mut followed = target.clone();
                followed.extend(path[index + 1..].iter().cloned());
                path = followed;
            }
            _ => return Some(module),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::graph::Circle;
    use super::*;

    /// The tree rooted at the first file given.
    fn tree(files: &[(&str, &str)]) -> BTreeMap<ModPath, Module> {
        let root = PathBuf::from(files[0].0);
        let files: BTreeMap<PathBuf, String> = files
            .iter()
            .map(|(path, text)| (PathBuf::from(path), (*text).to_owned()))
            .collect();
        read_tree(&root, &|path| files.get(path).cloned())
    }

    fn names(circles: &[Circle]) -> Vec<(String, String)> {
        circles
            .iter()
            .map(|c| {
                assert_eq!(c.files.len(), 2, "{c:?}");
                (
                    c.files[0].display().to_string(),
                    c.files[1].display().to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn two_siblings_that_import_each_other_are_a_circle() {
        let tree = tree(&[
            ("src/lib.rs", "mod a;\nmod b;\nmod c;\n"),
            ("src/a.rs", "use crate::b::Thing;\n"),
            ("src/b.rs", "fn f() { crate::a::helper(); }\n"),
            ("src/c.rs", "use crate::a::Other;\n"),
        ]);
        let found = circles(&tree);
        assert_eq!(names(&found), vec![("src/a.rs".into(), "src/b.rs".into())]);
        assert_eq!(found[0].names, ["crate::b::Thing", "crate::a::helper"]);
    }

    #[test]
    fn a_longer_circle_is_found_whole_and_shown_as_one_loop() {
        // a → b → c → a, and d → e → d apart; f only names a (it is in no circle).
        let tree = tree(&[
            (
                "src/lib.rs",
                "mod a;\nmod b;\nmod c;\nmod d;\nmod e;\nmod f;\n",
            ),
            ("src/a.rs", "use crate::b::Bee;\n"),
            ("src/b.rs", "use crate::c::Sea;\n"),
            ("src/c.rs", "fn f() { crate::a::ay(); }\n"),
            ("src/d.rs", "use crate::e::Ee;\n"),
            ("src/e.rs", "use crate::d::Dee;\n"),
            ("src/f.rs", "use crate::a::Ay;\n"),
        ]);
        let found = circles(&tree);
        let files: Vec<Vec<String>> = found
            .iter()
            .map(|c| c.files.iter().map(|f| f.display().to_string()).collect())
            .collect();
        assert_eq!(
            files,
            [
                vec!["src/a.rs", "src/b.rs", "src/c.rs"],
                vec!["src/d.rs", "src/e.rs"]
            ]
        );
        assert_eq!(
            found[0].names,
            ["crate::b::Bee", "crate::c::Sea", "crate::a::ay"]
        );
    }

    #[test]
    fn grouped_uses_super_paths_and_nested_modules_are_read() {
        let tree = tree(&[
            ("src/main.rs", "mod serve;\nmod mcp;\n"),
            (
                "src/mcp.rs",
                "use crate::{serve::gate::{self, Gate}, other};\n",
            ),
            ("src/serve.rs", "pub mod gate;\n"),
            ("src/serve/gate.rs", "use super::super::mcp::Server;\n"),
        ]);
        assert_eq!(
            names(&circles(&tree)),
            vec![("src/mcp.rs".into(), "src/serve.rs".into())]
        );
    }

    #[test]
    fn a_module_that_imports_from_a_siblings_child_imports_from_that_sibling() {
        let tree = tree(&[
            ("src/main.rs", "mod serve;\nmod mcp;\n"),
            ("src/mcp.rs", "use crate::serve::Gate;\n"),
            (
                "src/serve.rs",
                "mod gate;\nmod cdp;\npub use gate::Gate;\nuse crate::mcp::Server;\n",
            ),
            ("src/serve/gate.rs", "pub struct Gate;\n"),
            // Siblings inside serve are judged between themselves, one way here.
            ("src/serve/cdp.rs", "use super::gate::Gate;\n"),
        ]);
        assert_eq!(
            names(&circles(&tree)),
            vec![("src/mcp.rs".into(), "src/serve.rs".into())]
        );
    }

    #[test]
    fn a_circle_through_a_parents_re_export_is_still_a_circle() {
        let tree = tree(&[
            (
                "src/lib.rs",
                "mod a;\nmod b;\npub use a::Alpha;\nuse b::Beta;\n",
            ),
            ("src/a.rs", "use crate::Beta;\n"),
            ("src/b.rs", "use crate::Alpha;\n"),
        ]);
        assert_eq!(
            names(&circles(&tree)),
            vec![("src/a.rs".into(), "src/b.rs".into())]
        );
    }

    #[test]
    fn parents_children_one_way_uses_and_test_blocks_are_not_circles() {
        let tree = tree(&[
            (
                "src/lib.rs",
                "mod a;\nmod b;\nmod c;\npub use a::Alpha;\nstruct Root;\n",
            ),
            // A child using its parent's items, and its own test block's `super`.
            (
                "src/a.rs",
                "use crate::Root;\nuse crate::b::Beta;\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::c::Helper;\n}\n",
            ),
            ("src/b.rs", "mod inner;\n"),
            ("src/b/inner.rs", "use super::Beta;\n"),
            // c is named by a's test block (as a's own), and names a back only in a comment.
            (
                "src/c.rs",
                "// crate::a::Alpha is where this came from\npub struct Helper;\n",
            ),
        ]);
        assert_eq!(circles(&tree), Vec::new());
        assert!(
            tree[&vec!["a".to_owned()]]
                .references
                .iter()
                .any(|(path, _)| path == &vec!["c".to_owned(), "Helper".to_owned()]),
            "super in a test block leaves the block first"
        );
    }

    #[test]
    fn this_workspace_has_no_modules_that_import_each_other() {
        assert_eq!(check(&crate::util::workspace_root()), Vec::<String>::new());
    }
}
