//! Every metric family the server exports, read from the registry itself, for the generated
//! reference (`docs/reference.md`).

use std::collections::BTreeMap;

use crate::metrics::Metrics;

/// One metric family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    /// Its full name (`airlock_tasks_running`).
    pub name: String,
    /// `counter`, `gauge`, `histogram`, ….
    pub kind: String,
    /// What it counts.
    pub help: String,
}

/// Every family, by name.
#[must_use]
pub fn families() -> Vec<Family> {
    let metrics = Metrics::new(1);
    metrics.with_a_series_in_every_family();
    let text = metrics.encode();
    let mut found: BTreeMap<String, (String, String)> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            help.clone_into(&mut found.entry(name.to_owned()).or_default().1);
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            kind.clone_into(&mut found.entry(name.to_owned()).or_default().0);
        }
    }
    found
        .into_iter()
        .map(|(name, (kind, help))| Family { name, kind, help })
        .collect()
}

/// The names `metrics.rs` registers whose family [`families`] lacks: each needs a series in
/// `with_a_series_in_every_family`, or the reference would miss it.
#[must_use]
pub fn registered_without_a_series() -> Vec<String> {
    let listed = families();
    include_str!("metrics.rs")
        .split("registry.register")
        .skip(1)
        .filter_map(|rest| rest.split('"').nth(1))
        .filter(|name| {
            !listed.iter().any(|family| {
                family
                    .name
                    .strip_prefix("airlock_")
                    .is_some_and(|listed| listed.starts_with(name))
            })
        })
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_metric_has_a_series_for_the_reference() {
        assert_eq!(registered_without_a_series(), Vec::<String>::new());
        assert!(families().iter().any(|f| f.name == "airlock_tasks_running"));
    }
}
