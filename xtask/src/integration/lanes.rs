//! The order test binaries run in: [`LANES`] at a time (each binary's own tests one at a time),
//! longest first, then what [`ALONE`] names, by itself.
//!
//! Running side by side is also a check: a machine's tests must hold on a busy machine. What
//! cannot is a test that judges the daemon as a whole ("no task container left", a killed
//! owner's orphans found by the next cleanup), since another binary's containers or cleanup at
//! the same time would fail it for nothing.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::binary_run::{BinaryRun, run_binary};

/// What runs by itself after the side-by-side binaries, and why: a whole binary, or one test of
/// it (the rest of that binary runs side by side).
struct Alone {
    package: &'static str,
    target: &'static str,
    test: Option<&'static str>,
    why: &'static str,
}

const ALONE: &[Alone] = &[
    Alone {
        package: "airlock",
        target: "scenarios",
        test: None,
        why: "no task container left; a SIGKILLed host's orphans",
    },
    Alone {
        package: "airlock",
        target: "accounts",
        test: None,
        why: "no task container left",
    },
    Alone {
        package: "airlock",
        target: "mcp",
        test: None,
        why: "a SIGKILLed server's orphans, removed by `airlock cleanup`",
    },
    Alone {
        package: "airlock",
        target: "cli",
        test: None,
        why: "`airlock cleanup`",
    },
    Alone {
        package: "airlock-driver-docker",
        target: "docker",
        test: Some("a_killed_host_process_leaves_an_orphan_that_the_next_driver_removes"),
        why: "the orphan must be left for this test's own driver to remove",
    },
    Alone {
        package: "airlock-gate",
        target: "gate",
        test: None,
        why: "dockerd's events: every container made since the test began",
    },
];

/// Started first among the side-by-side binaries: the longest, so the lanes end near the same
/// time. Any other follows in name order.
const LONGEST_FIRST: &[(&str, &str)] = &[
    ("airlock", "serve"),
    ("airlock-driver-docker", "docker"),
    ("airlock", "cdp"),
];

/// How many test binaries run at once, outside [`ALONE`].
const LANES: usize = 2;

/// One binary's run: package, target, executable, what it reported and how long it took.
pub(super) type Run = (String, String, String, BinaryRun, Duration);

/// One run to make: a binary, with the tests it must leave out (run alone) or the one it must
/// run (alone).
struct Planned {
    package: String,
    target: String,
    binary: String,
    skip: Vec<&'static str>,
    only: Option<&'static str>,
    why: &'static str,
}

impl Planned {
    fn command(&self, test_command: &dyn Fn(&str) -> Command) -> Command {
        let mut command = test_command(&self.binary);
        if let Some(test) = self.only {
            command.args(["--exact", test]);
        } else if !self.skip.is_empty() {
            command.arg("--exact");
            for test in &self.skip {
                command.args(["--skip", test]);
            }
        }
        command
    }

    /// A filter this plan chose is not a filtered test: count only the unplanned ones.
    fn account(&self, mut run: BinaryRun) -> BinaryRun {
        if self.only.is_some() {
            if run.results.len() == 1 {
                run.filtered = 0;
            }
        } else {
            run.filtered = run.filtered.saturating_sub(self.skip.len());
        }
        run
    }
}

/// Run every test binary: [`LANES`] at a time, then what [`ALONE`] names, one by one.
pub(super) fn run_every_binary(
    binaries: &BTreeMap<(String, String), String>,
    test_command: &(dyn Fn(&str) -> Command + Sync),
) -> anyhow::Result<Vec<Run>> {
    let (side_by_side, alone) = plan(binaries);
    let queue = Mutex::new(side_by_side.into_iter());
    let finished = Mutex::new(Vec::new());
    std::thread::scope(|lanes| {
        for _ in 0..LANES {
            lanes.spawn(|| {
                loop {
                    // The lock is held only to take the next binary.
                    let next = queue.lock().map(|mut queue| queue.next());
                    let Ok(Some(planned)) = next else {
                        break;
                    };
                    let started = Instant::now();
                    let mut output = Vec::new();
                    let run = run_binary(&mut planned.command(test_command), Some(&mut output));
                    // Whole, once it ends: two binaries' lines interleaved would be unreadable.
                    let shown = format!(
                        "== {} / {}\n{}",
                        planned.package,
                        planned.target,
                        output.join("\n")
                    );
                    println!("{shown}");
                    if let Ok(mut finished) = finished.lock() {
                        finished.push((planned, run, started.elapsed()));
                    }
                }
            });
        }
    });
    let mut finished = finished
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a lane of test binaries panicked"))?;
    finished.sort_by(|(a, ..), (b, ..)| (&a.package, &a.target).cmp(&(&b.package, &b.target)));
    let mut runs = Vec::new();
    for (planned, run, took) in finished {
        let run = planned.account(run?);
        runs.push((planned.package, planned.target, planned.binary, run, took));
    }
    for planned in alone {
        let what = planned.only.unwrap_or("all of it");
        eprintln!(
            "== {} / {}: {what}, alone ({})",
            planned.package, planned.target, planned.why
        );
        let started = Instant::now();
        let run = planned.account(run_binary(&mut planned.command(test_command), None)?);
        runs.push((
            planned.package,
            planned.target,
            planned.binary,
            run,
            started.elapsed(),
        ));
    }
    Ok(runs)
}

/// The runs to make side by side (longest first), and those to make alone.
fn plan(binaries: &BTreeMap<(String, String), String>) -> (Vec<Planned>, Vec<Planned>) {
    let (mut side_by_side, mut alone) = (Vec::new(), Vec::new());
    for ((package, target), binary) in binaries {
        let named: Vec<&Alone> = ALONE
            .iter()
            .filter(|alone| alone.package == package && alone.target == target)
            .collect();
        let planned = |skip, only, why| Planned {
            package: package.clone(),
            target: target.clone(),
            binary: binary.clone(),
            skip,
            only,
            why,
        };
        if let Some(whole) = named.iter().find(|alone| alone.test.is_none()) {
            alone.push(planned(Vec::new(), None, whole.why));
            continue;
        }
        let tests: Vec<&'static str> = named.iter().filter_map(|alone| alone.test).collect();
        side_by_side.push(planned(tests, None, ""));
        for each in named {
            alone.push(planned(Vec::new(), each.test, each.why));
        }
    }
    side_by_side.sort_by_key(|planned| {
        LONGEST_FIRST
            .iter()
            .position(|&(package, target)| planned.package == package && planned.target == target)
            .unwrap_or(LONGEST_FIRST.len())
    });
    (side_by_side, alone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_with_one_test_alone_runs_the_rest_side_by_side_and_that_test_after() {
        let binaries: BTreeMap<(String, String), String> = [
            ("airlock-driver-docker", "docker"),
            ("airlock", "scenarios"),
            ("airlock", "serve"),
            ("airlock-policy", "lib"),
        ]
        .into_iter()
        .map(|(package, target)| ((package.to_owned(), target.to_owned()), target.to_owned()))
        .collect();
        let (side_by_side, alone) = plan(&binaries);
        let names = |plans: &[Planned]| -> Vec<(String, Option<&str>)> {
            plans.iter().map(|p| (p.target.clone(), p.only)).collect()
        };
        assert_eq!(
            names(&side_by_side),
            [
                ("serve".to_owned(), None),
                ("docker".to_owned(), None),
                ("lib".to_owned(), None)
            ]
        );
        assert_eq!(
            side_by_side[1].skip,
            ["a_killed_host_process_leaves_an_orphan_that_the_next_driver_removes"]
        );
        assert_eq!(
            names(&alone),
            [
                ("scenarios".to_owned(), None),
                (
                    "docker".to_owned(),
                    Some("a_killed_host_process_leaves_an_orphan_that_the_next_driver_removes")
                )
            ]
        );
        let command = side_by_side[1].command(&|binary: &str| Command::new(binary));
        let args: Vec<_> = command.get_args().collect();
        assert_eq!(
            args,
            [
                "--exact",
                "--skip",
                "a_killed_host_process_leaves_an_orphan_that_the_next_driver_removes"
            ]
        );
    }
}
