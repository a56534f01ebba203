//! Listing containers and reading events: only with Airlock's task label among the filters, and
//! the gate's own label added, so a client sees nothing the gate did not make. Plus the one
//! update Airlock makes (a warm container's CPU weight).

use std::collections::BTreeMap;

use serde_json::Value;

use super::call::query_refusal;
use super::{GateRefusal, GateRules, LABEL_GATE};

/// Filter names a client may use; each only narrows what is returned.
const FILTER_NAMES: &[&str] = &[
    "label",
    "status",
    "name",
    "id",
    "container",
    "event",
    "type",
];

/// `GET /containers/json`: `all`, `limit`, `size=false` (sizes cost the daemon a walk of every
/// layer; bollard sends it along, and it is dropped) and `filters` (required, with the task
/// label).
pub(crate) fn list_query(
    query: &[(String, String)],
    rules: &GateRules,
) -> Result<Vec<(String, String)>, GateRefusal> {
    narrowed(
        query,
        rules,
        false,
        "a list takes only `all`, `limit`, `size=false` and `filters`",
        |name, value| match name {
            "all" => ["true", "false", "1", "0"].contains(&value).then_some(true),
            "size" => ["false", "0"].contains(&value).then_some(false),
            "limit" => digits(value, 5).then_some(true),
            _ => None,
        },
    )
}

/// `GET /events`: `since`, `until` and `filters` (required, with the task label); only
/// container events.
pub(crate) fn events_query(
    query: &[(String, String)],
    rules: &GateRules,
) -> Result<Vec<(String, String)>, GateRefusal> {
    narrowed(
        query,
        rules,
        true,
        "events take only `since`, `until` (seconds) and `filters`",
        |name, value| match name {
            "since" | "until" => (digits(value.replacen('.', "", 1).as_str(), 30)).then_some(true),
            _ => None,
        },
    )
}

/// Whether `value` is 1 to `most` ASCII digits.
fn digits(value: &str, most: usize) -> bool {
    !value.is_empty() && value.len() <= most && value.bytes().all(|b| b.is_ascii_digit())
}

/// The query with each parameter other than `filters` kept (`Some(true)`), dropped
/// (`Some(false)`) or refused (`None`) by `passes`, then the filters, narrowed.
fn narrowed(
    query: &[(String, String)],
    rules: &GateRules,
    events: bool,
    why: &str,
    passes: fn(&str, &str) -> Option<bool>,
) -> Result<Vec<(String, String)>, GateRefusal> {
    let mut written = Vec::new();
    for (name, value) in query {
        if name == "filters" {
            continue;
        }
        match passes(name, value) {
            Some(true) => written.push((name.clone(), value.clone())),
            Some(false) => {}
            None => return Err(query_refusal(name, why)),
        }
    }
    written.push(("filters".to_owned(), filters(query, rules, events)?));
    Ok(written)
}

/// The client's filters with the task label required and the gate's label added.
fn filters(
    query: &[(String, String)],
    rules: &GateRules,
    events: bool,
) -> Result<String, GateRefusal> {
    let why = "must be JSON like {\"label\":[\"airlock.task\"]}: lists of strings, with Airlock's task label";
    let text = query
        .iter()
        .find(|(name, _)| name == "filters")
        .map(|(_, value)| value.as_str())
        .ok_or_else(|| query_refusal("filters", why))?;
    let Ok(Value::Object(given)) = super::strict_json::parse(text.as_bytes()) else {
        return Err(query_refusal("filters", why));
    };
    let mut written: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, values) in &given {
        // Filter names are a map's keys, matched exactly by dockerd.
        if !FILTER_NAMES.contains(&name.as_str()) {
            return Err(query_refusal(
                "filters",
                &format!("{name:?} is not a filter the gate passes"),
            ));
        }
        let Value::Array(values) = values else {
            return Err(query_refusal("filters", why));
        };
        let values: Option<Vec<String>> = values
            .iter()
            .map(|value| value.as_str().filter(|v| v.len() <= 256).map(str::to_owned))
            .collect();
        match values {
            Some(values) if values.len() <= 64 => {
                written.insert(name.clone(), values);
            }
            _ => return Err(query_refusal("filters", why)),
        }
    }
    let labels = written.entry("label".to_owned()).or_default();
    if !labels
        .iter()
        .any(|label| label == "airlock.task" || label.starts_with("airlock.task="))
    {
        return Err(query_refusal("filters", why));
    }
    labels.push(format!("{LABEL_GATE}={}", rules.gate_id));
    if events {
        let types = written.entry("type".to_owned()).or_default();
        if types.iter().any(|kind| kind != "container") {
            return Err(query_refusal("filters", "only container events are passed"));
        }
        *types = vec!["container".to_owned()];
    }
    serde_json::to_string(&written).map_err(|error| GateRefusal::Body(error.to_string()))
}

/// `POST /containers/{id}/update`: only `CpuShares`, from 2 to Docker's default 1024.
pub(crate) fn cpu_shares(body: &Value) -> Result<u64, GateRefusal> {
    let refused = || GateRefusal::Field {
        field: "update".into(),
        why: "the only update Airlock makes is {\"CpuShares\": 2 to 1024}".into(),
    };
    let object = body.as_object().ok_or_else(refused)?;
    if !super::strict_json::unknown_keys(object, &["CpuShares"]).is_empty() {
        return Err(refused());
    }
    super::strict_json::field(object, "CpuShares")
        .and_then(Value::as_u64)
        .filter(|shares| (2..=1024).contains(shares))
        .ok_or_else(refused)
}
