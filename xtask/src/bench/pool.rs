//! The warm pool's throughput: tasks of one heavy page each, back to back, with no pool and with
//! pools of 1 and 2, in alternation; and whether the pool's refill (a browser starting while the
//! next task loads its page) slows that page.

use std::fmt::Write as _;
use std::path::Path;

use super::gvisor::example;
use super::stats::{Samples, is_warmup, rotation, total_rounds};
use airlock_testkit::stats::nearest_rank;

const POOLS: [&str; 3] = ["0", "1", "2"];

/// `tasks` per run, then `claims` claims on their own.
pub(super) fn pool(
    root: &Path,
    site: u16,
    rounds: usize,
    (tasks, claims_count): (usize, usize),
    report: &mut String,
) {
    eprintln!("== warm pool: {tasks} one-page tasks back to back, pools 0, 1 and 2");
    let pages = format!("http://127.0.0.1:{site}/page-{{n}}.html");
    let mut per_minute = [Vec::new(), Vec::new(), Vec::new()];
    let mut loads = [Samples::default(), Samples::default(), Samples::default()];
    let mut warm = [0_u64; 3];
    // Of those, the tasks that found the pool empty and took over the refill under way.
    let mut taken_over = [0_u64; 3];
    // Each run's time its pool's refills spent held for first answers, as a share of the run.
    let mut held = [Vec::new(), Vec::new(), Vec::new()];
    for round in 0..total_rounds(rounds) {
        for index in rotation(round, POOLS.len()) {
            let run = example(
                root,
                &[("AIRLOCK_BENCH_POOL", POOLS[index])],
                &["pooltasks", &tasks.to_string(), &pages],
            );
            if is_warmup(round) {
                continue;
            }
            let Some(run) = run.first() else {
                loads[index].record(None);
                continue;
            };
            if let Some(seconds) = run["seconds"].as_f64() {
                let done = run["loads_ms"].as_array().map_or(0, Vec::len);
                per_minute[index]
                    .push(f64::from(u32::try_from(done).unwrap_or(0)) * 60.0 / seconds);
                if let Some(held_s) = run["refill_held_s"].as_f64() {
                    held[index].push(100.0 * held_s / seconds);
                }
            }
            warm[index] += run["warm"].as_u64().unwrap_or(0);
            taken_over[index] += run["taken_over"].as_u64().unwrap_or(0);
            for load in run["loads_ms"].as_array().into_iter().flatten() {
                loads[index].record(load.as_f64());
            }
        }
    }
    let total = tasks * rounds;
    let _ = writeln!(
        report,
        "## Warm pool: one-page tasks back to back ({tasks} per run, {rounds} runs each after a warm-up)\n\n\
         Each task: a session, the 100-subresource page (a fresh one per task), its load time, a \
         snapshot, dispose, and the next task at once (no thinking time between commands: the worst case \
         for a refill). A pool starts full. A refill starts once the task that took a browser has its \
         first answer (the page load, and the command that follows it at once), holds its next step while a later task (warm, or cold because \
         the pool was empty) waits for its own, and its Chromium's launch, if under way then, is \
         frozen until that answer. Refills held is the time the pool's refills spent waiting, or \
         frozen, for those answers, as a share of the run (median): making time the pool gives up \
         so as not to slow a task's first page. A task that finds the pool empty while a refill is \
         under way takes that refill over (it stops yielding and the task waits for it) instead \
         of starting a browser of its own beside it; it is counted among those that started warm, \
         and apart in brackets.\n\n\
         | pool | tasks per minute (median) | ratio | tasks that started warm (of {total}; refills taken over) | refills held | page load median ms | ratio | failed loads |\n|---|---|---|---|---|---|---|---|"
    );
    let tpm: Vec<Option<f64>> = per_minute.iter().map(|v| super::stats::median(v)).collect();
    let load_median: Vec<Option<f64>> = loads
        .iter()
        .map(|s| s.summary().map(|s| s.median))
        .collect();
    for index in 0..POOLS.len() {
        let ratio = |values: &[Option<f64>]| match (values[index], values[0]) {
            (Some(v), Some(base)) if base > 0.0 => format!("{:.2}x", v / base),
            _ => "–".to_owned(),
        };
        let number = |v: Option<f64>| v.map_or_else(|| "–".to_owned(), |v| format!("{v:.1}"));
        let _ = writeln!(
            report,
            "| {} | {} | {} | {} ({}) | {} | {} | {} | {} |",
            POOLS[index],
            number(tpm[index]),
            ratio(&tpm),
            warm[index],
            taken_over[index],
            super::stats::median(&held[index])
                .filter(|_| index > 0)
                .map_or_else(|| "–".to_owned(), |share| format!("{share:.0} %")),
            number(load_median[index]),
            ratio(&load_median),
            loads[index].failed(),
        );
    }
    let _ = writeln!(report);
    claims(root, site, claims_count, report);
    burst(root, site, rounds.min(2), report);
}

/// The contenders of the burst: (min, max) browsers.
const BURST_POOLS: [(usize, usize); 3] = [(4, 4), (1, 4), (1, 1)];

/// Bursts of tasks arriving faster than one browser starts: a fixed pool of the maximum, the
/// adaptive pool from 1 to that maximum, and a fixed pool of its minimum, in alternation.
fn burst(root: &Path, site: u16, rounds: usize, report: &mut String) {
    eprintln!("== warm pool: bursts, fixed 4 against 1 to 4 and fixed 1 ({rounds} rounds)");
    let pages = format!("http://127.0.0.1:{site}/page-{{n}}.html");
    let binary = root.join("target/release/examples/pool_burst");
    let mut times = [Samples::default(), Samples::default(), Samples::default()];
    let mut warm = [(0_u64, 0_u64); 3];
    let mut taken_over = [0_u64; 3];
    let mut seconds = [Vec::new(), Vec::new(), Vec::new()];
    for round in 0..total_rounds(rounds) {
        for index in rotation(round, BURST_POOLS.len()) {
            let (min, max) = BURST_POOLS[index];
            let run = crate::util::output(
                std::process::Command::new("runuser")
                    .args(["-u", crate::integration::TEST_USER, "--"])
                    .arg(&binary)
                    .args(["2", &pages])
                    .env("AIRLOCK_BENCH_POOL_MIN", min.to_string())
                    .env("AIRLOCK_BENCH_POOL_MAX", max.to_string()),
            )
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(text.trim()).ok());
            if is_warmup(round) {
                continue;
            }
            let Some(run) = run else {
                times[index].record(None);
                continue;
            };
            warm[index].0 += run["warm"].as_u64().unwrap_or(0);
            warm[index].1 += run["tasks"].as_u64().unwrap_or(0);
            // [warm, taken over, cold]
            taken_over[index] += run["claims"][1].as_u64().unwrap_or(0);
            seconds[index].extend(run["seconds"].as_f64());
            for time in run["times_ms"].as_array().into_iter().flatten() {
                times[index].record(time.as_f64());
            }
        }
    }
    let _ = writeln!(
        report,
        "## Warm pool: bursts\n\n\
         Two bursts of 4 tasks 250 ms apart (faster than one browser starts), 20 s between them \
         (`pool_burst`), {rounds} runs each after a warm-up; each contender starts with its \
         minimum ready. A task: a session, a fresh 100-subresource page, a snapshot, dispose; \
         its time runs from its arrival to its snapshot; in brackets, the tasks that found the \
         pool empty and took over a refill under way.\n\n\
         | pool (min to max) | tasks started warm (refills taken over) | task time median ms | p90 ms | ratio (median) \
         | run s (median) | failed |\n|---|---|---|---|---|---|---|"
    );
    let base = times[0].summary().map(|s| s.median);
    for (index, (min, max)) in BURST_POOLS.iter().enumerate() {
        let summary = times[index].summary();
        let cell = |value: Option<f64>| value.map_or_else(|| "–".to_owned(), |v| format!("{v:.0}"));
        let ratio = match (summary.map(|s| s.median), base) {
            (Some(v), Some(b)) if b > 0.0 => format!("{:.2}x", v / b),
            _ => "–".to_owned(),
        };
        let run_seconds = super::stats::median(&seconds[index]);
        let _ = writeln!(
            report,
            "| {min} to {max} | {} of {} ({}) | {} | {} | {ratio} | {} | {} |",
            warm[index].0,
            warm[index].1,
            taken_over[index],
            cell(summary.map(|s| s.median)),
            cell(summary.map(|s| s.p90)),
            run_seconds.map_or_else(|| "–".to_owned(), |v| format!("{v:.1}")),
            times[index].failed(),
        );
    }
    let _ = writeln!(report);
}

/// Many claims from a warm pool (take → session ready): its median and its tail.
fn claims(root: &Path, site: u16, count: usize, report: &mut String) {
    eprintln!("== warm pool: {count} claims");
    let page = format!("http://127.0.0.1:{site}/page-0.html");
    let run = example(root, &[], &["claims", &count.to_string(), &page]);
    let made: Vec<serde_json::Value> = run
        .first()
        .and_then(|run| run["claims_ms"].as_array().cloned())
        .unwrap_or_default();
    let mut claims: Vec<f64> = made.iter().filter_map(serde_json::Value::as_f64).collect();
    claims.sort_by(f64::total_cmp);
    let cold = made.iter().filter(|claim| claim.is_null()).count();
    let shown =
        |q: f64| nearest_rank(&claims, q).map_or_else(|| "–".to_owned(), |v| format!("{v:.1}"));
    let _ = writeln!(
        report,
        "## Warm pool: claims\n\n\
         {count} claims from a pool of 2 (`bench claims`), each disposed at once; a claim waits \
         only for one warm browser, so most are made while the pool starts another. A claim is \
         task requested → session ready: a warm session taken, its container checked, unpaused \
         and given its CPU weight.\n\n\
         | claims | p50 ms | p90 ms | p99 ms | max ms | found the pool empty (cold) |\n\
         |---|---|---|---|---|---|\n\
         | {} | {} | {} | {} | {} | {cold} |\n",
        claims.len(),
        shown(0.5),
        shown(0.9),
        shown(0.99),
        shown(1.0),
    );
}
