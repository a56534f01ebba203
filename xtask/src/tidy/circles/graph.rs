//! The graph of imports between sibling modules, and its circles: strongly connected components
//! (Tarjan's, from petgraph), each shown as one shortest loop.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::{ModPath, Module, owning_module};

/// Modules that import each other in a circle, in the order of one loop through them: each
/// names the next (the last names the first), with the text that does.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Circle {
    pub(super) files: Vec<PathBuf>,
    pub(super) names: Vec<String>,
}

fn related(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// Module → module it names → the first text that names it, between siblings.
type Edges<'a> = BTreeMap<ModPath, BTreeMap<ModPath, &'a str>>;

pub(super) fn circles(tree: &BTreeMap<ModPath, Module>) -> Vec<Circle> {
    let edges = edges(tree);
    let mut graph = petgraph::graph::DiGraph::<&ModPath, ()>::new();
    let mut index = BTreeMap::new();
    for (from, targets) in &edges {
        for module in std::iter::once(from).chain(targets.keys()) {
            index
                .entry(module)
                .or_insert_with(|| graph.add_node(module));
        }
    }
    for (from, targets) in &edges {
        for to in targets.keys() {
            graph.add_edge(index[from], index[to], ());
        }
    }
    let mut found: Vec<Circle> = petgraph::algo::tarjan_scc(&graph)
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| {
            let members: BTreeSet<&ModPath> = component.iter().map(|node| graph[*node]).collect();
            let loop_path = one_loop(&edges, &members);
            let names = loop_path
                .iter()
                .zip(loop_path.iter().cycle().skip(1))
                .map(|(from, to)| edges[*from][*to].to_owned())
                .collect();
            Circle {
                files: loop_path
                    .iter()
                    .map(|path| tree[*path].file.clone())
                    .collect(),
                names,
            }
        })
        .collect();
    found.sort_by(|a, b| a.files.cmp(&b.files));
    found
}

fn edges(tree: &BTreeMap<ModPath, Module>) -> Edges<'_> {
    let mut edges = Edges::new();
    for (path, module) in tree {
        for (reference, written) in &module.references {
            let Some(target) = owning_module(tree, reference) else {
                continue;
            };
            if related(path, &target) {
                continue;
            }
            // Judged between the two siblings under the modules' nearest common ancestor: a
            // module that imports from a sibling's child imports from that sibling.
            let common = path.iter().zip(&target).take_while(|(a, b)| a == b).count();
            let from = path[..=common].to_vec();
            let to = target[..=common].to_vec();
            edges.entry(from).or_default().entry(to).or_insert(written);
        }
    }
    edges
}

/// A shortest loop from the first of `members` back to it, within them (they are one strongly
/// connected component, so there is one).
fn one_loop<'a>(edges: &'a Edges<'_>, members: &BTreeSet<&'a ModPath>) -> Vec<&'a ModPath> {
    let Some(&start) = members.first() else {
        return Vec::new();
    };
    // Breadth first: each module reached, with the one it was reached from.
    let mut came_from: BTreeMap<&ModPath, &ModPath> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(module) = queue.pop_front() {
        let next = edges.get(module).into_iter().flat_map(BTreeMap::keys);
        for target in next.filter(|target| members.contains(target)) {
            if target == start {
                let mut path = vec![module];
                while let Some(&before) = came_from.get(path[path.len() - 1]) {
                    path.push(before);
                }
                path.reverse();
                return path;
            }
            if !came_from.contains_key(target) {
                came_from.insert(target, module);
                queue.push_back(target);
            }
        }
    }
    vec![start]
}
