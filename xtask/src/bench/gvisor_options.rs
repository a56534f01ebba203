//! gVisor's other options in this machine's runsc, each on the same sealed session's page loads,
//! against runc and against runsc as Airlock registers it: the root filesystem's changes kept in
//! the sandbox's memory (`--overlay2=root:memory`) and the root filesystem shared with the host
//! (`--file-access=shared`). The KVM platform cannot run here (`gvisor_cause.rs` shows why), and
//! `--network=none` is already Airlock's.

use std::fmt::Write as _;
use std::path::Path;

use super::bench_runtimes::{BenchRuntimes, Variant};
use super::gvisor::{example, record_loads};
use super::stats::{Samples, is_warmup, rotation, table_header, table_row, total_rounds};

/// Each variant: its runtime's name, its extra argument, and its row in the report.
const VARIANTS: [(&str, &str, &str); 2] = [
    (
        "airlock-bench-runsc-overlay",
        "--overlay2=root:memory",
        "runsc --overlay2=root:memory: 100-subresource page load",
    ),
    (
        "airlock-bench-runsc-shared",
        "--file-access=shared",
        "runsc --file-access=shared: 100-subresource page load",
    ),
];

pub(super) fn gvisor_options(
    root: &Path,
    pages: &str,
    rounds: usize,
    loads: usize,
    report: &mut String,
) {
    eprintln!("== gVisor's options: the page load under each ({rounds} rounds after a warm-up)");
    let _ = writeln!(
        report,
        "### gVisor's other options in this release\n\n\
         The same page loads ({loads} per session, {rounds} sessions each after a warm-up, \
         alternating) under runsc with each option added to Airlock's registration. The KVM \
         platform cannot run here (above), and `--network=none` is already Airlock's.\n"
    );
    let variants: Vec<Variant<'_>> = VARIANTS
        .iter()
        .map(|(name, arg, _)| Variant::with_args(name, vec![(*arg).to_owned()]))
        .collect();
    let registered = match BenchRuntimes::register(&variants) {
        Ok(registered) => registered,
        Err(error) => {
            let _ = writeln!(report, "Not measured: {error:#}.\n");
            return;
        }
    };
    let runtimes: Vec<&str> = ["runc", "runsc"]
        .into_iter()
        .chain(VARIANTS.iter().map(|(name, _, _)| *name))
        .collect();
    let mut page: Vec<Samples> = runtimes.iter().map(|_| Samples::default()).collect();
    for round in 0..total_rounds(rounds) {
        for index in rotation(round, runtimes.len()) {
            let loaded = example(
                root,
                &[("AIRLOCK_RUNTIME", runtimes[index])],
                &["pageload", &loads.to_string(), pages],
            );
            if !is_warmup(round) {
                record_loads(&mut page[index], &loaded);
            }
        }
    }
    drop(registered);
    table_header(report);
    table_row(report, "runc: 100-subresource page load", &page[0], None);
    table_row(
        report,
        "runsc as Airlock registers it: 100-subresource page load",
        &page[1],
        Some(&page[0]),
    );
    for (index, (_, _, label)) in VARIANTS.iter().enumerate() {
        table_row(report, label, &page[index + 2], Some(&page[0]));
    }
    let _ = writeln!(report);
}
