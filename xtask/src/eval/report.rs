//! The eval's report: per system the success rate with its 95 % interval, steps, tokens and
//! time, every failure by class, then each task side by side.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::outcome::{Failure, Outcome, System};
use super::tasks::{LEFT_OUT, Source, TASKS};

/// What the report says about how the run was made.
#[derive(Debug, Clone)]
pub(super) struct Header {
    /// `--quick`, a full run, or a chosen set.
    pub kind: String,
    /// The model, as given to both systems.
    pub model: String,
    /// The server and how it was started.
    pub server: String,
    /// Steps and time allowed per task.
    pub limits: String,
    /// The `airlock` binary measured, and the guide its worker read.
    pub airlock: String,
    /// The commit the run was made on.
    pub commit: String,
    /// When.
    pub date: String,
}

/// The Wilson score interval for `k` successes in `n` at 95 %, as fractions.
pub(super) fn wilson(k: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let z = 1.96_f64;
    #[allow(clippy::cast_precision_loss)] // task counts are small
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let denominator = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denominator;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denominator;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

#[allow(clippy::cast_precision_loss)] // token counts stay far below 2^52
fn mean(values: impl Iterator<Item = u64>) -> f64 {
    let (sum, count) = values.fold((0u64, 0u64), |(s, c), v| (s.saturating_add(v), c + 1));
    if count == 0 {
        0.0
    } else {
        sum as f64 / count as f64
    }
}

#[allow(clippy::cast_precision_loss)] // token counts and milliseconds stay far below 2^52
fn median(mut values: Vec<u64>) -> f64 {
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or(0) as f64
}

fn thousands(value: f64) -> String {
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // a rounded, positive mean
    let whole = value.round() as u64;
    let digits = whole.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// The report in Markdown.
pub(super) fn render(header: &Header, outcomes: &[Outcome]) -> String {
    let mut by_system: BTreeMap<System, Vec<&Outcome>> = BTreeMap::new();
    for outcome in outcomes {
        by_system.entry(outcome.system).or_default().push(outcome);
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Airlock on the job: MiniWoB++ and the lab, beside browser-use\n"
    );
    let _ = writeln!(
        out,
        "Written by `cargo xtask eval` ({}) on {}, commit `{}`. Model: `{}`, served by {}. \
         Limits per task: {}. Airlock: `{}`. A task succeeds when its page gives a positive \
         reward.\n",
        header.kind,
        header.date,
        header.commit,
        header.model,
        header.server,
        header.limits,
        header.airlock
    );
    let _ = writeln!(out, "## Per system\n");
    let _ = writeln!(
        out,
        "| system | success | 95 % interval | steps | prompt tokens / task (cached) | completion / task | prompt tokens / success | first prompt (median) | wall time (median) |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    for (system, list) in &by_system {
        let n = list.len();
        let k = list.iter().filter(|o| o.succeeded()).count();
        let (low, high) = wilson(k, n);
        let prompt = mean(list.iter().map(|o| o.prompt_tokens));
        let cached = mean(list.iter().map(|o| o.cached_tokens));
        let total_prompt: u64 = list.iter().map(|o| o.prompt_tokens).sum();
        #[allow(clippy::cast_precision_loss)]
        let per_success = if k == 0 {
            "–".to_owned()
        } else {
            thousands(total_prompt as f64 / k as f64)
        };
        #[allow(clippy::cast_precision_loss)]
        let rate = 100.0 * k as f64 / n.max(1) as f64;
        let _ = writeln!(
            out,
            "| {} | {k}/{n} ({rate:.0} %) | {:.0}–{:.0} % | {:.1} | {} ({}) | {} | {per_success} | {} | {:.0} s |",
            system.name(),
            100.0 * low,
            100.0 * high,
            mean(list.iter().map(|o| o.steps)),
            thousands(prompt),
            thousands(cached),
            thousands(mean(list.iter().map(|o| o.completion_tokens))),
            thousands(median(list.iter().map(|o| o.first_prompt_tokens).collect())),
            median(list.iter().map(|o| o.wall_ms).collect()) / 1000.0,
        );
    }
    let _ = writeln!(out, "\n## Failures by class\n");
    let _ = writeln!(out, "| class | {} |", systems_row(&by_system));
    let _ = writeln!(out, "|---|{}", "---|".repeat(by_system.len()));
    let mut classes: Vec<Failure> = outcomes.iter().filter_map(|o| o.failure).collect();
    classes.sort();
    classes.dedup();
    for class in classes {
        let counts: Vec<String> = by_system
            .values()
            .map(|list| {
                list.iter()
                    .filter(|o| o.failure == Some(class))
                    .count()
                    .to_string()
            })
            .collect();
        let _ = writeln!(out, "| {} | {} |", class.name(), counts.join(" | "));
    }
    per_task(&mut out, &by_system, outcomes);
    tasks_section(&mut out);
    out
}

fn systems_row(by_system: &BTreeMap<System, Vec<&Outcome>>) -> String {
    by_system
        .keys()
        .map(|s| s.name())
        .collect::<Vec<_>>()
        .join(" | ")
}

fn per_task(out: &mut String, by_system: &BTreeMap<System, Vec<&Outcome>>, outcomes: &[Outcome]) {
    let _ = writeln!(out, "\n## Per task\n");
    let _ = writeln!(
        out,
        "Each cell: result, steps, prompt tokens, seconds.\n\n| task | {} |",
        systems_row(by_system)
    );
    let _ = writeln!(out, "|---|{}", "---|".repeat(by_system.len()));
    let mut names: Vec<&str> = outcomes.iter().map(|o| o.task.as_str()).collect();
    names.dedup();
    let mut seen = std::collections::BTreeSet::new();
    for name in names.into_iter().filter(|n| seen.insert(*n)) {
        let cells: Vec<String> = by_system
            .values()
            .map(|list| {
                list.iter()
                    .find(|o| o.task == name)
                    .map_or("–".to_owned(), |o| {
                        let result = match o.failure {
                            None if o.succeeded() => "✓".to_owned(),
                            None => "✗".to_owned(),
                            Some(failure) => format!("✗ {}", failure.name()),
                        };
                        #[allow(clippy::cast_precision_loss)]
                        let seconds = o.wall_ms as f64 / 1000.0;
                        #[allow(clippy::cast_precision_loss)]
                        let prompt = thousands(o.prompt_tokens as f64);
                        format!("{result}, {}, {prompt}, {seconds:.0}", o.steps)
                    })
            })
            .collect();
        let _ = writeln!(out, "| {name} | {} |", cells.join(" | "));
    }
}

fn tasks_section(out: &mut String) {
    let _ = writeln!(out, "\n## The tasks\n");
    let _ = writeln!(
        out,
        "MiniWoB++ 1.1.0 (PyPI `miniwob`): {} of its 130 tasks, each given with its page's own \
         instruction for a fixed seed. The lab's own tasks, scored by the lab:\n",
        TASKS.iter().filter(|t| t.source == Source::MiniWob).count()
    );
    for task in TASKS {
        if let Source::Lab {
            instruction,
            checks,
            ..
        } = task.source
        {
            let _ = writeln!(out, "- `{}`: {checks}. \"{instruction}\"", task.name);
        }
    }
    let _ = writeln!(out, "\nLeft out of MiniWoB++, and why:\n");
    for (why, names) in LEFT_OUT {
        let _ = writeln!(out, "- {why}: {names}.");
    }
    let _ = writeln!(
        out,
        "\nThe adapter the lab appends to MiniWoB++'s `core/core.js` (one episode from page \
         load, no time limit of its own, the raw reward reported once):\n\n```js\n{}```",
        include_str!("adapter.js")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_intervals_match_published_values() {
        // 8 of 10: 0.490–0.943 (Wilson 1927; Newcombe 1998, table I).
        let (low, high) = wilson(8, 10);
        assert!((low - 0.490).abs() < 0.001, "{low}");
        assert!((high - 0.943).abs() < 0.001, "{high}");
        let (low, high) = wilson(0, 40);
        assert!(low.abs() < 1e-9 && (high - 0.0876).abs() < 0.001, "{high}");
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(1_234_567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
    }
}
